"""Stop requests: what a turn is doing, and recording a stop exactly once.

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

`StopStore` is the port: `PostgresStopStore` (`bot.turns.stop.postgres`) in production,
`InMemoryStopStore` (`bot.turns.stop.memory`) in tests. Both pass one contract suite
(tests/integration/turns/stop/test_stop_store_contract.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from bot.audit.entries import AuditEntry, AuditKind
from bot.base.conversation import Actor
from bot.base.errors import AlreadyStoppedError, NothingToStopError, TurnEndedError
from bot.reviews.records import ApprovalRecord
from bot.turns.conversations import Stopper


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


def stop_audit_entry(turn: TurnState, stopper: Actor, closed: Sequence[ApprovalRecord]) -> AuditEntry:
    """The audit row of a stop: who stopped which turn, while it did what, and the approvals it closed.

    Args:
        turn: the turn as it was before the stop.
        stopper: who stopped it.
        closed: the pending approvals the stop closed.
    """
    return AuditEntry(
        kind=AuditKind.DECISION,
        workspace_id=turn.workspace_id,
        thread_id=turn.thread_id,
        actor_id=stopper.user_id,
        actor_name=stopper.display_name,
        outcome="stopped",
        detail={
            "turn_id": turn.turn_id,
            "requester_id": turn.requester_id,
            "while": "running" if turn.running else "paused",
            "approvals_stopped": [approval.id for approval in closed],
            **({"actor_workspace_id": stopper.workspace_id} if stopper.workspace_id != turn.workspace_id else {}),
        },
    )


class StopStore(Protocol):
    """Reads turns and records stops (see the module docstring)."""

    async def turn_of(self, thread_id: str) -> TurnState | None:
        """The current turn of a conversation (None: the bot never took part in it)."""
        ...

    async def turn(self, turn_id: str) -> TurnState | None:
        """The conversation whose current turn is `turn_id`, or None (a later turn began, or no such turn)."""
        ...

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
        ...

    async def close_late_pauses(self, thread_id: str, *, stopper: Stopper) -> tuple[list[ApprovalRecord], bool]:
        """Close, as stopped, pending approvals a stopped turn opened after its stop was recorded.

        A replica learns of a stop made elsewhere within `bot.turns.stop.watch.POLL_S`; a pause its
        run raised in that moment got cards that the stop's own transaction could not see.
        The runner closes them once its run is over, so no card of a stopped turn stays open.

        Returns:
            The approvals closed, and whether a review was claimed for resuming.
        """
        ...

    async def stop_requests(self, turn_ids: Sequence[str]) -> dict[str, Stopper]:
        """The turns among `turn_ids` a stop was requested for, with who stopped each.

        One indexed query for every turn a process runs (`bot.turns.stop.watch.StopWatch`).
        """
        ...
