"""The review store contract, run against PostgreSQL (a real server) and the in-memory store alike.

A "worker" is a store of its own over the same data: for PostgreSQL, one on its own pool, as
another replica has; for the in-memory store, another instance over the same `ReviewTables`.
Times are reckoned from each store's own clock: a card that expires or escalates in 0 seconds
is due at once, one in an hour is not.

PostgreSQL needs each conversation's row before a review of it (the fixture writes them); the
in-memory store does not model that table (`bot.reviews.memory`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

import pytest

from bot.audit.entries import AuditEntry, AuditKind
from bot.audit.postgres import PostgresAuditStore
from bot.base.conversation import Actor
from bot.base.errors import (
    AlreadyDecidedError,
    AlreadyVotedError,
    ApprovalNotFoundError,
    StaleVoteError,
    TrustRefusedError,
)
from bot.reviews.digest import args_digest
from bot.reviews.escalation.rules import EscalationTarget, TargetKind
from bot.reviews.lifecycle import ApprovalStatus, EscalationStatus, ReviewStatus
from bot.reviews.memory import InMemoryApprovalStore, ReviewTables
from bot.reviews.postgres import PostgresApprovalStore
from bot.reviews.records import EXPIRED_REASON, ApprovalRecord, NewAction
from bot.reviews.store import ApprovalStore, VoteKind
from bot.reviews.trust.grants import NewGrant
from bot.settings import DatabaseSettings
from bot.storage.database import open_database
from bot.tools.ledger.memory import InMemoryLedger
from bot.tools.ledger.postgres import PostgresLedger
from bot.tools.ledger.store import Claim, ToolResult, ToolRunLedger
from tests.support import postgres

THREAD = "test:W1:C1"
OTHER_THREAD = "test:W1:C2"
ELSEWHERE = "other:W1:C1"
"""A conversation on a platform the sweeps below do not serve."""
THREADS = (THREAD, OTHER_THREAD, ELSEWHERE)
REQUESTER = Actor(platform="test", workspace_id="W1", user_id="U0", display_name="Requester")
ANN = Actor(platform="test", workspace_id="W1", user_id="U1", display_name="Ann")
BOB = Actor(platform="test", workspace_id="W1", user_id="U2", display_name="Bob")
TEAM = EscalationTarget(kind=TargetKind.USER, subject_id="U9")
HOUR = 3600


@dataclass
class Kit:
    """One store backend.

    Attributes:
        store: the store under test.
        worker: another store over the same data (another replica).
        ledger: the tool-run ledger the store reads (`tool_runs`, `give_up_reviews`).
        audited: `(kind, outcome, approval_id)` of every audit row written, oldest first.
    """

    store: ApprovalStore
    worker: Callable[[], Awaitable[ApprovalStore]]
    ledger: ToolRunLedger
    audited: Callable[[], Awaitable[list[tuple[str, str, str | None]]]]


@pytest.fixture(params=["postgres", "memory"])
async def kit(request: pytest.FixtureRequest, pg_server: postgres.TestServer) -> AsyncIterator[Kit]:
    """The store under test, on PostgreSQL (a fresh database) or in memory."""
    if request.param == "memory":
        tables = ReviewTables()
        ledger = InMemoryLedger()

        async def memory_worker() -> ApprovalStore:
            return InMemoryApprovalStore(tables, ledger=ledger)

        async def memory_audited() -> list[tuple[str, str, str | None]]:
            return [(entry.kind.value, entry.outcome, entry.approval_id) for entry in tables.audit]

        yield Kit(InMemoryApprovalStore(tables, ledger=ledger), memory_worker, ledger, memory_audited)
        return
    db_url = await pg_server.create_database()
    async with AsyncExitStack() as stack:
        stack.push_async_callback(pg_server.drop_database, db_url)
        settings = DatabaseSettings(url=db_url, pool_max_size=4)
        database = await stack.enter_async_context(open_database(settings, run_migrations=False))
        for thread_id in THREADS:
            platform, workspace_id, channel_id = thread_id.split(":")
            await database.pool.execute(
                "INSERT INTO conversations (thread_id, platform, workspace_id, channel_id) VALUES ($1, $2, $3, $4)",
                thread_id,
                platform,
                workspace_id,
                channel_id,
            )
        audit = PostgresAuditStore(database.pool)
        store = PostgresApprovalStore(database.pool, audit)

        async def postgres_worker() -> ApprovalStore:
            other = await stack.enter_async_context(open_database(settings, run_migrations=False))
            return PostgresApprovalStore(other.pool, PostgresAuditStore(other.pool))

        async def postgres_audited() -> list[tuple[str, str, str | None]]:
            rows = await database.pool.fetch("SELECT kind, outcome, approval_id FROM audit_log ORDER BY id")
            return [(row["kind"], row["outcome"], row["approval_id"]) for row in rows]

        yield Kit(store, postgres_worker, PostgresLedger(database.pool, store, audit=audit), postgres_audited)


def action(tool_call_id: str, **changes: Any) -> NewAction:
    """A reviewed call of `notes__add` (its arguments name the call)."""
    fields: dict[str, Any] = {
        "tool_call_id": tool_call_id,
        "tool_name": "notes__add",
        "args": {"text": tool_call_id, "pinned": False},
        "description": f"Add {tool_call_id}",
        **changes,
    }
    return NewAction(**fields)


async def pause(
    kit: Kit, *actions: NewAction, thread_id: str = THREAD, interrupt_id: str = "i1", source: str | None = None
) -> list[ApprovalRecord]:
    """Open a review of `actions`; its approvals."""
    _, approvals = await kit.store.open_review(
        thread_id=thread_id,
        workspace_id="W1",
        interrupt_id=interrupt_id,
        requester=REQUESTER,
        actions=list(actions),
        source=source,
    )
    return approvals


def entry(approval: ApprovalRecord, actor: Actor) -> AuditEntry:
    """The audit row a vote on `approval` by `actor` starts from."""
    return AuditEntry(
        kind=AuditKind.DECISION,
        workspace_id=approval.workspace_id,
        thread_id=approval.thread_id,
        approval_id=approval.id,
        tool_name=approval.tool_name,
        actor_id=actor.user_id,
        actor_name=actor.display_name,
        outcome="",
        proposed_args=approval.proposed_args,
    )


async def vote(
    store: ApprovalStore, approval: ApprovalRecord, actor: Actor, kind: VoteKind, quorum: int = 1, **more: Any
) -> Any:
    """`store.vote` on `approval` by `actor`."""
    return await store.vote(approval.id, actor=actor, kind=kind, quorum=quorum, audit=entry(approval, actor), **more)


async def test_a_review_is_stored_once_with_its_approvals_in_order(kit: Kit):
    """Opening the same interrupt again returns what the first opening stored, and stores nothing more."""
    review, approvals = await kit.store.open_review(
        thread_id=THREAD,
        workspace_id="W1",
        interrupt_id="i1",
        requester=REQUESTER,
        actions=[action("c1"), action("c2", definition="d2")],
        source="researcher",
    )
    assert review.status is ReviewStatus.PENDING and review.source == "researcher"
    assert (review.thread_id, review.interrupt_id, review.requester_id) == (THREAD, "i1", "U0")
    assert [(a.position, a.tool_call_id, a.status) for a in approvals] == [
        (0, "c1", ApprovalStatus.PENDING),
        (1, "c2", ApprovalStatus.PENDING),
    ]
    first = approvals[0]
    assert first.proposed_args == first.current_args == {"text": "c1", "pinned": False}
    assert (first.review_id, first.workspace_id, first.source, first.requester_name) == (
        review.id,
        "W1",
        "researcher",
        "Requester",
    )
    assert first.votes == () and first.card_ref is None and first.decided_at is None
    assert (first.expires_at, first.escalation, first.trust_offer_s, first.definition) == (None, None, None, None)
    assert approvals[1].definition == "d2"

    again, same = await kit.store.open_review(
        thread_id=THREAD, workspace_id="W1", interrupt_id="i1", requester=REQUESTER, actions=[action("c9")]
    )
    assert again == review and same == approvals
    assert await kit.store.review(review.id) == review
    assert await kit.store.approvals_of(review.id) == approvals
    assert await kit.store.get(first.id) == first
    assert await kit.store.get("no-such-approval") is None
    assert await kit.store.reviews_for_interrupts(THREAD, ["i1", "i2"]) == {"i1": review}
    assert await kit.store.reviews_for_interrupts(OTHER_THREAD, ["i1"]) == {}
    assert await kit.store.reviews_in_thread(THREAD, [ReviewStatus.PENDING]) == [review]
    assert await kit.store.reviews_in_thread(THREAD, [ReviewStatus.DONE]) == []
    assert await kit.store.pending_in_thread(THREAD) == approvals


async def test_an_approval_keeps_its_expiry_escalation_and_trust_offer(kit: Kit):
    """What the card offers is fixed when the review opens, from its action."""
    offered, plain = await pause(
        kit,
        action("c1", expires_in_s=HOUR, escalates_in_s=HOUR, escalate_to=TEAM, trust_offer_s=60),
        action("c2", escalates_in_s=HOUR, trust_offer_matching=("text",)),
    )
    assert offered.expires_at is not None and offered.escalate_at is not None
    assert offered.escalate_at - offered.created_at == offered.expires_at - offered.created_at
    assert (offered.escalation, offered.escalate_to, offered.escalated_at) == (EscalationStatus.WAITING, TEAM, None)
    assert (offered.trust_offer_s, offered.trust_offer_matching) == (60, ())
    # An escalation needs a target, a trust matching needs a trust offer.
    assert (plain.escalation, plain.escalate_at, plain.escalate_to) == (None, None, None)
    assert (plain.trust_offer_s, plain.trust_offer_matching) == (None, None)


async def test_a_reject_decides_at_once_and_the_last_decision_claims_the_resume(kit: Kit):
    """Each decision is audited; of a review's decisions, only the one leaving nothing pending claims it."""
    first, second = await pause(kit, action("c1"), action("c2"))
    rejected = await vote(kit.store, first, ANN, VoteKind.REJECT, reason="not now")
    assert rejected.decided and not rejected.review_complete
    assert rejected.approval.status is ApprovalStatus.REJECTED
    assert (rejected.approval.reason, rejected.approval.decided_by_id, rejected.approval.final_args) == (
        "not now",
        "U1",
        None,
    )
    assert await kit.store.gate(THREAD, "c1") is not None
    gate = await kit.store.gate(THREAD, "c1")
    assert gate is not None and (gate.status, gate.approved) == (ApprovalStatus.REJECTED, None)
    approved = await vote(kit.store, second, BOB, VoteKind.APPROVE)
    assert approved.decided and approved.review_complete
    assert approved.approval.status is ApprovalStatus.APPROVED
    assert approved.approval.final_args == second.proposed_args and approved.approval.votes == ("Bob",)
    gate = await kit.store.gate(THREAD, "c2")
    assert gate is not None and gate.approved == args_digest(second.proposed_args)
    review = await kit.store.review(first.review_id)
    assert review is not None and review.status is ReviewStatus.RESUMING
    assert await kit.store.pending_in_thread(THREAD) == []
    assert await kit.audited() == [("decision", "rejected", first.id), ("decision", "approved", second.id)]
    assert await kit.store.gate(THREAD, "c3") is None


