"""`/countersign context [reset]` end to end: the real Bolt app and discord.py client against the stand-ins.

Slack cannot tell a slash command which thread it was typed in, so in a channel with a
conversation per thread the command takes the thread's link; Discord knows the channel or
thread of every interaction.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from bot.turns.context.window import DEFAULT_CONTEXT_TOKENS
from countersign.server import BotServer
from tests.e2e.conftest import ALICE, BOB, CAROL, CHANNEL, D_ALICE, D_BOB, D_CAROL, D_CHANNEL, D_GUILD, D_THREAD
from tests.e2e.discord.test_discord_flow import mention as discord_mention
from tests.e2e.discord.test_discord_flow import wait_answer as discord_answer
from tests.e2e.slack.test_slack_flow import wait_answer as slack_answer

pytestmark = pytest.mark.e2e


async def settle(bot: BotServer) -> None:
    assert bot.runtime is not None
    await bot.runtime.service.tasks.join()


# --- Slack ---------------------------------------------------------------------------------


async def slack_command(events, slack, who: str, text: str, channel: str = CHANNEL) -> str:
    """Type `/countersign <text>` and return the private reply."""
    url = slack.new_response_url(channel, user=who)
    before = len(slack.calls_to("response_url"))
    delivery = await events.slash_command("/countersign", text, who, channel, url)
    assert delivery.status == 200
    calls = await slack.wait_for("response_url", count=before + 1)
    assert calls[-1].args.get("response_type") == "ephemeral"
    return str(calls[-1].args.get("text", ""))


def root_link(events, ts: str, channel: str = CHANNEL) -> str:
    """*Copy link* on a thread's first message, as a link token (escaping on)."""
    return f"<https://{events.team_domain}.slack.com/archives/{channel}/p{ts.replace('.', '')}>"


def reply_link(events, ts: str, root: str, channel: str = CHANNEL) -> str:
    """*Copy link* on a reply: its own ts, the thread's in the query; `&` escaped as Slack sends it."""
    url = f"https://{events.team_domain}.slack.com/archives/{channel}/p{ts.replace('.', '')}"
    return f"<{url}?thread_ts={root}&amp;cid={channel}|a reply>"


async def test_slack_context_needs_the_thread_link_and_then_shows_and_resets_that_thread(bot, events, slack, gemini):
    """Per-thread channel: without a link the reply says how to give it; a root's or a reply's link shows
    the thread; a non-admin's reset is refused; an admin's clears it and the next reply starts afresh."""
    first = await events.app_mention(CHANNEL, ALICE, "<@UBOT> hello there")
    await slack_answer(slack, first.ts, starts="You said: hello there")
    reply = await events.message(CHANNEL, ALICE, "second message", thread_ts=first.ts)
    await slack_answer(slack, first.ts, starts="You said: second message")
    await settle(bot)

    needs = await slack_command(events, slack, BOB, "context")
    assert needs.startswith("Slack does not tell a slash command which thread it was typed in")
    assert "Copy link" in needs and "/countersign context <link>" in needs

    shown = await slack_command(events, slack, BOB, f"context {root_link(events, first.ts)}")
    assert f"(`slack:T1:{CHANNEL}:{first.ts}`)" in shown
    assert (
        "Agent: `react` · 4 messages kept verbatim · about " in shown
        and f" of {DEFAULT_CONTEXT_TOKENS:,} tokens" in shown
    )
    assert "No summary" in shown
    by_reply = await slack_command(events, slack, BOB, f"context {reply_link(events, reply.ts, first.ts)}")
    assert by_reply == shown

    refused = await slack_command(events, slack, BOB, f"context reset {root_link(events, first.ts)}")
    assert refused.startswith("Only admins can do that")
    done = await slack_command(events, slack, CAROL, f"context reset {reply_link(events, reply.ts, first.ts)}")
    assert done.startswith("Context reset: the model starts afresh in this conversation (4 messages removed")

    await events.message(CHANNEL, ALICE, "after the reset", thread_ts=first.ts)
    await slack_answer(slack, first.ts, starts="You said: after the reset")
    await settle(bot)
    contents = json.dumps(gemini.requests[-1].contents)
    assert "after the reset" in contents and "hello there" not in contents and "second message" not in contents
    audit = await slack_command(events, slack, CAROL, "audit")
    assert "config · context" in audit and "refused · not_an_admin" in audit and "context reset" in audit


async def test_slack_context_refuses_links_elsewhere_and_needs_none_where_the_channel_is_one_conversation(
    bot, events, slack
):
    """A link into another channel or workspace is refused; with `scope channel`, and in a DM, no link is needed."""
    slack.add_channel("C2", name="random")
    other_channel = await slack_command(events, slack, BOB, f"context {root_link(events, '1700000000.000100', 'C2')}")
    assert other_channel.startswith("That link points into another channel")
    elsewhere = "<https://elsewhere.slack.com/archives/C1/p1700000000000100>"
    assert (await slack_command(events, slack, BOB, f"context {elsewhere}")).startswith(
        "That link points into another Slack workspace"
    )
    assert (await slack_command(events, slack, BOB, "context <https://example.com/x>")).startswith(
        "That is not a link to a Slack message"
    )

    await slack_command(events, slack, CAROL, f"scope channel in <#{CHANNEL}>")
    first = await events.app_mention(CHANNEL, ALICE, "<@UBOT> in the channel")
    await slack.wait_for("chat.postMessage", lambda a: str(a.get("text", "")).startswith("You said: in the channel"))
    await settle(bot)
    shown = await slack_command(events, slack, BOB, "context")
    assert f"(`slack:T1:{CHANNEL}`)" in shown and "2 messages kept verbatim" in shown
    assert first.ts not in shown

    await events.message("D1", ALICE, "hi in private", channel_type="im")
    await slack.wait_for("chat.postMessage", lambda a: a.get("channel") == "D1")
    await settle(bot)
    private = await slack_command(events, slack, ALICE, "context", channel="D1")
    assert "(`slack:T1:D1`)" in private and "2 messages kept verbatim" in private


