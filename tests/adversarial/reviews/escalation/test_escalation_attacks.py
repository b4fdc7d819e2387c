"""Attacks on escalation (docs/decisions/0023): races with the click, the stop and the expiry, two replicas, targets nobody can reach.

The real Bolt app against the Slack stand-in. The bot's own escalation loop is stopped in
these tests and the test runs the same sweep itself (`EscalationSweeper.sweep`), so that the
moment of the claim is the test's to choose; a gate on the stand-in's `usergroups.users.list`
holds the sweeper between its claim and its copies (it asks Slack for a group's members there).
What must hold: a card decided, stopped or expired before its copies go out gets no copy and
no `escalated` row; each card escalates once whichever replica sweeps; a target that cannot be
reached still gets a card somewhere, and only the audience may decide through it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from adapters.slack import messages as msg
from countersign.server import BotServer
from tests.adversarial.slack_support import db_rows, ephemerals_to, runtime_of, sender
from tests.e2e import conftest as c
from tests.e2e.drivers import SlackDriver
from tests.support.barriers import GENEROUS_S, wait_until
from tests.support.gate import Gate

pytestmark = pytest.mark.e2e

ERIN_DM = "DUERIN"


async def _quiet(*bots: BotServer) -> None:
    """Stop the bots' own escalation loops: the test sweeps, at the moment it chooses."""
    for bot in bots:
        await runtime_of(bot).service.escalation.stop()


async def _due(bot: BotServer) -> None:
    await runtime_of(bot).database.pool.execute(
        "UPDATE approvals SET escalate_at = now() - interval '1 second' WHERE escalate_at IS NOT NULL"
    )


def _posts_to(slack, channel: str) -> list[Any]:
    """Cards (messages with buttons) the bot posted to `channel` (a user id means their DMs)."""
    return [
        call
        for call in slack.calls_to("chat.postMessage")
        if call.args.get("channel") == channel and call.args.get("blocks")
    ]


async def _escalation_rows(bot: BotServer) -> list[dict[str, Any]]:
    return await db_rows(bot, "SELECT * FROM audit_log WHERE kind = 'escalation' ORDER BY id")


@pytest.mark.parametrize("closed_by", ["approve", "stop"])
async def test_a_card_closed_after_the_claim_but_before_the_copies_gets_none(bot, events, slack, target, closed_by):
    """The sweeper has claimed the card and asks Slack for the group's members; meanwhile alice approves it (or stops
    the turn). The group must get no copy with live buttons, and the audit log no `escalated` row for a card decided
    before anything was posted (decision 0023: "nothing is posted when the approval was decided after the claim")."""
    driver = SlackDriver(bot, events, slack)
    reply = await driver.command("carol", "escalate", tool="http_request", after="10s", group="SOPS")
    assert "Updated escalation" in reply, reply
    await driver.ask("alice", "post widget")
    [card] = await driver.cards()
    await driver.settle()
    await _quiet(bot)
    members = slack.gates["usergroups.users.list"] = Gate()
    members.arm()
    await _due(bot)
    sweeping = asyncio.create_task(runtime_of(bot).service.escalation.sweep())
    await members.wait_arrived(GENEROUS_S)  # claimed; the copies are not out yet
    [row] = await db_rows(bot, "SELECT status, escalation FROM approvals")
    assert row == {"status": "pending", "escalation": "claimed"}
    if closed_by == "approve":
        await driver.approve(card, "alice")
        await driver.answer()
    else:
        assert (await driver.stop_command("alice")).startswith("Stopped. 1 card")
        await driver.stopped_notice()
    members.release()
    assert await asyncio.wait_for(sweeping, GENEROUS_S) == 1  # it did claim one
    await driver.settle()
    assert _posts_to(slack, "UERIN") == [], "a closed card was escalated"
    assert await _escalation_rows(bot) == []
    [row] = await db_rows(bot, "SELECT status FROM approvals")
    assert row["status"] == ("approved" if closed_by == "approve" else "stopped")
    assert len(target.requests) == (1 if closed_by == "approve" else 0)
    assert not driver.card_has_buttons(card)


async def test_a_card_past_its_expiry_is_never_escalated_even_before_the_expiry_sweep(bot, events, slack, target):
    """Expiry due before the escalation, both past (a replica was down, or its expiry sweep is late): the escalation
    sweep must not claim the card, which is expired already (a vote on it is refused as expired); the group gets no
    copy, the card then expires as usual, and the audit log shows the expiry only."""
    driver = SlackDriver(bot, events, slack)
    await driver.command("carol", "escalate", tool="http_request", after="10s", group="SOPS")
    await driver.command("carol", "expiry", duration="10s")
    await driver.ask("alice", "post widget")
    [card] = await driver.cards()
    await driver.settle()
    runtime = runtime_of(bot)
    await _quiet(bot)
    await runtime.service.expiry.stop()
    await runtime.database.pool.execute(
        "UPDATE approvals SET expires_at = now() - interval '2 seconds', escalate_at = now() - interval '1 second'"
    )
    assert await runtime.service.escalation.sweep() == 0, "an expired card was claimed for escalation"
    told = await driver.approve(card, "carol", private=True)
    assert told is not None and "expired" in told, told
    runtime.service.expiry.start()
    await wait_until(lambda: "Expired" in driver.card_text(card), "the card expired", GENEROUS_S)
    await driver.settle()
    assert _posts_to(slack, "UERIN") == [] and await _escalation_rows(bot) == []
    [row] = await db_rows(bot, "SELECT status, escalation FROM approvals")
    assert row == {"status": "expired", "escalation": "waiting"}
    assert target.requests == []