async def test_a_quorum_counts_distinct_approvers_of_the_same_arguments(kit: Kit):
    """The same person twice counts once; the quorum's last approver decides."""
    (approval,) = await pause(kit, action("c1", quorum=2))
    first = await vote(kit.store, approval, ANN, VoteKind.APPROVE, quorum=2)
    assert not first.decided and not first.review_complete
    assert (first.approval.status, first.approval.votes, first.approval.quorum) == (ApprovalStatus.PENDING, ("Ann",), 2)
    with pytest.raises(AlreadyVotedError):
        await vote(kit.store, approval, ANN, VoteKind.APPROVE, quorum=2)
    second = await vote(kit.store, approval, BOB, VoteKind.APPROVE, quorum=2)
    assert second.decided and second.review_complete
    assert (second.approval.status, second.approval.votes) == (ApprovalStatus.APPROVED, ("Ann", "Bob"))
    assert await kit.audited() == [("decision", "vote", approval.id), ("decision", "approved", approval.id)]


async def test_an_edit_replaces_the_arguments_under_vote(kit: Kit):
    """Earlier approvals were for other arguments; an edit back to the proposal keeps the proposal's key order."""
    (approval,) = await pause(kit, action("c1", quorum=2))
    await vote(kit.store, approval, ANN, VoteKind.APPROVE, quorum=2)
    edited_args = {"text": "changed", "pinned": True}
    edited = await vote(kit.store, approval, BOB, VoteKind.EDIT, quorum=2, args=edited_args)
    assert not edited.decided
    assert (edited.approval.current_args, edited.approval.votes) == (edited_args, ("Bob",))
    assert edited.approval.version != approval.version
    with pytest.raises(StaleVoteError):
        await vote(
            kit.store, approval, ANN, VoteKind.APPROVE, quorum=2, expected_digest=args_digest(approval.proposed_args)
        )
    back = await vote(kit.store, approval, ANN, VoteKind.EDIT, quorum=2, args={"pinned": False, "text": "c1"})
    # Back to the proposal, in the proposal's key order; Ann approved it before, and that approval counts again.
    assert not back.decided and back.approval.votes == ("Ann",)
    assert list(back.approval.args_under_vote) == ["text", "pinned"]
    decided = await vote(kit.store, approval, BOB, VoteKind.APPROVE, quorum=2)
    assert decided.decided and decided.approval.status is ApprovalStatus.APPROVED
    assert list(decided.approval.final_args or {}) == ["text", "pinned"]


