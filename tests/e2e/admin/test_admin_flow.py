"""Admin configuration end to end, the same scenarios on Slack and on Discord."""

from __future__ import annotations

import pytest

from adapters.slack import blocks
from countersign.server import BotServer
from tests.e2e.drivers import DiscordDriver, SlackDriver

pytestmark = pytest.mark.e2e


@pytest.fixture(params=["slack", "discord"])
def driver(request):
    if request.param == "slack":
        return SlackDriver(
            request.getfixturevalue("bot"), request.getfixturevalue("events"), request.getfixturevalue("slack")
        )
    return DiscordDriver(request.getfixturevalue("discord_bot"), request.getfixturevalue("discord_api"))


CONFIGURING = [
    (
        "policy",
        {"tool": "http_request", "mode": "review", "when": "args.method != 'GET'"},
        "Updated policy for `http_request`",
    ),
    ("policy", {"tool": "calculator", "mode": "deny", "channel": "CHANNEL"}, "Updated policy for `calculator` in"),
    ("policy", {"tool": "calculator", "mode": "default", "channel": "CHANNEL"}, "(was: deny)"),
    ("approvers", {"action": "add", "user": "dave", "tool": "http_request"}, "Updated approvers for `http_request`"),
    ("approvers", {"action": "remove", "user": "dave", "tool": "http_request"}, "Updated approvers"),
    ("admins", {"action": "add", "user": "dave"}, "Updated admins"),
    ("admins", {"action": "remove", "user": "dave"}, "Updated admins"),
    ("quorum", {"tool": "http_request", "count": 2}, "Updated quorum for `http_request`: 2"),
    ("self-approval", {"state": "off", "tool": "http_request"}, "Updated self-approval for `http_request`: off"),
    ("expiry", {"duration": "30m"}, "Updated expiry: 30m"),
    ("cards", {"where": "here"}, "Updated cards: here"),
    ("scope", {"kind": "thread", "channel": "CHANNEL"}, "Updated scope in"),
    ("audit", {"tool": "http_request"}, "Audit log"),
]


def _channel(driver) -> str:
    from tests.e2e import conftest as c

    return c.CHANNEL if driver.platform == "slack" else str(c.D_CHANNEL)


def _with_channel(driver, options: dict) -> dict:
    return {k: (_channel(driver) if v == "CHANNEL" else v) for k, v in options.items()}


async def test_help_and_show_are_for_everyone(driver):
    """Anyone gets help (usage and examples) and show (one line per tool with its mode)."""
    help_text = await driver.command("bob", "help")
    typed = {
        "slack": "/countersign policy <tool>|<server>__* auto|review|deny|default",
        "discord": "/countersign policy tool:<tool> mode:auto|review|deny|default",
    }
    assert typed[driver.platform] in help_text and "Examples" in help_text
    shown = await driver.command("bob", "show")
    assert "`http_request`: review when the method is not GET or HEAD (built-in)" in shown
    assert "`calculator`: auto (built-in)" in shown
    assert "Cards: in the conversation" in shown


async def test_each_command_works_for_an_admin_and_is_refused_for_others(driver):
    """Every configuring command answers an admin with what changed, and refuses a non-admin, changing nothing."""
    for sub, options, expected in CONFIGURING:
        reply = await driver.command("carol", sub, **_with_channel(driver, options))
        assert expected in reply, (sub, reply)
        refused = await driver.command("bob", sub, **_with_channel(driver, options))
        assert refused.startswith("Only admins can do that"), (sub, refused)
    shown = await driver.command("carol", "show")
    assert "quorum 2" in shown and "self-approval off" in shown and "Expiry: 30m" in shown
    audit = await driver.command("carol", "audit")
    assert "refused" in audit and "config" in audit


async def test_quorum_of_two_with_a_double_click(driver, target):
    """Quorum 2: the requester's second click counts once; a second approver makes it run, once."""
    await driver.command("carol", "quorum", tool="http_request", count=2)
    await driver.ask("alice", "post widget")
    [card] = await driver.cards()
    first = await driver.approve(card, "alice", private=True)
    assert "1 of 2" in first
    again = await driver.approve(card, "alice", private=True)
    assert "already approved" in again
    await driver.settle()  # the card is redrawn after the reply, by a background task
    assert "1 of 2" in driver.card_text(card) and target.requests == []
    await driver.approve(card, "carol")
    await driver.answer()
    assert len(target.requests) == 1


