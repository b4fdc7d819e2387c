"""Exactly once on Slack: racing clicks and forms, replays, two replicas, ten cards at once."""

from __future__ import annotations

import asyncio
import json

import asyncpg
import pytest

from adapters.slack import blocks
from countersign.server import BotServer
from tests.adversarial.conftest import ModelRules
from tests.adversarial.slack_support import (
    card_ready,
    ephemerals_to,
    has_buttons,
    posted_texts,
    sender,
)
from tests.e2e.conftest import ALICE, BOB, CAROL, CHANNEL
from tests.e2e.slack.test_slack_flow import card_state, click, settle, wait_answer, wait_card
from tests.standins.gemini import calls, text
from tests.standins.slack_api import SlackApiStandIn

pytestmark = pytest.mark.e2e


def _reject_form(user: str, approval_id: str, reason: str):
    return user, blocks.VIEW_REJECT, approval_id, {blocks.REASON_BLOCK: {blocks.REASON_INPUT: reason}}


async def test_approve_edit_and_reject_racing_decide_once(bot, events, slack: SlackApiStandIn, target):
    """Three approve clicks, an edit form and a reject form at the same moment: one outcome, applied once."""
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    [card] = await card_ready(bot, slack)
    edited = {"method": "POST", "url": target.url(), "body": {"name": "edited"}}
    results = await asyncio.gather(
        click(events, slack, ALICE, blocks.ACTION_APPROVE, card),
        click(events, slack, CAROL, blocks.ACTION_APPROVE, card),
        events.view_submission(
            ALICE, blocks.VIEW_EDIT, card.approval_id, {blocks.EDIT_BLOCK: {blocks.EDIT_INPUT: json.dumps(edited)}}
        ),
        events.view_submission(*_reject_form(CAROL, card.approval_id, "racing")),
        click(events, slack, ALICE, blocks.ACTION_APPROVE, card),
    )
    assert all(r.status == 200 for r in results)
    await wait_answer(slack, mention.ts)
    await settle(bot)
    shown = json.dumps(card_state(slack, card)["blocks"])
    assert not has_buttons(slack, card)
    if "Approved with edits" in shown:
        assert [r.json for r in target.requests] == [{"name": "edited"}]
    elif "Rejected" in shown:
        assert target.requests == []
    else:
        assert "Approved" in shown and [r.json for r in target.requests] == [{"name": "widget"}]
    # Every other attempt is told it came too late: forms inside the form, clicks privately.
    refused_forms = [r for r in results[2:4] if r.json]
    told = await slack.wait_for("chat.postEphemeral", count=4 - len(refused_forms))
    assert len(told) == 4 - len(refused_forms)
    assert all("already" in t.args["text"] for t in told)
    assert all("already" in next(iter(r.json["errors"].values())) for r in refused_forms)
    assert len(posted_texts(slack, mention.ts)) == 2  # the card and one answer


async def test_a_replayed_click_is_told_and_changes_nothing(bot, events, slack: SlackApiStandIn, target):
    """The same signed block_actions body sent again (a retry or a replay) is answered 'already approved'."""
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    [card] = await card_ready(bot, slack)
    first = await click(events, slack, ALICE, blocks.ACTION_APPROVE, card)
    await wait_answer(slack, mention.ts)
    headers = {"Content-Type": first.request_headers["Content-Type"], **events.sign(first.request_body)}
    again = await events.send_raw(first.request_body, headers)
    assert again.status == 200
    [told] = await slack.wait_for("chat.postEphemeral", lambda a: a.get("user") == ALICE)
    await settle(bot)
    assert "already approved" in told.args["text"]
    assert len(target.requests) == 1
    assert len(posted_texts(slack, mention.ts)) == 2


async def test_two_replicas_receiving_the_same_click_decide_once(settings, slack: SlackApiStandIn, target):
    """Two bots on one database each get the click (and a second approver's): one decision, one request."""
    async with (
        BotServer(settings) as one,
        BotServer(settings) as two,
        sender(one.port) as to_one,
        sender(two.port) as to_two,
    ):
        mention = await to_one.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
        [card] = await wait_card(slack)
        await asyncio.gather(
            click(to_one, slack, ALICE, blocks.ACTION_APPROVE, card),
            click(to_two, slack, ALICE, blocks.ACTION_APPROVE, card),
            click(to_two, slack, CAROL, blocks.ACTION_APPROVE, card),
        )
        await wait_answer(slack, mention.ts)
        await slack.wait_for("chat.postEphemeral", lambda a: "already approved" in a.get("text", ""), count=2)
        await settle(one)
        await settle(two)
    assert len(target.requests) == 1
    assert len(posted_texts(slack, mention.ts)) == 2