async def test_an_edit_alone_decides_as_edited(kit: Kit):
    """An edit that reaches the quorum decides the approval as edited, with the new arguments approved."""
    (approval,) = await pause(kit, action("c1"))
    new = {"text": "other", "pinned": True}
    edited = await vote(kit.store, approval, ANN, VoteKind.EDIT, args=new)
    assert edited.decided and edited.review_complete
    assert (edited.approval.status, edited.approval.final_args) == (ApprovalStatus.EDITED, new)
    gate = await kit.store.gate(THREAD, "c1")
    assert gate is not None and (gate.status, gate.approved) == (ApprovalStatus.EDITED, args_digest(new))


async def test_refused_votes_change_nothing(kit: Kit):
    """An unknown approval, a decided one, an edit without arguments: refused, nothing stored."""
    with pytest.raises(ApprovalNotFoundError):
        await kit.store.vote("nope", actor=ANN, kind=VoteKind.APPROVE, quorum=1, audit=entry(await _one(kit), ANN))
    (approval,) = await kit.store.pending_in_thread(THREAD)
    with pytest.raises(ValueError, match="new arguments"):
        await vote(kit.store, approval, ANN, VoteKind.EDIT)
    assert await kit.store.get(approval.id) == approval
    await vote(kit.store, approval, ANN, VoteKind.REJECT, reason="no")
    with pytest.raises(AlreadyDecidedError) as refused:
        await vote(kit.store, approval, BOB, VoteKind.APPROVE)
    assert (refused.value.outcome, refused.value.decided_by_id) == ("rejected", "U1")
    assert await kit.audited() == [("decision", "rejected", approval.id)]


