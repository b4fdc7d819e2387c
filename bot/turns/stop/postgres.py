"""`PostgresStopStore`: the `StopStore` in PostgreSQL (see `bot.turns.stop.store` for what a stop does)."""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from bot import metrics
from bot.audit.postgres import PostgresAuditStore
from bot.base.conversation import Actor
from bot.base.errors import NothingToStopError, TurnEndedError
from bot.reviews.postgres import PostgresApprovalStore
from bot.reviews.records import ApprovalRecord
from bot.turns.conversations import Stopper
from bot.turns.stop.store import StopRecorded, TurnState, stop_audit_entry

_TURN = """
SELECT c.thread_id, c.workspace_id, c.turn_id, c.turn_requester_id, c.turn_requester_name,
       c.stop_requested_at, c.stopped_by_id, c.stopped_by_name,
       c.running_since IS NOT NULL AS running,
       EXISTS (SELECT 1 FROM approvals a WHERE a.thread_id = c.thread_id AND a.status = 'pending')
           OR EXISTS (SELECT 1 FROM mcp_questions q WHERE q.thread_id = c.thread_id AND q.status = 'open') AS paused,
       EXISTS (SELECT 1 FROM reviews r WHERE r.thread_id = c.thread_id AND r.status = 'resuming') AS resuming
FROM conversations c
"""


class PostgresStopStore:
    """A `StopStore` on the `conversations` table (a turn's state also reads `approvals`, `reviews`, `mcp_questions`).

    Args:
        pool: the asyncpg pool.
        approvals: closes the stopped turn's pending approvals, in the stop's transaction.
        audit: the audit log.
    """

    def __init__(self, pool: asyncpg.Pool, approvals: PostgresApprovalStore, audit: PostgresAuditStore) -> None:
        self._pool = pool
        self._approvals = approvals
        self._audit = audit

    async def turn_of(self, thread_id: str) -> TurnState | None:
        """See `StopStore.turn_of`."""
        row = await self._pool.fetchrow(f"{_TURN} WHERE c.thread_id = $1", thread_id)
        return _turn(row) if row is not None else None

    async def turn(self, turn_id: str) -> TurnState | None:
        """See `StopStore.turn`."""
        row = await self._pool.fetchrow(f"{_TURN} WHERE c.turn_id = $1", turn_id)
        return _turn(row) if row is not None else None

    async def request_stop(self, thread_id: str, *, stopper: Actor, expected_turn_id: str | None) -> StopRecorded:
        """See `StopStore.request_stop`."""
        async with self._pool.acquire() as connection, connection.transaction():
            await self._approvals.lock_open_reviews(connection, thread_id)
            row = await connection.fetchrow(f"{_TURN} WHERE c.thread_id = $1 FOR UPDATE OF c", thread_id)
            if row is None:
                raise TurnEndedError() if expected_turn_id is not None else NothingToStopError()
            turn = _turn(row)
            refusal = turn.refusal(expected_turn_id)
            if refusal is not None:
                raise refusal
            await connection.execute(
                "UPDATE conversations SET stop_requested_at = now(), stopped_by_id = $2, stopped_by_name = $3 "
                "WHERE thread_id = $1",
                thread_id,
                stopper.user_id,
                stopper.display_name,
            )
            closed, claimed = await self._approvals.stop_pending(
                connection, thread_id, stopper=Stopper(user_id=stopper.user_id, display_name=stopper.display_name)
            )
            await self._audit.record(
                stop_audit_entry(turn, stopper, closed),
                connection=connection,
            )
        for approval in closed:
            metrics.approval_closed(approval)
        metrics.TURNS_STOPPED.labels(state="running" if turn.running else "paused").inc()
        return StopRecorded(turn=turn, closed=tuple(closed), claimed=claimed)

    async def close_late_pauses(self, thread_id: str, *, stopper: Stopper) -> tuple[list[ApprovalRecord], bool]:
        """See `StopStore.close_late_pauses`."""
        async with self._pool.acquire() as connection, connection.transaction():
            await self._approvals.lock_open_reviews(connection, thread_id)
            closed, claimed = await self._approvals.stop_pending(connection, thread_id, stopper=stopper)
        for approval in closed:
            metrics.approval_closed(approval)
        return closed, claimed

    async def stop_requests(self, turn_ids: Sequence[str]) -> dict[str, Stopper]:
        """See `StopStore.stop_requests`."""
        rows = await self._pool.fetch(
            "SELECT turn_id, stopped_by_id, stopped_by_name FROM conversations "
            "WHERE turn_id = ANY($1::text[]) AND stop_requested_at IS NOT NULL",
            list(turn_ids),
        )
        return {
            row["turn_id"]: Stopper(user_id=row["stopped_by_id"] or "", display_name=row["stopped_by_name"] or "")
            for row in rows
        }


def _turn(row: asyncpg.Record) -> TurnState:
    return TurnState(
        thread_id=row["thread_id"],
        workspace_id=row["workspace_id"],
        turn_id=row["turn_id"],
        requester_id=row["turn_requester_id"],
        requester_name=row["turn_requester_name"],
        running=bool(row["running"]),
        paused=bool(row["paused"]),
        resuming=bool(row["resuming"]),
        stopped_by_id=row["stopped_by_id"],
        stopped_by_name=row["stopped_by_name"],
        stopped_at=row["stop_requested_at"],
    )
