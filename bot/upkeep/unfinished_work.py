"""Finishing work that a fault interrupted, on whichever replica is alive (docs/decisions/0009).

Three kinds of work can be left unfinished by a crash, a cancelled task at shutdown, a lost
database connection or a platform that refused a post: a message accepted but never handled
(the inbox), a run whose outcome never reached the conversation, and a review claimed for
resuming but never resumed. Each records when it is due for another attempt (`retry_at`,
migration 0004). Every replica runs one `Upkeep` loop: every `INTERVAL_S` seconds it lists the
conversations with due work and hands each to `bot.turns.messages.Messages.tend`, which works on it only if
the conversation's lock is free (a live handler holds it) and counts the attempt first. The
delay between attempts doubles from `FIRST_RETRY_S`; after `MAX_ATTEMPTS` the work is given up
with an error in the log (a message's sender, the requester of a decided call, or the
conversation of a run, is told once). A message not answered `ANSWER_WITHIN_S` after it arrived
(an outage kept every replica from it) is given up the same way rather than answered that late.
Work that a graceful shutdown cancels takes its attempt back (`Messages.tend`): only failures
and crashes count. At most `AT_ONCE` conversations are tended at a time, so a backlog never
starves live messages. The same loop deletes finished inbox entries older than `INBOX_KEPT_H`
hours (docs/decisions/0009, docs/decisions/0038-one-outcome-per-message.md).

A database restart (or failover) is an outage, not a failure of the work: every attempt under
way then failed with it, and each counted attempt doubled that work's delay, so a few restarts
in a row could put a decided review minutes away. The first look after the server's start time
changed therefore takes all unfinished work, due or not, as the first look after this process
started does. Beside
it, a second loop keeps storage bounded (`bot.upkeep.retention`: checkpoint pruning and retention,
docs/decisions/0012), so that a long prune never delays finishing interrupted work.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import time
from collections.abc import Awaitable, Callable, Collection

from bot.base.tasks import TaskTracker
from bot.turns.inbox import Inbox
from bot.upkeep.retention import Housekeeping
from bot.upkeep.unfinished_store import UpkeepStore

log = logging.getLogger(__name__)

INTERVAL_S = 10.0
"""How often the loop looks for due work (seconds)."""

FIRST_RETRY_S = 30.0
"""Delay before the second attempt; it doubles with every attempt after that."""

MAX_DELAY_S = 900.0
"""The longest delay between two attempts."""

MAX_ATTEMPTS = 5
"""Attempts at a piece of work; the next one gives it up (about 15 minutes after the first)."""

ANSWER_WITHIN_S = 3600.0
"""A message whose handling (re)begins this many seconds after it arrived is given up, its
sender told once, instead of being answered so late: after an outage longer than this, a
question may be stale and an instruction dangerous to carry out unasked
(docs/decisions/0038-one-outcome-per-message.md)."""

AT_ONCE = 2
"""Conversations tended at the same time: a backlog (after an outage) must not take every
database connection from live messages."""

INBOX_KEPT_H = 24.0
"""Hours a finished inbox entry is kept: platforms retry a delivery within minutes. An entry
not finished stays until the upkeep answers it or gives it up."""

PRUNE_EVERY_S = 3600.0
"""How often old finished inbox entries are deleted (seconds)."""

Tend = Callable[[str], Awaitable[bool]]


def retry_delay_s(attempts: int) -> float:
    """Seconds before the next attempt after `attempts` attempts (>= 1): 30, 60, 120, ... 900."""
    return float(min(FIRST_RETRY_S * 2 ** max(attempts - 1, 0), MAX_DELAY_S))


class Upkeep:
    """The background loop of one process.

    Args:
        store: finds conversations with due work.
        inbox: the inbox (pruned here).
        tend: `Messages.tend(thread_id)`: works on one conversation if its lock is free;
            returns whether it did.
        tasks: where each conversation's tending runs, so shutdown waits for it.
        platforms: the platforms this process serves (`ConversationRef.platform` names; read
            at each look): only their conversations are tended here.
        interval_s: seconds between two looks.
        housekeeping: pruning and retention, run every `interval_s` in a loop of its own
            (None: not run).
    """

    def __init__(
        self,
        store: UpkeepStore,
        inbox: Inbox,
        tend: Tend,
        tasks: TaskTracker,
        *,
        platforms: Collection[str],
        interval_s: float = INTERVAL_S,
        housekeeping: Housekeeping | None = None,
    ) -> None:
        self._store = store
        self._inbox = inbox
        self._tend = tend
        self._tasks = tasks
        self._platforms = platforms
        self._interval_s = interval_s
        self._busy: set[str] = set()
        self._at_once = asyncio.Semaphore(AT_ONCE)
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._housekeeping = housekeeping
        self._housekeeping_task: asyncio.Task[None] | None = None
        self._pruned_at = 0.0
        self._server_started: dt.datetime | None = None

    def start(self, *, everything_first: bool = True) -> None:
        """Start the loop (once).

        Args:
            everything_first: the first look takes all unfinished work, due or not: at start,
                what this process's predecessor left is finished without waiting (live
                replicas' work is protected by their conversation locks).
        """
        if self._task is None:
            self._task = asyncio.create_task(self._run(everything_first), name="upkeep")
        if self._housekeeping is not None and self._housekeeping_task is None:
            self._housekeeping_task = asyncio.create_task(self._housekeep(self._housekeeping), name="housekeeping")

    def wake(self) -> None:
        """Look again now."""
        self._wake.set()

    async def stop(self) -> None:
        """Stop the loops (tending already started is drained with the service's tasks).

        A prune or a deletion cut short here is rolled back; it is done again later.
        """
        for task in (self._task, self._housekeeping_task):
            if task is None:
                continue
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._task = self._housekeeping_task = None

    async def sweep(self, *, everything: bool = False) -> list[str]:
        """Start tending every conversation with due work; return the thread ids of those being tended.

        A conversation this process is tending already (its first look took it, say) is among
        them, so that `Countersign.recover` names every conversation it is finishing.

        Args:
            everything: take unfinished work whether or not it is due. It is taken so anyway
                when the database server restarted since the previous look (see the module's
                docstring).

        Raises:
            Exception: the database's, when it cannot be asked (the next look tries again).
        """
        started = await self._store.server_started_at()
        restarted = self._server_started is not None and started != self._server_started
        if restarted and not everything:
            log.info("the database restarted: looking at all unfinished work, due or not")
        threads = await self._store.due_threads(
            platforms=self._platforms, max_attempts=MAX_ATTEMPTS + 1, everything=everything or restarted
        )
        self._server_started = started  # only once this look got its answer
        tended = []
        for thread_id in threads:
            if self._tasks.closing:
                break
            if thread_id not in self._busy:
                self._busy.add(thread_id)
                self._tasks.spawn(self._tend_one(thread_id), name=f"upkeep {thread_id}")
            tended.append(thread_id)
        return tended

    async def prune(self) -> int:
        """Delete finished inbox entries older than `INBOX_KEPT_H` hours; return how many.

        A message never handled is kept, however old: the upkeep answers it or gives it up
        (telling its sender) first, also when this runs before the first look reached it.
        """
        deleted = await self._inbox.forget_older_than(INBOX_KEPT_H)
        if deleted:
            log.info("deleted %d finished inbox entries older than %g hours", deleted, INBOX_KEPT_H)
        return deleted

    async def _tend_one(self, thread_id: str) -> None:
        try:
            async with self._at_once:
                await self._tend(thread_id)
        except Exception:
            log.exception("finishing interrupted work failed; it is tried again later (thread_id=%s)", thread_id)
        finally:
            self._busy.discard(thread_id)

    async def _run(self, everything_first: bool) -> None:
        everything = everything_first
        while True:
            try:
                await self.sweep(everything=everything)
                everything = False
                if time.monotonic() - self._pruned_at >= PRUNE_EVERY_S:
                    await self.prune()
                    self._pruned_at = time.monotonic()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("looking for interrupted work failed; retrying")
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=self._interval_s)

    async def _housekeep(self, housekeeping: Housekeeping) -> None:
        while True:
            # Not at once at start: the first look is for work a restart left unfinished.
            await asyncio.sleep(self._interval_s)
            await housekeeping.run_once()  # logs its own failures