async def test_an_unreachable_target_gets_its_copy_in_the_conversation_and_may_decide_there(bot, events, slack, target):
    """erin's DMs are closed: the copy goes to the conversation naming her; when even that fails the claim waits for
    its lease and the next sweep posts it once. bob is still refused on that copy; erin approves there."""
    driver = SlackDriver(bot, events, slack)
    await driver.command("carol", "escalate", tool="http_request", after="10s", user="erin")
    await driver.ask("alice", "post widget")
    [card] = await driver.cards()
    await driver.settle()
    await _quiet(bot)
    slack.forbid_channel(ERIN_DM)
    slack.forbid_channel(c.CHANNEL)  # not even the conversation can be written in, for now
    await _due(bot)
    assert await runtime_of(bot).service.escalation.sweep() == 1
    assert await _escalation_rows(bot) == []  # nothing went out: not escalated (yet)
    [row] = await db_rows(bot, "SELECT escalation FROM approvals")
    assert row["escalation"] == "claimed"
    assert await runtime_of(bot).service.escalation.sweep() == 0  # the lease holds it
    slack._forbidden.discard(c.CHANNEL)
    await runtime_of(bot).database.pool.execute("UPDATE approvals SET escalation_lease = now() - interval '1 second'")
    assert await runtime_of(bot).service.escalation.sweep() == 1
    copy = await driver.copy_in_channel(c.CHANNEL, count=2)
    assert copy.approval_id == card.approval_id and copy.message != card.message
    [posted] = [p for p in _posts_to(slack, c.CHANNEL) if p.response.get("ts") == copy.message]
    assert "<@UERIN>" in posted.args["text"]
    [escalated] = await _escalation_rows(bot)
    assert escalated["detail"]["copies"] == 1 and escalated["detail"]["to"] == {"kind": "user", "id": "UERIN"}
    assert await driver.approve(copy, "bob", private=True) == msg.REFUSED_NOT_PERMITTED
    await driver.approve(copy, "erin")
    await driver.answer()
    await driver.settle()
    assert len(target.requests) == 1
    [decided] = await db_rows(bot, "SELECT * FROM audit_log WHERE kind = 'decision' ORDER BY id")
    assert decided["actor_id"] == "UERIN" and decided["detail"]["via"] == "escalation"


async def test_two_replicas_sweeping_at_once_post_one_copy(settings, slack, target):
    """Two bots on one database sweep the same due escalation at the same moment: one copy, one `escalated` row."""
    async with BotServer(settings) as one, BotServer(settings) as two, sender(one.port) as to_one:
        driver = SlackDriver(one, to_one, slack)
        await driver.command("carol", "escalate", tool="http_request", after="10s", user="erin")
        await driver.ask("alice", "post widget")
        [card] = await driver.cards()
        await driver.settle()
        await _quiet(one, two)
        await _due(one)
        swept = await asyncio.gather(*(runtime_of(bot).service.escalation.sweep() for bot in (one, two, one, two)))
        assert sum(swept) == 1
        copy = await driver.copy_in_dm("erin")
        await driver.approve(copy, "erin")
        await driver.answer()
        await driver.settle()
        await runtime_of(two).service.tasks.join()
        assert len(_posts_to(slack, "UERIN")) == 1 and len(await _escalation_rows(one)) == 1
        assert copy.approval_id == card.approval_id
    assert len(target.requests) == 1


async def test_the_channel_audience_decides_only_its_own_calls_of_a_pause(bot, events, slack, target):
    """A pause of two calls, only `http_request` escalating to #approvals: bob (nobody) clicks Approve all and
    "Approve and trust" on the copy there. He approves that one call (audited via escalation), trusts nothing, and
    the other call stays pending with the reason; the same click in the conversation's channel decides nothing."""
    slack.add_channel("CAPPROVALS", name="approvals")
    driver = SlackDriver(bot, events, slack)
    await driver.command("carol", "policy", tool="calculator", mode="review")
    await driver.command("carol", "escalate", tool="http_request", after="10s", channel="CAPPROVALS")
    await driver.ask("alice", "batch widget")
    first, _ = await driver.cards(count=2)
    await driver.settle()
    assert driver.has_batch(first)
    told = await driver.approve_all(first, "bob")  # in the conversation: not the audience, nothing decided
    assert "Left pending: `http_request` (call 1)" in told and "Left pending: `calculator` (call 2)" in told, told
    await _quiet(bot)
    await _due(bot)
    assert await runtime_of(bot).service.escalation.sweep() == 1
    copy = await driver.copy_in_channel("CAPPROVALS")
    assert copy.approval_id == first.approval_id and driver.has_batch(copy)
    told = await driver.approve_all(copy, "bob")
    assert "Approved: `http_request` (call 1)" in told, told
    assert "Left pending: `calculator` (call 2)" in told, told
    await driver.settle()
    rows = await db_rows(bot, "SELECT status FROM approvals ORDER BY position")
    assert [r["status"] for r in rows] == ["approved", "pending"]
    [decided] = await db_rows(bot, "SELECT * FROM audit_log WHERE kind = 'decision' ORDER BY id")
    assert decided["actor_id"] == c.BOB and decided["detail"]["via"] == "escalation" and decided["detail"]["batch"]
    assert target.requests == []  # the pause waits for its second call
    assert not any("trust" in t.lower() for t in ephemerals_to(slack, c.BOB))
    assert await db_rows(bot, "SELECT id FROM trust_grants") == []