async def _one(kit: Kit) -> ApprovalRecord:
    (approval,) = await pause(kit, action("c1"))
    return approval


async def test_approve_and_trust_makes_a_grant_only_when_the_vote_decides_alone(kit: Kit):
    """A grant binds the approved arguments; asked on a card that needs more approvers, nothing changes."""
    trusted, quorate = await pause(kit, action("c1", trust_offer_s=60), action("c2", quorum=2, trust_offer_s=60))
    grant = NewGrant(matching=("text",), duration_s=600)
    with pytest.raises(TrustRefusedError):
        await vote(kit.store, quorate, ANN, VoteKind.APPROVE, quorum=2, trust=grant)
    assert await kit.store.get(quorate.id) == quorate
    decided = await vote(kit.store, trusted, ANN, VoteKind.APPROVE, trust=grant)
    assert decided.decided and decided.approval.trust_id is not None
    assert (decided.approval.trust_matching, decided.approval.trust_s) == (("text",), 600)
    assert decided.approval.trusted_until is not None
    assert await kit.audited() == [("decision", "approved", trusted.id), ("decision", "trust_granted", trusted.id)]


async def test_of_decisions_finishing_one_review_at_once_exactly_one_claims_it(kit: Kit):
    """Two workers each deciding one of a review's two calls together: one resume."""
    approvals = await pause(kit, action("c1"), action("c2"))
    other = await kit.worker()
    results = await asyncio.gather(
        vote(kit.store, approvals[0], ANN, VoteKind.APPROVE), vote(other, approvals[1], BOB, VoteKind.APPROVE)
    )
    assert sorted(result.review_complete for result in results) == [False, True]


