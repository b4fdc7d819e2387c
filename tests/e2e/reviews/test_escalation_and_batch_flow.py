"""Escalation and Approve all / Reject all end to end, the same scenarios on Slack and on Discord (docs/decisions/0023)."""

from __future__ import annotations

import asyncpg
import pytest

from countersign.server import BotServer
from tests.e2e import conftest as c
from tests.e2e.drivers import DiscordDriver, SlackDriver
from tests.support.barriers import wait_until_async

pytestmark = pytest.mark.e2e


@pytest.fixture(params=["slack", "discord"])
def driver(request):
    if request.param == "slack":
        return SlackDriver(
            request.getfixturevalue("bot"), request.getfixturevalue("events"), request.getfixturevalue("slack")
        )
    return DiscordDriver(request.getfixturevalue("discord_bot"), request.getfixturevalue("discord_api"))


async def _sql(db_url: str, statement: str) -> None:
    connection = await asyncpg.connect(db_url)
    try:
        await connection.execute(statement)
    finally:
        await connection.close()


async def _escalations(db_url: str) -> list[str | None]:
    connection = await asyncpg.connect(db_url)
    try:
        return [row["escalation"] for row in await connection.fetch("SELECT escalation FROM approvals")]
    finally:
        await connection.close()


def _runtime(driver):
    bot: BotServer = driver.bot
    assert bot.runtime is not None
    return bot.runtime


async def _escalate_soon(driver) -> None:
    """The card's escalation falls due in a moment (as if its delay had passed); nobody writes meanwhile."""
    await _runtime(driver).database.pool.execute(
        "UPDATE approvals SET escalate_at = now() + interval '300 milliseconds' WHERE escalate_at IS NOT NULL"
    )


# --- escalation -------------------------------------------------------------------------------------


async def test_an_undecided_card_escalates_with_no_traffic_and_its_target_decides(driver, target):
    """Escalated to erin's DMs by the sweeper alone; the original says so; bob is refused; erin approves on her copy."""
    reply = await driver.command("carol", "escalate", tool="http_request", after="10s", user="erin")
    assert "Updated escalation for `http_request`: after 10s to <@" in reply, reply
    assert "escalates after 10s to" in await driver.command("bob", "show")
    await driver.ask("alice", "post widget")
    [card] = await driver.cards()
    await _escalate_soon(driver)
    copy = await driver.copy_in_dm("erin")  # posted by the sweeper, without any message or click
    assert copy.approval_id == card.approval_id
    await wait_until_async(
        lambda: _is_escalated_everywhere(driver, card, copy), "the original and the copy saying Escalated"
    )
    refused = await driver.approve(card, "bob", private=True)
    assert "can't decide" in refused and target.requests == []
    await driver.approve(copy, "erin")
    await driver.answer()
    await driver.settle()
    assert len(target.requests) == 1
    for each in (card, copy):
        assert "Approved" in driver.card_text(each) and driver.user("erin") in driver.card_text(each)
    audit = await driver.command("carol", "audit", tool="http_request")
    [escalated] = [line for line in audit.splitlines() if "escalation · escalated · system" in line]
    assert f"to <@{driver.user('erin')}>" in escalated
    assert any("decision · approved" in line and driver.user("erin") in line for line in audit.splitlines())


async def _is_escalated_everywhere(driver, *cards) -> bool:
    await driver.settle()
    return all("Escalated" in driver.card_text(card) for card in cards)


async def test_a_card_decided_before_its_time_never_escalates(driver, db_url, target):
    """Approved before the delay: when its time passes, the sweeper finds nothing and nobody gets a copy."""
    await driver.command("carol", "escalate", tool="http_request", after="10s", user="erin")
    await driver.ask("alice", "post widget")
    [card] = await driver.cards()
    await driver.approve(card, "alice")
    await driver.answer()
    await _sql(db_url, "UPDATE approvals SET escalate_at = now() - interval '1 second'")
    assert await _runtime(driver).service.escalation.sweep() == 0
    assert await _escalations(db_url) == ["waiting"]
    assert "Escalated" not in driver.card_text(card) and len(target.requests) == 1


async def test_expiry_still_applies_to_an_escalated_card(driver, target):
    """Escalated to a channel and still undecided: the card expires on time, and every copy says Expired."""
    channel = _escalation_channel(driver)
    await driver.command("carol", "escalate", tool="http_request", after="10s", channel=channel)
    await driver.command("carol", "expiry", duration="1h")
    await driver.ask("alice", "post widget")
    [card] = await driver.cards()
    await _escalate_soon(driver)
    copy = await driver.copy_in_channel(channel)
    await _runtime(driver).database.pool.execute(
        "UPDATE approvals SET expires_at = now() + interval '300 milliseconds'"
    )
    _runtime(driver).service.expiry.wake()
    assert "expired without a decision" in await driver.answer()
    await driver.settle()
    for each in (card, copy):
        assert "Expired" in driver.card_text(each) and "Escalated" in driver.card_text(each)
    assert target.requests == []


