"""What the progress indicator shows during a run: who works, who waits for a card, a model retry, Stop.

`DelegationTracker` turns the run's stream (delegation events, interrupts, model waits) into
`Activity` values; `ProgressFeed` hands them to the platform's `Progress` without holding up the run.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Iterable

from langgraph.types import Interrupt

from bot.agents.delegation import DelegationEvent
from bot.agents.model_retry import ModelWait
from bot.ports import Activity, ModelRetry, Progress
from bot.reviews.requests import action_requests

log = logging.getLogger(__name__)

PROGRESS_GRACE_S = 5.0
"""At the end of a run, how long progress updates still under way may take before they are dropped."""


def interrupt_source(interrupt: Interrupt) -> str | None:
    """The subagent whose review gate raised `interrupt`, or None for the top-level agent."""
    return next((action.source for action in action_requests(interrupt.value) if action.source), None)


class DelegationTracker:
    """Which delegations work and which wait for cards, from a run's stream.

    Args:
        paused: interrupts pending before the run that it does not resume; their delegations
            run again only to find they still wait (LangGraph re-runs every interrupted task),
            which is no news.
        resumed: interrupts the run resumes; their delegations continue where they stopped.
        turn_id: the run's turn, named by the indicator's Stop button (docs/decisions/0021).

    Names stand for delegations: two delegations to one subagent are told apart only by count.
    """

    def __init__(
        self, *, paused: Iterable[Interrupt] = (), resumed: Iterable[Interrupt] = (), turn_id: str | None = None
    ) -> None:
        self._known = {interrupt.id for interrupt in (*paused, *resumed)}
        self._working: dict[str, str] = {}
        self._waiting = [name for name in map(interrupt_source, paused) if name]
        self._continuing = [name for name in map(interrupt_source, resumed) if name]
        self._rechecking = list(self._waiting)
        self._delegated = bool(self._waiting or self._continuing)
        self._turn_id = turn_id
        self._long = False
        self._stopping: str | None = None

    def on_long_run(self) -> Activity:
        """The activity once the run has gone on for a while: an indicator with its Stop button."""
        self._long = True
        return self._activity()

    def on_stop(self, name: str) -> Activity:
        """The activity once the turn was stopped by `name` (the Stop button goes)."""
        self._stopping = name or "someone"
        return self._activity()

    def on_event(self, event: DelegationEvent) -> Activity | None:
        """The activity after a delegation started or reported; None when nothing changed."""
        name = event.subagent
        if not event.started:
            if self._working.pop(event.call_id, None) is None:
                return None
            return self._activity()
        if name in self._continuing:
            self._continuing.remove(name)
            self._working[event.call_id] = name
            return self._activity(continued=name)
        if name in self._rechecking:
            self._rechecking.remove(name)
            return None
        self._delegated = True
        self._working[event.call_id] = name
        return self._activity(started=name, query=event.query)

    def on_interrupt(self, interrupt: Interrupt) -> Activity | None:
        """The activity after a delegation paused for a card; None for a pause seen before."""
        if interrupt.id in self._known:
            return None
        self._known.add(interrupt.id)
        name = interrupt_source(interrupt)
        if name is None:
            return None
        for call_id, working in list(self._working.items()):
            if working == name:
                del self._working[call_id]
                break
        self._delegated = True
        self._waiting.append(name)
        return self._activity()

    def on_model_wait(self, wait: ModelWait) -> Activity:
        """The activity while a failed model call waits to be tried again (who works stays as it was)."""
        return self._activity(retrying=ModelRetry(kind=wait.kind, wait_s=wait.seconds))

    def _activity(
        self,
        *,
        started: str | None = None,
        continued: str | None = None,
        query: str = "",
        retrying: ModelRetry | None = None,
    ) -> Activity:
        return Activity(
            subagents=tuple(self._working.values()),
            waiting=tuple(self._waiting),
            started=started,
            continued=continued,
            query=query,
            retrying=retrying,
            delegated=self._delegated,
            turn_id=self._turn_id,
            long_running=self._long,
            stopping=self._stopping,
        )


class ProgressFeed:
    """Hands activities to a `Progress` in order, in the background.

    LangGraph's stream advances only when its consumer asks for the next part, so awaiting a
    progress update in the loop would hold up the run (the model, the tools, the cards) for
    as long as the platform takes; a rate-limited update waits out its `Retry-After` (Slack's
    client and discord.py both do) before it returns. Progress is decoration: one worker shows
    the activities one after the other while the run goes on, a failure is logged, and when
    the run ends what has not been shown within `PROGRESS_GRACE_S` is dropped (the
    platform's `working` then clears the indicator).

    Args:
        progress: the run's progress indicator.
        thread_id: for the logs.
    """

    def __init__(self, progress: Progress, thread_id: str | None) -> None:
        self._progress = progress
        self._thread_id = thread_id
        self._queue: deque[Activity] = deque()
        self._worker: asyncio.Task[None] | None = None

    def show(self, activity: Activity | None) -> None:
        """Queue `activity` (None: nothing to show); it is shown after those queued before it."""
        if activity is None:
            return
        self._queue.append(activity)
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._drain())

    async def close(self, grace_s: float = PROGRESS_GRACE_S) -> None:
        """Wait for the queued activities for at most `grace_s`, then drop the rest."""
        worker = self._worker
        if worker is None:
            return
        try:
            await asyncio.wait({worker}, timeout=grace_s)
        finally:
            if not worker.done():
                log.info("progress updates not shown within %ss, dropped (thread_id=%s)", grace_s, self._thread_id)
                self._queue.clear()
                worker.cancel()

    async def _drain(self) -> None:
        while self._queue:
            activity = self._queue.popleft()
            try:
                await self._progress.show(activity)
            except Exception:
                log.exception("could not show progress (thread_id=%s)", self._thread_id)
