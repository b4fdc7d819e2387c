"""Expiring cards on time, with or without traffic, across restarts (docs/decisions/0006).

Each approval stores its `expires_at` when its review opens. The sweeper (`bot.upkeep.due_sweeper`)
expires what is due in single transactions and hands each expiry to the service: card redrawn
as Expired, requester told, graph resumed once its pause has no pending call left.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection
from datetime import datetime

from bot.reviews.records import DecideResult
from bot.reviews.store import ApprovalStore
from bot.upkeep.due_sweeper import MAX_SLEEP_S, DueSweeper

log = logging.getLogger(__name__)

__all__ = ["MAX_SLEEP_S", "ExpirySweeper", "OnExpired"]

OnExpired = Callable[[DecideResult], Awaitable[None]]


class ExpirySweeper(DueSweeper):
    """The expiry loop.

    Args:
        approvals: the approvals tables.
        on_expired: what to do with each expiry (the service's follow-up).
        platforms: the platforms this process serves (`ConversationRef.platform` names; read
            at each sweep): only their approvals are expired here.
    """

    def __init__(self, approvals: ApprovalStore, on_expired: OnExpired, *, platforms: Collection[str]) -> None:
        super().__init__("expiry sweeper")
        self._approvals = approvals
        self._on_expired = on_expired
        self._platforms = platforms

    async def sweep(self) -> int:
        """Expire everything due now; return how many."""
        results = await self._approvals.expire_due(platforms=self._platforms)
        for result in results:
            log.info(
                "approval %s expired without a decision (thread_id=%s)", result.approval.id, result.approval.thread_id
            )
            try:
                await self._on_expired(result)
            except Exception:
                log.exception("handling the expiry of approval %s failed", result.approval.id)
        return len(results)

    async def next_due(self) -> datetime | None:
        """When the next pending approval on the platforms served expires, or None."""
        return await self._approvals.next_expiry(platforms=self._platforms)