async def test_a_channel_audience_decides_from_that_channel_only(driver, target):
    """Escalated to a channel: bob is refused on the original card, and may reject from the copy in that channel."""
    channel = _escalation_channel(driver)
    await driver.command("carol", "escalate", tool="http_request", after="10s", channel=channel)
    await driver.ask("alice", "post widget")
    [card] = await driver.cards()
    await _escalate_soon(driver)
    copy = await driver.copy_in_channel(channel)
    assert "can't decide" in await driver.approve(card, "bob", private=True)
    await driver.approve(copy, "bob")
    await driver.answer()
    assert len(target.requests) == 1


async def test_the_escalation_audience_may_approve_but_not_edit(driver, target):
    """bob may decide only as the escalation channel's audience: his Edit click and edit form are refused, his Approve counts."""
    channel = _escalation_channel(driver)
    await driver.command("carol", "escalate", tool="http_request", after="10s", channel=channel)
    await driver.command("carol", "quorum", tool="http_request", count=2)
    await driver.command("carol", "approvers", action="add", user="dave", tool="http_request")
    await driver.ask("alice", "post widget")
    [card] = await driver.cards()
    await _escalate_soon(driver)
    copy = await driver.copy_in_channel(channel)
    refused = await driver.edit_refused(copy, "bob")
    assert "escalated to you" in refused and "not edit" in refused, refused
    refused = await driver.forged_edit(copy, "bob", {"method": "POST", "url": target.url(), "body": {"name": "bob"}})
    assert "escalated to you" in refused, refused
    # An approver and the requester still edit (each edit is its editor's approval of new arguments).
    await driver.edit(copy, "dave", {"method": "POST", "url": target.url(), "body": {"name": "dave"}})
    await driver.edit(card, "alice", {"method": "POST", "url": target.url(), "body": {"name": "alice"}})
    assert target.requests == []
    await driver.approve(copy, "bob")
    await driver.answer()
    [request] = target.requests
    assert request.json == {"name": "alice"}, request
    audit = await driver.command("carol", "audit", tool="http_request")
    refusals = [line for line in audit.splitlines() if "escalation_no_edit" in line]
    assert len(refusals) == 2, audit


def _escalation_channel(driver) -> str:
    if driver.platform == "slack":
        driver.slack.add_channel("CESC", name="oncall")
        return "CESC"
    return str(c.D_THREAD)  # a thread of the server: a channel anyone there can click in


async def test_a_group_or_role_target_reaches_its_members(driver, target):
    """Slack: the user group's members get the card in their DMs; Discord: the conversation's copy pings the role."""
    await driver.command("carol", "escalate", tool="http_request", after="10s", **driver.ops)
    await driver.ask("alice", "post widget")
    [card] = await driver.cards()
    await _escalate_soon(driver)
    if driver.platform == "slack":
        copy = await driver.copy_in_dm("erin")
    else:
        copy = await driver.copy_in_channel(str(c.D_CHANNEL), count=2)
        posted = driver.api.message(copy.message)
        assert posted["mention_roles"] == [str(c.D_OPS)] and posted["mentions"] == []
        assert f"<@&{c.D_OPS}>" in posted["content"]
    assert copy.message != card.message
    assert "can't decide" in await driver.approve(copy, "bob", private=True)
    await driver.approve(copy, "erin")
    await driver.answer()
    assert len(target.requests) == 1


async def test_slack_escalation_due_while_stopped_happens_once_after_a_restart(settings, db_url, slack, target):
    """A Slack bot stopped before the delay and started after it escalates the card once."""
    from tests.standins.slack_events import SlackEventSender

    url = "http://127.0.0.1:{}/slack/events"
    async with BotServer(settings) as first, SlackEventSender(url.format(first.port), c.SIGNING_SECRET) as events:
        driver = SlackDriver(first, events, slack)
        await driver.command("carol", "escalate", tool="http_request", after="10s", user="erin")
        await driver.ask("alice", "post widget")
        [card] = await driver.cards()
    await _sql(db_url, "UPDATE approvals SET escalate_at = now() - interval '1 second'")
    async with BotServer(settings) as second, SlackEventSender(url.format(second.port), c.SIGNING_SECRET) as events:
        driver = SlackDriver(second, events, slack)
        copy = await driver.copy_in_dm("erin")
        await wait_until_async(lambda: _all_escalated(db_url), "the escalation recorded")
        assert await _runtime(driver).service.escalation.sweep() == 0
        await driver.approve(copy, "erin")
        await driver.answer()
    copies = [p for p in slack.calls_to("chat.postMessage") if p.args.get("channel") == "UERIN"]
    assert len(copies) == 1 and copy.approval_id == card.approval_id
    assert len(target.requests) == 1


