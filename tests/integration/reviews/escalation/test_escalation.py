"""Escalation on a real PostgreSQL: timing without traffic, exactly once, who may then decide."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
from langchain_core.messages import AIMessage

from bot.admin.parse import parse_command
from bot.admin.service import AdminService
from bot.audit.entries import AuditKind
from bot.base.conversation import Actor
from bot.base.errors import NotPermittedError
from bot.reviews.decisions import Approve, Reject
from bot.reviews.escalation.rules import EscalationTarget, TargetKind
from bot.reviews.lifecycle import ApprovalStatus, EscalationStatus
from tests.support.barriers import wait_until, wait_until_async
from tests.support.recording_platform import RecordingPlatform
from tests.support.scripted_model import ScriptedChatModel, calls, tool_call
from tests.support.service import WORKSPACE, actor, message, open_service

ADMIN = "boss"


def send(to: str = "bob") -> dict:
    return tool_call("send", {"to": to, "body": "hi"})


async def configure(h, registry, *texts: str) -> None:
    service = AdminService(config=h.config, audit=h.audit, registry=registry, directory_for=lambda name: h.platform)
    for text in texts:
        await service.execute(actor(ADMIN), parse_command(text), here="C1")


def copies_to(h, **where) -> list[str]:
    """Refs of the card copies posted to a target with these fields (e.g. user_id="UDAVE")."""
    return [
        ref
        for ref, target in h.platform.targets.items()
        if all(getattr(target, key) == value for key, value in where.items())
    ]


async def due_now(db_url: str, *, offset_s: float = -1.0) -> None:
    """Bring every escalation's time to now (plus `offset_s`), as if its delay had passed."""
    connection = await asyncpg.connect(db_url)
    try:
        await connection.execute(
            "UPDATE approvals SET escalate_at = $1 WHERE escalate_at IS NOT NULL",
            datetime.now(UTC) + timedelta(seconds=offset_s),
        )
    finally:
        await connection.close()


async def one_card(h):
    await wait_until(lambda: bool(h.platform.cards), "the card")
    [approval] = await h.approvals.pending_in_thread(next(iter(h.platform.cards.values())).approval.thread_id)
    return approval


async def quiet(*harnesses) -> None:
    """Stop the background escalation sweepers, so that the test's own `sweep()` calls count everything."""
    for h in harnesses:
        await h.service.escalation.stop()


def model(*replies) -> ScriptedChatModel:
    return ScriptedChatModel(replies=[calls(send()), *replies])


async def test_a_due_escalation_is_posted_with_no_traffic_and_the_target_may_decide(db_url, registry, tool_log):
    """The sweeper posts the card to dave's DMs on time; the original says so; dave (no approver) approves it."""
    async with open_service(db_url, model(AIMessage("sent")), registry, RecordingPlatform(admins={ADMIN})) as h:
        await configure(h, registry, "escalate send after 10m to <@UDAVE>")
        await h.service.handle_message(message("send", user="alice"))
        card = await one_card(h)
        assert card.escalation is EscalationStatus.WAITING
        assert card.escalate_to == EscalationTarget(kind=TargetKind.USER, subject_id="UDAVE")
        waiting = card.escalate_at - card.created_at
        assert timedelta(minutes=9) < waiting <= timedelta(minutes=10, seconds=5)
        with pytest.raises(NotPermittedError):  # not yet: dave is nobody here before the escalation
            await h.service.decide(card.id, actor("UDAVE"), Approve())
        await due_now(db_url, offset_s=0.3)
        h.service.escalation.wake()
        await wait_until(lambda: bool(copies_to(h, user_id="UDAVE")), "the escalated copy in dave's DMs")
        await h.service.tasks.join()
        await wait_until(
            lambda: any(c.approval.escalation is EscalationStatus.ESCALATED for c in h.platform.updates),
            "the original redrawn as escalated",
        )
        stored = await h.approvals.get(card.id)
        assert stored.escalation is EscalationStatus.ESCALATED and stored.escalated_at is not None
        assert set(await h.approvals.card_refs(card.id)) == {stored.card_ref, *copies_to(h, user_id="UDAVE")}
        [copy] = copies_to(h, user_id="UDAVE")
        assert h.platform.targets[copy].escalated_to == stored.escalate_to
        with pytest.raises(NotPermittedError):  # bob is neither an approver nor the audience
            await h.service.decide(card.id, actor("bob"), Approve())
        decided = await h.service.decide(card.id, actor("UDAVE"), Approve())
        await wait_until(lambda: bool(h.platform.answers), "the answer")
        await h.service.tasks.join()
        audit = await h.audit.recent(WORKSPACE, limit=50)
    assert decided.status is ApprovalStatus.APPROVED and decided.decided_by_id == "UDAVE"
    assert tool_log.calls == [("send", {"to": "bob", "body": "hi", "urgent": False})]
    [escalated] = [e for e in audit if e.kind is AuditKind.ESCALATION]
    assert escalated.outcome == "escalated" and escalated.actor_id is None
    assert escalated.detail["to"] == {"kind": "user", "id": "UDAVE"} and escalated.detail["copies"] == 1
    [approved] = [e for e in audit if e.kind is AuditKind.DECISION]
    assert approved.actor_id == "UDAVE" and approved.detail["via"] == "escalation"
    refused = [e for e in audit if e.kind is AuditKind.REFUSED]
    assert {(e.actor_id, e.reason) for e in refused} == {
        ("UDAVE", "not_requester_or_admin"),
        ("bob", "not_requester_or_admin"),
    }
    # Every copy, the original and dave's, was redrawn with the decision.
    final = {ref: c.approval.status for ref, c in h.platform.cards.items()}
    assert set(final.values()) == {ApprovalStatus.APPROVED}


