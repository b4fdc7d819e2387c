"""Trust for a while (docs/decisions/0022) end to end, the same scenarios on Slack and on Discord.

The real Bolt app and the real discord.py client against the stand-ins: carol (an admin) sets
`/countersign trust`, alice asks for a gated `http_request` POST ("post <name>"), a card offers
"Approve and trust for 30 minutes", and later calls in the same conversation run without a card
only while the trust covers them exactly.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from adapters.slack import blocks
from countersign.server import BotServer
from tests.e2e import conftest as c
from tests.e2e.drivers import CardHandle, DiscordDriver, SlackDriver, is_discord_card, slack_buttons
from tests.standins.slack_events import SlackEventSender

pytestmark = pytest.mark.e2e

_TRUST_ID = re.compile(r"`([0-9a-f]{8})`")


@pytest.fixture(params=["slack", "discord"])
def driver(request):
    if request.param == "slack":
        return SlackDriver(
            request.getfixturevalue("bot"), request.getfixturevalue("events"), request.getfixturevalue("slack")
        )
    return DiscordDriver(request.getfixturevalue("discord_bot"), request.getfixturevalue("discord_api"))


async def trust(driver, who: str, sub: str, **options: Any) -> str:
    """`/countersign trust ...` as each platform sends it: words on Slack, a subcommand group on Discord.

    `sub` is `set` (options `tool`, `up_to`, `matching`), `list` or `revoke` (option `id`).
    """
    if driver.platform == "slack":
        if sub == "set":
            words = ["trust", options["tool"], "up-to", options["up_to"]]
            if "matching" in options:
                words += ["matching", options["matching"]]
        else:
            words = ["trust", sub, *([options["id"]] if "id" in options else [])]
        url = driver.slack.new_response_url(c.CHANNEL, user=driver.user(who))
        before = len(driver.slack.calls_to("response_url"))
        delivery = await driver.events.slash_command("/countersign", " ".join(words), driver.user(who), c.CHANNEL, url)
        assert delivery.status == 200
        calls = await driver.slack.wait_for("response_url", count=before + 1)
        return str(calls[-1].args.get("text", ""))
    names = {"up_to": "up-to"}
    leaf = [{"name": names.get(k, k), "type": 3, "value": v} for k, v in options.items()]
    interaction = await driver.api.invoke_command(
        "countersign",
        int(driver.user(who)),
        channel_id=c.D_CHANNEL,
        options=[{"type": 2, "name": "trust", "options": [{"type": 1, "name": sub, "options": leaf}]}],
    )
    await driver.api.wait_for_request("POST", rf"/webhooks/{c.D_APP}/{interaction.token}")
    return "\n".join(f["content"] for f in driver.api.followups(interaction.id))


async def say(driver, who: str, text: str) -> None:
    """A message in the conversation alice started: a reply in its thread (Slack), a mention in the channel (Discord)."""
    if driver.platform == "slack" and driver._thread is not None:
        await driver.events.message(c.CHANNEL, driver.user(who), text, thread_ts=driver._thread)
        return
    await driver.ask(who, text)


async def approve_and_trust(driver, card: CardHandle, who: str) -> None:
    """Click "Approve and trust" and wait for the card's redraw."""
    if driver.platform == "slack":
        updates = driver._updates(card)
        await driver._click(card, who, blocks.ACTION_TRUST)
        await driver.slack.wait_for("chat.update", lambda a: a.get("ts") == card.message, count=updates + 1)
        await driver.settle()
        return
    before = driver._patches(card)
    await driver._click(card, who, "trust")
    await driver._card_redrawn(card, before)


def shown(driver, card: CardHandle) -> str:
    """Everything the card shows now, its buttons included."""
    if driver.platform == "slack":
        return driver.card_text(card)
    return json.dumps(driver.api.message(card.message))


async def granted(driver, target, who: str = "alice", *, approver: str = "alice") -> CardHandle:
    """alice asks for `post widget`; `approver` approves and trusts its card; the call runs once."""
    await say(driver, who, "post widget")
    [card] = await driver.cards()
    assert "Approve and trust for 30 minutes" in shown(driver, card)
    await approve_and_trust(driver, card, approver)
    await driver.answer()
    assert len(target.requests) == 1
    return card


def card_posts(driver) -> int:
    """Cards posted so far; a status line with Stop (a slow turn, on a busy machine) is none."""
    if driver.platform == "slack":
        return len([x for x in driver.slack.calls_to("chat.postMessage") if slack_buttons(x.args.get("blocks"))])
    posts = driver.api.requests_to("POST", r"/channels/\d+/messages$")
    return len([r for r in posts if is_discord_card(r)])