async def test_discord_escalation_due_while_stopped_happens_once_after_a_restart(db_url, gemini, target, discord_api):
    """A Discord bot stopped before the delay and started after it escalates the card once."""
    from tests.e2e.conftest import make_discord_settings
    from tests.standins.discord_api import point_discord_py_at

    settings = make_discord_settings(db_url, gemini, target, discord_api)
    with point_discord_py_at(discord_api.api_url):
        async with BotServer(settings) as first:
            driver = DiscordDriver(first, discord_api)
            await driver.command("carol", "escalate", tool="http_request", after="10s", user="erin")
            await driver.ask("alice", "post widget")
            [card] = await driver.cards()
        await _sql(db_url, "UPDATE approvals SET escalate_at = now() - interval '1 second'")
        async with BotServer(settings) as second:
            driver = DiscordDriver(second, discord_api)
            copy = await driver.copy_in_dm("erin")
            await wait_until_async(lambda: _all_escalated(db_url), "the escalation recorded")
            assert await _runtime(driver).service.escalation.sweep() == 0
            await driver.approve(copy, "erin")
            await driver.answer()
    dm = discord_api.dm_channel_id(c.D_ERIN)
    copies = [
        r for r in discord_api.requests_to("POST", rf"/channels/{dm}/messages$") if (r.json or {}).get("components")
    ]
    assert len(copies) == 1 and copy.approval_id == card.approval_id
    assert len(target.requests) == 1


async def _all_escalated(db_url: str) -> bool:
    return await _escalations(db_url) == ["escalated"]


# --- Approve all / Reject all ------------------------------------------------------------------------


async def _pause_of_two(driver, *, approver_for_calculator: str | None = None):
    """`calculator` reviewed too (optionally approved by one person only); a request for a POST and a sum."""
    await driver.command("carol", "policy", tool="calculator", mode="review")
    if approver_for_calculator:
        await driver.command("carol", "approvers", action="add", user=approver_for_calculator, tool="calculator")
    await driver.ask("alice", "batch widget")
    cards = await driver.cards(count=2)
    assert len(cards) == 2
    return cards


async def test_approve_all_decides_the_permitted_calls_and_leaves_the_others(driver, target):
    """carol (admin) approves all: the POST is approved, the sum (dave approves it) stays and she is told why."""
    first, second = await _pause_of_two(driver, approver_for_calculator="dave")
    assert driver.has_batch(first) and not driver.has_batch(second)
    told = await driver.approve_all(first, "carol")
    assert "Approved: `http_request` (call 1)" in told, told
    assert "Left pending: `calculator` (call 2)" in told and "not on the approvers list" in told
    await driver.settle()
    assert "Approved" in driver.card_text(first) and not driver.has_batch(first)
    assert target.requests == []  # the pause waits for its second call
    await driver.approve(second, "dave")
    answer = await driver.answer()
    assert '"4"' in answer or "4" in answer
    assert len(target.requests) == 1


async def test_reject_all_rejects_every_call_with_one_reason(driver, target):
    """The requester rejects all with a reason: both cards say Rejected, nothing runs, the model reads the reason twice."""
    first, second = await _pause_of_two(driver)
    told = await driver.reject_all(first, "alice", "not today")
    assert "Rejected: `http_request` (call 1), `calculator` (call 2)" in told, told
    answer = await driver.answer()
    assert answer.count("not today") == 2
    await driver.settle()
    for card in (first, second):
        assert "Rejected" in driver.card_text(card)
    assert not driver.has_batch(first) and target.requests == []


async def test_reject_all_by_someone_who_may_decide_nothing_is_refused_at_once(driver, target):
    """bob may decide neither call: Reject all says so instead of opening its form; the batch stays."""
    first, _ = await _pause_of_two(driver)
    told = await driver.reject_all(first, "bob", "no")
    assert "can't decide" in told
    assert driver.has_batch(first) and target.requests == []


async def test_a_double_click_on_approve_all_decides_nothing_twice(driver, target):
    """Two Approve all clicks at once: each call is decided once (the other click finds it decided); one run, one answer."""
    first, second = await _pause_of_two(driver)
    told = await driver.approve_all(first, "alice", clicks=2)
    assert told.count("`http_request` (call 1)") == 2 and told.count("`calculator` (call 2)") == 2, told
    assert "Already decided before your click" in told
    await driver.answer()
    await driver.settle()
    assert not driver.has_batch(first) and len(target.requests) == 1
    assert "Approved" in driver.card_text(second)
    decisions = await _runtime(driver).database.pool.fetchval("SELECT count(*) FROM audit_log WHERE kind = 'decision'")
    assert decisions == 2
