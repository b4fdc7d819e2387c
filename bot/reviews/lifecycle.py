"""The life of a review, as one I/O-free state machine (docs/development.md, convention 16).

Everything that decides the state of a review and of its approvals lives in this module; it
does no I/O. `ApprovalStore` persists the states and enforces every transition with one
conditional update (`... WHERE status = ANY(<the states the event may leave>)`), so two
replicas racing on one card cannot both move it. The service and the adapters ask this module;
they never re-derive its rules.

A *review* is one interrupt of one thread (one `human_review` pause, at any depth: the
top-level agent or a subagent). It holds one *approval* per reviewed tool call.

Approval (one reviewed tool call)::

    PENDING --vote--------> PENDING     an approval or edit below the quorum (votes are rows)
    PENDING --approve-----> APPROVED    the quorum approved the proposed arguments
    PENDING --approve_edit> EDITED      the quorum approved edited arguments
    PENDING --reject------> REJECTED    one reject decides (also a policy denial)
    PENDING --expire------> EXPIRED     nobody decided in time
    PENDING --stop--------> STOPPED     the requester or an admin stopped the turn the call
                                        belongs to (docs/decisions/0021): it never runs

Review (one interrupt)::

    PENDING  --claim--> RESUMING   its last pending approval was decided or expired; exactly
                                   one decision (the one that made it) claims the resume
    RESUMING --finish-> DONE       the resume was applied (the interrupt is no longer pending)
    RESUMING --give_up> DONE       the resume failed every attempt: the pause is answered in the
                                   checkpoint without running anything, a decided call that had
                                   not started is marked not run, one that had is outcome
                                   unknown (`RUNS`), and the requester is told once
                                   (docs/decisions/0038-one-outcome-per-message.md)

`open -> votes -> decided or expired -> resuming -> done` is the path of a review whose
approvals collect votes. Deciding the last approval and claiming the resume happen in one
transaction, so a review is never decided without somebody owning its resume.

A stop closes every pending approval of the stopped turn with STOP, in one transaction that
locks the reviews first (the order a vote takes), so of a Stop and an Approve racing on one
card exactly one moves it; the stop then claims each review it left without a pending
approval, like a last decision does, and the resume answers every call of the turn as
stopped (docs/decisions/0021).

Escalation (a pending approval whose tool has `/countersign escalate`; docs/decisions/0023)::

    WAITING --claim--> CLAIMED     due, and the approval still PENDING: one sweeper posts it
    CLAIMED --claim--> CLAIMED     the claim's lease ran out (its sweeper died): another posts it
    CLAIMED --post---> ESCALATED   its copies are out

An approval that is decided or expired first is never claimed (`ESCALATES_FROM`; the store
also skips one past its expiry time that the expiry sweep has not recorded yet), and one decided
after its claim gets no copies (the claimer reads it again before posting). From the claim on,
the escalation's target may decide the approval (`escalation_admits`).

Batch: a pause whose approvals include at least `BATCH_MIN_PENDING` pending ones offers
*Approve all* / *Reject all* on its first card (`batch_open`); each call is still decided by
its own vote.

Trust grant (docs/decisions/0022: one approver's "Approve and trust" on one card)::

    (none)  --approve, trusted--> LIVE   made in the transaction of the vote that decided the
                                         approval alone (`grants_trust`), at most once per card
    LIVE    --revoke-------------> REVOKED
    LIVE    --expire-------------> EXPIRED   by time alone: nothing is written

A grant covers later calls only while LIVE; everything else it takes to cover one (same tool,
conversation, requester and matched arguments, and an approver who could still approve the
call alone) is checked at the moment of the call (`bot.reviews.trust.check`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from enum import StrEnum

from bot.base.errors import CountersignError


class ApprovalStatus(StrEnum):
    """Where an approval stands; every status but PENDING is final."""

    PENDING = "pending"
    APPROVED = "approved"
    EDITED = "edited"
    REJECTED = "rejected"
    EXPIRED = "expired"
    STOPPED = "stopped"


class ReviewStatus(StrEnum):
    """A pause: waiting for decisions, claimed for resuming, or finished."""

    PENDING = "pending"
    RESUMING = "resuming"
    DONE = "done"


class ApprovalEvent(StrEnum):
    """What can happen to an approval."""

    VOTE = "vote"
    APPROVE = "approve"
    APPROVE_EDIT = "approve_edit"
    REJECT = "reject"
    EXPIRE = "expire"
    STOP = "stop"


class ReviewEvent(StrEnum):
    """What can happen to a review."""

    CLAIM = "claim"
    FINISH = "finish"
    GIVE_UP = "give_up"


class TrustStatus(StrEnum):
    """Where a trust grant stands; only LIVE covers calls, and both others are final."""

    LIVE = "live"
    EXPIRED = "expired"
    REVOKED = "revoked"


class TrustEvent(StrEnum):
    """What can happen to a trust grant."""

    REVOKE = "revoke"
    EXPIRE = "expire"


APPROVAL_TRANSITIONS: Mapping[ApprovalStatus, Mapping[ApprovalEvent, ApprovalStatus]] = {
    ApprovalStatus.PENDING: {
        ApprovalEvent.VOTE: ApprovalStatus.PENDING,
        ApprovalEvent.APPROVE: ApprovalStatus.APPROVED,
        ApprovalEvent.APPROVE_EDIT: ApprovalStatus.EDITED,
        ApprovalEvent.REJECT: ApprovalStatus.REJECTED,
        ApprovalEvent.EXPIRE: ApprovalStatus.EXPIRED,
        ApprovalEvent.STOP: ApprovalStatus.STOPPED,
    },
    ApprovalStatus.APPROVED: {},
    ApprovalStatus.EDITED: {},
    ApprovalStatus.REJECTED: {},
    ApprovalStatus.EXPIRED: {},
    ApprovalStatus.STOPPED: {},
}
"""state -> event -> new state; an event missing for a state does not fit it."""

REVIEW_TRANSITIONS: Mapping[ReviewStatus, Mapping[ReviewEvent, ReviewStatus]] = {
    ReviewStatus.PENDING: {ReviewEvent.CLAIM: ReviewStatus.RESUMING},
    ReviewStatus.RESUMING: {ReviewEvent.FINISH: ReviewStatus.DONE, ReviewEvent.GIVE_UP: ReviewStatus.DONE},
    ReviewStatus.DONE: {},
}

TRUST_TRANSITIONS: Mapping[TrustStatus, Mapping[TrustEvent, TrustStatus]] = {
    TrustStatus.LIVE: {TrustEvent.REVOKE: TrustStatus.REVOKED, TrustEvent.EXPIRE: TrustStatus.EXPIRED},
    TrustStatus.EXPIRED: {},
    TrustStatus.REVOKED: {},
}

DECIDED = frozenset(s for s in ApprovalStatus if not APPROVAL_TRANSITIONS[s])
"""Final approval states."""

RUNS = frozenset({ApprovalStatus.APPROVED, ApprovalStatus.EDITED})
"""The final approval states whose call runs when its pause resumes (the others never run).
A review given up marks each such call not run, or outcome unknown when it had started."""


class EscalationStatus(StrEnum):
    """Where an approval's escalation stands (None on the approval: no escalation)."""

    WAITING = "waiting"
    CLAIMED = "claimed"
    ESCALATED = "escalated"


