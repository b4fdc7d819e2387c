"""The Slack flow in Socket Mode: the real bot and Bolt's Socket Mode client over a real WebSocket.

The bot runs with `SLACK_APP_TOKEN` and no signing secret; slack_sdk asks the stand-in's
`apps.connections.open` (through `SLACK_API_URL`) for a WebSocket URL and connects to it; tests
deliver events, clicks and slash commands as envelopes and read the bot's Web API calls.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator

import asyncpg
import httpx
import pytest

from adapters.slack import blocks
from bot.base.errors import UnreachableError
from bot.settings import Settings, SlackSettings
from countersign.server import BotServer
from tests.e2e.cli.test_operations import scrape, value
from tests.e2e.conftest import ALICE, BOB, BOT_TOKEN, CAROL, CHANNEL, TEAM, make_settings
from tests.e2e.drivers import SlackDriver
from tests.e2e.slack.test_slack_flow import _actions, card_state, click, settle, wait_answer, wait_card
from tests.standins.gemini import GeminiStandIn
from tests.standins.slack_api import SlackApiStandIn
from tests.standins.slack_socket import SocketModeEventSender
from tests.support.barriers import GENEROUS_S, slack_listeners_done, wait_until, wait_until_async
from tests.support.gate import Gate
from tests.support.http_target import HttpTarget
from tests.support.postgres import inbox_refusing_claims

pytestmark = pytest.mark.e2e


@pytest.fixture
def settings(db_url: str, gemini: GeminiStandIn, slack: SlackApiStandIn, target: HttpTarget) -> Settings:
    """The e2e settings with Slack in Socket Mode: an app token, no signing secret."""
    base = make_settings(db_url, gemini, slack, target)
    return base.model_copy(
        update={"slack": SlackSettings(bot_token=BOT_TOKEN, app_token=slack.app_token, api_url=slack.base_url)}
    )


@pytest.fixture
async def bot(settings: Settings, slack: SlackApiStandIn) -> AsyncIterator[BotServer]:
    """The real bot, started: its Socket Mode client is connected to the stand-in."""
    async with BotServer(settings) as server:
        await slack.socket.wait_connected(timeout=GENEROUS_S)
        yield server


@pytest.fixture
def events(bot: BotServer, slack: SlackApiStandIn) -> SocketModeEventSender:
    """Slack's side of the socket: each call returns once the bot acknowledged the envelope."""
    return SocketModeEventSender(slack.socket, team_id=TEAM, bot_user_id=slack.bot_user_id, timeout=GENEROUS_S)


async def _ready(bot: BotServer) -> httpx.Response:
    async with httpx.AsyncClient(timeout=GENEROUS_S) as client:
        return await client.get(f"http://127.0.0.1:{bot.port}/readyz")


async def _is_ready(bot: BotServer) -> bool:
    return (await _ready(bot)).status_code == 200


def _hold_connections_open(slack: SlackApiStandIn) -> Gate:
    gate = slack.gates.setdefault("apps.connections.open", Gate())
    gate.arm()
    return gate


def _posts(slack: SlackApiStandIn, thread_ts: str | None) -> list[str]:
    return [c.args["text"] for c in slack.calls_to("chat.postMessage") if c.args.get("thread_ts") == thread_ts]


async def test_the_bot_connects_with_the_app_token_and_serves_no_http_events(bot, slack):
    """At start the bot proves both tokens, opens one socket via apps.connections.open, and mounts no /slack/events."""
    opened = slack.calls_to("apps.connections.open")
    assert [c.error for c in opened] == [None, None]  # the start-up check, then the client's own
    assert slack.socket.connections[0].open and len(slack.socket.connections) == 1
    assert (await _ready(bot)).json()["platforms"] == {"SlackAdapter": "connected"}
    async with httpx.AsyncClient() as client:
        response = await client.post(f"http://127.0.0.1:{bot.port}/slack/events", json={})
    assert response.status_code in (404, 405)


async def test_a_mention_over_the_socket_is_acked_and_answered_in_its_thread(bot, events, slack, gemini):
    """An app_mention envelope is acknowledged (a bare ack) and the answer lands in the mention's thread."""
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> hello socket")
    assert mention.status == 200 and mention.body == ""
    [answer] = await wait_answer(slack, mention.ts, starts="You said")
    assert answer == "You said: hello socket"
    await settle(bot)
    assert len(gemini.requests) == 1
    assert slack.socket.unexpected == []


