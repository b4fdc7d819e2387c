"""Approve all / Reject all on a real PostgreSQL: one decision per call, through the single-click path."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest
from langchain_core.messages import AIMessage, ToolMessage

from adapters.discord import messages as discord_msg
from adapters.slack import messages as slack_msg
from adapters.words.batch import batch_summary
from adapters.words.decisions import CARD_NOT_POSTED
from bot.admin.parse import parse_command
from bot.admin.service import AdminService
from bot.audit.entries import AuditKind
from bot.base.errors import (
    AlreadyDecidedError,
    AlreadyVotedError,
    ApprovalNotFoundError,
    CardNotPostedError,
    NotPermittedError,
    StaleVoteError,
    UnshowableError,
)
from bot.reviews.decisions import Approve, Edit, EditedAction, Reject
from bot.reviews.lifecycle import ApprovalStatus, ReviewStatus
from bot.reviews.records import pause_version
from tests.support.barriers import wait_until
from tests.support.recording_platform import RecordingPlatform
from tests.support.scripted_model import ScriptedChatModel, calls, tool_call
from tests.support.service import WORKSPACE, actor, message, open_service

ADMIN = "boss"


def two_calls() -> AIMessage:
    return calls(tool_call("send", {"to": "bob", "body": "hi"}), tool_call("lookup", {"query": "weather"}))


async def configure(h, registry, *texts: str) -> None:
    service = AdminService(config=h.config, audit=h.audit, registry=registry, directory_for=lambda name: h.platform)
    for text in texts:
        await service.execute(actor(ADMIN), parse_command(text), here="C1")


async def pause_of_two(h, registry, *settings: str):
    """`lookup` reviewed too, then a message whose answer calls `send` and `lookup`: one pause, two cards."""
    await configure(h, registry, "policy lookup review", *settings)
    await h.service.handle_message(message("do both", user="alice"))
    await wait_until(lambda: len(h.platform.cards) == 2, "two cards")
    rows = await h.approvals.pending_in_thread(next(iter(h.platform.cards.values())).approval.thread_id)
    assert [row.tool_name for row in rows] == ["send", "lookup"]
    return rows


def first_card(h, rows):
    return next(card for card in h.platform.cards.values() if card.approval.id == rows[0].id)


async def test_only_the_first_card_offers_the_batch_and_it_goes_when_one_call_is_left(db_url, registry):
    """Two pending calls: the first card carries Approve all (2); once one is decided, the batch is gone."""
    model = ScriptedChatModel(replies=[two_calls(), AIMessage("done")])
    async with open_service(db_url, model, registry, RecordingPlatform(admins={ADMIN})) as h:
        rows = await pause_of_two(h, registry)
        first = first_card(h, rows)
        assert first.batch is not None and first.batch.pending == 2
        assert first.batch.version == pause_version(rows) and len(first.batch.review_id) == 32
        assert [c.batch for c in h.platform.cards.values() if c.approval.id == rows[1].id] == [None]
        await h.service.decide(rows[1].id, actor("alice"), Approve())
        await h.service.tasks.join()
        assert first_card(h, rows).batch is None and first_card(h, rows).approval.is_pending
        await h.service.decide(rows[0].id, actor("alice"), Approve())
        await wait_until(lambda: bool(h.platform.answers), "the answer")


async def test_approve_all_decides_what_the_clicker_may_and_leaves_the_rest(db_url, registry, tool_log):
    """An admin's Approve all: `send` approved, `lookup` (only dave approves it) left pending and said why; dave finishes."""
    model = ScriptedChatModel(replies=[two_calls(), AIMessage("both ran")])
    async with open_service(db_url, model, registry, RecordingPlatform(admins={ADMIN})) as h:
        rows = await pause_of_two(h, registry, "approvers add <@UDAVE> for lookup")
        batch = first_card(h, rows).batch
        outcome = await h.service.decide_all(batch.review_id, actor(ADMIN), Approve(), seen_version=batch.version)
        assert [row.id for row in outcome.decided] == [rows[0].id]
        assert outcome.decided[0].status is ApprovalStatus.APPROVED and outcome.decided[0].decided_by_id == ADMIN
        [left] = outcome.left
        assert left.approval.id == rows[1].id and isinstance(left.error, NotPermittedError)
        assert left.error.reason == "not_an_approver"
        assert outcome.voted == () and outcome.skipped == ()
        await h.service.tasks.join()
        assert tool_log.calls == [] and h.platform.answers == []  # the pause waits for lookup
        assert (await h.approvals.review(rows[0].review_id)).status is ReviewStatus.PENDING
        await h.service.decide(rows[1].id, actor("UDAVE"), Approve())
        await wait_until(lambda: bool(h.platform.answers), "the answer")
        await h.service.tasks.join()
        audit = await h.audit.recent(WORKSPACE, limit=50)
    assert [name for name, _ in tool_log.calls] == ["send", "lookup"]
    assert h.platform.answers[-1][1] == "both ran"
    decisions = [e for e in audit if e.kind is AuditKind.DECISION]
    assert {(e.actor_id, e.detail.get("batch")) for e in decisions} == {(ADMIN, True), ("UDAVE", None)}
    assert any(e.kind is AuditKind.REFUSED and e.actor_id == ADMIN and e.reason == "not_an_approver" for e in audit)


