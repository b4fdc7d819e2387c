"""Who may decide a Slack card: clickers from other teams, forged ids, forms nobody opened."""

from __future__ import annotations

import json

import pytest

from adapters.slack import blocks
from tests.adversarial.slack_support import (
    card_json,
    card_ready,
    ephemerals_to,
    has_buttons,
    sender,
)
from tests.e2e.conftest import ALICE, BOB, CAROL, CHANNEL
from tests.e2e.slack.test_slack_flow import click, settle, wait_answer
from tests.standins.slack_api import SlackApiStandIn
from tests.standins.slack_events import SlackEventSender

pytestmark = pytest.mark.e2e

MALLORY = "UMALLORY"


async def test_an_admin_of_another_team_is_refused(bot, events, slack: SlackApiStandIn, target):
    """A workspace admin clicking from team T2 (same app, same signing secret) decides nothing."""
    slack.add_user(MALLORY, "mallory", is_admin=True)
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    [card] = await card_ready(bot, slack)
    async with sender(bot.port, team_id="T2") as foreign:
        await click(foreign, slack, MALLORY, blocks.ACTION_APPROVE, card)
        await click(foreign, slack, MALLORY, blocks.ACTION_EDIT, card)
        reply = await foreign.view_submission(
            MALLORY,
            blocks.VIEW_REJECT,
            card.approval_id,
            {blocks.REASON_BLOCK: {blocks.REASON_INPUT: "mine now"}},
        )
    await slack.wait_for("chat.postEphemeral", lambda a: a.get("user") == MALLORY, count=2)
    await settle(bot)
    assert all("another workspace" in text for text in ephemerals_to(slack, MALLORY))
    assert reply.json["response_action"] == "errors"
    assert "another workspace" in reply.json["errors"][blocks.REASON_BLOCK]
    assert slack.calls_to("views.open") == []
    assert target.requests == []
    assert has_buttons(slack, card)
    await click(events, slack, ALICE, blocks.ACTION_APPROVE, card)
    await wait_answer(slack, mention.ts)
    assert len(target.requests) == 1


async def test_a_forged_value_naming_another_threads_approval_is_refused(bot, events, slack: SlackApiStandIn, target):
    """Bob clicks his own card with the value of Alice's approval: checked against Alice's, refused."""
    alice = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    [alice_card] = await card_ready(bot, slack)
    bob = await events.app_mention(CHANNEL, BOB, "<@UBOT> post gadget")
    [_, bob_card] = await card_ready(bot, slack, count=2)
    assert bob_card.thread_ts == bob.ts != alice.ts
    await events.block_actions(
        BOB,
        CHANNEL,
        bob_card.ts,
        blocks.ACTION_APPROVE,
        alice_card.approval_id,
        slack.new_trigger_id(),
        thread_ts=bob_card.thread_ts,
    )
    [refusal] = await slack.wait_for("chat.postEphemeral", lambda a: a.get("user") == BOB)
    await settle(bot)
    assert "can't decide" in refusal.args["text"]
    assert target.requests == []
    assert has_buttons(slack, alice_card) and has_buttons(slack, bob_card)


async def test_a_form_submitted_for_an_approval_the_user_could_not_open_is_refused(
    bot, events, slack: SlackApiStandIn, target
):
    """Bob submits Edit and Reject forms naming Alice's approval without opening them: errors, nothing changes."""
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    [card] = await card_ready(bot, slack)
    edited = {"method": "POST", "url": target.url("/evil"), "body": {"name": "bob was here"}}
    edit = await events.view_submission(
        BOB, blocks.VIEW_EDIT, card.approval_id, {blocks.EDIT_BLOCK: {blocks.EDIT_INPUT: json.dumps(edited)}}
    )
    reject = await events.view_submission(
        BOB, blocks.VIEW_REJECT, card.approval_id, {blocks.REASON_BLOCK: {blocks.REASON_INPUT: "no"}}
    )
    assert edit.json["response_action"] == "errors"
    assert "can't decide" in edit.json["errors"][blocks.EDIT_BLOCK]
    assert reject.json["response_action"] == "errors"
    assert "can't decide" in reject.json["errors"][blocks.REASON_BLOCK]
    await settle(bot)
    assert target.requests == []
    assert has_buttons(slack, card) and "bob was here" not in card_json(slack, card)
    await click(events, slack, ALICE, blocks.ACTION_APPROVE, card)
    await wait_answer(slack, mention.ts)
    assert [(r.path, r.json) for r in target.requests] == [("/things", {"name": "widget"})]


async def test_bob_writing_in_alices_thread_is_the_requester_of_his_call(bot, events, slack: SlackApiStandIn, target):
    """The requester is whoever wrote the message that led to the call, not who started the thread."""
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> hello")
    await wait_answer(slack, mention.ts, starts="You said: hello")
    await events.message(CHANNEL, BOB, "post gadget", thread_ts=mention.ts)
    [card] = await card_ready(bot, slack)
    assert card.thread_ts == mention.ts
    assert f"<@{BOB}>" in card_json(slack, card) and f"<@{ALICE}>" not in card_json(slack, card)
    await click(events, slack, ALICE, blocks.ACTION_APPROVE, card)
    [refusal] = await slack.wait_for("chat.postEphemeral", lambda a: a.get("user") == ALICE)
    assert "can't decide" in refusal.args["text"]
    await settle(bot)
    assert target.requests == []
    await click(events, slack, BOB, blocks.ACTION_APPROVE, card)
    await wait_answer(slack, mention.ts)
    assert [r.json for r in target.requests] == [{"name": "gadget"}]


@pytest.mark.parametrize(
    "value",
    ["", "0" * 32, "' OR 1=1 --", "../../approvals", "x" * 2000, "\u202e\u200b"],
    ids=["empty", "zeros", "sql", "path", "2000-chars", "invisible"],
)
async def test_made_up_approval_ids_change_nothing(bot, events: SlackEventSender, slack, target, value):
    """Buttons and forms naming an approval that does not exist are answered 'can't find' and change nothing."""
    mention = await events.app_mention(CHANNEL, CAROL, "<@UBOT> post widget")
    [card] = await card_ready(bot, slack)
    await events.block_actions(
        CAROL, CHANNEL, card.ts, blocks.ACTION_APPROVE, value, slack.new_trigger_id(), thread_ts=mention.ts
    )
    [told] = await slack.wait_for("chat.postEphemeral", lambda a: a.get("user") == CAROL)
    reply = await events.view_submission(
        CAROL, blocks.VIEW_REJECT, value, {blocks.REASON_BLOCK: {blocks.REASON_INPUT: "x"}}
    )
    await settle(bot)
    assert "can't find this approval" in told.args["text"]
    assert reply.json["response_action"] == "errors"
    assert "can't find this approval" in reply.json["errors"][blocks.REASON_BLOCK]
    assert target.requests == []
    assert has_buttons(slack, card)