class EscalationEvent(StrEnum):
    """What can happen to an escalation."""

    CLAIM = "claim"
    POST = "post"


ESCALATION_TRANSITIONS: Mapping[EscalationStatus, Mapping[EscalationEvent, EscalationStatus]] = {
    EscalationStatus.WAITING: {EscalationEvent.CLAIM: EscalationStatus.CLAIMED},
    EscalationStatus.CLAIMED: {
        # Again only once the claim's lease ran out (the store's update says so).
        EscalationEvent.CLAIM: EscalationStatus.CLAIMED,
        EscalationEvent.POST: EscalationStatus.ESCALATED,
    },
    EscalationStatus.ESCALATED: {},
}
"""state -> event -> new state for an approval's escalation."""

ESCALATES_FROM = frozenset({ApprovalStatus.PENDING})
"""The approval states an escalation may be claimed in: a decided or expired card never escalates."""

BATCH_MIN_PENDING = 2
"""Pending calls a pause needs for its first card to offer Approve all / Reject all."""


class LifecycleError(CountersignError):
    """An event that does not fit the current state (a bug, or a race the store lost)."""

    def __init__(self, state: str, event: str) -> None:
        super().__init__(f"{event!r} does not fit state {state!r}")
        self.state = state
        self.event = event


def approval_after(state: ApprovalStatus, event: ApprovalEvent) -> ApprovalStatus:
    """The approval's state after `event`.

    Raises:
        LifecycleError: when `event` does not fit `state` (e.g. a vote on a decided approval).
    """
    try:
        return APPROVAL_TRANSITIONS[state][event]
    except KeyError:
        raise LifecycleError(state.value, event.value) from None


