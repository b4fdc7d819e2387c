"""The review state machine of bot/reviews/lifecycle.py: its tables, refusals and the quorum tally."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.base.errors import CountersignError
from bot.reviews.lifecycle import (
    APPROVAL_TRANSITIONS,
    DECIDED,
    REVIEW_TRANSITIONS,
    ApprovalEvent,
    ApprovalStatus,
    LifecycleError,
    ReviewEvent,
    ReviewStatus,
    approval_after,
    approval_sources,
    review_after,
    review_claimable,
    review_sources,
    tally,
)

FINAL = (
    ApprovalStatus.APPROVED,
    ApprovalStatus.EDITED,
    ApprovalStatus.REJECTED,
    ApprovalStatus.EXPIRED,
    ApprovalStatus.STOPPED,
)

# --- approvals: every allowed move, every refused one -----------------------------------------


@pytest.mark.parametrize(
    ("event", "after"),
    [
        (ApprovalEvent.VOTE, ApprovalStatus.PENDING),
        (ApprovalEvent.APPROVE, ApprovalStatus.APPROVED),
        (ApprovalEvent.APPROVE_EDIT, ApprovalStatus.EDITED),
        (ApprovalEvent.REJECT, ApprovalStatus.REJECTED),
        (ApprovalEvent.EXPIRE, ApprovalStatus.EXPIRED),
        (ApprovalEvent.STOP, ApprovalStatus.STOPPED),
    ],
)
def test_a_pending_approval_moves_as_the_table_says(event, after):
    """Every event fits a pending approval and leads to its documented state."""
    assert approval_after(ApprovalStatus.PENDING, event) is after


def test_the_approval_table_is_exactly_the_documented_one():
    """Only PENDING has moves (six of them); each decided state has none."""
    assert set(APPROVAL_TRANSITIONS) == set(ApprovalStatus)
    assert dict(APPROVAL_TRANSITIONS[ApprovalStatus.PENDING]) == {
        ApprovalEvent.VOTE: ApprovalStatus.PENDING,
        ApprovalEvent.APPROVE: ApprovalStatus.APPROVED,
        ApprovalEvent.APPROVE_EDIT: ApprovalStatus.EDITED,
        ApprovalEvent.REJECT: ApprovalStatus.REJECTED,
        ApprovalEvent.EXPIRE: ApprovalStatus.EXPIRED,
        ApprovalEvent.STOP: ApprovalStatus.STOPPED,
    }
    assert all(not APPROVAL_TRANSITIONS[s] for s in FINAL)


@pytest.mark.parametrize(("state", "event"), list(itertools.product(FINAL, ApprovalEvent)))
def test_a_decided_approval_refuses_every_event(state, event):
    """A second click, a late vote or an expiry on a decided approval raises LifecycleError naming both."""
    with pytest.raises(LifecycleError) as raised:
        approval_after(state, event)
    assert (raised.value.state, raised.value.event) == (state.value, event.value)
    assert f"{event.value!r} does not fit state {state.value!r}" == str(raised.value)
    assert isinstance(raised.value, CountersignError)


def test_decided_means_final():
    """DECIDED is every status but PENDING."""
    assert frozenset(FINAL) == DECIDED
    assert ApprovalStatus.PENDING not in DECIDED


@pytest.mark.parametrize("event", list(ApprovalEvent))
def test_every_approval_event_may_leave_only_pending(event):
    """The store's conditional update lets each approval event leave PENDING and nothing else."""
    assert approval_sources(event) == [ApprovalStatus.PENDING.value]


# --- reviews ----------------------------------------------------------------------------------


def test_a_review_goes_pending_resuming_done():
    """claim: PENDING -> RESUMING; finish, or give up after failed resumes: RESUMING -> DONE."""
    assert review_after(ReviewStatus.PENDING, ReviewEvent.CLAIM) is ReviewStatus.RESUMING
    assert review_after(ReviewStatus.RESUMING, ReviewEvent.FINISH) is ReviewStatus.DONE
    assert review_after(ReviewStatus.RESUMING, ReviewEvent.GIVE_UP) is ReviewStatus.DONE
    assert set(REVIEW_TRANSITIONS) == set(ReviewStatus)
    assert not REVIEW_TRANSITIONS[ReviewStatus.DONE]


