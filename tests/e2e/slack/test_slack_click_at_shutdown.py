"""A click Slack was told about (acked) is the bot's to finish, even when the bot stops right then."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest
from asyncpg.transaction import Transaction

from adapters.slack import blocks
from countersign.server import BotServer
from tests.e2e.conftest import ALICE, CHANNEL, SIGNING_SECRET, TEAM
from tests.e2e.slack.test_slack_flow import Card, click, wait_answer, wait_card
from tests.standins.slack_api import SlackApiStandIn
from tests.standins.slack_events import Delivery, SlackEventSender
from tests.support.barriers import GENEROUS_S, another_session_waits_for_a_lock, wait_until, wait_until_async

pytestmark = pytest.mark.e2e


async def _approve_with_the_review_locked(
    bot: BotServer, slack: SlackApiStandIn, holder: asyncpg.Connection
) -> tuple[Delivery, Card, Transaction]:
    """A card, its review's row locked by `holder`, then Approve: acked while the decision waits for the row.

    Returns the mention, the card and `holder`'s open transaction (roll it back to let the decision go on).
    """
    async with SlackEventSender(
        f"http://127.0.0.1:{bot.port}/slack/events", SIGNING_SECRET, team_id=TEAM, bot_user_id="UBOT"
    ) as events:
        mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
        [card] = await wait_card(slack)
        holding = holder.transaction()
        await holding.start()
        await holder.execute(
            "SELECT 1 FROM reviews WHERE id = (SELECT review_id FROM approvals WHERE id = $1) FOR UPDATE",
            card.approval_id,
        )
        delivery = await click(events, slack, ALICE, blocks.ACTION_APPROVE, card)
        assert delivery.status == 200  # acked while the decision waits
        await wait_until_async(
            lambda: another_session_waits_for_a_lock(holder), "the decision waiting for the review's row"
        )
    return mention, card, holding


async def test_an_approve_acked_as_the_bot_stops_is_applied_before_it_exits(
    settings, db_url: str, slack: SlackApiStandIn, target
):
    """The Approve is acked while its decision waits for a row lock; the bot begins to stop; the
    lock goes: the decision is recorded, the call made and the answer posted before the bot exits.

    The decision runs as the service's tracked background work (`adapters.slack.after_ack`), which
    the stop waits for; as a task of Bolt's own it was not waited for, and the closing pools cut it.
    """
    holder = await asyncpg.connect(db_url)
    bot = BotServer(settings)
    await bot.__aenter__()
    try:
        assert bot.runtime is not None
        service = bot.runtime.service
        mention, card, holding = await _approve_with_the_review_locked(bot, slack, holder)
        stopping = asyncio.create_task(bot.__aexit__(None, None, None))
        await wait_until(lambda: service.tasks.closing, "the stop draining the background work")
        assert not stopping.done()
        await holding.rollback()
        await asyncio.wait_for(stopping, GENEROUS_S)
    finally:
        if not bot.runtime or not bot.runtime.service.tasks.closing:
            await bot.__aexit__(None, None, None)
        status = await holder.fetchval("SELECT status FROM approvals WHERE id = $1", card.approval_id)
        await holder.close()
    assert status == "approved"
    assert [(r.method, r.json) for r in target.requests] == [("POST", {"name": "widget"})]
    [answer] = await wait_answer(slack, mention.ts)
    assert answer


async def test_the_stop_waits_for_the_resume_an_acked_approve_started_during_the_drain(
    settings, db_url: str, slack: SlackApiStandIn, target, monkeypatch
):
    """As above, but the approved call is still running when the click's own task has ended: the
    resume the decision started (a task spawned while the stop drains) is waited for too.

    `TaskTracker.drain` waited for the tasks it had when it began; the Approve's task ends as soon
    as the decision is recorded, and the resume it spawned was not among them: the stop went on
    to close the Web API session and the pools under the running call.
    """
    holder = await asyncpg.connect(db_url)
    bot = BotServer(settings)
    await bot.__aenter__()
    drained = asyncio.Event()
    try:
        assert bot.runtime is not None
        service = bot.runtime.service
        drain = service.tasks.drain

        async def observed_drain(grace_s: float, **options: Any) -> bool:
            cut = await drain(grace_s, **options)
            drained.set()
            return cut

        monkeypatch.setattr(service.tasks, "drain", observed_drain)
        mention, card, holding = await _approve_with_the_review_locked(bot, slack, holder)
        stopping = asyncio.create_task(bot.__aexit__(None, None, None))
        await wait_until(lambda: service.tasks.closing, "the stop draining the background work")
        target.gate.arm()
        await holding.rollback()
        await target.gate.wait_arrived(GENEROUS_S)  # the approved call is being made, held here
        drained_before_the_call_ended = drained.is_set()
        target.gate.release()
        await asyncio.wait_for(stopping, GENEROUS_S)
    finally:
        target.gate.release()
        if not bot.runtime or not bot.runtime.service.tasks.closing:
            await bot.__aexit__(None, None, None)
        status = await holder.fetchval("SELECT status FROM approvals WHERE id = $1", card.approval_id)
        await holder.close()
    assert status == "approved"
    assert not drained_before_the_call_ended, "the drain ended while the acked click's call was still running"
    [answer] = await wait_answer(slack, mention.ts)
    assert answer
