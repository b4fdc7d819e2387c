"""Keeping stored state bounded: checkpoint pruning, conversation and audit retention (docs/decisions/0012).

Run by the upkeep loop of every replica (`bot.upkeep.unfinished_work.Upkeep`), never on a turn's path:

- **Pruning**, every pass: each conversation that ran since it was last pruned is pruned under
  its lock, taken only if free now, so a running turn is never held up (it is pruned on a later
  pass). At most `PRUNE_BATCH` conversations per pass.
- **Retention**, when `COUNTERSIGN_RETENTION_DAYS` is set, every `RETENTION_EVERY_S` (sooner
  while a backlog lasts): pending cards of idle conversations are expired through the usual
  expiry path (card redrawn, requester told, the graph resumed), and idle conversations with
  nothing waiting are deleted under their lock, at most `RETENTION_BATCH` per pass.
- **Audit retention**, when `AUDIT_RETENTION_DAYS` is set, at the same rate: rows older than
  that are deleted in batches of `AUDIT_BATCH`, at most `AUDIT_BATCHES` per pass.

What is deleted and why it is safe: docs/decisions/0012.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from bot.base.log_context import about
from bot.storage.locks import ThreadLocks
from bot.upkeep.retention_store import RetentionStore

log = logging.getLogger(__name__)

PRUNE_BATCH = 100
"""Conversations pruned per pass at most (a pass every `bot.upkeep.unfinished_work.INTERVAL_S` seconds)."""

RETENTION_EVERY_S = 3600.0
"""Seconds between two retention passes once no backlog is left."""

RETENTION_BATCH = 50
"""Conversations deleted, and cards expired, per retention pass at most."""

AUDIT_BATCH = 1000
"""Audit rows deleted per transaction."""

AUDIT_BATCHES = 10
"""Transactions of audit deletes per retention pass at most."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RetentionPass:
    """What one retention pass did.

    Attributes:
        expired: approvals of idle conversations made due for expiry.
        deleted: conversations deleted.
        audit_rows: audit rows deleted.
        more: a batch was full: another pass follows soon.
    """

    expired: int = 0
    deleted: int = 0
    audit_rows: int = 0
    more: bool = False


class Housekeeping:
    """Pruning and retention for one process.

    Args:
        store: the pruning and retention queries.
        locks: the conversations' locks (pruning and deleting happen under them).
        retention_days: delete conversations idle this many days (None: keep them).
        audit_retention_days: delete audit rows older than this many days (None: keep them).
        on_cards_expiring: called when retention made cards due for expiry (wakes the expiry
            sweeper, which expires them through the usual path).
    """

    def __init__(
        self,
        store: RetentionStore,
        locks: ThreadLocks,
        *,
        retention_days: int | None = None,
        audit_retention_days: int | None = None,
        on_cards_expiring: Callable[[], None] | None = None,
    ) -> None:
        self._on_cards_expiring = on_cards_expiring
        self._store = store
        self._locks = locks
        self._retention_days = retention_days
        self._audit_retention_days = audit_retention_days
        self._retention_at = 0.0

    async def run_once(self) -> None:
        """One pass of the upkeep: prune, then retention when it is due (errors are logged)."""
        try:
            await self.prune_checkpoints()
        except Exception:
            log.exception("pruning checkpoints failed; tried again on the next pass")
        if self._retention_days is None and self._audit_retention_days is None:
            return
        if time.monotonic() < self._retention_at:
            return
        try:
            done = await self.apply_retention()
        except Exception:
            log.exception("applying retention failed; tried again in %g s", RETENTION_EVERY_S)
            done = RetentionPass(more=False)
        self._retention_at = time.monotonic() + (0.0 if done.more else RETENTION_EVERY_S)

    async def prune_checkpoints(self, *, limit: int = PRUNE_BATCH) -> int:
        """Prune the conversations that ran since they were last pruned; return how many were.

        A conversation whose lock is held (a turn runs, on this replica or another) is skipped
        and stays due.

        Args:
            limit: at most this many conversations.

        Raises:
            Exception: the database's, when the candidates cannot be listed.
        """
        pruned = 0
        for thread_id in await self._store.due_for_pruning(limit=limit):
            with about(thread_id):
                try:
                    async with self._locks.try_hold(thread_id) as held:
                        if held and await self._store.prune(thread_id):
                            pruned += 1
                except Exception:
                    log.exception("pruning the conversation's checkpoints failed; tried again later")
        if pruned:
            log.debug("pruned the checkpoints of %d conversation(s)", pruned)
        return pruned

    async def apply_retention(self) -> RetentionPass:
        """Expire idle conversations' cards, delete idle conversations and old audit rows (one batch each).

        Does nothing for a retention that is not set. A conversation whose card is expired here
        is deleted by a later pass, once the expiry's follow-up has resumed its graph and
        delivered what came of it.

        Raises:
            Exception: the database's.
        """
        expired: list[str] = []
        deleted = 0
        candidates: list[str] = []
        days = self._retention_days
        if days is not None:
            expired = await self._store.expire_idle_cards(idle_days=days, limit=RETENTION_BATCH)
            if expired:
                log.info(
                    "expiring %d card(s) of conversations idle for more than %s (retention)", len(expired), _days(days)
                )
                if self._on_cards_expiring is not None:
                    self._on_cards_expiring()
            candidates = await self._store.idle_conversations(idle_days=days, limit=RETENTION_BATCH)
            for thread_id in candidates:
                with about(thread_id):
                    try:
                        async with self._locks.try_hold(thread_id) as held:
                            if held and await self._store.delete_if_idle(thread_id, idle_days=days):
                                deleted += 1
                                log.info("deleted the conversation: idle for more than %s (retention)", _days(days))
                    except Exception:
                        log.exception("deleting an idle conversation failed; tried again later")
        audit_rows, audit_more = await self._forget_old_audit()
        more = len(expired) == RETENTION_BATCH or (len(candidates) == RETENTION_BATCH and deleted > 0) or audit_more
        return RetentionPass(expired=len(expired), deleted=deleted, audit_rows=audit_rows, more=more)

    async def _forget_old_audit(self) -> tuple[int, bool]:
        """Delete old audit rows, a few batches; return how many, and whether more are left."""
        days = self._audit_retention_days
        if days is None:
            return 0, False
        total = 0
        for _ in range(AUDIT_BATCHES):
            deleted = await self._store.forget_audit_older_than(days=days, limit=AUDIT_BATCH)
            total += deleted
            if deleted < AUDIT_BATCH:
                if total:
                    log.info("deleted %d audit row(s) older than %s (retention)", total, _days(days))
                return total, False
        log.info("deleted %d audit row(s) older than %s (retention); more follow", total, _days(days))
        return total, True


def _days(days: int) -> str:
    """`days` for a log line: "1 day", "30 days"."""
    return f"{days} day" if days == 1 else f"{days} days"