async def test_approve_over_the_socket_decides_once_and_runs_the_tool_once(bot, events, slack, target):
    """A gated call posts a card; the Approve interaction is acked, the decision applied once, the tool run once.

    Each ack over the socket is timed in `countersign_platform_ack_seconds` as over HTTP."""
    acks_before = await scrape(bot)
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    [card] = await wait_card(slack)
    assert card.thread_ts == mention.ts and target.requests == []

    approved = await click(events, slack, ALICE, blocks.ACTION_APPROVE, card)
    assert approved.status == 200
    [envelope] = slack.socket.sent(approved.envelope_id)
    assert envelope.type == "interactive" and envelope.payload["actions"][0]["value"] == card.approval_id
    [answer] = await wait_answer(slack, mention.ts)
    await settle(bot)
    assert answer.startswith("Result: ")
    assert [(r.method, r.json) for r in target.requests] == [("POST", {"name": "widget"})]
    updated = card_state(slack, card)
    assert _actions(updated["blocks"]) == [] and "Approved" in json.dumps(updated["blocks"])

    # A second click (a double click, delivered as its own envelope) changes nothing.
    again = await click(events, slack, CAROL, blocks.ACTION_APPROVE, card)
    assert again.status == 200
    [told] = await slack.wait_for("chat.postEphemeral", lambda a: a.get("user") == CAROL)
    assert "already approved" in told.args["text"]
    await settle(bot)
    assert len(target.requests) == 1
    assert len([u for u in slack.calls_to("chat.update") if u.args.get("ts") == card.ts]) == 1
    assert len(await wait_answer(slack, mention.ts)) == 1
    acks = await scrape(bot)
    for kind, count in (("event", 1), ("interaction", 2)):
        name, labels = "countersign_platform_ack_seconds_count", {"platform": "slack", "kind": kind}
        assert value(acks, name, **labels) - value(acks_before, name, **labels) == count, kind


async def test_reject_over_the_socket_runs_nothing(bot, events, slack, target, gemini):
    """Reject opens the modal; its submission over the socket gets an empty ack; nothing runs; the reason reaches the model."""
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    [card] = await wait_card(slack)
    await click(events, slack, ALICE, blocks.ACTION_REJECT, card)
    [opened] = await slack.wait_for("views.open")
    submitted = await events.view_submission(
        ALICE,
        blocks.VIEW_REJECT,
        opened.args["view"]["private_metadata"],
        {blocks.REASON_BLOCK: {blocks.REASON_INPUT: "not during the freeze"}},
    )
    assert submitted.status == 200 and submitted.body == ""  # an empty ack closes the modal
    [answer] = await wait_answer(slack, mention.ts)
    await settle(bot)
    assert "not during the freeze" in answer
    assert target.requests == []
    assert any("not during the freeze" in json.dumps(r.function_responses) for r in gemini.requests)
    assert "Rejected" in json.dumps(card_state(slack, card)["blocks"])


async def test_an_invalid_edit_is_answered_in_the_ack(bot, events, slack, target):
    """An Edit submission with broken JSON gets response_action errors inside the socket ack."""
    await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    [card] = await wait_card(slack)
    await click(events, slack, ALICE, blocks.ACTION_EDIT, card)
    [opened] = await slack.wait_for("views.open")
    reply = await events.view_submission(
        ALICE,
        blocks.VIEW_EDIT,
        opened.args["view"]["private_metadata"],
        {blocks.EDIT_BLOCK: {blocks.EDIT_INPUT: '{"method": '}},
    )
    assert reply.json["response_action"] == "errors"
    assert "not valid JSON" in reply.json["errors"][blocks.EDIT_BLOCK]
    await settle(bot)
    assert target.requests == []


async def test_slash_commands_over_the_socket_are_answered(bot, events, slack):
    """/countersign over the socket: help for anyone, a change for an admin, a refusal for others."""
    driver = SlackDriver(bot, events, slack)
    assert "/countersign policy <tool>|<server>__* auto|review|deny|default" in await driver.command("bob", "help")
    assert "Updated expiry: 30m" in await driver.command("carol", "expiry", duration="30m")
    refused = await driver.command("bob", "expiry", duration="10m")
    assert "Updated" not in refused
    assert "Expiry: 30m" in await driver.command("bob", "show")  # carol's change held, bob's did not
    commands = [e for e in slack.socket.envelopes if e.type == "slash_commands"]
    assert len(commands) >= 4 and all(slack.socket.acks_of(e.envelope_id) for e in commands)


