"""`InMemoryStopStore`: the `StopStore` in a process's memory, for tests.

It reads and writes the conversation rows of a `TurnTables` (`bot.turns.memory_tables`), shared
with the conversation twin that starts turns (`InMemoryConversationStore.mark_running`). A stop
is recorded under the tables' lock, as PostgreSQL records it with the conversation's row locked.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace

from bot import metrics
from bot.base.conversation import Actor
from bot.base.errors import NothingToStopError, TurnEndedError
from bot.reviews.records import ApprovalRecord
from bot.turns.conversations import Stopper
from bot.turns.memory_tables import ConversationRecord, TurnTables
from bot.turns.stop.store import StopRecorded, TurnState, stop_audit_entry


class InMemoryStopStore:
    """A `StopStore` over `TurnTables` (see the module docstring).

    Not modelled: approvals, reviews and MCP questions. A turn is active only while its run is
    marked (never `paused` or `resuming`), a stop closes no approval and claims no review
    (`StopRecorded.closed` empty, `claimed` False), and `close_late_pauses` closes nothing.
    The stop's audit row goes to `TurnTables.audit`.

    Args:
        tables: the rows to share with other twins; fresh ones when omitted.
    """

    def __init__(self, tables: TurnTables | None = None) -> None:
        self.tables = tables if tables is not None else TurnTables()

    async def turn_of(self, thread_id: str) -> TurnState | None:
        """See `StopStore.turn_of`."""
        await asyncio.sleep(0)
        row = self.tables.conversations.get(thread_id)
        return _turn(row) if row is not None else None

    async def turn(self, turn_id: str) -> TurnState | None:
        """See `StopStore.turn`."""
        await asyncio.sleep(0)
        row = next((r for r in self.tables.conversations.values() if r.turn_id == turn_id), None)
        return _turn(row) if row is not None else None

    async def request_stop(self, thread_id: str, *, stopper: Actor, expected_turn_id: str | None) -> StopRecorded:
        """See `StopStore.request_stop`."""
        await asyncio.sleep(0)
        t = self.tables
        async with t.lock:
            row = t.conversations.get(thread_id)
            if row is None:
                raise TurnEndedError() if expected_turn_id is not None else NothingToStopError()
            turn = _turn(row)
            refusal = turn.refusal(expected_turn_id)
            if refusal is not None:
                raise refusal
            now = t.clock()
            row.stop_requested_at = now
            row.stopped_by = Stopper(user_id=stopper.user_id, display_name=stopper.display_name)
            t.audit.append(replace(stop_audit_entry(turn, stopper, ()), at=now))
        metrics.TURNS_STOPPED.labels(state="running" if turn.running else "paused").inc()
        return StopRecorded(turn=turn, closed=(), claimed=False)

    async def close_late_pauses(self, thread_id: str, *, stopper: Stopper) -> tuple[list[ApprovalRecord], bool]:
        """See `StopStore.close_late_pauses` (approvals are not modelled: nothing to close)."""
        await asyncio.sleep(0)
        return [], False

    async def stop_requests(self, turn_ids: Sequence[str]) -> dict[str, Stopper]:
        """See `StopStore.stop_requests`."""
        await asyncio.sleep(0)
        wanted = set(turn_ids)
        return {
            row.turn_id: row.stopped_by or Stopper(user_id="", display_name="")
            for row in self.tables.conversations.values()
            if row.turn_id is not None and row.turn_id in wanted and row.stop_requested_at is not None
        }


def _turn(row: ConversationRecord) -> TurnState:
    stopper = row.stopped_by
    return TurnState(
        thread_id=row.thread_id,
        workspace_id=row.workspace_id,
        turn_id=row.turn_id,
        requester_id=row.turn_requester_id,
        requester_name=row.turn_requester_name,
        running=row.running,
        paused=False,
        resuming=False,
        stopped_by_id=stopper.user_id if stopper is not None else None,
        stopped_by_name=stopper.display_name if stopper is not None else None,
        stopped_at=row.stop_requested_at,
    )