async def test_self_approval_can_be_forbidden(driver, target):
    """With self-approval off the requester is refused privately; an admin approves."""
    await driver.command("carol", "self-approval", state="off")
    await driver.ask("alice", "post widget")
    [card] = await driver.cards()
    refused = await driver.approve(card, "alice", private=True)
    assert "self-approval is off" in refused and target.requests == []
    await driver.approve(card, "carol")
    await driver.answer()
    assert len(target.requests) == 1


async def test_an_edit_makes_the_call_need_more_approvals(driver, target):
    """Quorum 2: an edit is one approval of the new arguments; another approver must agree, then the edit runs."""
    await driver.command("carol", "quorum", tool="http_request", count=2)
    await driver.ask("alice", "post widget")
    [card] = await driver.cards()
    await driver.edit(card, "alice", {"method": "POST", "url": target.url(), "body": {"name": "gadget"}})
    shown = driver.card_text(card)
    assert "gadget" in shown and "1 of 2" in shown and target.requests == []
    await driver.approve(card, "carol")
    await driver.answer()
    assert [r.json for r in target.requests] == [{"name": "gadget"}]


async def test_a_denied_tool_never_runs_and_shows_no_card(driver, target):
    """`policy http_request deny`: no card, the model reads that policy rejected the call."""
    await driver.command("carol", "policy", tool="http_request", mode="deny")
    await driver.ask("alice", "post widget")
    answer = await driver.answer()
    assert "Rejected by policy" in answer
    assert target.requests == []


async def test_a_condition_routes_get_past_review_and_post_to_review(driver, target):
    """Everything reviewed, then `when args.method != 'GET'`: GET runs at once, POST gets a card."""
    await driver.command("carol", "policy", tool="http_request", mode="review")
    await driver.ask("alice", "get")
    [card] = await driver.cards()
    await driver.approve(card, "alice")
    await driver.answer()
    await driver.command("carol", "policy", tool="http_request", mode="review", when="args.method != 'GET'")
    await driver.ask("alice", "get")
    await driver.answer(count=2)
    await driver.settle()
    assert [r.method for r in target.requests] == ["GET", "GET"]
    await driver.ask("alice", "post widget")
    assert len(await driver.cards(count=2)) == 2
    assert [r.method for r in target.requests] == ["GET", "GET"]


async def test_an_invalid_condition_is_refused_at_save(driver):
    """A condition naming an argument the tool lacks is refused with the reason, and nothing changes."""
    reply = await driver.command("carol", "policy", tool="http_request", mode="review", when="args.nope == 1")
    assert "refused" in reply and "no argument 'nope'" in reply
    syntax = await driver.command("carol", "policy", tool="http_request", mode="review", when="args.method ==")
    assert "not a valid CEL expression" in syntax
    shown = await driver.command("carol", "show")
    assert "`http_request`: review when the method is not GET or HEAD (built-in)" in shown


async def test_a_header_name_in_capitals_is_refused_and_its_lower_case_name_holds(driver, target):
    """`'X-Pay-To' in args.headers` could never match: refused with what to write; `'x-pay-to'` then holds for `X-Pay-To`."""
    capitals = "has(args.headers) && 'X-Pay-To' in args.headers"
    reply = await driver.command("carol", "policy", tool="http_request", mode="review", when=capitals)
    assert "refused" in reply and "header names are compared in lower case: write 'x-pay-to'" in reply, reply
    assert "review when the method is not GET or HEAD (built-in)" in await driver.command("carol", "show")
    lower = capitals.replace("X-Pay-To", "x-pay-to")
    assert "Updated policy" in await driver.command("carol", "policy", tool="http_request", mode="review", when=lower)
    await driver.ask("alice", "longbody 100")  # a POST whose headers name X-Pay-To
    [card] = await driver.cards()
    assert target.requests == [] and driver.actions(card)[0] == "approve"


