"""Admin-configured approvals under attack: quorum, self-approval off, clicks on stale cards."""

from __future__ import annotations

import json

import pytest

from adapters.slack import blocks
from tests.adversarial.slack_support import card_json, card_ready, ephemerals_to, has_buttons, slash_countersign
from tests.e2e.conftest import ALICE, BOB, CAROL, CHANNEL
from tests.e2e.slack.test_slack_flow import card_state, click, settle, wait_answer
from tests.standins.slack_api import SlackApiStandIn
from tests.support.barriers import slack_listeners_done, wait_until

pytestmark = pytest.mark.e2e


async def _private_reply(slack: SlackApiStandIn, user: str, before: int) -> str:
    """Wait for the next ephemeral message to `user` (the answer to a click) and return it."""
    calls = await slack.wait_for("chat.postEphemeral", lambda a: a.get("user") == user, count=before + 1)
    return str(calls[-1].args.get("text", ""))


async def _click(events, slack: SlackApiStandIn, user: str, card, **kwargs) -> str:
    """Click Approve as `user` and return the private reply (a vote count or a refusal)."""
    before = len(ephemerals_to(slack, user))
    await events.block_actions(
        user,
        CHANNEL,
        card.ts,
        blocks.ACTION_APPROVE,
        card.approval_id,
        slack.new_trigger_id(),
        thread_ts=card.thread_ts,
        **kwargs,
    )
    return await _private_reply(slack, user, before)


async def _edit(events, user: str, approval_id: str, args: dict[str, object]):
    return await events.view_submission(
        user, blocks.VIEW_EDIT, approval_id, {blocks.EDIT_BLOCK: {blocks.EDIT_INPUT: json.dumps(args)}}
    )


async def test_with_self_approval_off_the_requester_cannot_edit_or_approve_but_may_reject(
    bot, events, slack: SlackApiStandIn, target
):
    """Self-approval off: Alice's approve click and edit form are refused (an edit is an approval); her reject works."""
    assert "self-approval" in (await slash_countersign(events, slack, "self-approval off")).lower()
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    [card] = await card_ready(bot, slack)
    refused = await _click(events, slack, ALICE, card)
    edit = await _edit(events, ALICE, card.approval_id, {"method": "POST", "url": target.url(), "body": {"x": 1}})
    assert edit.json["response_action"] == "errors"
    await settle(bot)
    assert target.requests == [] and has_buttons(slack, card)
    assert "self-approval is off" in refused
    reject = await events.view_submission(
        ALICE, blocks.VIEW_REJECT, card.approval_id, {blocks.REASON_BLOCK: {blocks.REASON_INPUT: "changed my mind"}}
    )
    assert reject.status == 200 and not reject.body
    await wait_answer(slack, mention.ts)
    await settle(bot)
    assert target.requests == [] and "Rejected" in card_json(slack, card)


async def test_quorum_needs_two_different_people_whatever_they_click(bot, events, slack: SlackApiStandIn, target):
    """Quorum 2: the requester's approve, edit and approve again count as one person; Bob cannot be the second."""
    await slash_countersign(events, slack, "quorum http_request 2")
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    [card] = await card_ready(bot, slack)
    assert "1 of 2" in await _click(events, slack, ALICE, card)
    await _edit(events, ALICE, card.approval_id, {"method": "POST", "url": target.url(), "body": {"name": "mine"}})
    assert "already" in await _click(events, slack, ALICE, card)
    assert "can't decide" in await _click(events, slack, BOB, card)
    await settle(bot)
    assert target.requests == [] and has_buttons(slack, card)
    await click(events, slack, CAROL, blocks.ACTION_APPROVE, card)
    await wait_answer(slack, mention.ts)
    await settle(bot)
    assert [r.json for r in target.requests] == [{"name": "mine"}]


async def test_a_click_on_a_card_drawn_before_an_edit_does_not_approve_the_edit(
    bot, events, slack: SlackApiStandIn, target
):
    """Quorum 2: Carol clicks Approve on the card as it showed 'widget'; Alice's edit to 'exfiltrate' must not run."""
    await slash_countersign(events, slack, "quorum http_request 2")
    await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    [card] = await card_ready(bot, slack)
    seen_by_carol = card_state(slack, card)
    assert "widget" in json.dumps(seen_by_carol["blocks"])
    edited = {"method": "POST", "url": target.url("/export"), "body": {"name": "exfiltrate"}}
    await _edit(events, ALICE, card.approval_id, edited)
    await settle(bot)
    assert target.requests == []
    # Slack sends the message the click was made on; Carol's client still showed the old card.
    before = len(slack.calls_to("chat.update"))
    await events.block_actions(
        CAROL,
        CHANNEL,
        card.ts,
        blocks.ACTION_APPROVE,
        card.approval_id,
        slack.new_trigger_id(),
        thread_ts=card.thread_ts,
        message=seen_by_carol,
        block_id=next(b["block_id"] for b in seen_by_carol["blocks"] if b.get("type") == "actions"),
    )
    # Either way the bot answers: a redrawn card (vote or decision) or a private refusal.
    await wait_until(
        lambda: bool(ephemerals_to(slack, CAROL)) or len(slack.calls_to("chat.update")) > before, "an answer to Carol"
    )
    await slack_listeners_done()
    await settle(bot)
    assert [r.path for r in target.requests] == [], "Carol's click on 'widget' approved 'exfiltrate'"