async def test_retried_events_are_answered_once(bot, events, slack, gemini):
    """The same mention redelivered with retry_attempt 1..3 (same envelope, and as new envelopes) is answered once."""
    first = await events.app_mention(CHANNEL, ALICE, "<@UBOT> hello once")
    for attempt in (1, 2, 3):
        again = await events.retry(first, retry_num=attempt)
        assert again.status == 200
    # Slack may also carry a retry in an envelope of its own: same event_id and ts, new envelope id.
    fresh = await events.app_mention(
        CHANNEL, ALICE, "<@UBOT> hello once", ts=first.ts, event_id=first.event_id, retry_num=1
    )
    assert fresh.status == 200 and fresh.envelope_id != first.envelope_id
    [answer] = await wait_answer(slack, first.ts, starts="You said")
    await settle(bot)
    assert answer == "You said: hello once"
    assert [e.retry_attempt for e in slack.socket.sent(first.envelope_id)] == [0, 1, 2, 3]
    assert len(slack.socket.acks_of(first.envelope_id)) == 4
    assert _posts(slack, first.ts) == ["You said: hello once"]
    assert len(gemini.requests) == 1


async def test_a_retried_gated_call_posts_one_card_and_runs_once(bot, events, slack, target):
    """Redeliveries of a mention that asks for a gated call give one card; approving it runs the tool once."""
    first = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    for attempt in (1, 2, 3):
        await events.retry(first, retry_num=attempt)
    [card] = await wait_card(slack)
    await settle(bot)
    assert len([m for m in slack.messages(CHANNEL) if _actions(m.get("blocks"))]) == 1
    await click(events, slack, ALICE, blocks.ACTION_APPROVE, card)
    await wait_answer(slack, first.ts)
    await settle(bot)
    assert len(target.requests) == 1


async def test_an_event_not_acked_in_time_is_redelivered_and_answered_once(bot, events, slack, db_url, gemini):
    """The inbox is locked, so no ack comes in time: the stand-in redelivers (retry_attempt 1..3); once free, one answer."""
    slack.socket.ack_timeout_s = 0.5
    events.wait_for_ack = False
    holder = await asyncpg.connect(db_url)
    try:
        async with holder.transaction():
            # The claim that comes before the ack waits on this lock.
            await holder.execute("LOCK TABLE inbox IN ACCESS EXCLUSIVE MODE")
            first = await events.app_mention(CHANNEL, ALICE, "<@UBOT> hello late")
            sent = await slack.socket.wait_sent(first.envelope_id, attempts=4, timeout=GENEROUS_S)
            assert slack.socket.acks_of(first.envelope_id) == []
    finally:
        await holder.close()
    assert [(e.retry_attempt, e.retry_reason) for e in sent] == [
        (0, ""),
        (1, "timeout"),
        (2, "timeout"),
        (3, "timeout"),
    ]
    await slack.socket.wait_acked(first.envelope_id, count=4, timeout=GENEROUS_S)
    [answer] = await wait_answer(slack, first.ts, starts="You said")
    await settle(bot)
    assert answer == "You said: hello late"
    assert _posts(slack, first.ts) == ["You said: hello late"]
    assert len(gemini.requests) == 1


async def test_an_event_the_database_cannot_take_is_not_acked_and_its_redelivery_is_answered(
    bot, events, slack, db_url, caplog
):
    """The inbox claim fails: Bolt sends no ack (Slack will deliver again); the redelivery is acked and answered once."""
    caplog.set_level(logging.INFO, logger="slack_bolt.AsyncApp")
    slack.socket.max_retries = 0  # this test redelivers by hand, once the table is back
    events.wait_for_ack = False
    connection = await asyncpg.connect(db_url)
    try:
        await connection.execute("ALTER TABLE inbox RENAME TO inbox_away")
        first = await events.app_mention(CHANNEL, ALICE, "<@UBOT> hello")
        # Bolt's Socket Mode handler says so when the app answered other than 200 (and sends no ack).
        await wait_until(
            lambda: any("Unsuccessful Bolt execution result" in r.getMessage() for r in caplog.records),
            "the bot refusing the envelope",
        )
        await connection.execute("ALTER TABLE inbox_away RENAME TO inbox")
    finally:
        await connection.close()
    assert slack.socket.acks_of(first.envelope_id) == []
    events.wait_for_ack = True
    retried = await events.retry(first, retry_num=1)
    assert retried.status == 200
    [answer] = await wait_answer(slack, first.ts, starts="You said")
    await settle(bot)
    assert answer == "You said: hello"
    assert [c.args["text"] for c in slack.calls_to("chat.postMessage")] == ["You said: hello"]