async def test_expiry_fires_with_no_traffic(driver, target):
    """An expired card says so, the requester is told, the model hears why, nothing runs."""
    await driver.command("carol", "expiry", duration="10s")
    await driver.ask("alice", "post widget")
    [card] = await driver.cards()
    bot: BotServer = driver.bot
    assert bot.runtime is not None
    await bot.runtime.database.pool.execute("UPDATE approvals SET expires_at = now() + interval '200 milliseconds'")
    bot.runtime.service.expiry.wake()
    answer = await driver.answer()
    assert "expired without a decision" in answer
    await driver.settle()
    assert "Expired" in driver.card_text(card)
    assert target.requests == []


async def test_cards_can_go_to_an_approvals_channel(driver, target):
    """`cards channel`: the card is posted in the approvals channel, the conversation gets a line, a click there works."""
    from tests.e2e import conftest as c

    approvals = "CAPPROVALS" if driver.platform == "slack" else str(c.D_THREAD)
    if driver.platform == "slack":
        driver.slack.add_channel("CAPPROVALS", name="approvals")
    reply = await driver.command("carol", "cards", where="channel", channel=approvals)
    assert "Updated cards: channel" in reply
    await driver.ask("alice", "post widget")
    [card] = await driver.cards()
    assert card.channel == approvals
    line = await driver.answer(starts="Approval needed for `http_request`")
    assert approvals in line
    await driver.approve(card, "alice")
    await driver.answer()
    assert len(target.requests) == 1


async def test_a_group_of_approvers(driver, target):
    """Approvers named by a Slack user group or a Discord role: its member approves; bob, outside it, is refused."""
    reply = await driver.command("carol", "approvers", action="add", tool="http_request", **driver.ops)
    assert "Updated approvers for `http_request`" in reply
    await driver.ask("alice", "post widget")
    [card] = await driver.cards()
    refused = await driver.approve(card, "bob", private=True)
    assert "not" in refused.lower() and target.requests == []
    await driver.approve(card, "erin")
    await driver.answer()
    assert len(target.requests) == 1
    assert driver.user("erin") in driver.card_text(card)


async def test_slack_dm_cards_reach_the_members_of_an_approver_group(bot, events, slack, target):
    """`cards dm` with a user group of approvers: each member gets the card in their DM and can decide there."""
    from tests.e2e import conftest as c

    driver = SlackDriver(bot, events, slack)
    await driver.command("carol", "approvers", action="add", tool="http_request", group="SOPS")
    assert "Updated cards: dm" in await driver.command("carol", "cards", where="dm")
    await driver.ask("alice", "post widget")
    [post] = await slack.wait_for("chat.postMessage", lambda a: bool(_buttons(a)))
    assert post.args["channel"] == "UERIN"
    [dm] = [m for m in slack.messages("DUERIN") if _buttons(m)]
    line = await driver.answer(starts="Approval needed for `http_request`")
    assert "by direct message" in line
    await events.block_actions(
        "UERIN", "DUERIN", dm["ts"], blocks.ACTION_APPROVE, _buttons(dm)[0], slack.new_trigger_id()
    )
    await driver.answer()
    assert len(target.requests) == 1
    assert c.CHANNEL not in [p.args["channel"] for p in slack.calls_to("chat.postMessage") if _buttons(p.args)]


def _buttons(message) -> list[str]:
    return [e["value"] for b in message.get("blocks") or [] if b.get("type") == "actions" for e in b["elements"]]


async def test_slack_scope_channel_makes_the_channel_one_conversation(bot, events, slack):
    """`scope channel` in Slack: a mention is answered in the channel itself, and the next mention shares its history."""
    from tests.e2e import conftest as c

    driver = SlackDriver(bot, events, slack)
    await driver.command("carol", "scope", kind="channel", channel=c.CHANNEL)
    await events.app_mention(c.CHANNEL, c.ALICE, "<@UBOT> first words")
    [post] = await slack.wait_for("chat.postMessage", lambda a: str(a.get("text", "")).startswith("You said: first"))
    assert post.args.get("thread_ts") is None
    await events.app_mention(c.CHANNEL, c.BOB, "<@UBOT> second words")
    await slack.wait_for("chat.postMessage", lambda a: str(a.get("text", "")).startswith("You said: second"))
    assert bot.runtime is not None
    threads = await bot.runtime.database.pool.fetch("SELECT thread_id FROM conversations")
    assert [r["thread_id"] for r in threads] == [f"slack:{c.TEAM}:{c.CHANNEL}"]


