"""The Slack stand-in's Socket Mode speaks Slack: slack_sdk's client and Bolt's handler accept it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncAck, AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.web.async_client import AsyncWebClient

from tests.standins.slack_api import SlackApiStandIn
from tests.standins.slack_socket import SocketModeEventSender

TOKEN = "xoxb-test"
APP_TOKEN = "xapp-1-test"
CHANNEL = "C1"
PING_S = 0.5
"""The clients' ping interval here: slack_sdk notices a dead socket on its next ping tick."""


@pytest.fixture
async def slack() -> AsyncIterator[SlackApiStandIn]:
    """A started stand-in that accepts APP_TOKEN for Socket Mode, with one person, U1."""
    async with SlackApiStandIn(bot_token=TOKEN, app_token=APP_TOKEN) as stand_in:
        stand_in.add_user("U1", name="alice")
        yield stand_in


@pytest.fixture
async def bolt(slack: SlackApiStandIn) -> AsyncIterator[AsyncApp]:
    """A real Bolt app connected over Socket Mode through the real AsyncSocketModeHandler."""
    app = AsyncApp(client=AsyncWebClient(token=TOKEN, base_url=slack.base_url), request_verification_enabled=False)
    handler = AsyncSocketModeHandler(app, APP_TOKEN, ping_interval=PING_S)
    await handler.connect_async()
    try:
        yield app
    finally:
        await handler.close_async()


@pytest.fixture
def events(slack: SlackApiStandIn) -> SocketModeEventSender:
    return SocketModeEventSender(slack.socket, team_id=slack.team_id)


async def test_connections_open_takes_only_the_app_token_and_answers_a_ws_url(slack: SlackApiStandIn):
    """apps.connections.open answers ws://127.0.0.1:PORT/link/?ticket=... for the app token only."""
    client = AsyncWebClient(token=TOKEN, base_url=slack.base_url)
    opened = await client.apps_connections_open(app_token=APP_TOKEN)
    origin = slack.base_url.removesuffix("/api/").replace("http://", "ws://")
    assert opened["url"].startswith(f"{origin}/link/?ticket=")
    with pytest.raises(SlackApiError) as bot_token:
        await client.apps_connections_open(app_token=TOKEN)
    with pytest.raises(SlackApiError) as app_token_elsewhere:
        await AsyncWebClient(token=APP_TOKEN, base_url=slack.base_url).auth_test()
    with pytest.raises(SlackApiError) as unknown:
        await client.apps_connections_open(app_token="xapp-other")
    assert bot_token.value.response["error"] == "not_allowed_token_type"
    assert app_token_elsewhere.value.response["error"] == "not_allowed_token_type"
    assert unknown.value.response["error"] == "invalid_auth"


async def test_a_ticket_is_good_for_one_connection_which_starts_with_hello(slack: SlackApiStandIn):
    """The first connect gets Slack's hello; the same ticket again is refused."""
    url = (await AsyncWebClient(token=TOKEN, base_url=slack.base_url).apps_connections_open(app_token=APP_TOKEN))["url"]
    async with aiohttp.ClientSession() as session, session.ws_connect(url) as ws:
        hello = await ws.receive_json(timeout=30)
        assert hello["type"] == "hello"
        assert hello["connection_info"] == {"app_id": slack.app_id}
        assert hello["num_connections"] == 1
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await session.ws_connect(url)
        assert refused.value.status == 401
    await slack.socket.wait_disconnected()
    assert [c.closed_by for c in slack.socket.connections] == ["client"]


async def test_bolt_receives_a_mention_acks_and_replies(slack: SlackApiStandIn, bolt: AsyncApp, events):
    """An app_mention envelope reaches Bolt's listener; the ack comes back; the reply hits the Web API."""

    @bolt.event("app_mention")
    async def mention(event: dict[str, Any], say: Any) -> None:
        await say(text=f"heard: {event['text']}", thread_ts=event["ts"])

    await slack.socket.wait_connected()
    sent = await events.app_mention(CHANNEL, "U1", "<@UBOT> hi")
    assert sent.status == 200 and sent.body == ""
    [envelope] = slack.socket.sent(sent.envelope_id)
    assert (envelope.type, envelope.retry_attempt, envelope.retry_reason) == ("events_api", 0, "")
    assert envelope.payload["type"] == "event_callback" and envelope.payload["event"]["ts"] == sent.ts
    [reply] = await slack.wait_for("chat.postMessage")
    assert reply.args["text"] == "heard: <@UBOT> hi" and reply.args["thread_ts"] == sent.ts
    assert slack.socket.unexpected == []