async def test_a_dm_the_inbox_never_takes_is_told_after_slack_s_last_redelivery(bot, events, slack, db_url):
    """A DM the inbox refuses is never acked: Slack redelivers it with retry_attempt 1, 2, 3; after the last its
    sender gets one ephemeral notice quoting it, and none before."""
    slack.socket.ack_timeout_s = 0.5  # Slack waits about 3 s for an ack before delivering again
    events.wait_for_ack = False
    async with inbox_refusing_claims(db_url):
        first = await events.message("D1", ALICE, "rotate the keys", channel_type="im")
        sent = await slack.socket.wait_sent(first.envelope_id, attempts=4, timeout=GENEROUS_S)
        [notice] = await slack.wait_for("chat.postEphemeral", timeout=GENEROUS_S)
        await slack.socket.redeliveries_done(timeout=GENEROUS_S)
        await slack_listeners_done()
    assert [e.retry_attempt for e in sent] == [0, 1, 2, 3]
    assert slack.socket.acks_of(first.envelope_id) == []
    assert notice.at > sent[-1].at  # retries 1 and 2 told nobody
    assert [c.args for c in slack.calls_to("chat.postEphemeral")] == [notice.args]
    assert (notice.args["channel"], notice.args["user"], notice.args.get("thread_ts")) == ("D1", ALICE, None)
    assert "could not answer your message “rotate the keys”. Please send it again" in notice.args["text"]
    assert slack.calls_to("chat.postMessage") == []


async def test_disconnect_message_moves_the_bot_to_a_new_socket(bot, events, slack):
    """After Slack's disconnect the old socket still serves until the new one is up; then events come on the new one."""
    old = slack.socket.connections[0]
    gate = _hold_connections_open(slack)
    await slack.socket.send_disconnect("refresh_requested")
    await gate.wait_arrived(GENEROUS_S)  # the client asks for a new URL
    assert await _is_ready(bot)  # the old socket is still up
    during = await events.app_mention(CHANNEL, ALICE, "<@UBOT> during refresh")
    assert slack.socket.sent(during.envelope_id)[0].connection == old.id
    await wait_answer(slack, during.ts, starts="You said")
    gate.release()
    new = await slack.socket.wait_connected(count=2, timeout=GENEROUS_S)
    await slack.socket.wait_closed(old, timeout=GENEROUS_S)
    assert old.closed_by == "client"
    await wait_until_async(lambda: _is_ready(bot), "ready on the new socket")
    after = await events.app_mention(CHANNEL, ALICE, "<@UBOT> after refresh")
    assert slack.socket.sent(after.envelope_id)[0].connection == new.id
    assert await wait_answer(slack, after.ts, starts="You said") == ["You said: after refresh"]
    assert len(slack.calls_to("apps.connections.open")) == 3  # start-up check, first socket, the refresh


@pytest.mark.parametrize("abrupt", [False, True], ids=["close-frame", "dropped-tcp"])
async def test_a_closed_socket_is_not_ready_until_the_bot_reconnects(bot, events, slack, abrupt):
    """The stand-in closes the socket: /readyz says disconnected while the new URL is held; then 200 and answers again."""
    gate = _hold_connections_open(slack)
    [closed] = await slack.socket.close_connections(abrupt=abrupt)
    await gate.wait_arrived(GENEROUS_S)
    down = await _ready(bot)
    assert down.status_code == 503
    assert down.json()["platforms"] == {"SlackAdapter": "disconnected"}
    assert not any(c.open for c in slack.socket.connections)
    gate.release()
    new = await slack.socket.wait_connected(count=2, timeout=GENEROUS_S)
    await wait_until_async(lambda: _is_ready(bot), "ready after the reconnect")
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> back again")
    assert slack.socket.sent(mention.envelope_id)[0].connection == new.id != closed.id
    assert await wait_answer(slack, mention.ts, starts="You said") == ["You said: back again"]