async def test_discord_scope_channel_makes_threads_share_the_channel(discord_bot, discord_api):
    """`scope channel` on Discord: a mention in a thread joins the parent channel's conversation."""
    from tests.e2e import conftest as c

    driver = DiscordDriver(discord_bot, discord_api)
    await driver.command("carol", "scope", kind="channel", channel=str(c.D_CHANNEL))
    await discord_api.send_message(
        c.D_THREAD, c.D_ALICE, f"<@{c.D_BOT}> from the thread", mentions=[c.D_BOT], guild_id=c.D_GUILD
    )
    await driver.answer(starts="You said: from the thread")
    assert discord_bot.runtime is not None
    threads = await discord_bot.runtime.database.pool.fetch("SELECT thread_id FROM conversations")
    assert [r["thread_id"] for r in threads] == [f"discord:{c.D_GUILD}:{c.D_CHANNEL}"]


async def test_discord_command_group_has_typed_options_and_autocompletes_tools(discord_bot, discord_api):
    """The synced `/countersign` group types users, roles and channels, and offers tool names as the admin types."""
    from tests.e2e import conftest as c

    [command] = [x for x in discord_api.commands(c.D_GUILD) + discord_api.commands() if x["name"] == "countersign"]
    subs = {s["name"]: {o["name"]: o for o in s.get("options", [])} for s in command["options"]}
    assert subs["approvers"]["user"]["type"] == 6 and subs["approvers"]["role"]["type"] == 8
    assert subs["policy"]["channel"]["type"] == 7 and subs["policy"]["tool"]["autocomplete"] is True
    assert [choice["value"] for choice in subs["policy"]["mode"]["choices"]] == ["auto", "review", "deny", "default"]
    typed = await discord_api.autocomplete(
        "countersign",
        c.D_CAROL,
        channel_id=c.D_CHANNEL,
        options=[
            {
                "type": 1,
                "name": "policy",
                "options": [{"name": "tool", "type": 3, "value": "HTTP", "focused": True}],
            }
        ],
    )
    await discord_api.wait_for_request("POST", rf"/interactions/{typed.id}/[^/]+/callback")
    assert discord_api.autocomplete_choices(typed.id) == [{"name": "http_request", "value": "http_request"}]


async def _expire_now(db_url: str) -> None:
    import asyncpg

    connection = await asyncpg.connect(db_url)
    try:
        await connection.execute("UPDATE approvals SET expires_at = now() - interval '1 second'")
    finally:
        await connection.close()


async def test_slack_expiry_fires_after_a_restart(settings, db_url, slack, target):
    """A card's time runs out while the bot is down: the next bot expires it on start, with no traffic."""
    from tests.e2e import conftest as c
    from tests.standins.slack_events import SlackEventSender

    url = "http://127.0.0.1:{}/slack/events"
    async with BotServer(settings) as first, SlackEventSender(url.format(first.port), c.SIGNING_SECRET) as events:
        driver = SlackDriver(first, events, slack)
        await driver.command("carol", "expiry", duration="10s")
        await driver.ask("alice", "post widget")
        [card] = await driver.cards()
    await _expire_now(db_url)
    async with BotServer(settings) as second, SlackEventSender(url.format(second.port), c.SIGNING_SECRET) as events:
        driver = SlackDriver(second, events, slack)
        assert "expired without a decision" in await driver.answer()
        await driver.settle()
        assert "Expired" in driver.card_text(card)
    assert target.requests == []