@pytest.mark.parametrize(
    ("state", "event"),
    [
        (ReviewStatus.PENDING, ReviewEvent.FINISH),  # finishing a resume nobody claimed
        (ReviewStatus.RESUMING, ReviewEvent.CLAIM),  # a second claim of one resume
        (ReviewStatus.DONE, ReviewEvent.CLAIM),
        (ReviewStatus.DONE, ReviewEvent.FINISH),
        (ReviewStatus.PENDING, ReviewEvent.GIVE_UP),  # a card still waits: nothing to give up
        (ReviewStatus.DONE, ReviewEvent.GIVE_UP),  # given up (or finished) once only
    ],
)
def test_a_review_refuses_events_that_do_not_fit(state, event):
    """A second claim, or a finish without a claim, raises LifecycleError."""
    with pytest.raises(LifecycleError) as raised:
        review_after(state, event)
    assert (raised.value.state, raised.value.event) == (state.value, event.value)


def test_review_events_leave_one_state_each():
    """Only a pending review can be claimed, only a resuming one finished or given up."""
    assert review_sources(ReviewEvent.CLAIM) == [ReviewStatus.PENDING.value]
    assert review_sources(ReviewEvent.FINISH) == [ReviewStatus.RESUMING.value]
    assert review_sources(ReviewEvent.GIVE_UP) == [ReviewStatus.RESUMING.value]


@pytest.mark.parametrize(
    ("statuses", "claimable"),
    [
        ([ApprovalStatus.APPROVED], True),
        ([ApprovalStatus.EXPIRED, ApprovalStatus.EXPIRED], True),
        ([ApprovalStatus.EXPIRED, ApprovalStatus.APPROVED, ApprovalStatus.EDITED, ApprovalStatus.REJECTED], True),
        ([ApprovalStatus.STOPPED, ApprovalStatus.APPROVED], True),  # a stop after one of two decisions
        ([ApprovalStatus.PENDING], False),
        ([ApprovalStatus.APPROVED, ApprovalStatus.PENDING], False),
        ([ApprovalStatus.EXPIRED, ApprovalStatus.PENDING], False),
    ],
)
def test_a_review_is_claimable_only_when_every_approval_is_decided(statuses, claimable):
    """One pending approval (of any number) keeps its review from being resumed."""
    assert review_claimable(statuses) is claimable
    assert review_claimable(iter(statuses)) is claimable  # any iterable, read once


# --- the quorum tally -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("approvals", "quorum", "edited", "event"),
    [
        (1, 1, False, ApprovalEvent.APPROVE),
        (1, 1, True, ApprovalEvent.APPROVE_EDIT),
        (1, 2, False, ApprovalEvent.VOTE),  # below
        (1, 2, True, ApprovalEvent.VOTE),  # an edit below the quorum is only a vote
        (2, 2, False, ApprovalEvent.APPROVE),  # at
        (2, 2, True, ApprovalEvent.APPROVE_EDIT),
        (3, 2, False, ApprovalEvent.APPROVE),  # above (a racing voter)
        (2, 3, False, ApprovalEvent.VOTE),
        (3, 3, True, ApprovalEvent.APPROVE_EDIT),
        (0, 1, False, ApprovalEvent.VOTE),  # nobody approved these arguments yet
    ],
)
def test_tally_below_at_and_above_the_quorum(approvals, quorum, edited, event):
    """Below the quorum a vote keeps the approval pending; at or above it decides, edited or not."""
    assert tally(approvals=approvals, quorum=quorum, edited=edited) is event


@pytest.mark.parametrize("quorum", [0, -1])
def test_a_quorum_below_one_counts_as_one(quorum):
    """A nonsensical quorum never lets an approval through with nobody's approval."""
    assert tally(approvals=0, quorum=quorum, edited=False) is ApprovalEvent.VOTE
    assert tally(approvals=1, quorum=quorum, edited=False) is ApprovalEvent.APPROVE