async def test_reject_all_rejects_each_call_with_one_reason_and_resumes_once(db_url, registry, tool_log):
    """Reject all by the requester: both calls rejected with the reason; the model reads it for each; one resume."""
    model = ScriptedChatModel(replies=[two_calls(), AIMessage("ok, not doing it")])
    async with open_service(db_url, model, registry, RecordingPlatform(admins={ADMIN})) as h:
        rows = await pause_of_two(h, registry)
        review_id = first_card(h, rows).batch.review_id
        assert [row.id for row in await h.service.check_batch(review_id, actor("alice"), attempted="reject")] == [
            row.id for row in rows
        ]
        outcome = await h.service.decide_all(review_id, actor("alice"), Reject(message="wrong day"))
        await wait_until(lambda: bool(h.platform.answers), "the answer")
        await h.service.tasks.join()
    assert [row.status for row in outcome.decided] == [ApprovalStatus.REJECTED, ApprovalStatus.REJECTED]
    assert tool_log.calls == []
    results = [str(m.content) for m in model.prompts[-1] if isinstance(m, ToolMessage)]
    assert results == ["Rejected by a reviewer: wrong day", "Rejected by a reviewer: wrong day"]
    assert len(h.platform.answers) == 1


async def test_a_double_click_on_approve_all_decides_nothing_twice(db_url, registry, tool_log):
    """Two Approve all at once: each call is decided once, the other click skips it; tools run once, one answer."""
    model = ScriptedChatModel(replies=[two_calls(), AIMessage("ran once")])
    async with open_service(db_url, model, registry, RecordingPlatform(admins={ADMIN})) as h:
        rows = await pause_of_two(h, registry)
        batch = first_card(h, rows).batch
        first, second = await asyncio.gather(
            h.service.decide_all(batch.review_id, actor("alice"), Approve(), seen_version=batch.version),
            h.service.decide_all(batch.review_id, actor("alice"), Approve(), seen_version=batch.version),
        )
        await wait_until(lambda: bool(h.platform.answers), "the answer")
        await h.service.tasks.join()
        again = await h.service.decide_all(batch.review_id, actor("alice"), Approve(), seen_version=batch.version)
        decisions = await h.database.pool.fetchval("SELECT count(*) FROM audit_log WHERE kind = 'decision'")
    decided = [row.id for row in first.decided + second.decided]
    assert sorted(decided) == sorted(row.id for row in rows)
    assert sorted(row.id for row in first.skipped + second.skipped) == sorted(row.id for row in rows)
    assert first.left == () and second.left == ()
    assert [row.id for row in again.skipped] == [row.id for row in rows] and again.decided == ()
    assert decisions == 2 and [name for name, _ in tool_log.calls] == ["send", "lookup"]
    assert len(h.platform.answers) == 1


async def test_approve_all_from_a_card_drawn_before_an_edit_is_refused(db_url, registry, tool_log):
    """An edit of the second call changes the pause's version: an Approve all naming the old one decides nothing."""
    model = ScriptedChatModel(replies=[two_calls(), AIMessage("done")])
    async with open_service(db_url, model, registry, RecordingPlatform(admins={ADMIN})) as h:
        await configure(h, registry, "quorum lookup 2")
        rows = await pause_of_two(h, registry)
        batch = first_card(h, rows).batch
        edit = Edit(edited_action=EditedAction(name="lookup", args={"query": "tides"}))
        await h.service.decide(rows[1].id, actor(ADMIN), edit)  # one of two approvals: still pending
        with pytest.raises(StaleVoteError):
            await h.service.decide_all(batch.review_id, actor("alice"), Approve(), seen_version=batch.version)
        assert all(row.is_pending for row in await h.approvals.approvals_of(rows[0].review_id))
        await h.service.tasks.join()
        fresh = first_card(h, rows).batch
        assert fresh.version != batch.version
        outcome = await h.service.decide_all(fresh.review_id, actor("alice"), Approve(), seen_version=fresh.version)
        await wait_until(lambda: bool(h.platform.answers), "the answer")
        await h.service.tasks.join()
    assert [row.tool_name for row in outcome.decided] == ["send", "lookup"]
    assert ("lookup", {"query": "tides"}) in tool_log.calls


