"""Expiring an MCP server's unanswered questions on time, like cards (`bot.reviews.expiry`).

A question stores its `expires_at` (its tool's card expiry) when its pause is raised. The
sweeper closes what is due, answered `cancel` (one conditional update per question, so each
expires once whichever replica gets there first, also after a restart), and hands each to the
service: the requester is shown that it expired, and the call goes on with `cancel`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection
from datetime import datetime

from bot.tools.mcp.elicitation.desk import QuestionDesk
from bot.tools.mcp.elicitation.store import QuestionRecord
from bot.upkeep.due_sweeper import DueSweeper

log = logging.getLogger(__name__)

OnQuestionExpired = Callable[[QuestionRecord], Awaitable[None]]


class QuestionExpiry(DueSweeper):
    """The questions' expiry loop.

    Args:
        desk: the questions.
        on_expired: what to do with each expired question (the service's follow-up).
        platforms: the platforms this process serves (read at each sweep).
    """

    def __init__(self, desk: QuestionDesk, on_expired: OnQuestionExpired, *, platforms: Collection[str]) -> None:
        super().__init__("question expiry sweeper")
        self._desk = desk
        self._on_expired = on_expired
        self._platforms = platforms

    async def sweep(self) -> int:
        """Expire every question due now; return how many."""
        expired = await self._desk.expire_due(platforms=self._platforms)
        for record in expired:
            log.info("question %s expired unanswered (thread_id=%s)", record.id, record.thread_id)
            try:
                await self._on_expired(record)
            except Exception:
                log.exception("handling the expiry of question %s failed", record.id)
        return len(expired)

    async def next_due(self) -> datetime | None:
        """When the next open question on the platforms served expires, or None."""
        return await self._desk.next_expiry(platforms=self._platforms)
