"""The stop signals of the turns this process runs, kept in step with PostgreSQL.

A stop is recorded in PostgreSQL (`bot.turns.stop.store`), on whichever replica or worker
got the click; the turn may run on another one. Each run registers its `StopSignal` here
under its turn id. A stop recorded in this process sets the signal at once (`stopped`); for
stops recorded elsewhere, one loop per process looks every `POLL_S` seconds, with one indexed
query for all the turns it runs, and only while it runs some: a turn shorter than that costs
no query at all. A run that starts (a resume, work finished after a restart) reads its turn's
stop in the statement that marks it running, so a stop is never missed between two looks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from contextlib import contextmanager

from bot.reviews.records import ApprovalRecord
from bot.turns.conversations import RunningTurn, Stopper
from bot.turns.stop.signal import StopSignal
from bot.turns.stop.store import StopStore

log = logging.getLogger(__name__)

POLL_S = 1.0
"""Seconds between two looks for stops recorded by other processes, while turns run here."""


class StopWatch:
    """Hands each run its `StopSignal` and sets it when its turn is stopped.

    Args:
        store: where stops are recorded.
        poll_s: seconds between two looks for stops recorded elsewhere.
    """

    def __init__(self, store: StopStore, *, poll_s: float = POLL_S) -> None:
        self._store = store
        self._poll_s = poll_s
        self._signals: dict[str, list[StopSignal]] = {}
        self._loop: asyncio.Task[None] | None = None

    @contextmanager
    def watching(self, turn: RunningTurn) -> Iterator[StopSignal]:
        """The signal of one run of `turn`, watched for as long as the block runs.

        A turn stopped before the run started (a resume after the stop) yields a signal that
        is set already; a turn without an id (older than turns) yields one that never is.
        """
        signal = StopSignal()
        if turn.stopped_by is not None:
            signal.set(user_id=turn.stopped_by.user_id, name=turn.stopped_by.display_name)
        if turn.turn_id is None:
            yield signal
            return
        signals = self._signals.setdefault(turn.turn_id, [])
        signals.append(signal)
        if self._loop is None or self._loop.done():
            self._loop = asyncio.create_task(self._watch(), name="stop watch")
        try:
            yield signal
        finally:
            signals.remove(signal)
            if not signals:
                del self._signals[turn.turn_id]

    def stopped(self, turn_id: str, stopper: Stopper) -> None:
        """Set the signals of `turn_id`'s runs in this process (a stop was just recorded here)."""
        for signal in self._signals.get(turn_id, ()):
            if not signal.is_set:
                log.info("turn %s stopped by %s", turn_id, stopper.user_id)
            signal.set(user_id=stopper.user_id, name=stopper.display_name)

    async def look(self, turn_id: str) -> None:
        """Look now whether `turn_id` was stopped elsewhere (a run that ends on a pause asks once)."""
        found = await self._store.stop_requests([turn_id])
        for stopped_turn, stopper in found.items():
            self.stopped(stopped_turn, stopper)

    async def stopper_of(self, thread_id: str) -> Stopper | None:
        """Who stopped the conversation's current turn, if it is stopped (a recovered pause asks)."""
        turn = await self._store.turn_of(thread_id)
        if turn is None or not turn.stopped:
            return None
        return Stopper(user_id=turn.stopped_by_id or "", display_name=turn.stopped_by_name or "")

    async def close_late_pauses(self, thread_id: str, stopper: Stopper) -> tuple[list[ApprovalRecord], bool]:
        """Close the pending approvals a stopped turn opened after its stop (`StopStore.close_late_pauses`)."""
        return await self._store.close_late_pauses(thread_id, stopper=stopper)

    async def close(self) -> None:
        """Stop looking (at shutdown)."""
        if self._loop is not None:
            self._loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop
            self._loop = None

    async def _watch(self) -> None:
        """Look for stops recorded elsewhere while runs are registered; end when none is."""
        while self._signals:
            await asyncio.sleep(self._poll_s)
            watched = [turn_id for turn_id, signals in self._signals.items() if any(not s.is_set for s in signals)]
            if not watched:
                continue
            try:
                found = await self._store.stop_requests(watched)
            except Exception as exc:  # the database is away: the next look tries again
                log.warning("could not look for stop requests: %s: %s", type(exc).__name__, exc)
                continue
            for turn_id, stopper in found.items():
                self.stopped(turn_id, stopper)
