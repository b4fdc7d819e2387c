"""The supervisor with subagents end to end, on Slack (Bolt over signed HTTP) and Discord (discord.py).

An admin switches the channel to `/countersign agent subagents`; the Gemini stand-in plays the
supervisor and its subagents (`subagents_script`); the HTTP target records what really ran.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from adapters.discord import messages as discord_msg
from adapters.slack import blocks
from adapters.slack import messages as slack_msg
from countersign.server import BotServer
from tests.e2e.conftest import ALICE, CAROL, CHANNEL, D_ALICE, D_BOT, D_CHANNEL, D_GUILD
from tests.e2e.discord.test_discord_flow import Card as DiscordCard
from tests.e2e.discord.test_discord_flow import click as discord_click
from tests.e2e.discord.test_discord_flow import wait_card as discord_wait_card
from tests.e2e.drivers import DiscordDriver, is_discord_card
from tests.e2e.slack.test_slack_flow import Card, click, wait_card
from tests.e2e.subagents_script import get_query, post_query, role, subagents_script
from tests.standins.gemini import GeminiRequest, GeminiStandIn
from tests.standins.slack_api import SlackApiStandIn
from tests.standins.slack_events import SlackEventSender
from tests.support.http_target import HttpTarget

pytestmark = pytest.mark.e2e

WAIT = 30.0
"""Seconds to wait for the bot at most (a busy machine is slow; a passing test never waits long)."""


@pytest.fixture
async def gemini(target: HttpTarget) -> AsyncIterator[GeminiStandIn]:
    """The Gemini stand-in playing the supervisor and the subagents (and the ReAct agent)."""
    async with GeminiStandIn(subagents_script(target.url()), api_key="e2e-gemini-key") as server:
        yield server


async def settle(bot: BotServer) -> None:
    assert bot.runtime is not None
    await bot.runtime.service.tasks.join()


def requests_of(gemini: GeminiStandIn, who: str) -> list[GeminiRequest]:
    return [r for r in gemini.requests if role(r) == who]


# --- Slack ----------------------------------------------------------------------------------


async def slack_use_subagents(events: SlackEventSender, slack: SlackApiStandIn) -> str:
    """Carol (a workspace admin) switches #general to the subagents agent; returns the reply."""
    url = slack.new_response_url(CHANNEL, user=CAROL)
    before = len(slack.calls_to("response_url"))
    delivery = await events.slash_command("/countersign", f"agent subagents in <#{CHANNEL}>", CAROL, CHANNEL, url)
    assert delivery.status == 200
    calls = await slack.wait_for("response_url", count=before + 1, timeout=WAIT)
    return str(calls[-1].args.get("text", ""))


async def slack_answer(slack: SlackApiStandIn, thread_ts: str | None) -> str:
    [post] = await slack.wait_for(
        "chat.postMessage",
        lambda a: a.get("thread_ts") == thread_ts and str(a.get("text", "")).startswith("Result: "),
        timeout=WAIT,
    )
    return str(post.args["text"])


def has_buttons(message: dict[str, Any]) -> bool:
    """Whether a Slack message (or chat.postMessage args) has an actions block: a card's buttons."""
    return any(b.get("type") == "actions" for b in message.get("blocks") or [])


async def slack_card(slack: SlackApiStandIn) -> Card:
    """Wait for the one approval card in #general."""
    await slack.wait_for("chat.postMessage", has_buttons, timeout=WAIT)
    [card] = await wait_card(slack)
    return card


def slack_progress_posts(slack: SlackApiStandIn, thread_ts: str | None, subagent: str) -> list[str]:
    """The ts of each progress message naming `subagent` that was posted in the thread."""
    text = slack_msg.PROGRESS.working_one.format(names=subagent)
    return [
        str(c.response["ts"])
        for c in slack.calls_to("chat.postMessage")
        if c.args.get("thread_ts") == thread_ts and c.args.get("text") == text and c.response.get("ok")
    ]


def assert_slack_progress_cleared(slack: SlackApiStandIn, thread_ts: str | None, subagent: str) -> None:
    """Progress naming `subagent` was posted in the thread, each message deleted before the answer."""
    posted = slack_progress_posts(slack, thread_ts, subagent)
    assert posted, [c.args.get("text") for c in slack.calls_to("chat.postMessage")]
    calls = slack.calls
    deleted = {str(c.args["ts"]): i for i, c in enumerate(calls) if c.method == "chat.delete" and not c.error}
    assert set(posted) <= set(deleted), (posted, deleted)
    answered = next(
        i
        for i, c in enumerate(calls)
        if c.method == "chat.postMessage" and str(c.args.get("text", "")).startswith("Result: ")
    )
    assert all(deleted[ts] < answered for ts in posted)
    remaining = [m.get("text", "") for m in slack.messages(CHANNEL, thread_ts=thread_ts)]
    assert not any("is working" in t or "Putting the answer together" in t for t in remaining), remaining