async def test_a_card_decided_before_its_time_never_escalates(db_url, registry):
    """Approved before the delay: the due time passes, the sweeper finds nothing, nobody gets a copy."""
    async with open_service(db_url, model(AIMessage("sent")), registry, RecordingPlatform(admins={ADMIN})) as h:
        await configure(h, registry, "escalate send after 10m to <@UDAVE>")
        await h.service.handle_message(message("send"))
        card = await one_card(h)
        await quiet(h)
        await h.service.decide(card.id, actor("alice"), Approve())
        await wait_until(lambda: bool(h.platform.answers), "the answer")
        await due_now(db_url)
        assert await h.service.escalation.sweep() == 0
        assert await h.approvals.next_escalation(platforms=["test"]) is None
        stored = await h.approvals.get(card.id)
        rows = await h.database.pool.fetchval("SELECT count(*) FROM audit_log WHERE kind = 'escalation'")
    assert stored.escalation is EscalationStatus.WAITING and stored.escalated_at is None
    assert copies_to(h, user_id="UDAVE") == [] and rows == 0


async def test_expiry_still_applies_to_an_escalated_card(db_url, registry, tool_log):
    """An escalated card nobody decides still expires on time; every copy then says Expired."""
    async with open_service(db_url, model(AIMessage("it expired")), registry, RecordingPlatform(admins={ADMIN})) as h:
        await configure(h, registry, "escalate send after 10m to <#CESC>", "expiry 1h")
        await h.service.handle_message(message("send"))
        card = await one_card(h)
        await quiet(h)
        await due_now(db_url)
        assert await h.service.escalation.sweep() == 1
        assert len(copies_to(h, channel_id="CESC")) == 1
        await h.database.pool.execute("UPDATE approvals SET expires_at = now() + interval '300 milliseconds'")
        h.service.expiry.wake()
        await wait_until(lambda: bool(h.platform.answers), "the expiry's answer")
        await h.service.tasks.join()
        refs = await h.approvals.card_refs(card.id)
    assert len(refs) == 2
    assert {h.platform.cards[ref].approval.status for ref in refs} == {ApprovalStatus.EXPIRED}
    assert tool_log.calls == []


async def test_a_channel_audience_is_whoever_clicks_in_that_channel(db_url, registry):
    """Escalated to #CESC: erin clicking there may reject; the same erin clicking elsewhere may not."""
    async with open_service(db_url, model(AIMessage("rejected")), registry, RecordingPlatform(admins={ADMIN})) as h:
        await configure(h, registry, "escalate send after 10m to <#CESC>")
        await h.service.handle_message(message("send"))
        card = await one_card(h)
        await quiet(h)
        await due_now(db_url)
        assert await h.service.escalation.sweep() == 1
        erin = Actor(platform="test", workspace_id=WORKSPACE, user_id="erin", display_name="erin")
        for elsewhere in (erin, replace(erin, channel_id="C1")):
            with pytest.raises(NotPermittedError):
                await h.service.decide(card.id, elsewhere, Approve())
        in_channel = replace(erin, channel_id="CESC")
        decided = await h.service.decide(card.id, in_channel, Reject(message="not now"))
        await h.service.tasks.join()
    assert decided.status is ApprovalStatus.REJECTED and decided.decided_by_id == "erin"


async def test_a_group_escalates_to_its_members_dms_and_self_approval_still_applies(db_url, registry):
    """A group's members get the card in their DMs (not the requester, with self-approval off), and may decide."""
    platform = RecordingPlatform(admins={ADMIN}, groups={"SOPS": {"alice", "UERIN", "UFRANK"}})
    async with open_service(db_url, model(AIMessage("done")), registry, platform) as h:
        await configure(h, registry, "escalate send after 10m to <!subteam^SOPS>", "self-approval off")
        await h.service.handle_message(message("send", user="alice"))
        card = await one_card(h)
        await quiet(h)
        await due_now(db_url)
        assert await h.service.escalation.sweep() == 1
        assert sorted(t.user_id for t in h.platform.targets.values() if t.user_id) == ["UERIN", "UFRANK"]
        with pytest.raises(NotPermittedError) as refused:  # alice is in the group, but asked for the call
            await h.service.decide(card.id, actor("alice"), Approve())
        assert refused.value.reason == "self_approval_off"
        decided = await h.service.decide(card.id, actor("UFRANK"), Approve())
        await h.service.tasks.join()
    assert decided.status is ApprovalStatus.APPROVED


