"""Background work the service owns, so shutdown can wait for it (DESIGN.md "Lifecycle")."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

log = logging.getLogger(__name__)


class TaskTracker:
    """Starts tasks, logs their failures, and drains them on shutdown."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closing = False

    @property
    def closing(self) -> bool:
        """True once `drain` has begun: no new work should start."""
        return self._closing

    @property
    def running(self) -> int:
        """How many tasks run now."""
        return len(self._tasks)

    def spawn(self, coro: Coroutine[Any, Any, Any], *, name: str) -> asyncio.Task[Any]:
        """Run `coro` in the background; an exception is logged, never lost."""
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("background task %s failed", task.get_name(), exc_info=task.exception())

    async def drain(self, grace_s: float, *, cut_short: asyncio.Event | None = None) -> bool:
        """Stop accepting work, wait up to `grace_s` seconds, then cancel what is left.

        Every task is waited for, those started during the drain too (an acked click's decision
        starts its resume as it ends), all within the one `grace_s`.

        Args:
            grace_s: the longest wait.
            cut_short: when set, the wait ends at once (`countersign chat`: a second Ctrl-C).

        Returns:
            Whether work was cancelled (it stays marked unfinished for the next start).
        """
        self._closing = True
        # A task may start another while it ends (an acked click's decision starts its resume):
        # those are waited for too, within the same grace.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace_s
        cut = asyncio.ensure_future(cut_short.wait()) if cut_short is not None else None
        try:
            while self._tasks and (left := deadline - loop.time()) > 0 and not (cut is not None and cut.done()):
                waiting: set[asyncio.Future[Any]] = set(self._tasks)
                if cut is not None:
                    waiting.add(cut)
                await asyncio.wait(waiting, timeout=left, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if cut is not None:
                cut.cancel()
        pending = set(self._tasks)
        for task in pending:
            log.warning("cancelling %s after the shutdown grace period", task.get_name())
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=5)
        return bool(pending)

    async def join(self) -> None:
        """Wait until no task is running (tests and benchmarks use this)."""
        while self._tasks:
            await asyncio.wait(set(self._tasks))
