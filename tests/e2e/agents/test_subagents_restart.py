"""A subagent's card across a restart, and edited, end to end on Slack (Bolt) and Discord (discord.py).

The Gemini stand-in plays the supervisor and the shipped subagents (`subagents_script`); the HTTP
target counts what really ran. "Restart" is what `countersign run` does: one bot (service and
platform client) stops, a new one starts on the same database, and the old card is clicked.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from adapters.discord import messages as discord_msg
from adapters.slack import blocks
from adapters.slack import messages as slack_msg
from bot.settings import Settings
from countersign.server import BotServer
from tests.e2e.agents.test_subagents_flow import (
    WAIT,
    discord_answer,
    discord_card,
    discord_embed,
    discord_mention,
    discord_use_subagents,
    has_buttons,
    requests_of,
    settle,
    slack_answer,
    slack_card,
    slack_use_subagents,
)
from tests.e2e.conftest import (
    ALICE,
    CAROL,
    CHANNEL,
    D_ALICE,
    D_APP,
    D_CAROL,
    D_CHANNEL,
    SIGNING_SECRET,
    TEAM,
    make_discord_settings,
)
from tests.e2e.discord.test_discord_flow import click as discord_click
from tests.e2e.slack.test_slack_flow import click
from tests.e2e.subagents_script import post_query, subagents_script
from tests.standins.gemini import GeminiStandIn
from tests.standins.slack_api import SlackApiStandIn
from tests.standins.slack_events import SlackEventSender
from tests.support.http_target import HttpTarget

pytestmark = pytest.mark.e2e

OPERATOR_FIELD = {"name": "operator wants to call", "value": "`http_request`", "inline": True}


@pytest.fixture
async def gemini(target: HttpTarget) -> AsyncIterator[GeminiStandIn]:
    """The Gemini stand-in playing the supervisor and the subagents."""
    async with GeminiStandIn(subagents_script(target.url()), api_key="e2e-gemini-key") as server:
        yield server


@asynccontextmanager
async def slack_bot(settings: Settings) -> AsyncIterator[tuple[BotServer, SlackEventSender]]:
    """A bot serving Slack, and a sender of signed events to it."""
    async with (
        BotServer(settings) as server,
        SlackEventSender(
            f"http://127.0.0.1:{server.port}/slack/events", SIGNING_SECRET, team_id=TEAM, bot_user_id="UBOT"
        ) as events,
    ):
        yield server, events


def model_turns(gemini: GeminiStandIn) -> dict[str, int]:
    """How many times each agent asked the model so far."""
    return {who: len(requests_of(gemini, who)) for who in ("supervisor", "operator", "researcher")}


def assert_operator_continued_in_place(gemini: GeminiStandIn, target: HttpTarget, name: str) -> None:
    """The operator asked the model twice in all: its call before the restart, its report (with the result) after."""
    first, report = requests_of(gemini, "operator")
    assert first.last_user_text == post_query(target.url(), name) and not first.function_responses
    [(tool, result)] = report.function_responses
    assert tool == "http_request" and '"echo": {"name": "' + name + '"}' in result["output"]
    assert model_turns(gemini) == {"supervisor": 2, "operator": 2, "researcher": 0}


def progress_lines(words: Any, subagent: str = "operator") -> set[str]:
    """Every progress line a platform shows for `subagent` (working, waiting, putting the answer together)."""
    return {words.working_one.format(names=subagent), words.waiting_one.format(names=subagent), words.agent}


def slack_progress_left(slack: SlackApiStandIn, thread_ts: str | None) -> list[str]:
    """Progress messages still in the thread (each must be deleted by the end of the turn)."""
    texts = [str(m.get("text", "")) for m in slack.messages(CHANNEL, thread_ts=thread_ts)]
    return [t for t in texts if t in progress_lines(slack_msg.PROGRESS)]


async def test_slack_restart_between_a_subagents_card_and_the_click(settings, gemini, slack, target):
    """operator's POST card survives a restart: the click on the old card is applied once, the POST runs once, operator continues, the answer is posted."""
    async with slack_bot(settings) as (_, events):
        assert "subagents" in await slack_use_subagents(events, slack)
        mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
        card = await slack_card(slack)
        assert "*operator* wants to call `http_request`" in json.dumps(card.blocks)
    assert target.requests == []
    assert model_turns(gemini) == {"supervisor": 1, "operator": 1, "researcher": 0}

    async with slack_bot(settings) as (second, events):
        # A double click and a second approver at once, on the card the first bot posted.
        clicks = await asyncio.gather(
            click(events, slack, ALICE, blocks.ACTION_APPROVE, card),
            click(events, slack, ALICE, blocks.ACTION_APPROVE, card),
            click(events, slack, CAROL, blocks.ACTION_APPROVE, card),
        )
        assert all(c.status == 200 for c in clicks)
        answer = await slack_answer(slack, mention.ts)
        told = await slack.wait_for(
            "chat.postEphemeral", lambda a: "already approved" in a.get("text", ""), count=2, timeout=WAIT
        )
        await settle(second)

    assert [(r.method, r.json) for r in target.requests] == [("POST", {"name": "widget"})]
    assert len(told) == 2
    assert answer.startswith("Result: operator reported: Report: ") and "widget" in answer
    assert_operator_continued_in_place(gemini, target, "widget")
    decided = json.dumps(slack.message(card.channel, card.ts)["blocks"])
    assert not has_buttons(slack.message(card.channel, card.ts))
    assert "Approved" in decided and "*operator*" in decided
    answers = [m for m in slack.messages(CHANNEL, thread_ts=mention.ts) if str(m.get("text", "")).startswith("Result")]
    assert len(answers) == 1
    working = slack_msg.PROGRESS.working_one.format(names="operator")
    shown = [c.args.get("text") for c in slack.calls_to("chat.postMessage") if c.args.get("thread_ts") == mention.ts]
    assert shown.count(working) == 2  # each bot showed operator working: before the card, and continuing after it
    assert slack_progress_left(slack, mention.ts) == []


