"""Approvals as stored: one review per graph pause, one approval per reviewed tool call."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bot.reviews.digest import args_digest
from bot.reviews.escalation.rules import EscalationTarget
from bot.reviews.lifecycle import ApprovalStatus, EscalationStatus, ReviewStatus, escalation_admits

VERSION_CHARS = 8
EXPIRED_REASON = "expired without a decision"
"""What the model reads when nobody decided in time (docs/decisions/0006)."""
DENIED_BY_POLICY = "denied by policy: the tool may not be used here"
"""The reason recorded (and read by the model) when an approved call's tool is now denied."""
NO_LONGER_CONFIGURED = "not run: the tool, or the subagent that asked for it, is no longer configured"
"""The reason recorded when a card is approved after its tool or subagent was removed from the
configuration (a restart with another tools module or subagents file): the call cannot run."""
STOPPED_REASON = "not run: the turn was stopped before this call ran"
"""The reject reason a stopped approval resumes with (the graph answers its call as stopped)."""
SYSTEM_REASONS = frozenset({EXPIRED_REASON, DENIED_BY_POLICY, NO_LONGER_CONFIGURED, STOPPED_REASON})
"""Reject reasons Countersign writes itself (no reviewer chose them); see `review_node`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NewAction:
    """A reviewed tool call about to be stored (one action request of the interrupt).

    Attributes:
        tool_call_id: from the action request (see `bot.reviews.requests`).
        quorum: distinct approvals needed, from the configuration when the review opens.
        expires_in_s: seconds until the card expires; None for never.
        trust_offer_s: the trust the card offers ("Approve and trust for ..."), in seconds;
            None for none (docs/decisions/0022).
        trust_offer_matching: the arguments a grant made on the card binds (the setting's
            `matching` when the card opens; empty: every argument); the card names the others,
            which such a grant leaves free.
        escalates_in_s: seconds until the card escalates to `escalate_to`; None for never.
        escalate_to: where it escalates (given exactly when `escalates_in_s` is).
        definition: the pinned digest of the MCP tool's definition the call was held under
            (`ActionRequest.definition`); None for the bot's own tools. The approval covers
            the call only under that definition (`bot.tools.ledger.store`).
    """

    tool_call_id: str | None
    tool_name: str
    args: dict[str, Any]
    description: str
    definition: str | None = None
    quorum: int = 1
    expires_in_s: int | None = None
    trust_offer_s: int | None = None
    trust_offer_matching: tuple[str, ...] = ()
    escalates_in_s: int | None = None
    escalate_to: EscalationTarget | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ReviewRecord:
    """One interrupt of one thread (see `bot.reviews.lifecycle`).

    Attributes:
        source: the subagent whose review gate raised the interrupt; None for the top-level
            agent.
        attempts: the upkeep's attempts at resuming it (`bot.upkeep.unfinished_work.MAX_ATTEMPTS`; a review
            past them is given up, not resumed).
    """

    id: str
    thread_id: str
    interrupt_id: str
    requester_id: str
    requester_name: str
    status: ReviewStatus
    created_at: datetime
    source: str | None = None
    attempts: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRecord:
    """One pending (or decided) tool call and its card."""

    id: str
    review_id: str
    position: int
    thread_id: str
    workspace_id: str
    tool_call_id: str | None
    tool_name: str
    description: str
    proposed_args: dict[str, Any]
    requester_id: str
    requester_name: str
    card_ref: str | None
    status: ApprovalStatus
    decided_by_id: str | None
    decided_by_name: str | None
    decided_at: datetime | None
    final_args: dict[str, Any] | None
    reason: str | None
    created_at: datetime
    quorum: int = 1
    current_args: dict[str, Any] | None = None
    """The arguments under vote: the proposal, or the latest edit while a quorum is pending."""
    votes: tuple[str, ...] = ()
    """Names of those who approved the current arguments so far."""
    expires_at: datetime | None = None
    source: str | None = None
    """The subagent that wants the call (cards name it); None for the top-level agent."""
    outcome_unknown: bool = False
    """The call was approved and started, and the bot stopped before it finished: it is not run
    again, and whether it took effect is unknown (cards say so; see `bot.tools.ledger.store`)."""
    not_run: bool = False
    """The call was approved, and the bot gave up resuming its pause before the call started:
    it did not run, and never will (cards say so; `bot.reviews.lifecycle`, give_up)."""
    definition: str | None = None
    """The pinned digest of the MCP tool's definition the card was made under; None for the
    bot's own tools. The call runs only under that definition (`bot.tools.ledger.store`)."""
    definition_changed: bool = False
    """The call was approved, but its MCP tool's definition had changed by the time it was to
    run: it did not run, and never will (cards say so; docs/decisions/0046-mcp-pins-wiring.md)."""
    trust_offer_s: int | None = None
    """The trust the card offers while pending, in seconds (None: no "Approve and trust" button);
    fixed when the card opens, like `quorum`."""
    trust_offer_matching: tuple[str, ...] | None = None
    """The arguments a grant made on this card binds (empty: every argument), fixed when the card
    opens; None for a card opened before cards said so (a grant then binds what the setting names
    when it is clicked)."""
    trust_id: str | None = None
    """The trust grant this card's approval made, if its approver chose "Approve and trust"."""
    trust_matching: tuple[str, ...] = ()
    """The arguments that grant binds (empty: every argument)."""
    trust_s: int | None = None
    """How long that grant was made for, in seconds."""
    trusted_until: datetime | None = None
    """When that grant ends (or ended: it may have been revoked since)."""
    escalation: EscalationStatus | None = None
    """Where its escalation stands; None when its tool had none when the review opened."""
    escalate_at: datetime | None = None
    """When it escalates (if still pending then)."""
    escalate_to: EscalationTarget | None = None
    """Who it escalates to: once escalated, an extra approver of this call (not of the tool)."""
    escalated_at: datetime | None = None
    """When it escalated (cards say so); None before."""

    @property
    def version(self) -> str:
        """A short tag of the arguments under vote, drawn on the card's buttons.

        A click carries the tag of the card it was made on; after an edit the tag changes, so
        an approval clicked on a card drawn before the edit is refused instead of counting for
        arguments the clicker never saw.
        """
        return args_digest(self.args_under_vote)[:VERSION_CHARS]

    @property
    def args_under_vote(self) -> dict[str, Any]:
        """`current_args`, or the proposal when nobody edited."""
        return dict(self.current_args if self.current_args is not None else self.proposed_args)

    @property
    def is_pending(self) -> bool:
        """Whether no decision has been recorded."""
        return self.status is ApprovalStatus.PENDING

    @property
    def escalated_audience(self) -> EscalationTarget | None:
        """The escalation target that may decide this call now, or None (`lifecycle.escalation_admits`)."""
        return self.escalate_to if escalation_admits(self.status, self.escalation) else None

    def resume_decision(self) -> dict[str, Any]:
        """This approval's decision in the HITL resume shape (pending counts as reject).

        Returns:
            `{"type": "approve"}`, `{"type": "edit", "edited_action": {...}}` or
            `{"type": "reject", "message": ...}`.
        """
        if self.status is ApprovalStatus.APPROVED:
            return {"type": "approve"}
        if self.status is ApprovalStatus.EDITED:
            return {
                "type": "edit",
                "edited_action": {"name": self.tool_name, "args": dict(self.final_args or {})},
            }
        if self.status is ApprovalStatus.EXPIRED:
            return {"type": "reject", "message": self.reason or EXPIRED_REASON}
        if self.status is ApprovalStatus.STOPPED:
            return {"type": "reject", "message": STOPPED_REASON}
        return {"type": "reject", "message": self.reason}


def pause_version(approvals: Sequence[ApprovalRecord]) -> str:
    """A short tag of every call's arguments under vote in one pause, drawn on Approve all.

    Like `ApprovalRecord.version` for one card: an Approve all clicked on a first card drawn
    before an edit of any call of the pause names an older tag and is refused, so nobody
    approves, in a batch, arguments they were not shown. Decisions do not change it.
    """
    joined = "|".join(f"{approval.id}:{approval.version}" for approval in sorted(approvals, key=lambda a: a.position))
    return hashlib.sha256(joined.encode()).hexdigest()[:VERSION_CHARS]


@dataclass(frozen=True, slots=True, kw_only=True)
class DecideResult:
    """What recording a decision did.

    Attributes:
        approval: the approval as now stored.
        decided: whether this vote decided the approval (False: a quorum still waits).
        review_complete: True for exactly one decision per review: the one that decided its
            last pending approval and thereby claimed the resume.
    """

    approval: ApprovalRecord
    review_complete: bool
    decided: bool = True
