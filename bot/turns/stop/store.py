"""Stop requests in PostgreSQL: what a turn is doing, and recording a stop exactly once.

A conversation's current turn is the one its last human message started (`conversations.
turn_id`, written by `ConversationStore.mark_running`). It is *active* while a run of it is
under way (the run mark), a card of it waits (a pending approval), or a decision of it waits
for its resume (a resuming review); a stop applies only to an active turn, and only to the
turn it names, never to a later one. The request is a row update, so the replica running the
turn finds it (`stop_requests`), also after a restart.

Recording a stop is one transaction: the thread's open reviews are locked first (as a vote
and an expiry lock their review first), then the conversation's row; the turn is checked
again under those locks, the stop is written, and every pending approval of the turn is
closed as stopped (`PostgresApprovalStore.stop_pending`), each with its audit row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from bot import metrics
from bot.audit.entries import AuditEntry, AuditKind
from bot.audit.postgres import PostgresAuditStore
from bot.base.conversation import Actor
from bot.base.errors import AlreadyStoppedError, NothingToStopError, TurnEndedError
from bot.reviews.postgres import PostgresApprovalStore
from bot.reviews.records import ApprovalRecord
from bot.turns.conversations import Stopper

_TURN = """
SELECT c.thread_id, c.workspace_id, c.turn_id, c.turn_requester_id, c.turn_requester_name,
       c.stop_requested_at, c.stopped_by_id, c.stopped_by_name,
       c.running_since IS NOT NULL AS running,
       EXISTS (SELECT 1 FROM approvals a WHERE a.thread_id = c.thread_id AND a.status = 'pending')
           OR EXISTS (SELECT 1 FROM mcp_questions q WHERE q.thread_id = c.thread_id AND q.status = 'open') AS paused,
       EXISTS (SELECT 1 FROM reviews r WHERE r.thread_id = c.thread_id AND r.status = 'resuming') AS resuming
FROM conversations c
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnState:
    """A conversation's current turn, as stored.

    Attributes:
        thread_id: the conversation.
        workspace_id: its workspace.
        turn_id: the current turn (None: no message since turns were recorded).
        requester_id / requester_name: the author of the message that started it.
        running: a run of the graph is under way (or its outcome is still due).
        paused: a card of the turn waits for a decision, or an MCP server's question for its
            requester's answer (docs/decisions/0054-mcp-elicitation.md).
        resuming: a decision of the turn waits for its resume.
        stopped_by_id / stopped_by_name / stopped_at: the stop requested for it, if any.
    """

    thread_id: str
    workspace_id: str
    turn_id: str | None
    requester_id: str | None
    requester_name: str | None
    running: bool
    paused: bool
    resuming: bool
    stopped_by_id: str | None = None
    stopped_by_name: str | None = None
    stopped_at: datetime | None = None

    @property
    def active(self) -> bool:
        """Whether the turn is still at work: running, waiting for a card, or about to resume."""
        return self.turn_id is not None and (self.running or self.paused or self.resuming)

    @property
    def stopped(self) -> bool:
        """Whether a stop was requested for this turn."""
        return self.stopped_at is not None

    def refusal(self, expected_turn_id: str | None) -> Exception | None:
        """Why a stop of this turn cannot be recorded now, or None when it can.

        Args:
            expected_turn_id: the turn a Stop button names; None for `stop` typed in the
                conversation (whatever turn is active there).

        Returns:
            `TurnEndedError` for a button whose turn is not the active one any more,
            `NothingToStopError` when nothing is active, `AlreadyStoppedError` when the turn
            was stopped before.
        """
        if expected_turn_id is not None and (self.turn_id != expected_turn_id or not self.active):
            return TurnEndedError()
        if not self.active:
            return NothingToStopError()
        if self.stopped:
            return AlreadyStoppedError(
                stopped_by_id=self.stopped_by_id, stopped_by_name=self.stopped_by_name, stopped_at=self.stopped_at
            )
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class StopRecorded:
    """What recording a stop did.

    Attributes:
        turn: the turn as it was when the stop was written (before it).
        closed: the pending approvals closed as stopped, as now stored.
        claimed: whether a review was claimed for resuming (the caller resumes the thread).
    """

    turn: TurnState
    closed: tuple[ApprovalRecord, ...]
    claimed: bool


class StopStore:
    """Reads turns and records stops.

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
        """The current turn of a conversation (None: the bot never took part in it)."""
        row = await self._pool.fetchrow(f"{_TURN} WHERE c.thread_id = $1", thread_id)
        return _turn(row) if row is not None else None

    async def turn(self, turn_id: str) -> TurnState | None:
        """The conversation whose current turn is `turn_id`, or None (a later turn began, or no such turn)."""
        row = await self._pool.fetchrow(f"{_TURN} WHERE c.turn_id = $1", turn_id)
        return _turn(row) if row is not None else None

    async def request_stop(self, thread_id: str, *, stopper: Actor, expected_turn_id: str | None) -> StopRecorded:
        """Record a stop of the conversation's active turn and close its pending approvals, atomically.

        Args:
            thread_id: the conversation.
            stopper: who stops it (authorised by the caller).
            expected_turn_id: the turn a Stop button names (None: the active turn).

        Raises:
            NothingToStopError, TurnEndedError, AlreadyStoppedError: see `TurnState.refusal`;
                nothing was changed.
        """
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
                AuditEntry(
                    kind=AuditKind.DECISION,
                    workspace_id=turn.workspace_id,
                    thread_id=thread_id,
                    actor_id=stopper.user_id,
                    actor_name=stopper.display_name,
                    outcome="stopped",
                    detail={
                        "turn_id": turn.turn_id,
                        "requester_id": turn.requester_id,
                        "while": "running" if turn.running else "paused",
                        "approvals_stopped": [approval.id for approval in closed],
                        **(
                            {"actor_workspace_id": stopper.workspace_id}
                            if stopper.workspace_id != turn.workspace_id
                            else {}
                        ),
                    },
                ),
                connection=connection,
            )
        for approval in closed:
            metrics.approval_closed(approval)
        metrics.TURNS_STOPPED.labels(state="running" if turn.running else "paused").inc()
        return StopRecorded(turn=turn, closed=tuple(closed), claimed=claimed)

    async def close_late_pauses(self, thread_id: str, *, stopper: Stopper) -> tuple[list[ApprovalRecord], bool]:
        """Close, as stopped, pending approvals a stopped turn opened after its stop was recorded.

        A replica learns of a stop made elsewhere within `bot.turns.stop.watch.POLL_S`; a pause its
        run raised in that moment got cards that the stop's own transaction could not see.
        The runner closes them once its run is over, so no card of a stopped turn stays open.

        Returns:
            The approvals closed, and whether a review was claimed for resuming.
        """
        async with self._pool.acquire() as connection, connection.transaction():
            await self._approvals.lock_open_reviews(connection, thread_id)
            closed, claimed = await self._approvals.stop_pending(connection, thread_id, stopper=stopper)
        for approval in closed:
            metrics.approval_closed(approval)
        return closed, claimed

    async def stop_requests(self, turn_ids: Sequence[str]) -> dict[str, Stopper]:
        """The turns among `turn_ids` a stop was requested for, with who stopped each.

        One indexed query for every turn a process runs (`bot.turns.stop.watch.StopWatch`).
        """
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
