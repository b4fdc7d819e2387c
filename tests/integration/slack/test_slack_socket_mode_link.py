"""The adapter's Socket Mode link: a real Bolt app over a real socket to the Slack stand-in."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.socket_mode import SocketModeConnection
from tests.standins.slack_api import SlackApiStandIn
from tests.standins.slack_socket import SocketModeEventSender
from tests.support.barriers import wait_until

TOKEN = "xoxb-test"
APP_TOKEN = "xapp-1-test"
WAIT_S = 60.0


@pytest.fixture
async def slack() -> AsyncIterator[SlackApiStandIn]:
    async with SlackApiStandIn(bot_token=TOKEN, app_token=APP_TOKEN) as stand_in:
        yield stand_in


async def test_stop_receiving_acks_the_envelopes_in_hand_and_leaves_later_ones_unacked(slack: SlackApiStandIn):
    """While stopping: the envelope being handled gets its ack, one arriving meanwhile gets none; then the socket closes."""
    app = AsyncApp(client=AsyncWebClient(token=TOKEN, base_url=slack.base_url), request_verification_enabled=False)
    entered, release = asyncio.Event(), asyncio.Event()
    seen: list[str] = []

    async def slow(body: dict[str, Any], next: Callable[[], Awaitable[None]]) -> None:
        # Before the ack, as the adapter's inbox claim is: the envelope stays in hand until released.
        seen.append(body["event"]["text"])
        entered.set()
        if body["event"]["text"] == "first":
            await release.wait()
        await next()

    @app.event("app_mention", middleware=[slow])
    async def mention() -> None:
        return None

    link = SocketModeConnection(app, APP_TOKEN)
    await link.connect(WAIT_S)
    events = SocketModeEventSender(slack.socket, wait_for_ack=False)
    slack.socket.max_retries = 0  # Slack's redelivery is not what this test is about
    try:
        first = await events.app_mention("C1", "U1", "first")
        await asyncio.wait_for(entered.wait(), WAIT_S)
        stopping = asyncio.create_task(link.stop_receiving(grace_s=WAIT_S))
        await wait_until(lambda: not link.receiving, "the link to stop taking envelopes")
        later = await events.app_mention("C1", "U1", "later")
        await slack.socket.wait_sent(later.envelope_id, attempts=1)
        assert await link.is_connected()  # still open: the first envelope is in hand
        release.set()
        await asyncio.wait_for(stopping, WAIT_S)
        assert len(slack.socket.acks_of(first.envelope_id)) == 1
        await slack.socket.wait_disconnected(timeout=WAIT_S)
        assert slack.socket.acks_of(later.envelope_id) == []
        assert seen == ["first"]  # the later envelope never reached Bolt
        assert not await link.is_connected()
    finally:
        release.set()
        await link.close()
