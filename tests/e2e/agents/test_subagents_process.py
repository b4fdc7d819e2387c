"""`countersign run` with COUNTERSIGN_AGENT=subagents as a separate process, Slack and Gemini on stand-ins."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from adapters.slack import blocks
from tests.e2e.agents.test_subagents_flow import (
    WAIT,
    assert_slack_progress_cleared,
    has_buttons,
    slack_answer,
    slack_card,
)
from tests.e2e.cli.test_process import bot_env
from tests.e2e.conftest import ALICE, CHANNEL, SIGNING_SECRET, TEAM
from tests.e2e.slack.test_slack_flow import click
from tests.e2e.subagents_script import post_query, role, subagents_script
from tests.standins.gemini import GeminiStandIn
from tests.standins.slack_events import SlackEventSender
from tests.support.bot_process import BotProcess, free_port
from tests.support.http_target import HttpTarget

pytestmark = pytest.mark.e2e


@pytest.fixture
async def gemini(target: HttpTarget) -> AsyncIterator[GeminiStandIn]:
    """The Gemini stand-in playing the supervisor and the subagents."""
    async with GeminiStandIn(subagents_script(target.url()), api_key="e2e-gemini-key") as server:
        yield server


async def test_countersign_run_with_subagents_serves_the_whole_flow(db_url, gemini, slack, target, tmp_path):
    """Mention -> card naming operator -> Approve -> one POST -> answer with operator's report, in a real process."""
    port = free_port()
    env = bot_env(gemini, slack, target, port, DATABASE_URL=db_url, COUNTERSIGN_AGENT="subagents")
    bot = await BotProcess(env, tmp_path).start()
    try:
        await bot.wait_healthy(port, timeout=120)
        async with SlackEventSender(f"http://127.0.0.1:{port}/slack/events", SIGNING_SECRET, team_id=TEAM) as events:
            mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
            assert mention.status == 200
            card = await slack_card(slack)
            assert card.thread_ts == mention.ts
            assert "*operator* wants to call `http_request`" in json.dumps(card.blocks)
            assert target.requests == []
            approved = await click(events, slack, ALICE, blocks.ACTION_APPROVE, card)
            assert approved.status == 200
            answer = await slack_answer(slack, mention.ts)
    finally:
        code = await bot.stop(timeout=WAIT)
    assert code == 0, bot.stderr.decode()
    assert b"Traceback" not in bot.stderr, bot.stderr.decode()
    assert [(r.method, r.json) for r in target.requests] == [("POST", {"name": "widget"})]
    assert answer.startswith("Result: operator reported: Report: ") and "widget" in answer
    decided = slack.message(card.channel, card.ts)["blocks"]
    assert not has_buttons({"blocks": decided}) and "Approved" in json.dumps(decided)
    assert_slack_progress_cleared(slack, mention.ts, "operator")
    operator = [r for r in gemini.requests if role(r) == "operator"]
    assert len(operator) == 2 and operator[0].last_user_text == post_query(target.url(), "widget")