async def test_two_replicas_receiving_the_same_event_run_the_agent_once(settings, slack, gemini, target):
    """Slack retries a mention to another replica while the first handles it: one turn, one card."""
    async with (
        BotServer(settings) as one,
        BotServer(settings) as two,
        sender(one.port) as to_one,
        sender(two.port) as to_two,
    ):
        first = await to_one.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
        again = await to_two.retry(first)
        assert (first.status, again.status) == (200, 200)
        [card] = await wait_card(slack)
        await settle(one)
        await settle(two)
        assert len(gemini.requests) == 1
        await click(to_two, slack, ALICE, blocks.ACTION_APPROVE, card)
        await wait_answer(slack, first.ts)
        await settle(one)
        await settle(two)
    assert len(target.requests) == 1
    assert len(posted_texts(slack, first.ts)) == 2


_WAITING_FOR_A_LOCK = """
SELECT EXISTS (
    SELECT 1 FROM pg_stat_activity
    WHERE wait_event_type = 'Lock' AND query ILIKE $1 AND pid <> pg_backend_pid()
)
"""


async def _until(watcher: asyncpg.Connection, sql: str, *args: object) -> None:
    """Poll until `sql` is true (a fresh connection: pg_stat_activity is cached per transaction)."""
    for _ in range(3000):
        if await watcher.fetchval(sql, *args):
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"waited 60 s for: {sql.strip()} {args}")


async def test_a_message_landing_between_the_decision_and_the_resume_does_not_drop_the_approved_call(
    bot, events, slack: SlackApiStandIn, target, db_url
):
    """Bob writes at the moment Alice's approval commits: the approved request is still sent, once."""
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    [card] = await card_ready(bot, slack)
    # Fix the interleaving with PostgreSQL's own locks (nothing in the bot is replaced):
    # 1. a row lock on the review holds Alice's decision just before it changes anything;
    # 2. a queued ACCESS EXCLUSIVE request on approvals makes Bob's settle() wait right after it
    #    read the review as 'pending' (the decision, holding a lock on approvals already, goes first);
    # 3. the decision commits; then Bob's settle() reads the approvals.
    holder, locker, watcher = [await asyncpg.connect(db_url) for _ in range(3)]
    try:
        async with holder.transaction():
            await holder.execute("SELECT 1 FROM reviews FOR UPDATE")
            clicking = asyncio.create_task(click(events, slack, ALICE, blocks.ACTION_APPROVE, card))
            await _until(watcher, _WAITING_FOR_A_LOCK, "%FROM reviews WHERE id = $1 FOR UPDATE%")
            locked = locker.transaction()
            await locked.start()
            locking = asyncio.create_task(locker.execute("LOCK TABLE approvals IN ACCESS EXCLUSIVE MODE"))
            await _until(watcher, _WAITING_FOR_A_LOCK, "LOCK TABLE approvals%")
            await events.message(CHANNEL, BOB, "is it done?", thread_ts=mention.ts)
            await _until(watcher, _WAITING_FOR_A_LOCK, "%approvals%pending%ORDER BY%")
        await _until(watcher, "SELECT EXISTS (SELECT 1 FROM reviews WHERE status <> 'pending')")
        await locking
        await locked.commit()
        await clicking
    finally:
        for connection in (holder, locker, watcher):
            await connection.close()
    await wait_answer(slack, mention.ts, starts="You said: is it done?")
    await settle(bot)
    assert [r.json for r in target.requests] == [{"name": "widget"}], "the approved call was dropped"


