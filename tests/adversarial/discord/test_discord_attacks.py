"""Attacks through the real discord.py client: who may decide, hostile text, limits of cards and notices."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.adversarial.conftest import ModelRules
from tests.e2e.conftest import D_ALICE, D_BOB, D_CHANNEL, D_OWNER
from tests.e2e.discord.test_discord_flow import (
    _buttons,
    card_embed,
    click,
    mention,
    settle,
    wait_answer,
    wait_callback,
    wait_card,
)
from tests.standins.gemini import call, calls, parts

pytestmark = pytest.mark.e2e

SHOUT = "@everyone @here <@1700000000000000003> <@&1600000000000000020>"
NO_PINGS = {"parse": []}


def _post(url: str, body: object) -> dict[str, object]:
    return {"method": "POST", "url": url, "body": body}


async def test_the_guild_owner_may_decide_without_any_role(discord_bot, discord_api, target):
    """The owner has every permission (Discord computes it so) and may approve someone else's call."""
    await mention(discord_api, D_ALICE, "post widget")
    [card] = await wait_card(discord_api)
    await settle(discord_bot)  # the card's reference is stored (see the Slack race test)
    await click(discord_api, card, D_OWNER, "approve")
    await wait_answer(discord_api)
    await settle(discord_bot)
    assert len(target.requests) == 1
    assert f"<@{D_OWNER}>" in json.dumps(card_embed(discord_api, card))


async def test_a_stranger_cannot_decide_through_any_button_or_form(discord_bot, discord_api, target):
    """Bob is refused on Approve, Edit and Reject; with no form opened for him there is nothing to submit."""
    await mention(discord_api, D_ALICE, "post widget")
    [card] = await wait_card(discord_api)
    for action in ("approve", "edit", "reject"):
        await click(discord_api, card, D_BOB, action)
    await settle(discord_bot)
    callbacks = discord_api.requests_to("POST", r"/interactions/\d+/[^/]+/callback")
    modals = [c for c in callbacks if c.json and c.json.get("type") == 9]
    assert modals == []
    with pytest.raises(LookupError):
        await discord_api.submit_modal(f"cs:reject-modal:{card.approval_id}", D_BOB, {"reason": "x"})
    assert target.requests == [] and _buttons(discord_api.message(card.message_id))


async def test_mentions_in_arguments_reasons_and_descriptions_ping_nobody(
    discord_bot, discord_api, target, model_rules: ModelRules
):
    """Every message and card edit the bot sends, with @everyone from the model and the reviewer, has no pings."""
    model_rules.on(
        "post shout",
        parts(
            [
                {"text": f"Because {SHOUT} asked."},
                {"functionCall": {"name": "http_request", "args": _post(target.url(), {"msg": SHOUT})}},
            ]
        ),
    )
    await mention(discord_api, D_ALICE, "post shout")
    [card] = await wait_card(discord_api)
    await settle(discord_bot)
    await click(discord_api, card, D_ALICE, "reject")
    await discord_api.submit_modal(f"cs:reject-modal:{card.approval_id}", D_ALICE, {"reason": SHOUT})
    [answer] = await wait_answer(discord_api)
    await settle(discord_bot)
    assert "@everyone" in answer and "Rejected" in card_embed(discord_api, card)["title"]
    sent = [
        r
        for r in discord_api.requests
        if r.method in ("POST", "PATCH")
        and r.path.startswith("/channels/")
        and r.path.endswith(("/messages", "/messages/" + card.message_id))
    ]
    assert len(sent) >= 3  # the card, its update and the answer
    assert all(r.json.get("allowed_mentions") == NO_PINGS for r in sent), [r.json.get("allowed_mentions") for r in sent]
    assert all(not m.get("mention_everyone") and not m.get("mentions") for m in discord_api.messages(D_CHANNEL))


async def test_a_decided_card_stays_within_discords_embed_limit(
    discord_bot, discord_api, target, model_rules: ModelRules
):
    """A 5,000-character body, a 1,000-character 'why' and a 1,800-character reason: the card still shows the outcome."""
    reasoning = "I will now post the quarterly report to the archive. " * 19
    model_rules.on(
        "post report",
        parts(
            [
                {"text": reasoning},
                {"functionCall": {"name": "http_request", "args": _post(target.url(), {"report": "r" * 5000})}},
            ]
        ),
    )
    await mention(discord_api, D_ALICE, "post report")
    [card] = await wait_card(discord_api)
    await settle(discord_bot)
    await click(discord_api, card, D_ALICE, "reject")
    await discord_api.submit_modal(f"cs:reject-modal:{card.approval_id}", D_ALICE, {"reason": "not now " * 225})
    await wait_answer(discord_api)
    await settle(discord_bot)
    edits = discord_api.requests_to("PATCH", rf"/channels/{D_CHANNEL}/messages/{card.message_id}")
    assert edits and all(e.status < 300 for e in edits), [(e.status, e.response) for e in edits]
    assert "Rejected" in card_embed(discord_api, card)["title"]
    assert _buttons(discord_api.message(card.message_id)) == []


async def test_the_pending_notice_reaches_the_sender_when_many_cards_wait(
    discord_bot, discord_api, target, model_rules: ModelRules
):
    """Twenty gated calls in one turn, then Bob writes: he still gets the 'waiting for approval' notice."""
    model_rules.on(
        "post twenty",
        calls([("http_request", _post(target.url(), {"n": n})) for n in range(20)]),
    )
    await mention(discord_api, D_ALICE, "post twenty")
    await wait_card(discord_api, count=20)
    await mention(discord_api, D_BOB, "hello?")
    await discord_api.wait_for_request(
        "POST", r"/channels/\d+/messages$", lambda r: str((r.json or {}).get("content", "")).startswith(f"<@{D_BOB}>")
    )
    await settle(discord_bot)
    notices = [
        m["content"] for m in discord_api.messages(D_CHANNEL) if str(m.get("content", "")).startswith(f"<@{D_BOB}>")
    ]
    assert notices, "Bob got no notice"
    assert all(len(n) <= 2000 for n in notices)


async def test_deeply_nested_json_in_a_discord_edit_is_answered(discord_bot, discord_api, target):
    """2,400 characters of nested brackets in the Edit form get an ephemeral refusal with Edit again."""
    await mention(discord_api, D_ALICE, "post widget")
    [card] = await wait_card(discord_api)
    await click(discord_api, card, D_ALICE, "edit")
    submitted = await discord_api.submit_modal(
        f"cs:edit-modal:{card.approval_id}", D_ALICE, {"args": "[" * 1200 + "]" * 1200}
    )
    await asyncio.wait_for(wait_callback(discord_api, submitted), timeout=3)
    await settle(discord_bot)
    assert target.requests == [] and _buttons(discord_api.message(card.message_id))


async def test_invisible_and_bidi_characters_are_visible_on_the_discord_card(
    discord_bot, discord_api, target, model_rules: ModelRules
):
    """A right-to-left override or a zero-width space in the arguments is shown as an escape."""
    model_rules.on("post spoof", call("http_request", _post(target.url(), {"pay_to": "ACME-\u202e9876-5432"})))
    await mention(discord_api, D_ALICE, "post spoof")
    [card] = await wait_card(discord_api)
    description = card_embed(discord_api, card)["description"]
    assert "ACME-" in description and "\u202e" not in description