async def test_discord_restart_between_a_subagents_card_and_the_click(db_url, gemini, target, discord_api):
    """A new discord.py client applies the click on operator's old card once; one POST; operator continues; one answer."""
    from tests.standins.discord_api import point_discord_py_at

    settings = make_discord_settings(db_url, gemini, target, discord_api)
    with point_discord_py_at(discord_api.api_url) as routing:
        async with BotServer(settings) as first:
            assert "subagents" in await discord_use_subagents(first, discord_api)
            await discord_mention(discord_api, D_ALICE, "post widget")
            card = await discord_card(discord_api)
            assert OPERATOR_FIELD in discord_embed(discord_api, card.message_id)["fields"]
        assert target.requests == []
        assert model_turns(gemini) == {"supervisor": 1, "operator": 1, "researcher": 0}

        async with BotServer(settings) as second:
            clicks = await asyncio.gather(
                discord_click(discord_api, card, D_ALICE, "approve", answered=False),
                discord_click(discord_api, card, D_ALICE, "approve", answered=False),
                discord_click(discord_api, card, D_CAROL, "approve", answered=False),
            )
            answer = await discord_answer(discord_api)
            tokens = "|".join(re.escape(c.token) for c in clicks)
            await discord_api.wait_for_request("POST", rf"/webhooks/{D_APP}/({tokens})$", count=2, timeout=WAIT)
            await settle(second)
    assert routing.blocked == []

    assert [(r.method, r.json) for r in target.requests] == [("POST", {"name": "widget"})]
    told = [f for c in clicks for f in discord_api.followups(c.id)]
    assert len(told) == 2 and all("already approved by" in f["content"] and f["flags"] & 64 for f in told)
    assert answer.startswith("Result: operator reported: Report: ") and "widget" in answer
    assert_operator_continued_in_place(gemini, target, "widget")
    edited = discord_api.message(card.message_id)
    assert not edited.get("components")
    assert "Approved" in edited["embeds"][0]["title"] and OPERATOR_FIELD in edited["embeds"][0]["fields"]
    contents = [str(m.get("content", "")) for m in discord_api.messages(D_CHANNEL)]
    assert len([t for t in contents if t.startswith("Result: ")]) == 1
    working = discord_msg.PROGRESS.working_one.format(names="operator")
    shown = [
        (r.json or {}).get("content") for r in discord_api.requests_to("POST", rf"/channels/{D_CHANNEL}/messages$")
    ]
    # A client that posted its indicator before it heard of the delegation edits it to say so.
    edited = {
        r.path
        for r in discord_api.requests_to("PATCH", rf"/channels/{D_CHANNEL}/messages/\d+$")
        if (r.json or {}).get("content") == working
    }
    assert shown.count(working) + len(edited) == 2  # each client showed operator working: before the card, and after it
    assert not progress_lines(discord_msg.PROGRESS) & set(contents), contents


async def test_slack_editing_a_subagents_card_runs_the_edited_arguments(bot, events, slack, target, gemini):
    """Edit on operator's card: the modal shows its proposal; the edited body is what is POSTed, once; operator reports it."""
    await slack_use_subagents(events, slack)
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    card = await slack_card(slack)
    await click(events, slack, ALICE, blocks.ACTION_EDIT, card)
    [opened] = await slack.wait_for("views.open", timeout=WAIT)
    view: dict[str, Any] = opened.args["view"]
    proposed = json.loads(view["blocks"][1]["element"]["initial_value"])
    assert (proposed["method"], proposed["url"], proposed["body"]) == ("POST", target.url(), {"name": "widget"})
    edited = proposed | {"body": {"name": "gadget"}, "headers": {"X-Edited": "yes"}}
    reply = await events.view_submission(
        ALICE, blocks.VIEW_EDIT, view["private_metadata"], {blocks.EDIT_BLOCK: {blocks.EDIT_INPUT: json.dumps(edited)}}
    )
    assert reply.status == 200 and not reply.body  # an empty ack closes the modal
    answer = await slack_answer(slack, mention.ts)
    await settle(bot)

    [ran] = target.requests
    assert (ran.method, ran.json, ran.headers.get("X-Edited")) == ("POST", {"name": "gadget"}, "yes")
    assert answer.startswith("Result: operator reported: Report: ")
    assert '\\"name\\": \\"gadget\\"' in answer and "widget" not in answer
    [_, report] = requests_of(gemini, "operator")
    [(tool, result)] = report.function_responses
    assert tool == "http_request" and '"echo": {"name": "gadget"}' in result["output"]
    shown = json.dumps(slack.message(card.channel, card.ts)["blocks"])
    assert "Approved with edits" in shown and "gadget" in shown and "*operator*" in shown
    assert not has_buttons(slack.message(card.channel, card.ts))