async def test_slack_reset_is_refused_while_a_card_waits(bot, events, slack, target):
    """A pending card blocks the reset, saying why; the card still works afterwards."""
    first = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    await slack.wait_for("chat.postMessage", lambda a: bool(a.get("blocks")) and a.get("thread_ts") == first.ts)
    await settle(bot)
    refused = await slack_command(events, slack, CAROL, f"context reset {root_link(events, first.ts)}")
    assert refused.startswith("A card is waiting for a decision in this conversation")
    shown = await slack_command(events, slack, CAROL, f"context {root_link(events, first.ts)}")
    assert "2 messages kept verbatim" in shown
    assert target.requests == []


# --- Discord -------------------------------------------------------------------------------


async def discord_command(api, who: int, channel: int, **options: Any) -> str:
    """Run `/countersign context` (options: `reset=True`) in `channel`; return the private reply."""
    payload = [{"name": name, "type": 5, "value": value} for name, value in options.items()]
    interaction = await api.invoke_command(
        "countersign", who, channel_id=channel, options=[{"type": 1, "name": "context", "options": payload}]
    )
    await api.wait_for_request("POST", rf"/webhooks/\d+/{interaction.token}")
    followups = api.followups(interaction.id)
    assert all(f.get("flags", 0) & 64 for f in followups)  # ephemeral
    return "\n".join(f["content"] for f in followups)


async def test_discord_context_in_a_channel_and_in_a_thread_and_a_reset(discord_bot, discord_api, gemini):
    """In the channel: the channel's conversation; in a thread: the thread's, or the channel's under
    `scope channel`; a non-admin's reset is refused, an admin's clears it and the next message starts afresh."""
    api = discord_api
    await discord_mention(api, D_ALICE, "hello channel")
    await discord_answer(api, starts="You said: hello channel")
    await discord_mention(api, D_ALICE, "hello thread", channel=D_THREAD)
    await discord_answer(api, channel=D_THREAD, starts="You said: hello thread")
    await settle(discord_bot)

    channel_view = await discord_command(api, D_BOB, D_CHANNEL)
    assert f"(`discord:{D_GUILD}:{D_CHANNEL}`)" in channel_view and "2 messages kept verbatim" in channel_view
    thread_view = await discord_command(api, D_BOB, D_THREAD)
    assert f"(`discord:{D_GUILD}:{D_CHANNEL}:{D_THREAD}`)" in thread_view

    refused = await discord_command(api, D_BOB, D_CHANNEL, reset=True)
    assert refused.startswith("Only admins can do that")
    done = await discord_command(api, D_CAROL, D_CHANNEL, reset=True)
    assert done.startswith("Context reset: the model starts afresh in this conversation (2 messages removed")
    assert "2 messages kept verbatim" in await discord_command(api, D_BOB, D_THREAD)  # the thread is untouched

    await discord_mention(api, D_ALICE, "after the reset")
    await discord_answer(api, starts="You said: after the reset")
    await settle(discord_bot)
    contents = json.dumps(gemini.requests[-1].contents)
    assert "after the reset" in contents and "hello channel" not in contents

    scope = await discord_api.invoke_command(
        "countersign",
        D_CAROL,
        channel_id=D_CHANNEL,
        options=[{"type": 1, "name": "scope", "options": [{"name": "kind", "type": 3, "value": "channel"}]}],
    )
    await api.wait_for_request("POST", rf"/webhooks/\d+/{scope.token}")
    shared = await discord_command(api, D_BOB, D_THREAD)
    assert f"(`discord:{D_GUILD}:{D_CHANNEL}`)" in shared and "2 messages kept verbatim" in shared


async def test_discord_context_in_a_dm_shows_and_a_reset_there_is_refused(discord_bot, discord_api):
    """A DM is its own conversation: `context` shows it; nobody administers a DM, so `reset` is refused."""
    dm = await discord_api.send_dm(D_ALICE, "hi in private")
    channel = int(dm["channel_id"])
    await discord_answer(discord_api, channel=channel, starts="You said: hi in private")
    await settle(discord_bot)
    shown = await discord_command(discord_api, D_ALICE, channel)
    assert f"(`discord:dm:{channel}`)" in shown and "2 messages kept verbatim" in shown
    refused = await discord_command(discord_api, D_ALICE, channel, reset=True)
    assert refused.startswith("Only admins can reset a conversation, and a DM belongs to no server")