async def test_interactions_and_commands_are_acked_with_their_response_payloads(
    slack: SlackApiStandIn, bolt: AsyncApp, events
):
    """A slash command's ack carries its message; a modal's ack carries response_action errors; a click a bare ack."""

    @bolt.command("/hello")
    async def hello(ack: AsyncAck, command: dict[str, Any]) -> None:
        await ack(text=f"hello {command['text']}")

    @bolt.view("form")
    async def form(ack: AsyncAck, view: dict[str, Any]) -> None:
        await ack(response_action="errors", errors={"b": view["state"]["values"]["b"]["a"]["value"]})

    @bolt.action("press")
    async def press(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()

    await slack.socket.wait_connected()
    command = await events.slash_command("/hello", "world", "U1", CHANNEL, slack.new_response_url(CHANNEL, user="U1"))
    assert command.json["text"] == "hello world"
    view = await events.view_submission("U1", "form", "meta", {"b": {"a": "not like that"}})
    assert view.json == {"response_action": "errors", "errors": {"b": "not like that"}}
    click = await events.block_actions("U1", CHANNEL, "1.000001", "press", "v", slack.new_trigger_id())
    assert (click.status, click.body) == (200, "")
    types = [(e.type, e.accepts_response_payload) for e in slack.socket.envelopes]
    assert types == [("slash_commands", True), ("interactive", True), ("interactive", False)]
    assert slack.socket.sent(command.envelope_id)[0].payload["command"] == "/hello"


async def test_an_unacknowledged_event_is_delivered_again_three_times(slack: SlackApiStandIn):
    """A client that never acks gets the same envelope with retry_attempt 1, 2, 3, then no more."""
    slack.socket.ack_timeout_s = 0.2
    received: list[SocketModeRequest] = []
    fourth = asyncio.Event()

    async def never_ack(client: Any, request: SocketModeRequest) -> None:
        received.append(request)
        if len(received) == 4:
            fourth.set()

    client = SocketModeClient(
        app_token=APP_TOKEN, web_client=AsyncWebClient(token=TOKEN, base_url=slack.base_url), ping_interval=PING_S
    )
    client.socket_mode_request_listeners.append(never_ack)
    await client.connect()
    try:
        events = SocketModeEventSender(slack.socket, wait_for_ack=False)
        first = await events.app_mention(CHANNEL, "U1", "<@UBOT> hi")
        sent = await slack.socket.wait_sent(first.envelope_id, attempts=4)
        await asyncio.wait_for(fourth.wait(), 30)
        assert [(e.retry_attempt, e.retry_reason) for e in sent] == [
            (0, ""),
            (1, "timeout"),
            (2, "timeout"),
            (3, "timeout"),
        ]
        assert [r.retry_attempt for r in received] == [0, 1, 2, 3]
        assert {json.dumps(r.payload, sort_keys=True) for r in received} == {
            json.dumps(sent[0].payload, sort_keys=True)
        }
        # The redelivery task gives up after the third retry.
        await slack.socket.redeliveries_done()
        assert len(slack.socket.sent(first.envelope_id)) == 4
    finally:
        await client.close()


async def test_an_acknowledged_event_is_not_delivered_again(slack: SlackApiStandIn, bolt: AsyncApp, events):
    """Bolt acks in time, so the stand-in sends the event once (its redelivery task ends at the ack)."""

    @bolt.event("app_mention")
    async def mention() -> None:
        return None

    slack.socket.ack_timeout_s = 30.0
    await slack.socket.wait_connected()
    sent = await events.app_mention(CHANNEL, "U1", "<@UBOT> hi")
    await slack.socket.redeliveries_done()
    assert len(slack.socket.sent(sent.envelope_id)) == 1
    assert len(slack.socket.acks_of(sent.envelope_id)) == 1


async def test_disconnect_makes_the_client_open_a_new_connection(slack: SlackApiStandIn, bolt: AsyncApp, events):
    """After {"type": "disconnect"} the client asks apps.connections.open again; events flow on the new socket."""
    heard = []

    @bolt.event("app_mention")
    async def mention(event: dict[str, Any]) -> None:
        heard.append(event["text"])

    first = await slack.socket.wait_connected()
    second = await slack.socket.disconnect("refresh_requested")
    assert second.id == 2 and first.disconnect_reasons == ["refresh_requested"]
    await slack.socket.wait_closed(first)
    assert first.closed_by == "client"  # slack_sdk closes the old socket itself
    assert len(slack.calls_to("apps.connections.open")) == 2
    sent = await events.app_mention(CHANNEL, "U1", "<@UBOT> after")
    assert slack.socket.sent(sent.envelope_id)[0].connection == 2


@pytest.mark.parametrize("abrupt", [False, True], ids=["close-frame", "dropped"])
async def test_a_closed_socket_is_replaced(slack: SlackApiStandIn, bolt: AsyncApp, events, abrupt: bool):
    """The stand-in closes the socket (with a close frame, or by dropping TCP); the client reconnects."""

    @bolt.event("app_mention")
    async def mention() -> None:
        return None

    await slack.socket.wait_connected()
    [closed] = await slack.socket.close_connections(abrupt=abrupt)
    assert closed.closed_by == "server"
    again = await slack.socket.wait_connected(count=2)
    assert again.id == 2
    sent = await events.app_mention(CHANNEL, "U1", "<@UBOT> after")
    assert slack.socket.sent(sent.envelope_id)[0].connection == 2
    assert len(slack.calls_to("apps.connections.open")) == 2


async def test_socket_sender_refuses_what_socket_mode_cannot_carry(slack: SlackApiStandIn, events):
    """No signatures and no url_verification over a socket: asking for them is a test bug."""
    with pytest.raises(ValueError):
        await events.app_mention(CHANNEL, "U1", "hi", bad_signature=True)
    with pytest.raises(ValueError):
        await events.url_verification()
    assert slack.socket.envelopes == []