async def test_of_two_clicks_on_one_card_at_once_exactly_one_decides(kit: Kit):
    """The other click finds the card decided."""
    (approval,) = await pause(kit, action("c1"))
    other = await kit.worker()
    results = await asyncio.gather(
        vote(kit.store, approval, ANN, VoteKind.APPROVE),
        vote(other, approval, BOB, VoteKind.REJECT),
        return_exceptions=True,
    )
    decided = [result for result in results if not isinstance(result, BaseException)]
    refused = [result for result in results if isinstance(result, AlreadyDecidedError)]
    assert len(decided) == 1 and len(refused) == 1 and decided[0].review_complete


async def test_a_card_past_its_time_is_expired_once_and_refuses_votes(kit: Kit):
    """Only the platforms served are swept; of two sweeps at once, each card expires once."""
    due, later = await pause(kit, action("c1", expires_in_s=0), action("c2", expires_in_s=HOUR))
    (elsewhere,) = await pause(kit, action("c3", expires_in_s=0), thread_id=ELSEWHERE)
    with pytest.raises(AlreadyDecidedError) as refused:
        await vote(kit.store, due, ANN, VoteKind.APPROVE)
    assert refused.value.outcome == "expired"
    assert await kit.store.next_expiry(platforms=["test"]) == due.expires_at
    other = await kit.worker()
    swept = await asyncio.gather(kit.store.expire_due(platforms=["test"]), other.expire_due(platforms=["test"]))
    results = [result for results in swept for result in results]
    assert len(results) == 1
    (expired,) = results
    assert expired.decided and not expired.review_complete  # c2 is still pending
    assert (expired.approval.id, expired.approval.status) == (due.id, ApprovalStatus.EXPIRED)
    assert (expired.approval.reason, expired.approval.decided_by_id) == (EXPIRED_REASON, None)
    assert await kit.store.next_expiry(platforms=["test"]) == later.expires_at
    assert await kit.store.expire_due(platforms=["test"]) == []
    still = await kit.store.get(elsewhere.id)
    assert still is not None and still.is_pending
    assert await kit.audited() == [("expiry", "expired", due.id)]
    finished = await vote(kit.store, later, ANN, VoteKind.REJECT)
    assert finished.review_complete


async def test_an_expiry_that_leaves_nothing_pending_claims_the_resume(kit: Kit):
    """The last card of a pause expiring claims its resume, as a last decision does."""
    (approval,) = await pause(kit, action("c1", expires_in_s=0))
    (expired,) = await kit.store.expire_due(platforms=["test"])
    assert expired.approval.id == approval.id and expired.review_complete
    assert await kit.store.next_expiry(platforms=["test"]) is None


