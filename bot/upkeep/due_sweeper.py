"""A background loop that acts on what falls due in PostgreSQL, with or without traffic.

The expiry of cards (`bot.reviews.expiry`) and their escalation (`bot.reviews.escalation.sweep`) share it: one loop
per process sleeps until the next due time the database reports (at most `MAX_SLEEP_S`, so
other replicas' new work is noticed too), is woken early when a review with such a time opens,
and acts on what is due. What is due is claimed with one conditional update per item, so each
item is acted on exactly once whichever replica's loop gets there first, also after a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from abc import ABC, abstractmethod
from datetime import UTC, datetime

log = logging.getLogger(__name__)

MAX_SLEEP_S = 5.0
"""The longest a sweeper sleeps without looking again."""


class DueSweeper(ABC):
    """The loop; subclasses say what is due (`sweep`) and when the next item is (`next_due`).

    Args:
        name: the loop's task name, for log lines.
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @abstractmethod
    async def sweep(self) -> int:
        """Act on everything due now; return how many items."""

    @abstractmethod
    async def next_due(self) -> datetime | None:
        """When the next item falls due, or None when nothing waits."""

    def start(self) -> None:
        """Start the loop (once)."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=self._name)

    def wake(self) -> None:
        """Look again now (a review with a due time just opened)."""
        self._wake.set()

    async def stop(self) -> None:
        """Stop the loop and wait for it."""
        if self._task is None:
            return
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None

    async def _run(self) -> None:
        while True:
            try:
                await self.sweep()
                delay = await self._until_next()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s failed; retrying", self._name)
                delay = MAX_SLEEP_S
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=delay)

    async def _until_next(self) -> float:
        upcoming = await self.next_due()
        if upcoming is None:
            return MAX_SLEEP_S
        seconds = (upcoming - datetime.now(UTC)).total_seconds()
        return min(max(seconds, 0.0), MAX_SLEEP_S)