async def runs_without_a_card(driver, target, text: str, who: str = "alice") -> None:
    """`text` in the conversation is answered with a result and posts no card."""
    runs, cards = len(target.requests), card_posts(driver)
    answers = _answers(driver)
    await say(driver, who, text)
    await driver.answer(count=answers + 1)
    await driver.settle()
    assert len(target.requests) == runs + 1 and card_posts(driver) == cards


async def brings_a_card(driver, target, text: str, who: str = "alice") -> None:
    """`text` in the conversation posts a card and runs nothing."""
    runs, cards = len(target.requests), card_posts(driver)
    await say(driver, who, text)
    await driver.cards(count=cards + 1)
    await driver.settle()
    assert len(target.requests) == runs


def _answers(driver) -> int:
    if driver.platform == "slack":
        return len(
            [x for x in driver.slack.calls_to("chat.postMessage") if str(x.args.get("text", "")).startswith("Result: ")]
        )
    posts = driver.api.requests_to("POST", r"/channels/\d+/messages$")
    return len([r for r in posts if str((r.json or {}).get("content", "")).startswith("Result: ")])


async def test_trust_granted_used_and_audited(driver, target):
    """Approve and trust: the card says so; the same request, and one differing only in its body, run at once."""
    reply = await trust(driver, "carol", "set", tool="http_request", up_to="30m", matching="method,url")
    assert "Updated trust for `http_request`: up to 30m, matching `method`,`url`" in reply
    card = await granted(driver, target)
    assert "Approved and trusted for 30 minutes by" in driver.card_text(card)
    await runs_without_a_card(driver, target, "post widget")
    await runs_without_a_card(driver, target, "post gadget")  # another body: only method and url must match
    audit = await driver.command("carol", "audit", tool="http_request")
    assert audit.count("trusted") >= 2 and "trust_granted" in audit
    listed = await trust(driver, "carol", "list")
    assert "`http_request` for" in listed and "matching" in listed and len(_TRUST_ID.findall(listed)) == 1


async def test_other_arguments_bring_a_card(driver, target):
    """With every argument bound, another body is another call: a card."""
    await trust(driver, "carol", "set", tool="http_request", up_to="30m")
    await granted(driver, target)
    await brings_a_card(driver, target, "post gadget")


async def test_another_requester_gets_a_card(driver, target):
    """Bob asks for the very call alice's trust covers, in the same conversation: a card."""
    await trust(driver, "carol", "set", tool="http_request", up_to="30m")
    await granted(driver, target)
    await brings_a_card(driver, target, "post widget", who="bob")


async def test_no_trust_with_a_quorum_of_two_and_none_after_a_deny(driver, target):
    """Quorum 2: no trust button. Trust granted, then the tool denied: rejected by policy, nothing runs."""
    await trust(driver, "carol", "set", tool="http_request", up_to="30m")
    await driver.command("carol", "quorum", tool="http_request", count=2)
    await say(driver, "alice", "post widget")
    [card] = await driver.cards()
    assert "trust" not in shown(driver, card).lower()
    await driver.approve(card, "alice", private=True)
    await driver.approve(card, "carol")
    await driver.answer()
    await driver.command("carol", "quorum", tool="http_request", count=1)
    await say(driver, "alice", "post widget")
    cards = await driver.cards(count=2)
    await approve_and_trust(driver, cards[-1], "alice")
    await driver.answer(count=2)
    await driver.command("carol", "policy", tool="http_request", mode="deny")
    runs = len(target.requests)
    await say(driver, "alice", "post widget")
    assert "Rejected by policy" in await driver.answer(count=3)
    assert len(target.requests) == runs == 2


async def test_revoked_and_expired_trusts_bring_cards(driver, target):
    """`trust revoke <id>` ends a trust at once; a trust past its time ends by itself."""
    await trust(driver, "carol", "set", tool="http_request", up_to="30m")
    await granted(driver, target)
    listed = await trust(driver, "carol", "list")
    [trust_id] = _TRUST_ID.findall(listed)
    refused = await trust(driver, "bob", "revoke", id=trust_id)
    assert "Only admins, the approver who granted a trust" in refused
    revoked = await trust(driver, "carol", "revoke", id=trust_id)
    assert revoked.startswith("Revoked trust") and trust_id in revoked
    await brings_a_card(driver, target, "post widget")
    cards = await driver.cards(count=2)
    await approve_and_trust(driver, cards[-1], "carol")
    await driver.answer(count=2)
    assert driver.bot.runtime is not None
    await driver.bot.runtime.database.pool.execute(
        "UPDATE trust_grants SET granted_at = now() - interval '1 hour', expires_at = now() - interval '1 second'"
    )
    assert "No live trusts" in await trust(driver, "carol", "list")
    await brings_a_card(driver, target, "post widget")