async def test_an_escalation_is_claimed_once_and_again_only_when_its_lease_ran_out(kit: Kit):
    """Two sweepers at once: one claim; a finished escalation is audited once and never claimed again."""
    due, _ = await pause(
        kit,
        action("c1", escalates_in_s=0, escalate_to=TEAM),
        action("c2", escalates_in_s=HOUR, escalate_to=TEAM),
    )
    await pause(kit, action("c3", escalates_in_s=0, escalate_to=TEAM), thread_id=ELSEWHERE)
    assert await kit.store.next_escalation(platforms=["test"]) == due.escalate_at
    other = await kit.worker()
    claims = await asyncio.gather(
        kit.store.claim_due_escalations(lease_s=HOUR, platforms=["test"]),
        other.claim_due_escalations(lease_s=HOUR, platforms=["test"]),
    )
    claimed = [approval for found in claims for approval in found]
    assert [approval.id for approval in claimed] == [due.id]
    assert claimed[0].escalation is EscalationStatus.CLAIMED and claimed[0].escalated_at is not None
    assert await kit.store.claim_due_escalations(lease_s=HOUR, platforms=["test"]) == []
    still = await kit.store.still_escalating(due.id)
    assert still is not None and still.escalation is EscalationStatus.CLAIMED
    done = await kit.store.finish_escalation(due.id, copies=2)
    assert done is not None and done.escalation is EscalationStatus.ESCALATED
    assert done.escalated_at == claimed[0].escalated_at
    assert await kit.store.finish_escalation(due.id, copies=2) is None
    assert await kit.store.still_escalating(due.id) is None
    assert await kit.store.claim_due_escalations(lease_s=HOUR, platforms=["test"]) == []
    assert await kit.audited() == [("escalation", "escalated", due.id)]


async def test_a_claim_whose_lease_ran_out_is_claimed_again(kit: Kit):
    """The sweeper that claimed died before posting: another claims it, keeping the first claim's time."""
    (approval,) = await pause(kit, action("c1", escalates_in_s=0, escalate_to=TEAM))
    (first,) = await kit.store.claim_due_escalations(lease_s=0, platforms=["test"])
    assert await kit.store.next_escalation(platforms=["test"]) is not None
    (again,) = await kit.store.claim_due_escalations(lease_s=HOUR, platforms=["test"])
    assert again.id == approval.id and again.escalated_at == first.escalated_at


async def test_a_decided_card_does_not_escalate(kit: Kit):
    """An escalation is claimed only on an approval still pending."""
    (approval,) = await pause(kit, action("c1", escalates_in_s=0, escalate_to=TEAM))
    await vote(kit.store, approval, ANN, VoteKind.APPROVE)
    assert await kit.store.claim_due_escalations(lease_s=HOUR, platforms=["test"]) == []
    assert await kit.store.still_escalating(approval.id) is None
    assert await kit.store.next_escalation(platforms=["test"]) is None


async def test_pending_everywhere_lists_the_platforms_served_oldest_first(kit: Kit):
    """Other platforms' cards are left out; `limit` caps the list."""
    first = await pause(kit, action("c1"), action("c2"))
    await pause(kit, action("c3"), thread_id=ELSEWHERE)
    later = await pause(kit, action("c4"), thread_id=OTHER_THREAD, interrupt_id="i2")
    listed = await kit.store.pending_everywhere(platforms=["test"])
    assert [a.id for a in listed] == [a.id for a in [*first, *later]]
    assert [a.id for a in await kit.store.pending_everywhere(platforms=["test"], limit=1)] == [first[0].id]
    assert await kit.store.pending_everywhere(platforms=["nowhere"]) == []


async def test_cards_are_remembered_once_and_the_primary_is_linked(kit: Kit):
    """Every posted copy is kept once; the primary one becomes the approval's `card_ref`."""
    (approval,) = await pause(kit, action("c1"))
    await kit.store.add_card(approval.id, "C1:1.0", primary=True)
    await kit.store.add_card(approval.id, "D1:2.0", primary=False)
    await kit.store.add_card(approval.id, "D1:2.0", primary=False)
    assert sorted(await kit.store.card_refs(approval.id)) == ["C1:1.0", "D1:2.0"]
    stored = await kit.store.get(approval.id)
    assert stored is not None and stored.card_ref == "C1:1.0"
    assert await kit.store.card_refs("nope") == []