@given(approvals=st.integers(0, 50), quorum=st.integers(-2, 50), edited=st.booleans())
def test_tally_always_gives_an_event_a_pending_approval_accepts(approvals, quorum, edited):
    """Whatever the counts, the tally's event fits PENDING, decides exactly at max(quorum, 1), and never rejects."""
    event = tally(approvals=approvals, quorum=quorum, edited=edited)
    after = approval_after(ApprovalStatus.PENDING, event)
    decided = approvals >= max(quorum, 1)
    assert (after in DECIDED) is decided
    assert after not in (ApprovalStatus.REJECTED, ApprovalStatus.EXPIRED, ApprovalStatus.STOPPED)
    if decided:
        assert after is (ApprovalStatus.EDITED if edited else ApprovalStatus.APPROVED)


@pytest.mark.parametrize("votes_before", [0, 1, 4])
def test_a_reject_decides_at_once_whatever_the_votes(votes_before):
    """However many approvals a quorum of five has collected, one reject moves the approval to REJECTED."""
    state = ApprovalStatus.PENDING
    for count in range(1, votes_before + 1):
        state = approval_after(state, tally(approvals=count, quorum=5, edited=False))
    assert state is ApprovalStatus.PENDING
    assert approval_after(state, ApprovalEvent.REJECT) is ApprovalStatus.REJECTED


def test_a_quorum_of_two_walks_vote_then_approve_then_refuses_a_third():
    """Two approvers under a quorum of two: pending after one, approved after two; a third vote does not fit."""
    state = approval_after(ApprovalStatus.PENDING, tally(approvals=1, quorum=2, edited=False))
    assert state is ApprovalStatus.PENDING
    state = approval_after(state, tally(approvals=2, quorum=2, edited=False))
    assert state is ApprovalStatus.APPROVED
    with pytest.raises(LifecycleError):
        approval_after(state, tally(approvals=3, quorum=2, edited=False))
    with pytest.raises(LifecycleError):
        approval_after(state, ApprovalEvent.EXPIRE)  # an expiry after the decision changes nothing


# --- a stop ------------------------------------------------------------------------------------


@pytest.mark.parametrize("votes_before", [0, 1, 2])
def test_a_stop_closes_a_pending_approval_whatever_its_votes(votes_before):
    """A stop moves a pending approval (with or without quorum votes) to STOPPED, a final state."""
    state = ApprovalStatus.PENDING
    for count in range(1, votes_before + 1):
        state = approval_after(state, tally(approvals=count, quorum=3, edited=False))
    assert approval_after(state, ApprovalEvent.STOP) is ApprovalStatus.STOPPED
    assert ApprovalStatus.STOPPED in DECIDED
    assert approval_sources(ApprovalEvent.STOP) == [ApprovalStatus.PENDING.value]


@pytest.mark.parametrize("decided", [ApprovalEvent.APPROVE, ApprovalEvent.REJECT, ApprovalEvent.EXPIRE])
def test_a_stop_and_a_decision_on_one_card_move_it_once(decided):
    """Whichever of a stop and a decision comes second does not fit: a card is decided or stopped, never both."""
    first = approval_after(ApprovalStatus.PENDING, decided)
    with pytest.raises(LifecycleError):
        approval_after(first, ApprovalEvent.STOP)
    stopped = approval_after(ApprovalStatus.PENDING, ApprovalEvent.STOP)
    with pytest.raises(LifecycleError) as raised:
        approval_after(stopped, decided)
    assert raised.value.state == "stopped"
    with pytest.raises(LifecycleError):
        approval_after(stopped, ApprovalEvent.STOP)  # a second stop moves nothing either


def test_a_review_whose_last_pending_approval_was_stopped_is_claimed_for_its_resume():
    """A stopped approval counts as decided: its review may be claimed, so the resume answers the call."""
    assert review_claimable([ApprovalStatus.STOPPED]) is True
    assert review_claimable([ApprovalStatus.STOPPED, ApprovalStatus.STOPPED, ApprovalStatus.APPROVED]) is True
