"""The port of reviews and approvals: `PostgresApprovalStore` in production, `InMemoryApprovalStore` in tests.

A review is one interrupt of one thread; an approval is one reviewed tool call of it, with its
card. Every status change is a transition of `bot.reviews.lifecycle`, made only from the states
the event may leave, so of two racing events (two clicks, a click and the expiry, two sweepers)
exactly one moves the approval, and of two decisions finishing one review exactly one claims
its resume. A decision and its audit row are written together, or neither. Both
implementations pass one contract suite (tests/integration/reviews/test_review_store_contract.py).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol

from bot.audit.entries import AuditEntry
from bot.base.conversation import Actor
from bot.reviews.lifecycle import ApprovalStatus, ReviewStatus
from bot.reviews.records import ApprovalRecord, DecideResult, NewAction, ReviewRecord
from bot.reviews.trust.grants import NewGrant
from bot.tools.ledger.store import ToolResult


class VoteKind(StrEnum):
    """What a vote does (see `ApprovalStore.vote`)."""

    APPROVE = "approve"
    EDIT = "edit"
    REJECT = "reject"


@dataclass(frozen=True, slots=True, kw_only=True)
class Gate:
    """What a reviewed call's approval lets run (`ApprovalStore.gate`, read by `bot.tools.ledger.postgres`).

    Attributes:
        status: the approval's status.
        approved: `args_digest` of the arguments approved; None until approved.
        definition: the pinned digest of the MCP tool's definition the card was made under;
            None for the bot's own tools.
    """

    status: ApprovalStatus
    approved: str | None
    definition: str | None


class ApprovalStore(Protocol):
    """Reviews (one per interrupt) and approvals (one per reviewed tool call)."""

    async def open_review(
        self,
        *,
        thread_id: str,
        workspace_id: str,
        interrupt_id: str,
        requester: Actor,
        actions: Sequence[NewAction],
        source: str | None = None,
    ) -> tuple[ReviewRecord, list[ApprovalRecord]]:
        """Store a pause and its approvals, or return the ones already stored for it.

        Idempotent on `(thread_id, interrupt_id)`, so reconciling after a crash is safe: a
        second call stores nothing and returns what the first stored (its `actions` ignored).

        Args:
            thread_id: the conversation.
            workspace_id: its workspace.
            interrupt_id: LangGraph's id of the interrupt (one review per interrupt).
            requester: the author of the message the calls came from.
            actions: the reviewed calls, in action-request order (their positions).
            source: the subagent whose gate paused, None for the top-level agent.

        Returns:
            The review (status `pending`) and its approvals in action-request order, each
            pending with its expiry, escalation and trust offer set from its action.
        """
        ...

    async def get(self, approval_id: str) -> ApprovalRecord | None:
        """The approval with this id, or None."""
        ...

    async def review(self, review_id: str) -> ReviewRecord | None:
        """The review with this id (a UUID's text), or None."""
        ...

    async def reviews_for_interrupts(self, thread_id: str, interrupt_ids: Sequence[str]) -> dict[str, ReviewRecord]:
        """The reviews stored for these interrupts of the thread, by interrupt id (missing: none stored)."""
        ...

    async def approvals_of(self, review_id: str) -> list[ApprovalRecord]:
        """The approvals of a review, in action-request order."""
        ...

    async def pending_in_thread(self, thread_id: str) -> list[ApprovalRecord]:
        """Undecided approvals of a thread, oldest first (then in action-request order)."""
        ...

    async def pending_everywhere(self, *, platforms: Collection[str], limit: int = 1000) -> list[ApprovalRecord]:
        """Undecided approvals of every thread on `platforms`, oldest first (at most `limit`).

        Args:
            platforms: `ConversationRef.platform` names (a thread id's first part): those this
                process serves.
            limit: at most this many.
        """
        ...

    async def reviews_in_thread(self, thread_id: str, statuses: Sequence[ReviewStatus]) -> list[ReviewRecord]:
        """The thread's reviews in any of `statuses`, oldest first."""
        ...

    async def add_card(self, approval_id: str, card_ref: str, *, primary: bool) -> None:
        """Remember a posted copy of the approval's card (once per `card_ref`); the primary one is its `card_ref`."""
        ...

    async def card_refs(self, approval_id: str) -> list[str]:
        """Every posted copy of the approval's card."""
        ...

    async def expire_due(self, *, platforms: Collection[str]) -> list[DecideResult]:
        """Expire every pending approval on `platforms` whose time has come, each exactly once.

        Each expiry is ordered against a vote on the same review, so of an expiry and a click
        on one approval only one wins. An expired approval's reason is `EXPIRED_REASON`; the
        expiry that leaves its review without a pending approval claims the resume.

        Each expiry writes its audit row (kind `expiry`, outcome `expired`) with it.

        Args:
            platforms: `ConversationRef.platform` names: those this process serves.

        Returns:
            One result per approval this call expired (`decided` True).
        """
        ...

    async def next_expiry(self, *, platforms: Collection[str]) -> datetime | None:
        """When the next pending approval on `platforms` expires, or None."""
        ...

    async def claim_due_escalations(
        self, *, lease_s: float, platforms: Collection[str], limit: int = 50
    ) -> list[ApprovalRecord]:
        """Claim the escalations that are due on approvals still pending; each is claimed once.

        A `waiting` escalation whose time has come, or a `claimed` one whose lease ran out (the
        sweeper that claimed it died before posting), on a pending approval not past its expiry
        time, becomes `claimed` with a new lease; `escalated_at` keeps the first claim's time.
        Of two sweepers at once, each escalation goes to exactly one.

        Args:
            lease_s: seconds the claimer has to post the copies and `finish_escalation`.
            platforms: `ConversationRef.platform` names: those this process serves.
            limit: at most this many per call.

        Returns:
            The claimed approvals, as stored after the claim, by escalation time.
        """
        ...

    async def finish_escalation(self, approval_id: str, *, copies: int) -> ApprovalRecord | None:
        """Record that a claimed escalation's copies are out, with its audit row, atomically.

        Args:
            approval_id: the approval.
            copies: how many copies were posted (for the audit row).

        Returns:
            The approval as now stored (escalation `escalated`), or None when it was not
            `claimed` (another sweeper finished it after this one's lease ran out).
        """
        ...

    async def next_escalation(self, *, platforms: Collection[str]) -> datetime | None:
        """When the next escalation on `platforms` falls due (or a claim's lease runs out), or None."""
        ...

    async def still_escalating(self, approval_id: str) -> ApprovalRecord | None:
        """The approval as stored now, if the escalation claimed on it may still go out; else None.

        A claim does not hold the approval: a decision, a stop or the expiry time may come after
        it, so the claimer reads it again right before posting the copies, with the claim's own
        conditions (pending, escalation claimable, not past its expiry time).
        """
        ...

    async def vote(
        self,
        approval_id: str,
        *,
        actor: Actor,
        kind: VoteKind,
        quorum: int,
        audit: AuditEntry,
        args: dict[str, Any] | None = None,
        expected_digest: str | None = None,
        reason: str | None = None,
        trust: NewGrant | None = None,
    ) -> DecideResult:
        """Record one vote exactly once, with its audit row, atomically.

        - `reject` (also a call denied by policy) decides at once.
        - `approve` counts for the arguments under vote; the same person twice counts once.
        - `edit` replaces the arguments under vote (earlier approvals were for other arguments
          and no longer count) and is the editor's approval of the new ones.
        The approval is decided when `quorum` distinct people approved the same arguments; it
        is then `approved`, or `edited` when those arguments differ from the proposal. Of two
        decisions finishing the same review at once exactly one claims the resume
        (`review_complete`). A vote that decides is counted in `bot.metrics`. A decision is
        activity of its conversation (retention counts idle days from it).

        Args:
            approval_id: the approval.
            actor: the voter.
            kind: approve, edit or reject.
            quorum: approvals needed (the tool's current setting; stored for the card).
            audit: the audit row to write if the vote is recorded (its outcome is completed
                here: `approved`, `edited`, `rejected` or `vote`).
            args: the new arguments, for an edit.
            expected_digest: for an approve, the digest of the arguments the caller checked
                the policy for; a concurrent edit makes the vote stale.
            reason: for a reject.
            trust: for an approve, the trust grant to make with it ("Approve and trust",
                docs/decisions/0022): made with the decision only when this vote decides the
                approval alone (`bot.reviews.lifecycle.grants_trust`), binding the arguments it
                approves, with its own audit row.

        Raises:
            ApprovalNotFoundError: no such approval.
            AlreadyDecidedError: decided before, or past its expiry time; nothing changed.
            AlreadyVotedError: this person already approved these arguments.
            StaleVoteError: the arguments changed since the caller read them; retry.
            TrustRefusedError: `trust` was asked, but this vote would not decide the approval
                alone (`quorum`); nothing changed.
            ValueError: an edit without `args`.
        """
        ...

    async def gate(self, thread_id: str, tool_call_id: str) -> Gate | None:
        """The review state of a tool call (its latest approval), or None if never reviewed."""
        ...

    async def mark_definition_changed(self, thread_id: str, tool_call_id: str) -> ApprovalRecord | None:
        """Record that a decided call did not run because its MCP tool's definition changed; return the approval."""
        ...

    async def mark_outcome_unknown(self, thread_id: str, tool_call_id: str) -> ApprovalRecord | None:
        """Record that a decided call started and was cut short; return the approval, if it had one."""
        ...

    async def tool_runs(self, thread_id: str, tool_call_ids: Sequence[str]) -> dict[str, ToolResult | None]:
        """What the tool-run ledger knows of these calls: the result of each that finished, None for one that started.

        A call missing from the answer never started (the ledger claims a call before it runs).
        """
        ...

    async def give_up_reviews(self, thread_id: str, review_ids: Sequence[str]) -> dict[str, list[ApprovalRecord]]:
        """Give up resuming these reviews of the thread, at once; return what was given up.

        The `give_up` transition (`bot.reviews.lifecycle`): each review still resuming becomes
        done, so of two handlers giving one up, one does. Each decided call of theirs that
        would have run (`RUNS`) is marked from the tool-run ledger: `not_run` when it never
        started, `outcome_unknown` when it started and did not finish (a call that finished
        keeps its result and no mark). The conversation's run, the resume that kept failing,
        is given up too. Call it under the conversation's lock, once the checkpoint no longer
        holds the pauses.

        Args:
            thread_id: the conversation.
            review_ids: the reviews to give up.

        Returns:
            The approvals, as now stored, of each review this call gave up, by review id.
        """
        ...

    async def complete_review(self, review_id: str) -> bool:
        """Mark a claimed (resuming) review done once its resume was applied; False if it was not claimed."""
        ...
