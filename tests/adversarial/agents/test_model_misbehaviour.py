"""A model that misbehaves: endless tool loops, mixed and duplicate calls, a card per call."""

from __future__ import annotations

import json

import pytest

from adapters.slack import blocks
from bot.agents.prompts import STEP_LIMIT_MESSAGE
from tests.adversarial.conftest import ModelRules
from tests.adversarial.slack_support import card_ready, posted_texts
from tests.e2e.conftest import ALICE, CHANNEL
from tests.e2e.slack.test_slack_flow import click, settle, wait_answer
from tests.standins.gemini import GeminiRequest, call, calls
from tests.standins.slack_api import SlackApiStandIn

pytestmark = pytest.mark.e2e


async def test_a_model_that_never_stops_calling_tools_gets_a_closing_answer(
    bot, events, slack: SlackApiStandIn, target, gemini, model_rules: ModelRules
):
    """An endless loop of ungated GETs ends with the step-limit answer, not an error, after a bounded number of calls."""

    def forever(request: GeminiRequest):
        if "loop forever" in json.dumps(request.contents):
            return call("http_request", {"method": "GET", "url": target.url("/again")})
        return None

    model_rules.rules.append(forever)
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> loop forever")
    [answer] = await wait_answer(slack, mention.ts, starts=STEP_LIMIT_MESSAGE[:30])
    await settle(bot)
    assert 1 <= len(target.requests) <= 8
    assert not any("went wrong" in t for t in posted_texts(slack, mention.ts))
    assert answer.startswith(STEP_LIMIT_MESSAGE[:30])


async def test_an_ungated_call_next_to_a_gated_one_waits_for_the_decision(
    bot, events, slack: SlackApiStandIn, target, gemini, model_rules: ModelRules
):
    """A GET in the same model turn as a POST does not run before the POST's card is decided; results stay in order."""
    model_rules.on(
        "get and post",
        calls(
            [
                ("http_request", {"method": "GET", "url": target.url("/first")}),
                ("http_request", {"method": "POST", "url": target.url("/second"), "body": {"n": 2}}),
            ]
        ),
    )
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> get and post")
    [card] = await card_ready(bot, slack)
    await settle(bot)
    assert target.requests == []
    await click(events, slack, ALICE, blocks.ACTION_REJECT, card)
    await events.view_submission(
        ALICE, blocks.VIEW_REJECT, card.approval_id, {blocks.REASON_BLOCK: {blocks.REASON_INPUT: "only read"}}
    )
    await wait_answer(slack, mention.ts)
    await settle(bot)
    assert [(r.method, r.path) for r in target.requests] == [("GET", "/first")]
    [(_, first), (_, second)] = gemini.requests[-1].function_responses
    assert "200" in json.dumps(first) or "201" in json.dumps(first)
    assert "only read" in json.dumps(second)


async def test_two_identical_gated_calls_get_two_cards_decided_separately(
    bot, events, slack: SlackApiStandIn, target, gemini, model_rules: ModelRules
):
    """The same POST twice in one turn: two cards; approving one and rejecting the other sends exactly one."""
    same = ("http_request", {"method": "POST", "url": target.url(), "body": {"n": 1}})
    model_rules.on("post twice", calls([same, same]))
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post twice")
    first, second = await card_ready(bot, slack, count=2)
    assert first.approval_id != second.approval_id
    await click(events, slack, ALICE, blocks.ACTION_REJECT, second)
    await events.view_submission(
        ALICE, blocks.VIEW_REJECT, second.approval_id, {blocks.REASON_BLOCK: {blocks.REASON_INPUT: "dup"}}
    )
    await click(events, slack, ALICE, blocks.ACTION_APPROVE, first)
    await wait_answer(slack, mention.ts)
    await settle(bot)
    assert len(target.requests) == 1
    responses = [json.dumps(r) for _, r in gemini.requests[-1].function_responses]
    assert "201" in responses[0] and "dup" in responses[1]
