"""Expiring cards on time, with or without traffic, across restarts (issue 4, "Expiry").

Each approval stores its `expires_at` when its review opens. One sweeper per process sleeps
until the next expiry (at most `MAX_SLEEP_S`, so other replicas' new cards are noticed too),
expires what is due in single transactions, and hands each expiry to the service: card
redrawn as Expired, requester told, graph resumed once its pause has no pending call left.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from bot.approvals.records import DecideResult
from bot.storage.approval_store import ApprovalStore
from bot.storage.audit_store import AuditStore

log = logging.getLogger(__name__)

MAX_SLEEP_S = 5.0
"""The longest the sweeper sleeps without looking again."""

OnExpired = Callable[[DecideResult], Awaitable[None]]


class ExpirySweeper:
    """The background loop.

    Args:
        approvals: the approvals tables.
        audit: the audit log (one `expiry` row per expired approval).
        on_expired: what to do with each expiry (the service's follow-up).
    """

    def __init__(self, approvals: ApprovalStore, audit: AuditStore, on_expired: OnExpired) -> None:
        self._approvals = approvals
        self._audit = audit
        self._on_expired = on_expired
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start the loop (once)."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="expiry sweeper")

    def wake(self) -> None:
        """Look again now (a review with an expiry just opened)."""
        self._wake.set()

    async def stop(self) -> None:
        """Stop the loop and wait for it."""
        if self._task is None:
            return
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None

    async def sweep(self) -> int:
        """Expire everything due now; return how many."""
        results = await self._approvals.expire_due(self._audit)
        for result in results:
            log.info(
                "approval %s expired without a decision (thread_id=%s)", result.approval.id, result.approval.thread_id
            )
            try:
                await self._on_expired(result)
            except Exception:
                log.exception("handling the expiry of approval %s failed", result.approval.id)
        return len(results)

    async def _run(self) -> None:
        while True:
            try:
                await self.sweep()
                delay = await self._until_next()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("expiry sweep failed; retrying")
                delay = MAX_SLEEP_S
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=delay)

    async def _until_next(self) -> float:
        upcoming = await self._approvals.next_expiry()
        if upcoming is None:
            return MAX_SLEEP_S
        seconds = (upcoming - datetime.now(UTC)).total_seconds()
        return min(max(seconds, 0.0), MAX_SLEEP_S)