def review_after(state: ReviewStatus, event: ReviewEvent) -> ReviewStatus:
    """The review's state after `event`.

    Raises:
        LifecycleError: when `event` does not fit `state`.
    """
    try:
        return REVIEW_TRANSITIONS[state][event]
    except KeyError:
        raise LifecycleError(state.value, event.value) from None


def trust_after(state: TrustStatus, event: TrustEvent) -> TrustStatus:
    """The grant's state after `event`.

    Raises:
        LifecycleError: when `event` does not fit `state` (e.g. revoking a revoked grant).
    """
    try:
        return TRUST_TRANSITIONS[state][event]
    except KeyError:
        raise LifecycleError(state.value, event.value) from None


def trust_status(*, expires_at: datetime, revoked_at: datetime | None, now: datetime) -> TrustStatus:
    """A grant's state at `now` (the database's clock): revoked, else expired once `expires_at` is reached."""
    if revoked_at is not None:
        return TrustStatus.REVOKED
    return TrustStatus.EXPIRED if now >= expires_at else TrustStatus.LIVE


def grants_trust(event: ApprovalEvent, quorum: int) -> bool:
    """Whether a vote that caused `event` may also make a trust grant (docs/decisions/0022).

    Only a click that itself approved the call, alone: the vote decided the approval as
    approved (or approved with edits) and the tool needs one approval. A vote below a quorum,
    a rejection and an expiry never grant trust, so trust never widens what one person may do.
    """
    return event in (ApprovalEvent.APPROVE, ApprovalEvent.APPROVE_EDIT) and quorum == 1


def approval_sources(event: ApprovalEvent) -> list[str]:
    """The approval states `event` may leave (for the store's conditional update)."""
    return [state.value for state, moves in APPROVAL_TRANSITIONS.items() if event in moves]


def review_sources(event: ReviewEvent) -> list[str]:
    """The review states `event` may leave (for the store's conditional update)."""
    return [state.value for state, moves in REVIEW_TRANSITIONS.items() if event in moves]


def escalation_after(state: EscalationStatus, event: EscalationEvent) -> EscalationStatus:
    """The escalation's state after `event`.

    Raises:
        LifecycleError: when `event` does not fit `state` (e.g. a second post).
    """
    try:
        return ESCALATION_TRANSITIONS[state][event]
    except KeyError:
        raise LifecycleError(state.value, event.value) from None


def escalation_sources(event: EscalationEvent) -> list[str]:
    """The escalation states `event` may leave (for the store's conditional update)."""
    return [state.value for state, moves in ESCALATION_TRANSITIONS.items() if event in moves]


def escalation_admits(approval: ApprovalStatus, escalation: EscalationStatus | None) -> bool:
    """Whether an escalation's target may now decide the approval (as an extra approver of it).

    From the claim on: the escalation is due and its copies are being, or were, posted. The
    approval must still be pending (a decided one is decided for everyone).
    """
    return approval is ApprovalStatus.PENDING and escalation in {EscalationStatus.CLAIMED, EscalationStatus.ESCALATED}


def batch_open(statuses: Iterable[ApprovalStatus]) -> bool:
    """Whether a pause with approvals in `statuses` offers Approve all / Reject all (2+ pending)."""
    return sum(status is ApprovalStatus.PENDING for status in statuses) >= BATCH_MIN_PENDING


def tally(*, approvals: int, quorum: int, edited: bool) -> ApprovalEvent:
    """What an approval (or edit) vote does, given the distinct approvals of the arguments.

    Args:
        approvals: distinct people who approved the arguments now under vote, this vote
            included.
        quorum: approvals the tool needs (at least 1).
        edited: whether those arguments differ from the proposal.

    Returns:
        VOTE while fewer than `quorum` approved; else APPROVE, or APPROVE_EDIT for edited
        arguments (the card then says "approved with edits").
    """
    if approvals < max(quorum, 1):
        return ApprovalEvent.VOTE
    return ApprovalEvent.APPROVE_EDIT if edited else ApprovalEvent.APPROVE


def review_claimable(statuses: Iterable[ApprovalStatus]) -> bool:
    """Whether a review with approvals in `statuses` may be claimed for resuming (all decided)."""
    return all(status in DECIDED for status in statuses)
