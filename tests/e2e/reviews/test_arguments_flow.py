"""What an approver sees before deciding, end to end, the same scenarios on Slack and on Discord.

Every key and value that will run is on the card (long values shortened visibly, in the tool's
own order) or one click away (All arguments); a call whose arguments the platform cannot show in
full cannot be approved there, by its buttons, a forged click, Approve all, an escalated copy or
Approve and trust (docs/decisions/0034-arguments-approvers-can-see.md).
"""

from __future__ import annotations

import json

import pytest

from bot.base.conversation import Actor
from bot.reviews.decisions import Edit, EditedAction
from tests.e2e import conftest as c
from tests.e2e.agent_script import EVIL, HUGE_BODY_CHARS, ORDERED_BODY
from tests.e2e.drivers import DiscordDriver, SlackDriver
from tests.e2e.reviews.test_escalation_and_batch_flow import _escalate_soon, _runtime
from tests.e2e.reviews.trust.test_trust_flow import approve_and_trust, trust

pytestmark = pytest.mark.e2e


@pytest.fixture(params=["slack", "discord"])
def driver(request):
    if request.param == "slack":
        return SlackDriver(
            request.getfixturevalue("bot"), request.getfixturevalue("events"), request.getfixturevalue("slack")
        )
    return DiscordDriver(request.getfixturevalue("discord_bot"), request.getfixturevalue("discord_api"))


def _key(name: str) -> str:
    """A key as the card's payload (JSON of blocks or embeds) spells it: `\\"name\\"`."""
    return json.dumps(f'"{name}"')[1:-1]


async def _refusals(driver, outcome: str) -> int:
    return await _runtime(driver).database.pool.fetchval(
        "SELECT count(*) FROM audit_log WHERE kind = 'refused' AND outcome = $1", outcome
    )


async def test_a_long_body_comes_after_method_and_headers_on_the_card(driver, target):
    """The card lists method, url and headers before a shortened 20,000-character body; approving runs exactly that."""
    await driver.ask("alice", "longbody 20000")
    [card] = await driver.cards()
    shown = driver.card_text(card)
    assert "x-pay-to" in shown.lower() and "eve" in shown  # (a header name's case is the tool's canonical one)
    assert (
        shown.index(_key("method"))
        < shown.index(_key("url"))
        < shown.index(_key("headers"))
        < shown.index(_key("body"))
    )
    assert "characters)" in shown  # the body says how much of it the card does not show
    assert driver.actions(card) == ["approve", "edit", "reject", "args"]
    await driver.approve(card, "alice")
    await driver.answer()
    [request] = target.requests
    assert {name.lower(): value for name, value in request.headers.items()}["x-pay-to"] == "eve"
    assert request.json == "x" * 20_000


async def test_nested_keys_are_shown_in_the_order_the_request_sends_them(driver, target):
    """Headers and a body whose keys are not ordered by length: the card lists them as sent, and that is what runs."""
    await driver.ask("alice", "ordered")
    [card] = await driver.cards()
    shown = driver.card_text(card)
    headers = '"headers": {"x-sudo": "1", "authorization": "Bearer t", "content-type": "application/json"}'
    body = '"body": {"zeta": 1, "alpha": 2, "mid": 3, "b": [{"yy": 1, "x": 2}]}'
    assert json.dumps(headers)[1:-1] in shown and json.dumps(body)[1:-1] in shown, shown
    await driver.approve(card, "alice")
    await driver.answer()
    [request] = target.requests
    ours = [name.lower() for name in request.headers if name.lower() in {"x-sudo", "authorization", "content-type"}]
    assert ours == ["x-sudo", "authorization", "content-type"]
    assert json.dumps(request.json) == json.dumps(ORDERED_BODY)


async def test_the_address_at_the_end_of_a_long_list_is_in_all_arguments(driver, target):
    """An address after 400 others is not on the card, but All arguments shows it, in the tool's order."""
    await driver.ask("alice", "longcc 400")
    [card] = await driver.cards()
    assert EVIL not in driver.card_text(card)
    everything = await driver.show_all(card, "bob")  # anyone who sees the card may look
    assert f'"{EVIL}"' in everything and "person399@example.com" in everything
    assert everything.index('"method"') < everything.index('"url"') < everything.index('"body"')
    assert json.loads(everything.replace("\u200b", ""))["body"]["cc"][-1] == EVIL
    assert target.requests == []


async def test_a_call_too_long_to_show_cannot_be_approved(driver, target):
    """No Approve on the card, which says why; a forged approval is refused privately and changes nothing; Reject works."""
    await driver.ask("alice", "hugebody")
    [card] = await driver.cards()
    assert driver.actions(card) == ["edit", "reject"]
    shown = driver.card_text(card)
    assert "Too long to review" in shown and f"{HUGE_BODY_CHARS:,}"[:5] in shown  # "310,0..." characters
    told = await driver.forge(card, "alice", "approve")
    if driver.platform == "slack":
        assert "cannot be approved in Slack" in told and "Nothing was changed" in told
        assert await _refusals(driver, "unshowable") == 1
    else:  # Discord sends no click on a button a message does not show; a forged one is refused as such
        assert "not one I can act on" in told
    await driver.settle()
    assert target.requests == []
    assert driver.card_has_buttons(card) and "Approved" not in driver.card_text(card)
    assert driver.actions(card) == ["edit", "reject"]