async def test_discord_expiry_fires_after_a_restart(db_url, gemini, target, discord_api):
    """The same on Discord: a new client process expires the card, edits it to Expired, and the model hears why."""
    from tests.e2e.conftest import make_discord_settings
    from tests.standins.discord_api import point_discord_py_at

    settings = make_discord_settings(db_url, gemini, target, discord_api)
    with point_discord_py_at(discord_api.api_url):
        async with BotServer(settings) as first:
            driver = DiscordDriver(first, discord_api)
            await driver.command("carol", "expiry", duration="10s")
            await driver.ask("alice", "post widget")
            [card] = await driver.cards()
        await _expire_now(db_url)
        async with BotServer(settings) as second:
            driver = DiscordDriver(second, discord_api)
            assert "expired without a decision" in await driver.answer()
            await driver.settle()
            assert "Expired" in driver.card_text(card)
    assert target.requests == []


# --- the agent of a channel (docs/decisions/0008) ------------------------------------------------------


async def test_agent_is_set_per_channel_shown_refused_for_others_and_audited(driver):
    """`agent subagents in #channel`: only an admin sets it, `show` prints it, a repeat changes nothing, audit has it."""
    channel = _channel(driver)
    default = "Agent: react (default)"
    assert default in await driver.command("carol", "show", channel=channel)

    refused = await driver.command("bob", "agent", kind="subagents", channel=channel)
    assert refused.startswith("Only admins can do that") and "Nothing was changed" in refused
    assert default in await driver.command("bob", "show", channel=channel)

    reply = await driver.command("carol", "agent", kind="subagents", channel=channel)
    assert reply == f"Updated agent in <#{channel}>: subagents (was: not set). Recorded in the audit log."
    shown = await driver.command("bob", "show", channel=channel)
    assert "Agent: subagents (channel): `researcher`, `operator`" in shown

    again = await driver.command("carol", "agent", kind="subagents", channel=channel)
    assert again == f"Nothing to change: agent in <#{channel}> is already like that."

    # Workspace-wide without a channel; the channel's own setting still wins there.
    assert (await driver.command("carol", "agent", kind="react")).startswith("Updated agent: react (was: not set)")
    assert "Agent: subagents (channel)" in await driver.command("carol", "show", channel=channel)

    audit = await driver.command("carol", "audit")
    rows = [line for line in audit.splitlines() if "· config · agent ·" in line]
    assert len(rows) == 2, audit  # the repeat wrote nothing
    assert '"before":null,"after":"react"' in rows[0] and '"before":null,"after":"subagents"' in rows[1]
    assert all(driver.user("carol") in row for row in rows)
    assert any("· refused · not_an_admin ·" in line and driver.user("bob") in line for line in audit.splitlines())


async def test_discord_agent_subcommand_is_published_and_a_thread_means_its_parent(discord_bot, discord_api):
    """`/countersign agent` is published with `kind` choices and a channel option; a thread given (or typed in) means its parent channel."""
    from tests.e2e import conftest as c

    [command] = [x for x in discord_api.commands(c.D_GUILD) + discord_api.commands() if x["name"] == "countersign"]
    [agent] = [s for s in command["options"] if s["name"] == "agent"]
    options = {o["name"]: o for o in agent["options"]}
    assert options["kind"]["type"] == 3 and options["kind"]["required"] is True
    assert [choice["value"] for choice in options["kind"]["choices"]] == ["react", "subagents", "default"]
    assert options["channel"]["type"] == 7 and not options["channel"].get("required", False)

    driver = DiscordDriver(discord_bot, discord_api)
    reply = await driver.command("carol", "agent", kind="subagents", channel=str(c.D_THREAD))
    assert reply.startswith(f"Updated agent in <#{c.D_CHANNEL}>: subagents"), reply
    shown = await driver.command("carol", "show", channel=str(c.D_CHANNEL))
    assert "Agent: subagents (channel)" in shown

    # `show` typed inside the thread reports the parent channel's settings.
    typed = await discord_api.invoke_command(
        "countersign", c.D_CAROL, channel_id=c.D_THREAD, options=[{"type": 1, "name": "show", "options": []}]
    )
    await discord_api.wait_for_request("POST", rf"/webhooks/{c.D_APP}/{typed.token}")
    in_thread = "\n".join(f["content"] for f in discord_api.followups(typed.id))
    assert f"Effective policy for <#{c.D_CHANNEL}>" in in_thread and "Agent: subagents (channel)" in in_thread