async def test_slack_a_subagents_card_names_the_subagent_and_approving_runs_it_once(bot, events, slack, target, gemini):
    """Admin picks subagents; operator's POST waits on a card naming it; approve -> one POST, report in the answer."""
    reply = await slack_use_subagents(events, slack)
    assert "subagents" in reply
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    card = await slack_card(slack)
    assert card.thread_ts == mention.ts
    shown = json.dumps(card.blocks)
    assert "*operator* wants to call `http_request`" in shown and "widget" in shown and f"<@{ALICE}>" in shown
    assert target.requests == []

    await click(events, slack, ALICE, blocks.ACTION_APPROVE, card)
    answer = await slack_answer(slack, mention.ts)
    await settle(bot)
    assert [(r.method, r.json) for r in target.requests] == [("POST", {"name": "widget"})]
    assert answer.startswith("Result: operator reported: Report: ") and "widget" in answer
    decided = slack.message(card.channel, card.ts)["blocks"]
    assert not has_buttons({"blocks": decided})
    assert "Approved" in json.dumps(decided) and "*operator*" in json.dumps(decided)
    assert_slack_progress_cleared(slack, mention.ts, "operator")
    # fresh context: the operator saw only the supervisor's query, never the user's words
    operator = requests_of(gemini, "operator")
    assert len(operator) == 2  # its call, then its report: after the click it continued in place
    assert all("post widget" not in json.dumps(r.contents) for r in operator)
    assert operator[0].last_user_text == post_query(target.url(), "widget")


async def test_slack_a_get_delegation_runs_without_a_card(bot, events, slack, target):
    """researcher's GET needs no review: it runs once, no card, progress shown and cleared, report answered."""
    await slack_use_subagents(events, slack)
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> get")
    answer = await slack_answer(slack, mention.ts)
    await settle(bot)
    assert [r.method for r in target.requests] == ["GET"]
    assert answer.startswith("Result: researcher reported: Report: ")
    assert not any(has_buttons(c.args) for c in slack.calls_to("chat.postMessage"))
    assert_slack_progress_cleared(slack, mention.ts, "researcher")


async def test_slack_rejecting_a_subagents_card_posts_nothing(bot, events, slack, target):
    """Reject operator's card with a reason: nothing is POSTed; the answer carries the rejection."""
    await slack_use_subagents(events, slack)
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    card = await slack_card(slack)
    await click(events, slack, ALICE, blocks.ACTION_REJECT, card)
    [opened] = await slack.wait_for("views.open", timeout=WAIT)
    submitted = await events.view_submission(
        ALICE,
        blocks.VIEW_REJECT,
        opened.args["view"]["private_metadata"],
        {blocks.REASON_BLOCK: {blocks.REASON_INPUT: "change freeze"}},
    )
    assert submitted.status == 200
    answer = await slack_answer(slack, mention.ts)
    await settle(bot)
    assert target.requests == []
    assert answer.startswith("Result: operator reported: ") and "Rejected by a reviewer: change freeze" in answer
    shown = json.dumps(slack.message(card.channel, card.ts)["blocks"])
    assert "Rejected" in shown and "change freeze" in shown and "*operator*" in shown


# --- Discord --------------------------------------------------------------------------------


def discord_messages_path(channel: int = D_CHANNEL) -> str:
    return rf"/channels/{channel}/messages$"


async def discord_mention(discord_api: Any, user: int, text: str) -> None:
    await discord_api.send_message(D_CHANNEL, user, f"<@{D_BOT}> {text}", mentions=[D_BOT], guild_id=D_GUILD)


async def discord_use_subagents(discord_bot: BotServer, discord_api: Any) -> str:
    """Carol (Manage Server) switches #general to the subagents agent; returns the reply."""
    return await DiscordDriver(discord_bot, discord_api).command("carol", "agent", kind="subagents", channel=D_CHANNEL)


async def discord_answer(discord_api: Any) -> str:
    [post] = await discord_api.wait_for_request(
        "POST",
        discord_messages_path(),
        lambda r: str((r.json or {}).get("content", "")).startswith("Result: "),
        timeout=WAIT,
    )
    return str(post.json["content"])