async def test_a_clicker_who_is_not_permitted_is_refused_over_the_socket(bot, events, slack, target):
    """Bob's Approve over the socket is acked and refused privately; the card stays usable."""
    await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    [card] = await wait_card(slack)
    refused = await click(events, slack, BOB, blocks.ACTION_APPROVE, card)
    assert refused.status == 200
    [notice] = await slack.wait_for("chat.postEphemeral", lambda a: a.get("user") == BOB)
    assert "can't decide" in notice.args["text"]
    await settle(bot)
    assert target.requests == [] and _actions(card_state(slack, card)["blocks"])


async def test_a_socket_that_never_opens_fails_the_start_with_a_readable_error(settings, slack, monkeypatch):
    """apps.connections.open answers but its WebSocket refuses (503): the start fails as an outage (tried again), not a hang."""
    from adapters.slack import app as slack_app

    monkeypatch.setattr(slack_app, "SOCKET_CONNECT_TIMEOUT_S", 3.0)
    slack.socket.refuse_status = 503
    with pytest.raises(UnreachableError, match=r"Socket Mode did not connect within 3s"):
        async with asyncio.timeout(GENEROUS_S), BotServer(settings):
            pass
    assert len(slack.calls_to("apps.connections.open")) >= 2  # the check, then the client's try
    assert slack.socket.connections == []


async def test_at_shutdown_the_socket_closes_before_the_in_flight_turn_drains(db_url, gemini, slack, target):
    """Stopping: the bot stops taking envelopes and closes the socket first; the turn in flight still finishes."""
    base = make_settings(db_url, gemini, slack, target)
    settings = base.model_copy(
        update={
            "slack": SlackSettings(bot_token=BOT_TOKEN, app_token=slack.app_token, api_url=slack.base_url),
            "server": base.server.model_copy(update={"shutdown_grace_s": GENEROUS_S * 2}),
        }
    )
    events = SocketModeEventSender(slack.socket, team_id=TEAM, bot_user_id=slack.bot_user_id, timeout=GENEROUS_S)
    gate = slack.gates.setdefault("chat.postMessage", Gate())
    server = BotServer(settings)
    await server.__aenter__()
    stopping: asyncio.Task[None] | None = None
    try:
        gate.arm()
        mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> hello before the stop")
        await gate.wait_arrived(GENEROUS_S)  # the turn is in flight, posting its answer
        stopping = asyncio.create_task(server.__aexit__(None, None, None))
        # The drain waits for the held turn (a grace of minutes), so only a socket closed before it passes.
        await slack.socket.wait_disconnected(timeout=GENEROUS_S / 2)
        assert not stopping.done()
        assert [c.closed_by for c in slack.socket.connections] == ["client"]
    finally:
        gate.release()
        await (stopping if stopping is not None else server.__aexit__(None, None, None))
    [answer] = [c for c in slack.calls_to("chat.postMessage") if c.args.get("thread_ts") == mention.ts]
    assert answer.args["text"] == "You said: hello before the stop" and answer.error is None
    assert len(slack.socket.connections) == 1  # it did not reconnect while stopping


async def test_debug_logs_of_a_process_hold_no_envelope(gemini, slack, target, db_url, tmp_path):
    """`LOG_LEVEL=DEBUG` in Socket Mode: Bolt does not log envelopes whole (the text people wrote, a click's response_url)."""
    from tests.e2e.cli.test_process import bot_env
    from tests.support.bot_process import BotProcess, free_port

    port = free_port()
    env = bot_env(gemini, slack, target, port, DATABASE_URL=db_url, LOG_LEVEL="DEBUG", SLACK_APP_TOKEN=slack.app_token)
    del env["SLACK_SIGNING_SECRET"]
    bot = await BotProcess(env, tmp_path).start()
    try:
        await bot.wait_healthy(port, timeout=GENEROUS_S)
        await slack.socket.wait_connected(timeout=GENEROUS_S)
        events = SocketModeEventSender(slack.socket, team_id=TEAM, bot_user_id=slack.bot_user_id, timeout=GENEROUS_S)
        mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post a-very-private-widget")
        [card] = await wait_card(slack)
        await click(events, slack, ALICE, blocks.ACTION_APPROVE, card)
        await wait_answer(slack, mention.ts)
    finally:
        code = await bot.stop()
    err = bot.stderr.decode()
    assert code == 0, err
    assert "DEBUG" in err  # the level took effect
    assert "a-very-private-widget" not in err and "response_url" not in err and "hooks.slack.com" not in err, err