async def test_ten_gated_calls_decided_at_once_resume_once_in_call_order(
    bot, events, slack: SlackApiStandIn, target, gemini, model_rules: ModelRules
):
    """Ten cards from one model turn, approved and rejected concurrently: five requests, one answer, results in order."""
    model_rules.on(
        "post ten",
        calls([("http_request", {"method": "POST", "url": target.url(), "body": {"n": n}}) for n in range(10)]),
    )
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post ten")
    cards = await card_ready(bot, slack, count=10)
    shown = [json.dumps(c.blocks) for c in cards]
    assert [f"{k} of 10" in s for k, s in enumerate(shown, 1)] == [True] * 10
    await asyncio.gather(
        *[
            click(events, slack, ALICE, blocks.ACTION_APPROVE, card)
            if n % 2 == 0
            else events.view_submission(*_reject_form(ALICE, card.approval_id, f"not {n}"))
            for n, card in enumerate(cards)
        ]
    )
    [answer] = await wait_answer(slack, mention.ts)
    await settle(bot)
    assert sorted(r.json["n"] for r in target.requests) == [0, 2, 4, 6, 8]
    responses = gemini.requests[-1].function_responses
    assert len(responses) == 10
    for n, (_, response) in enumerate(responses):
        shown = json.dumps(response)
        expected = f"not {n}" if n % 2 else f'\\"n\\": {n}'
        assert expected in shown, (n, shown)
    assert answer.startswith("Result: ")
    assert len([t for t in posted_texts(slack, mention.ts) if t.startswith("Result: ")]) == 1


async def test_a_late_click_after_the_conversation_moved_on_changes_nothing(
    bot, events, slack: SlackApiStandIn, target
):
    """An admin clicks Reject on an old, decided card after two more turns: told, nothing runs again."""
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    [card] = await card_ready(bot, slack)
    await click(events, slack, ALICE, blocks.ACTION_APPROVE, card)
    await wait_answer(slack, mention.ts)
    await events.message(CHANNEL, ALICE, "thanks", thread_ts=mention.ts)
    await wait_answer(slack, mention.ts, starts="You said: thanks")
    await click(events, slack, CAROL, blocks.ACTION_REJECT, card)
    reply = await events.view_submission(*_reject_form(CAROL, card.approval_id, "too late"))
    await slack.wait_for("chat.postEphemeral", lambda a: a.get("user") == CAROL)
    await settle(bot)
    assert "already approved" in ephemerals_to(slack, CAROL)[0]
    assert "already approved" in reply.json["errors"][blocks.REASON_BLOCK]
    assert slack.calls_to("views.open") == []
    assert len(target.requests) == 1
    assert "too late" not in json.dumps(card_state(slack, card)["blocks"])


async def test_a_message_sent_while_the_resume_runs_is_answered_after_it(
    bot, events, slack: SlackApiStandIn, target, gemini, model_rules: ModelRules
):
    """Bob writes while the approved turn is still with the model: he waits, then gets his own answer."""
    slow_once = {"left": 1}

    def slow_result(request):
        if request.function_responses and slow_once["left"]:
            slow_once["left"] -= 1
            return text("Result: slowly", delay_seconds=1.0)
        return None

    model_rules.rules.append(slow_result)
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    [card] = await card_ready(bot, slack)
    await click(events, slack, ALICE, blocks.ACTION_APPROVE, card)
    await gemini.wait_for_requests(2)  # the second model call carries the tool's result
    assert len(target.requests) == 1
    await events.message(CHANNEL, BOB, "me too", thread_ts=mention.ts)
    await wait_answer(slack, mention.ts, starts="You said: me too")
    await settle(bot)
    texts = posted_texts(slack, mention.ts)
    assert texts.index("Result: slowly") < texts.index("You said: me too")
    assert ephemerals_to(slack, BOB) == []
    assert len(target.requests) == 1


async def test_a_click_before_the_card_reference_is_stored_still_updates_the_card(
    bot, events, slack: SlackApiStandIn, target
):
    """The database is slow to store where the card went; Alice clicks at once: the card still shows the outcome."""
    assert bot.runtime is not None
    # A slow statement, not a mock: storing a card reference takes a second (statement-level, so
    # it delays nothing else and locks no row while it waits).
    await bot.runtime.database.pool.execute(
        """
        CREATE FUNCTION slow_card_ref() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN PERFORM pg_sleep(1); RETURN NULL; END $$;
        CREATE TRIGGER slow_card_ref BEFORE UPDATE OF card_ref ON approvals
            FOR EACH STATEMENT EXECUTE FUNCTION slow_card_ref();
        """
    )
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    [card] = await wait_card(slack)
    await click(events, slack, ALICE, blocks.ACTION_APPROVE, card)
    await wait_answer(slack, mention.ts)
    await settle(bot)
    assert len(target.requests) == 1
    assert not has_buttons(slack, card), "the decided card still offers Approve / Edit / Reject"