async def test_the_slack_trust_survives_a_restart(settings, slack, target):
    """Trusted on one bot; a new bot on the same database runs the same call without a card."""
    async with (
        BotServer(settings) as first,
        SlackEventSender(f"http://127.0.0.1:{first.port}/slack/events", c.SIGNING_SECRET, team_id=c.TEAM) as events,
    ):
        driver = SlackDriver(first, events, slack)
        await trust(driver, "carol", "set", tool="http_request", up_to="30m")
        await granted(driver, target)
        thread = driver._thread
    async with (
        BotServer(settings) as second,
        SlackEventSender(f"http://127.0.0.1:{second.port}/slack/events", c.SIGNING_SECRET, team_id=c.TEAM) as events,
    ):
        driver = SlackDriver(second, events, slack)
        driver._thread = thread
        await runs_without_a_card(driver, target, "post widget")


async def test_the_discord_trust_survives_a_restart(db_url, gemini, target, discord_api):
    """Trusted on one discord.py client; a new bot (a new client) runs the same call without a card."""
    from tests.standins.discord_api import point_discord_py_at

    settings = c.make_discord_settings(db_url, gemini, target, discord_api)
    with point_discord_py_at(discord_api.api_url):
        async with BotServer(settings) as first:
            driver = DiscordDriver(first, discord_api)
            await trust(driver, "carol", "set", tool="http_request", up_to="30m")
            await granted(driver, target)
        async with BotServer(settings) as second:
            await runs_without_a_card(DiscordDriver(second, discord_api), target, "post widget")


async def test_discord_trust_group_is_typed_and_autocompletes_ids(discord_bot, discord_api, target):
    """`/countersign trust` is a subcommand group; `revoke` offers the live trusts the typist may end, nobody else's."""
    [command] = [x for x in discord_api.commands(c.D_GUILD) + discord_api.commands() if x["name"] == "countersign"]
    [group] = [o for o in command["options"] if o["name"] == "trust"]
    assert group["type"] == 2
    subs = {s["name"]: {o["name"]: o for o in s.get("options", [])} for s in group["options"]}
    assert set(subs) == {"set", "list", "revoke"}
    assert subs["set"]["tool"]["autocomplete"] is True and subs["set"]["up-to"]["required"] is True
    assert subs["set"]["channel"]["type"] == 7 and subs["revoke"]["id"]["autocomplete"] is True
    driver = DiscordDriver(discord_bot, discord_api)
    await trust(driver, "carol", "set", tool="http_request", up_to="30m")
    await granted(driver, target)
    [trust_id] = _TRUST_ID.findall(await trust(driver, "carol", "list"))

    async def typed(who: str) -> list[dict[str, Any]]:
        interaction = await discord_api.autocomplete(
            "countersign",
            int(driver.user(who)),
            channel_id=c.D_CHANNEL,
            options=[
                {
                    "type": 2,
                    "name": "trust",
                    "options": [
                        {
                            "type": 1,
                            "name": "revoke",
                            "options": [{"name": "id", "type": 3, "value": "", "focused": True}],
                        }
                    ],
                }
            ],
        )
        await discord_api.wait_for_request("POST", rf"/interactions/{interaction.id}/[^/]+/callback")
        return discord_api.autocomplete_choices(interaction.id) or []

    assert [choice["value"] for choice in await typed("carol")] == [trust_id]
    assert [choice["value"] for choice in await typed("alice")] == [trust_id]  # her own calls
    assert await typed("bob") == []
    refused = await trust(driver, "carol", "set", tool="http_request", up_to="2d")
    assert "from 1m to 1d" in refused and "Nothing was changed" in refused


async def test_a_slack_trust_click_where_none_is_offered_is_refused_privately(bot, events, slack, target):
    """A forged "Approve and trust" on a quorum-2 card: the clicker is told why; nothing is approved or trusted."""
    driver = SlackDriver(bot, events, slack)
    await trust(driver, "carol", "set", tool="http_request", up_to="30m")
    await driver.command("carol", "quorum", tool="http_request", count=2)
    await say(driver, "alice", "post widget")
    [card] = await driver.cards()
    before = driver._private_count("carol")
    await driver._click(card, "carol", blocks.ACTION_TRUST)
    told = await driver._private("carol", before)
    assert "needs more than one approval" in told and "Nothing was changed" in told
    await driver.settle()
    assert bot.runtime is not None
    assert await bot.runtime.database.pool.fetchval("SELECT count(*) FROM trust_grants") == 0
    assert await bot.runtime.database.pool.fetchval("SELECT count(*) FROM approval_votes") == 0
    assert target.requests == []