async def test_marks_go_on_the_calls_latest_approval(kit: Kit):
    """Outcome unknown and definition changed are recorded on the approval and returned; no approval: None."""
    (approval,) = await pause(kit, action("c1"))
    await vote(kit.store, approval, ANN, VoteKind.APPROVE)
    unknown = await kit.store.mark_outcome_unknown(THREAD, "c1")
    assert unknown is not None and unknown.outcome_unknown and not unknown.definition_changed
    changed = await kit.store.mark_definition_changed(THREAD, "c1")
    assert changed is not None and changed.definition_changed and changed.outcome_unknown
    assert await kit.store.mark_outcome_unknown(THREAD, "c9") is None
    assert await kit.store.mark_definition_changed(OTHER_THREAD, "c1") is None


async def test_tool_runs_reads_the_ledger(kit: Kit):
    """A finished call has its result, a started one None, one never claimed is missing."""
    approvals = await pause(kit, action("c1"), action("c2"), action("c3"))
    for approval in approvals:
        await vote(kit.store, approval, ANN, VoteKind.APPROVE)
    for approval in approvals[:2]:
        claim = await kit.ledger.claim(
            thread_id=THREAD,
            tool_call_id=approval.tool_call_id or "",
            tool_name=approval.tool_name,
            args=approval.proposed_args,
            reviewed=True,
        )
        assert claim == Claim.GRANTED
    await kit.ledger.record(thread_id=THREAD, tool_call_id="c1", result=ToolResult("added"))
    runs = await kit.store.tool_runs(THREAD, ["c1", "c2", "c3"])
    assert runs == {"c1": ToolResult("added"), "c2": None}


async def test_giving_up_a_review_marks_what_never_ran_and_what_was_cut_short(kit: Kit):
    """Only a resuming review is given up, once; its calls that would have run are marked from the ledger."""
    approvals = await pause(kit, action("c1"), action("c2"), action("c3"), action("c4"))
    for approval in approvals[:3]:
        await vote(kit.store, approval, ANN, VoteKind.APPROVE)
    pending = await pause(kit, action("c5"), interrupt_id="i2")
    review_id = approvals[0].review_id
    assert await kit.store.give_up_reviews(THREAD, [review_id]) == {}  # still pending: not resuming
    await vote(kit.store, approvals[3], ANN, VoteKind.REJECT)
    for approval in approvals[:2]:
        await kit.ledger.claim(
            thread_id=THREAD,
            tool_call_id=approval.tool_call_id or "",
            tool_name=approval.tool_name,
            args=approval.proposed_args,
            reviewed=True,
        )
    await kit.ledger.record(thread_id=THREAD, tool_call_id="c1", result=ToolResult("added"))
    other = await kit.worker()
    both = await asyncio.gather(
        kit.store.give_up_reviews(THREAD, [review_id, pending[0].review_id]),
        other.give_up_reviews(THREAD, [review_id]),
    )
    given = [found for found in both if found]
    assert len(given) == 1 and list(given[0]) == [review_id]
    marks = [(a.tool_call_id, a.outcome_unknown, a.not_run) for a in given[0][review_id]]
    assert marks == [("c1", False, False), ("c2", True, False), ("c3", False, True), ("c4", False, False)]
    review = await kit.store.review(review_id)
    assert review is not None and review.status is ReviewStatus.DONE
    assert await kit.store.give_up_reviews(OTHER_THREAD, [pending[0].review_id]) == {}


async def test_a_claimed_review_is_completed_once(kit: Kit):
    """Completing needs the review claimed for resuming; the second completion is refused."""
    (approval,) = await pause(kit, action("c1"))
    assert not await kit.store.complete_review(approval.review_id)
    await vote(kit.store, approval, ANN, VoteKind.APPROVE)
    assert await kit.store.complete_review(approval.review_id)
    assert not await kit.store.complete_review(approval.review_id)
    review = await kit.store.review(approval.review_id)
    assert review is not None and review.status is ReviewStatus.DONE
    assert await kit.store.reviews_in_thread(THREAD, [ReviewStatus.PENDING, ReviewStatus.RESUMING]) == []