async def test_approve_all_counts_as_one_vote_below_a_quorum(db_url, registry):
    """Quorum 2 for send: Approve all records alice's vote (voted) and decides lookup; a second Approve all is refused as a repeat."""
    model = ScriptedChatModel(replies=[two_calls(), AIMessage("done")])
    async with open_service(db_url, model, registry, RecordingPlatform(admins={ADMIN})) as h:
        rows = await pause_of_two(h, registry, "quorum send 2")
        batch = first_card(h, rows).batch
        outcome = await h.service.decide_all(batch.review_id, actor("alice"), Approve(), seen_version=batch.version)
        assert [row.id for row in outcome.voted] == [rows[0].id] and [row.id for row in outcome.decided] == [rows[1].id]
        repeat = await h.service.decide_all(batch.review_id, actor("alice"), Approve())
        [left] = repeat.left
        assert isinstance(left.error, AlreadyVotedError) and [r.id for r in repeat.skipped] == [rows[1].id]
        await h.service.decide(rows[0].id, actor(ADMIN), Approve())
        await wait_until(lambda: bool(h.platform.answers), "the answer")
        await h.service.tasks.join()


async def test_unknown_or_finished_pauses_are_refused_in_words(db_url, registry):
    """A made-up pause id is not found (audited); a Reject all on a pause with nothing pending says it was decided."""
    model = ScriptedChatModel(replies=[two_calls(), AIMessage("done")])
    async with open_service(db_url, model, registry, RecordingPlatform(admins={ADMIN})) as h:
        rows = await pause_of_two(h, registry)
        for bogus in ("0" * 32, "not a pause", ""):
            with pytest.raises(ApprovalNotFoundError):
                await h.service.decide_all(bogus, actor("alice"), Approve())
        with pytest.raises(NotPermittedError):
            await h.service.check_batch(first_card(h, rows).batch.review_id, actor("nobody"), attempted="reject")
        review_id = first_card(h, rows).batch.review_id
        await h.service.decide_all(review_id, actor("alice"), Approve())
        await wait_until(lambda: bool(h.platform.answers), "the answer")
        await h.service.tasks.join()
        with pytest.raises(AlreadyDecidedError):
            await h.service.check_batch(review_id, actor("alice"), attempted="reject")
        unknown = await h.database.pool.fetchval(
            "SELECT count(*) FROM audit_log WHERE outcome = 'unknown_approval' AND reason = 'no such pause'"
        )
    assert unknown == 3


async def test_a_call_the_platform_cannot_show_is_never_approved_there_by_a_click_or_a_batch(
    db_url, registry, tool_log
):
    """The core refuses (and audits) an approval and Approve all of a call too long to show; reject still works."""
    model = ScriptedChatModel(
        replies=[
            calls(tool_call("send", {"to": "bob", "body": "x" * 5_000}), tool_call("lookup", {"query": "weather"})),
            AIMessage("done"),
        ]
    )
    platform = RecordingPlatform(admins={ADMIN}, unshowable_over=1_000)
    async with open_service(db_url, model, registry, platform) as h:
        rows = await pause_of_two(h, registry)
        with pytest.raises(UnshowableError) as refused:
            await h.service.decide(rows[0].id, actor("alice"), Approve(), trust=False)
        assert refused.value.size > refused.value.limit == 1_000 and not refused.value.keys
        outcome = await h.service.decide_all(rows[0].review_id.replace("-", ""), actor("alice"), Approve())
        assert [row.tool_name for row in outcome.decided] == ["lookup"]
        [left] = outcome.left
        assert left.approval.id == rows[0].id and isinstance(left.error, UnshowableError)
        assert (await h.approvals.get(rows[0].id)).is_pending and tool_log.calls == []
        refusals = [e for e in await h.audit.recent(WORKSPACE, limit=50) if e.outcome == "unshowable"]
        assert len(refusals) == 2 and all(e.kind is AuditKind.REFUSED for e in refusals)
        rejected = await h.service.decide(rows[0].id, actor("alice"), Reject(message="too long to read"))
        await h.service.tasks.join()
        assert rejected.status is ApprovalStatus.REJECTED
        assert tool_log.calls == [("lookup", {"query": "weather"})]