async def test_two_replicas_escalate_once_and_a_dead_claim_is_taken_over(db_url, registry):
    """Two services sweeping one database post one set of copies; a claim whose lease ran out is posted by another."""
    first_platform, second_platform = RecordingPlatform(admins={ADMIN}), RecordingPlatform(admins={ADMIN})
    two = ScriptedChatModel(replies=[calls(send()), calls(send())])
    async with (
        open_service(db_url, two, registry, first_platform) as a,
        open_service(db_url, ScriptedChatModel(replies=[]), registry, second_platform) as b,
    ):
        await configure(a, registry, "escalate send after 10m to <@UDAVE>")
        await a.service.handle_message(message("send"))
        await a.service.handle_message(message("send", conv=_other()))
        await wait_until(lambda: len(a.platform.cards) == 2, "two cards")
        await quiet(a, b)
        await due_now(db_url)
        # One of them is claimed by a replica that then dies: its lease has already run out.
        [dead] = await a.approvals.claim_due_escalations(lease_s=0.0, platforms=["test"], limit=1)
        swept = await asyncio.gather(a.service.escalation.sweep(), b.service.escalation.sweep())
        await a.service.tasks.join()
        await b.service.tasks.join()
        rows = await a.database.pool.fetch("SELECT id, escalation FROM approvals ORDER BY id")
        audited = await a.database.pool.fetchval("SELECT count(*) FROM audit_log WHERE kind = 'escalation'")
    assert sum(swept) == 2
    copies = copies_to(a, user_id="UDAVE") + copies_to(b, user_id="UDAVE")
    assert len(copies) == 2  # one per approval, whichever replica posted it
    assert {row["escalation"] for row in rows} == {"escalated"} and audited == 2
    assert dead.escalation is EscalationStatus.CLAIMED


async def _escalated(h, approval_id: str) -> bool:
    stored = await h.approvals.get(approval_id)
    return stored.escalation is EscalationStatus.ESCALATED


def _other():
    from tests.support.service import conversation

    return conversation("C2")


async def test_an_escalation_due_while_the_bot_is_down_happens_once_after_the_restart(db_url, registry):
    """Stopped before the delay, started after it: the new process escalates the card, once."""
    async with open_service(db_url, model(), registry, RecordingPlatform(admins={ADMIN})) as h:
        await configure(h, registry, "escalate send after 10m to <@UDAVE>")
        await h.service.handle_message(message("send"))
        card = await one_card(h)
    await due_now(db_url)
    restarted_platform = RecordingPlatform(admins={ADMIN})
    async with open_service(db_url, ScriptedChatModel(replies=[]), registry, restarted_platform) as again:
        await wait_until(lambda: bool(copies_to(again, user_id="UDAVE")), "the copy after the restart")
        await wait_until_async(lambda: _escalated(again, card.id), "the escalation recorded after the restart")
        await quiet(again)
        assert await again.service.escalation.sweep() == 0
        stored = await again.approvals.get(card.id)
    assert len(copies_to(again, user_id="UDAVE")) == 1
    assert stored.escalation is EscalationStatus.ESCALATED


async def test_changing_the_setting_does_not_rewrite_a_waiting_card(db_url, registry):
    """`escalate send off` after a card opened: that card keeps the escalation it opened with; new cards have none."""
    replies = [calls(send()), AIMessage("one"), calls(send("carol")), AIMessage("two")]
    async with open_service(
        db_url, ScriptedChatModel(replies=replies), registry, RecordingPlatform(admins={ADMIN})
    ) as h:
        await configure(h, registry, "escalate send after 10m to <@UDAVE>")
        await h.service.handle_message(message("send"))
        first = await one_card(h)
        await configure(h, registry, "escalate send off")
        stored = await h.approvals.get(first.id)
        assert stored.escalate_to == EscalationTarget(kind=TargetKind.USER, subject_id="UDAVE")
        await quiet(h)
        await due_now(db_url)
        assert await h.service.escalation.sweep() == 1
        await h.service.decide(first.id, actor("UDAVE"), Reject())
        await wait_until(lambda: bool(h.platform.answers), "the first answer")
        await h.service.handle_message(message("send again", conv=_other()))
        await wait_until(lambda: len(h.platform.cards) == 3, "the second card")
        [second] = await h.approvals.pending_in_thread(_other().thread_id)
        await h.service.tasks.join()
    assert second.escalation is None and second.escalate_at is None