def assert_discord_progress_cleared(discord_api: Any, subagent: str) -> None:
    """A status line naming `subagent` was posted, and each one deleted before the answer."""
    text = discord_msg.PROGRESS.working_one.format(names=subagent)
    requests = discord_api.requests
    posted = [
        str(r.response["id"])
        for r in requests
        if r.method == "POST" and r.path == f"/channels/{D_CHANNEL}/messages" and (r.json or {}).get("content") == text
    ]
    assert posted, [(r.json or {}).get("content") for r in discord_api.requests_to("POST", discord_messages_path())]
    deleted = {
        r.path.rsplit("/", 1)[1]: i
        for i, r in enumerate(requests)
        if r.method == "DELETE" and r.path.startswith(f"/channels/{D_CHANNEL}/messages/") and r.status < 300
    }
    assert set(posted) <= set(deleted), (posted, deleted)
    answered = next(
        i
        for i, r in enumerate(requests)
        if r.method == "POST" and str((r.json or {}).get("content", "")).startswith("Result: ")
    )
    assert all(deleted[message_id] < answered for message_id in posted)
    remaining = [m.get("content", "") for m in discord_api.messages(D_CHANNEL)]
    assert not any("is working" in t or "Putting the answer together" in t for t in remaining), remaining
    assert discord_api.typing(D_CHANNEL) >= 1


async def discord_card(discord_api: Any) -> DiscordCard:
    """Wait for the one approval card in #general."""
    await discord_api.wait_for_request("POST", discord_messages_path(), is_discord_card, timeout=WAIT)
    [card] = await discord_wait_card(discord_api)
    return card


def discord_embed(discord_api: Any, message_id: str) -> dict[str, Any]:
    return discord_api.message(message_id)["embeds"][0]


async def test_discord_a_subagents_card_names_the_subagent_and_approving_runs_it_once(discord_bot, discord_api, target):
    """Admin picks subagents; the embed says "operator wants to call"; approve -> one POST, card edited, answer."""
    reply = await discord_use_subagents(discord_bot, discord_api)
    assert "subagents" in reply
    await discord_mention(discord_api, D_ALICE, "post widget")
    card = await discord_card(discord_api)
    embed = discord_embed(discord_api, card.message_id)
    field = {"name": "operator wants to call", "value": "`http_request`", "inline": True}
    assert field in embed["fields"] and "widget" in embed["description"]
    assert target.requests == []

    await discord_click(discord_api, card, D_ALICE, "approve")
    answer = await discord_answer(discord_api)
    await settle(discord_bot)
    assert [(r.method, r.json) for r in target.requests] == [("POST", {"name": "widget"})]
    assert answer.startswith("Result: operator reported: Report: ") and "widget" in answer
    edited = discord_api.message(card.message_id)
    assert not edited.get("components")
    assert "Approved" in edited["embeds"][0]["title"] and field in edited["embeds"][0]["fields"]
    assert_discord_progress_cleared(discord_api, "operator")


async def test_discord_a_get_delegation_runs_without_a_card(discord_bot, discord_api, target):
    """researcher's GET needs no review: it runs once, no card, the status line is posted and deleted."""
    await discord_use_subagents(discord_bot, discord_api)
    await discord_mention(discord_api, D_ALICE, "get")
    answer = await discord_answer(discord_api)
    await settle(discord_bot)
    assert [r.method for r in target.requests] == ["GET"]
    assert answer.startswith("Result: researcher reported: Report: ")
    assert not any(is_discord_card(r) for r in discord_api.requests_to("POST", discord_messages_path()))
    assert_discord_progress_cleared(discord_api, "researcher")


async def test_discord_two_delegations_one_rejected_card(discord_bot, discord_api, target, gemini):
    """researcher's GET and operator's POST in one turn: reject the card -> no POST, the GET ran once, both reported."""
    await discord_use_subagents(discord_bot, discord_api)
    await discord_mention(discord_api, D_ALICE, "check and post gadget")
    card = await discord_card(discord_api)
    assert {"name": "operator wants to call", "value": "`http_request`", "inline": True} in discord_embed(
        discord_api, card.message_id
    )["fields"]
    await discord_click(discord_api, card, D_ALICE, "reject")
    submitted = await discord_api.submit_modal(f"cs:reject-modal:{card.approval_id}", D_ALICE, {"reason": "not now"})
    await discord_api.wait_for_request("POST", rf"/interactions/{submitted.id}/[^/]+/callback", timeout=WAIT)
    answer = await discord_answer(discord_api)
    await settle(discord_bot)
    assert [r.method for r in target.requests] == ["GET"]  # the finished sibling was not redone on resume
    assert "researcher reported: Report: " in answer
    assert "operator reported: Report: " in answer and "Rejected by a reviewer: not now" in answer
    assert "Rejected" in discord_embed(discord_api, card.message_id)["title"]
    [first_turn] = [r for r in requests_of(gemini, "supervisor") if not r.function_responses]
    assert first_turn.last_user_text == "check and post gadget"
    researcher = requests_of(gemini, "researcher")
    assert len(researcher) == 2 and researcher[0].last_user_text == get_query(target.url())