@dataclass
class LookupCardFails(RecordingPlatform):
    """Posts cards, except the `lookup` card, whose next `failures` posts fail (a 502, a dropped connection)."""

    failures: int = 1
    attempts: int = 0

    async def post_card(self, target, card):
        if card.approval.tool_name == "lookup":
            self.attempts += 1
            if self.failures:
                self.failures -= 1
                raise RuntimeError("502 Bad Gateway")
        return await super().post_card(target, card)


async def test_a_card_whose_post_failed_once_is_posted_again_at_once(db_url, registry, tool_log):
    """The `lookup` card's post fails once: it is posted again while the message is handled, without a new message."""
    model = ScriptedChatModel(replies=[two_calls(), AIMessage("both ran")])
    platform = LookupCardFails(admins={ADMIN}, failures=1)
    async with open_service(db_url, model, registry, platform) as h:
        await configure(h, registry, "policy lookup review")
        await h.service.handle_message(message("do both", user="alice"))
        posted = {card.approval.tool_name for card in platform.cards.values()}
        rows = await h.approvals.pending_in_thread(next(iter(platform.cards.values())).approval.thread_id)
        assert posted == {"send", "lookup"} and platform.attempts == 2
        assert all(row.card_ref is not None for row in rows)
        assert not await h.database.pool.fetchval("SELECT running_since IS NOT NULL FROM conversations")
        batch = first_card(h, rows).batch
        outcome = await h.service.decide_all(batch.review_id, actor(ADMIN), Approve(), seen_version=batch.version)
        await wait_until(lambda: bool(platform.answers), "the answer")
    assert [row.tool_name for row in outcome.decided] == ["send", "lookup"]
    assert [name for name, _ in tool_log.calls] == ["send", "lookup"]


async def test_approve_all_never_approves_a_call_whose_card_was_not_posted(db_url, registry, tool_log):
    """The `lookup` card cannot be posted: Approve all on the card shown approves `send` only, leaves `lookup`
    pending and says why (audited); once the upkeep posts its card, it is decided there."""
    secret = {"query": "payroll of every employee, mail it to x@evil.example"}
    model = ScriptedChatModel(
        replies=[calls(tool_call("send", {"to": "bob", "body": "hi"}), tool_call("lookup", secret)), AIMessage("ok")]
    )
    platform = LookupCardFails(admins={ADMIN}, failures=3)  # the first post and both retries
    async with open_service(db_url, model, registry, platform) as h:
        await configure(h, registry, "policy lookup review")
        await h.service.handle_message(message("do both", user="alice"))
        [shown] = platform.cards.values()
        assert shown.approval.tool_name == "send" and shown.batch is not None and platform.attempts == 3
        outcome = await h.service.decide_all(
            shown.batch.review_id, actor(ADMIN), Approve(), seen_version=shown.batch.version
        )
        await h.service.tasks.join()
        assert [row.tool_name for row in outcome.decided] == ["send"]
        [left] = outcome.left
        assert left.approval.tool_name == "lookup" and isinstance(left.error, CardNotPostedError)
        assert (await h.approvals.get(left.approval.id)).is_pending and tool_log.calls == []
        for messages in (slack_msg, discord_msg):
            summary = batch_summary(outcome, messages, str)
            assert f"Left pending: `lookup` (call 2). {CARD_NOT_POSTED}" in summary
        [refused] = [e for e in await h.audit.recent(WORKSPACE, limit=50) if e.kind is AuditKind.REFUSED]
        assert (refused.outcome, refused.actor_id, refused.approval_id) == ("card_not_posted", ADMIN, left.approval.id)
        # The platform is back; the upkeep's next look at the undelivered run posts the card.
        assert h.messages is not None
        assert await h.messages.tend(shown.approval.thread_id)
        [card] = [c for c in platform.cards.values() if c.approval.tool_name == "lookup"]
        await h.service.decide(card.approval.id, actor(ADMIN), Approve())
        await wait_until(lambda: bool(platform.answers), "the answer")
        await h.service.tasks.join()
    assert [name for name, _ in tool_log.calls] == ["send", "lookup"] and tool_log.calls[1] == ("lookup", secret)
