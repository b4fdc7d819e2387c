"""Acks before decisions (decision 0029): what holds a click's decision back, and what must not."""

from __future__ import annotations

import asyncio

import pytest

from adapters.slack import after_ack, blocks
from countersign.server import BotServer
from tests.e2e.conftest import ALICE, CHANNEL, SIGNING_SECRET, TEAM
from tests.e2e.test_slack_flow import click, wait_answer, wait_card
from tests.standins.slack_api import SlackApiStandIn
from tests.standins.slack_events import SlackEventSender
from tests.support.barriers import GENEROUS_S

pytestmark = pytest.mark.e2e


async def test_a_sender_slow_to_send_its_body_holds_no_decision_back(
    settings, slack: SlackApiStandIn, target, monkeypatch
):
    """Anyone who can reach the port sends a POST's headers and keeps its body back; an Approve
    clicked meanwhile is still applied.

    The gate counted a request from its receipt, before its body was read: one such connection
    (no signature needed) held every decision back for `MAX_DEFER_S`; with that made endless
    here, the decision never ran. A request now counts once its body is in.
    """
    monkeypatch.setattr(after_ack, "MAX_DEFER_S", 3600.0)
    async with BotServer(settings) as bot:
        reader, writer = await asyncio.open_connection("127.0.0.1", bot.port)
        try:
            async with SlackEventSender(
                f"http://127.0.0.1:{bot.port}/slack/events", SIGNING_SECRET, team_id=TEAM, bot_user_id="UBOT"
            ) as events:
                mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
                [card] = await wait_card(slack)
                writer.write(
                    b"POST /slack/events HTTP/1.1\r\nHost: bot\r\nContent-Type: application/json\r\n"
                    b"Expect: 100-continue\r\nContent-Length: 1000\r\n\r\n"
                )
                await writer.drain()
                # aiohttp answers 100 Continue as it hands the request to the handler.
                continued = await asyncio.wait_for(reader.readline(), GENEROUS_S)
                assert continued.startswith(b"HTTP/1.1 100"), continued
                writer.write(b"{")  # and then nothing more
                await writer.drain()
                delivery = await click(events, slack, ALICE, blocks.ACTION_APPROVE, card)
                assert delivery.status == 200
                await wait_answer(slack, mention.ts)
        finally:
            writer.close()