async def test_approve_all_leaves_a_call_too_long_to_show_and_says_why(driver, target):
    """Approve all approves the sum and leaves the huge POST pending, telling the clicker why."""
    await driver.command("carol", "policy", tool="calculator", mode="review")
    await driver.ask("alice", "hugebatch")
    first, second = await driver.cards(count=2)
    assert driver.has_batch(first)
    told = await driver.approve_all(first, "alice")
    assert "Approved: `calculator` (call 2)" in told, told
    assert "Left pending: `http_request` (call 1)" in told
    assert f"cannot be approved in {driver.platform.capitalize()}" in told and "Nothing was changed" in told
    await driver.settle()
    assert "Approved" in driver.card_text(second)
    assert driver.actions(first) == ["edit", "reject"] and target.requests == []
    assert await _refusals(driver, "unshowable") == 1


async def test_an_escalated_copy_of_a_call_too_long_to_show_offers_no_approve_either(driver, target):
    """The copy posted to erin has the same card: no Approve, the line saying why; her forged approval changes nothing."""
    await driver.command("carol", "escalate", tool="http_request", after="10s", user="erin")
    await driver.ask("alice", "hugebody")
    [card] = await driver.cards()
    await _escalate_soon(driver)
    copy = await driver.copy_in_dm("erin")
    assert copy.approval_id == card.approval_id
    assert driver.actions(copy) == ["edit", "reject"] and "Too long to review" in driver.card_text(copy)
    told = await driver.forge(copy, "erin", "approve")
    assert "cannot be approved" in told or "not one I can act on" in told
    await driver.settle()
    assert target.requests == [] and "Approved" not in driver.card_text(card)


async def test_approve_and_trust_follows_the_same_rule(driver, target):
    """A card offering trust drops Approve and trust too when it cannot show everything; a forged trust click is refused."""
    await trust(driver, "carol", "set", tool="http_request", up_to="30m", matching="method,url")
    await driver.ask("alice", "hugebody")
    [card] = await driver.cards()
    assert driver.actions(card) == ["edit", "reject"]
    told = await driver.forge(card, "alice", "trust")
    assert "cannot be approved" in told or "not one I can act on" in told
    await driver.settle()
    assert target.requests == []
    listed = await trust(driver, "carol", "list")
    assert "No live trusts" in listed


async def test_a_partial_trust_names_the_arguments_it_leaves_free(driver, target):
    """Trust matching method and url: the card and `trust list` both say headers and body stay free."""
    await trust(driver, "carol", "set", tool="http_request", up_to="30m", matching="method,url")
    await driver.ask("alice", "post widget")
    [card] = await driver.cards()
    shown = driver.card_text(card)
    assert "binds only `method`, `url`" in shown and "`headers`, `body`" in shown
    await approve_and_trust(driver, card, "alice")
    await driver.answer()
    assert "`headers`, `body` stay free" in driver.card_text(card)
    listed = await trust(driver, "carol", "list")
    assert "any `headers`, `body` (free)" in listed, listed


async def test_a_discord_page_drawn_before_an_edit_leads_to_the_arguments_as_they_are_now(
    discord_bot, discord_api, target
):
    """Next on a page of the old arguments shows the first page of the edited ones, saying they changed."""
    driver = DiscordDriver(discord_bot, discord_api)
    await driver.command("carol", "quorum", tool="http_request", count=2)
    await driver.ask("alice", "longcc 400")
    [card] = await driver.cards()
    opened = await discord_api.click_button(
        card.message, f"cs:args:{card.approval_id}", int(driver.user("bob")), guild_id=c.D_GUILD, channel_id=c.D_CHANNEL
    )
    await discord_api.wait_for_request("POST", rf"/interactions/{opened.id}/[^/]+/callback")
    page = discord_api.original_response(opened.id)
    assert page is not None and EVIL not in page["embeds"][0]["description"]  # the address is on a later page
    edited = {"method": "POST", "url": target.url(), "body": {"subject": "hi", "cc": ["ops@example.com"]}}
    carol = Actor(platform="discord", workspace_id=str(c.D_GUILD), user_id=str(c.D_CAROL), display_name="carol")
    edit = Edit(edited_action=EditedAction(name="http_request", args=edited))  # too long for the Edit form
    assert (await _runtime(driver).service.decide(card.approval_id, carol, edit)).is_pending  # one more vote needed
    [_, after] = [b for row in page["components"] for b in row["components"]]
    clicked = await discord_api.click_button(
        page["id"], after["custom_id"], int(driver.user("bob")), guild_id=c.D_GUILD, channel_id=c.D_CHANNEL
    )
    await discord_api.wait_for_request("POST", rf"/interactions/{clicked.id}/[^/]+/callback")
    now = discord_api.message(page["id"])
    assert "The arguments changed" in now["content"]
    assert "ops@example.com" in now["embeds"][0]["description"] and now["embeds"][0]["title"].endswith("page 1 of 1")
    assert target.requests == []
