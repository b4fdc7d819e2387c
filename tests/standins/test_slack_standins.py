"""The Slack stand-ins speak Slack: the real slack_sdk client and a real Bolt app accept them."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from aiohttp import web
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from tests.standins.slack_api import SlackApiStandIn
from tests.standins.slack_events import SlackEventSender

TOKEN = "xoxb-test"
SIGNING_SECRET = "signing-secret"
CHANNEL = "C1"


@pytest.fixture
async def slack() -> AsyncIterator[SlackApiStandIn]:
    """A started Web API stand-in with one registered person, U1 (alice)."""
    async with SlackApiStandIn(bot_token=TOKEN, bot_user_id="UBOT", team_id="T1") as stand_in:
        stand_in.add_user("U1", name="alice")
        yield stand_in


@pytest.fixture
def client(slack: SlackApiStandIn) -> AsyncWebClient:
    """The real slack_sdk client pointed at the stand-in."""
    return AsyncWebClient(token=TOKEN, base_url=slack.base_url)


@dataclass
class Bolt:
    app: AsyncApp
    sender: SlackEventSender


@pytest.fixture
async def bolt(slack: SlackApiStandIn) -> AsyncIterator[Bolt]:
    """A real Bolt AsyncApp served by aiohttp on a free port, and a sender aimed at it."""
    app = AsyncApp(
        signing_secret=SIGNING_SECRET,
        client=AsyncWebClient(token=TOKEN, base_url=slack.base_url),
    )
    runner = web.AppRunner(app.web_app(), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    host, port = runner.addresses[0][:2]
    try:
        url = f"http://{host}:{port}/slack/events"
        async with SlackEventSender(url, SIGNING_SECRET, team_id="T1") as sender:
            yield Bolt(app=app, sender=sender)
    finally:
        await runner.cleanup()


async def _next(queue: asyncio.Queue[Any]) -> Any:
    async with asyncio.timeout(5):
        return await queue.get()


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def _button(text: str = "Approve", value: str = "a1", action_id: str = "approve") -> dict[str, Any]:
    return {
        "type": "button",
        "text": {"type": "plain_text", "text": text},
        "value": value,
        "action_id": action_id,
    }


def _modal(title: str = "Approve?", **extra: Any) -> dict[str, Any]:
    return {
        "type": "modal",
        "callback_id": "approve_modal",
        "title": {"type": "plain_text", "text": title},
        "submit": {"type": "plain_text", "text": "Send"},
        "blocks": [
            {
                "type": "input",
                "block_id": "reason",
                "label": {"type": "plain_text", "text": "Reason"},
                "element": {"type": "plain_text_input", "action_id": "text"},
            }
        ],
        **extra,
    }


# --------------------------------------------------------------------- Web API


async def test_auth_test_reports_the_bot_identity(client: AsyncWebClient):
    """auth.test answers with the bot's user id, team and bot id."""
    response = await client.auth_test()

    assert response["user_id"] == "UBOT"
    assert response["team_id"] == "T1"
    assert response["bot_id"].startswith("B")
    assert response["is_enterprise_install"] is False


async def test_post_message_stores_messages_with_increasing_ts(slack: SlackApiStandIn, client: AsyncWebClient):
    """chat.postMessage answers with channel, ts and message, and ts strictly increases."""
    first = await client.chat_postMessage(channel=CHANNEL, text="one")
    second = await client.chat_postMessage(channel=CHANNEL, text="two", blocks=[_section("*two*")])

    assert first["channel"] == CHANNEL
    assert first["message"]["user"] == "UBOT"
    assert float(second["ts"]) > float(first["ts"])
    stored = slack.messages(CHANNEL)
    assert [m["text"] for m in stored] == ["one", "two"]
    assert stored[1]["blocks"] == [_section("*two*")]
    assert stored[0]["thread_ts"] is None
    [call] = slack.calls_to("chat.postMessage")[1:]
    assert call.args["blocks"] == [_section("*two*")]


async def test_thread_replies_and_permalinks(slack: SlackApiStandIn, client: AsyncWebClient):
    """A reply is threaded under its parent and its permalink carries thread_ts and cid."""
    parent = await client.chat_postMessage(channel=CHANNEL, text="parent")
    reply = await client.chat_postMessage(channel=CHANNEL, text="reply", thread_ts=parent["ts"])

    parent_link = await client.chat_getPermalink(channel=CHANNEL, message_ts=parent["ts"])
    reply_link = await client.chat_getPermalink(channel=CHANNEL, message_ts=reply["ts"])

    plain = parent["ts"].replace(".", "")
    assert parent_link["permalink"] == f"https://standin.slack.com/archives/C1/p{plain}"
    assert reply_link["permalink"] == (
        f"https://standin.slack.com/archives/C1/p{reply['ts'].replace('.', '')}?thread_ts={parent['ts']}&cid=C1"
    )
    thread = slack.messages(CHANNEL, thread_ts=parent["ts"])
    assert [m["text"] for m in thread] == ["parent", "reply"]
    assert thread[0]["reply_count"] == 1


async def test_update_replaces_text_and_blocks(slack: SlackApiStandIn, client: AsyncWebClient):
    """chat.update replaces the stored message's text and blocks and marks it edited."""
    posted = await client.chat_postMessage(channel=CHANNEL, text="pending", blocks=[_section("?")])

    updated = await client.chat_update(channel=CHANNEL, ts=posted["ts"], text="approved", blocks=[_section("ok")])

    assert updated["ts"] == posted["ts"]
    assert updated["text"] == "approved"
    stored = slack.message(CHANNEL, posted["ts"])
    assert stored["text"] == "approved"
    assert stored["blocks"] == [_section("ok")]
    assert stored["edited"]["user"] == "UBOT"


async def test_update_and_delete_of_unknown_ts_are_message_not_found(client: AsyncWebClient):
    """chat.update and chat.delete answer message_not_found for a ts never posted."""
    with pytest.raises(SlackApiError) as update_error:
        await client.chat_update(channel=CHANNEL, ts="1.000001", text="x")
    with pytest.raises(SlackApiError) as delete_error:
        await client.chat_delete(channel=CHANNEL, ts="1.000001")

    assert update_error.value.response["error"] == "message_not_found"
    assert delete_error.value.response["error"] == "message_not_found"


async def test_delete_removes_the_message(slack: SlackApiStandIn, client: AsyncWebClient):
    """chat.delete removes the bot's message from the channel."""
    posted = await client.chat_postMessage(channel=CHANNEL, text="bye")

    await client.chat_delete(channel=CHANNEL, ts=posted["ts"])

    assert slack.messages(CHANNEL) == []


async def test_post_ephemeral_returns_message_ts(slack: SlackApiStandIn, client: AsyncWebClient):
    """chat.postEphemeral answers message_ts and stores the message for its recipient only."""
    response = await client.chat_postEphemeral(channel=CHANNEL, user="U1", text="only you")

    [ephemeral] = slack.ephemerals(CHANNEL)
    assert ephemeral["ts"] == response["message_ts"]
    assert ephemeral["recipient"] == "U1"
    assert slack.messages(CHANNEL) == []


async def test_post_ephemeral_to_unknown_user_is_user_not_in_channel(client: AsyncWebClient):
    """chat.postEphemeral to a user the workspace does not have fails like Slack."""
    with pytest.raises(SlackApiError) as error:
        await client.chat_postEphemeral(channel=CHANNEL, user="U404", text="x")

    assert error.value.response["error"] == "user_not_in_channel"


async def test_post_to_a_user_id_lands_in_the_dm(slack: SlackApiStandIn, client: AsyncWebClient):
    """Posting to a user id answers with the DM channel, which conversations.info knows is an IM."""
    posted = await client.chat_postMessage(channel="U1", text="psst")
    info = await client.conversations_info(channel=posted["channel"])

    assert posted["channel"].startswith("D")
    assert info["channel"]["is_im"] is True
    assert info["channel"]["user"] == "U1"
    assert [m["text"] for m in slack.messages(posted["channel"])] == ["psst"]


async def test_forbidden_channel_is_channel_not_found(slack: SlackApiStandIn, client: AsyncWebClient):
    """A channel forbidden with forbid_channel answers channel_not_found."""
    slack.forbid_channel("C404")

    with pytest.raises(SlackApiError) as error:
        await client.chat_postMessage(channel="C404", text="x")

    assert error.value.response["error"] == "channel_not_found"


async def test_missing_or_too_long_text_is_rejected(client: AsyncWebClient):
    """No text, blocks or attachments is no_text; more than 40,000 characters is msg_too_long."""
    # api_call skips chat_postMessage's client-side warning about missing text.
    with pytest.raises(SlackApiError) as no_text:
        await client.api_call("chat.postMessage", json={"channel": CHANNEL})
    with pytest.raises(SlackApiError) as too_long:
        await client.chat_postMessage(channel=CHANNEL, text="x" * 40_001)

    assert no_text.value.response["error"] == "no_text"
    assert too_long.value.response["error"] == "msg_too_long"


@pytest.mark.parametrize(
    ("blocks", "pointer"),
    [
        ([{"type": "divider"}] * 51, "/blocks"),
        ([_section("x" * 3001)], "/blocks/0/text/text"),
        ([{"type": "header", "text": {"type": "plain_text", "text": "h" * 151}}], "/blocks/0/text"),
        (
            [{"type": "context", "elements": [{"type": "mrkdwn", "text": "c"}] * 11}],
            "/blocks/0/elements",
        ),
        ([{"type": "actions", "elements": [_button()] * 26}], "/blocks/0/elements"),
        ([{"type": "actions", "elements": [_button(text="b" * 76)]}], "/elements/0/text/text"),
        ([{"type": "actions", "elements": [_button(value="v" * 2001)]}], "/elements/0/value"),
        (
            [{"type": "actions", "elements": [_button(action_id="a" * 256)]}],
            "/elements/0/action_id",
        ),
        ([{**_section("x"), "block_id": "b" * 256}], "/blocks/0/block_id"),
    ],
    ids=[
        "51-blocks",
        "section-text",
        "header-text",
        "context-elements",
        "actions-elements",
        "button-text",
        "button-value",
        "action-id",
        "block-id",
    ],
)
async def test_blocks_over_block_kit_limits_are_invalid_blocks(
    client: AsyncWebClient, blocks: list[dict[str, Any]], pointer: str
):
    """Blocks beyond a Block Kit limit fail with invalid_blocks and a json-pointer message."""
    with pytest.raises(SlackApiError) as error:
        await client.chat_postMessage(channel=CHANNEL, text="fallback", blocks=blocks)

    response = error.value.response
    assert response["error"] == "invalid_blocks"
    assert any(pointer in message for message in response["errors"])
    assert response["response_metadata"]["messages"][0].startswith("[ERROR] ")


async def test_views_open_with_a_fresh_trigger_stores_the_view(slack: SlackApiStandIn, client: AsyncWebClient):
    """views.open with a freshly issued trigger answers the view with an id and stores it."""
    response = await client.views_open(trigger_id=slack.new_trigger_id(), view=_modal())

    view = response["view"]
    assert view["id"].startswith("V")
    assert view["callback_id"] == "approve_modal"
    assert slack.views[view["id"]]["title"]["text"] == "Approve?"


async def test_views_open_rejects_expired_reused_and_unknown_triggers(slack: SlackApiStandIn, client: AsyncWebClient):
    """Old or unknown trigger ids are expired_trigger_id; a used one is exchanged_trigger_id."""
    used = slack.new_trigger_id()
    await client.views_open(trigger_id=used, view=_modal())
    errors = []
    for trigger_id in (slack.new_trigger_id(age=4), "123.456.unknown", used):
        with pytest.raises(SlackApiError) as error:
            await client.views_open(trigger_id=trigger_id, view=_modal())
        errors.append(error.value.response["error"])

    assert errors == ["expired_trigger_id", "expired_trigger_id", "exchanged_trigger_id"]


async def test_views_open_validates_the_modal(slack: SlackApiStandIn, client: AsyncWebClient):
    """A title over 24 characters or metadata over 3000 is invalid_arguments with messages."""
    view = _modal(title="t" * 25, private_metadata="m" * 3001)

    with pytest.raises(SlackApiError) as error:
        await client.views_open(trigger_id=slack.new_trigger_id(), view=view)

    response = error.value.response
    assert response["error"] == "invalid_arguments"
    messages = " ".join(response["response_metadata"]["messages"])
    assert "/view/title/text" in messages
    assert "/view/private_metadata" in messages


async def test_views_update_replaces_the_view(slack: SlackApiStandIn, client: AsyncWebClient):
    """views.update by view_id replaces the stored view and keeps its id."""
    opened = await client.views_open(trigger_id=slack.new_trigger_id(), view=_modal())
    view_id = opened["view"]["id"]

    updated = await client.views_update(view_id=view_id, view=_modal(title="Done"))

    assert updated["view"]["id"] == view_id
    assert slack.views[view_id]["title"]["text"] == "Done"


async def test_users_info_returns_registered_users_only(slack: SlackApiStandIn, client: AsyncWebClient):
    """users.info answers Slack's user shape for registered users and user_not_found otherwise."""
    slack.add_user("U2", name="bob", real_name="Bob B", is_admin=True, tz="Europe/London")

    user = (await client.users_info(user="U2"))["user"]
    with pytest.raises(SlackApiError) as error:
        await client.users_info(user="U404")

    assert user["team_id"] == "T1"
    assert user["profile"]["display_name"] == "bob"
    assert user["real_name"] == "Bob B"
    assert user["is_admin"] is True
    assert user["tz"] == "Europe/London"
    assert error.value.response["error"] == "user_not_found"


async def test_reactions_fail_like_slack_when_repeated(slack: SlackApiStandIn, client: AsyncWebClient):
    """Reacting twice is already_reacted; removing a missing reaction is no_reaction."""
    ts = slack.add_message(CHANNEL, user="U1", text="deploy please")
    await client.reactions_add(channel=CHANNEL, timestamp=ts, name="eyes")
    with pytest.raises(SlackApiError) as again:
        await client.reactions_add(channel=CHANNEL, timestamp=ts, name="eyes")
    assert slack.message(CHANNEL, ts)["reactions"] == [{"name": "eyes", "users": ["UBOT"], "count": 1}]

    await client.reactions_remove(channel=CHANNEL, timestamp=ts, name="eyes")
    with pytest.raises(SlackApiError) as missing:
        await client.reactions_remove(channel=CHANNEL, timestamp=ts, name="eyes")

    assert again.value.response["error"] == "already_reacted"
    assert missing.value.response["error"] == "no_reaction"


async def test_conversations_info_tells_channels_from_dms(client: AsyncWebClient):
    """conversations.info marks D-prefixed ids as IMs and C-prefixed ones as channels."""
    dm = (await client.conversations_info(channel="D123"))["channel"]
    channel = (await client.conversations_info(channel=CHANNEL))["channel"]

    assert dm["is_im"] is True
    assert channel["is_im"] is False
    assert channel["is_channel"] is True


async def test_wrong_or_missing_token_is_rejected(slack: SlackApiStandIn):
    """A wrong token is invalid_auth and no token is not_authed, as SlackApiError."""
    with pytest.raises(SlackApiError) as wrong:
        await AsyncWebClient(token="xoxb-wrong", base_url=slack.base_url).auth_test()
    with pytest.raises(SlackApiError) as missing:
        await AsyncWebClient(base_url=slack.base_url).auth_test()

    assert wrong.value.response["error"] == "invalid_auth"
    assert missing.value.response["error"] == "not_authed"


async def test_rate_limit_is_retried_by_slack_sdk_handler(slack: SlackApiStandIn):
    """A 429 with Retry-After is retried by AsyncRateLimitErrorRetryHandler and then succeeds."""
    slack.rate_limit("chat.postMessage", times=1, retry_after=0)
    client = AsyncWebClient(
        token=TOKEN,
        base_url=slack.base_url,
        retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=1)],
    )

    response = await client.chat_postMessage(channel=CHANNEL, text="eventually")

    assert response["ok"] is True
    calls = slack.calls_to("chat.postMessage")
    assert [(c.status, c.error) for c in calls] == [(429, "ratelimited"), (200, None)]
    assert len(slack.messages(CHANNEL)) == 1


async def test_rate_limit_without_retry_handler_raises(slack: SlackApiStandIn, client: AsyncWebClient):
    """Without a retry handler a 429 surfaces as SlackApiError carrying Retry-After."""
    slack.rate_limit("chat.postMessage", times=1, retry_after=7)

    with pytest.raises(SlackApiError) as error:
        await client.chat_postMessage(channel=CHANNEL, text="x")

    assert error.value.response.status_code == 429
    assert error.value.response.headers["Retry-After"] == "7"
    assert error.value.response["error"] == "ratelimited"


async def test_fail_injects_an_error_once(slack: SlackApiStandIn, client: AsyncWebClient):
    """fail() makes the next call of a method fail, then the method works again."""
    slack.fail("users.info", error="fatal_error")

    with pytest.raises(SlackApiError) as error:
        await client.users_info(user="U1")
    user = await client.users_info(user="U1")

    assert error.value.response["error"] == "fatal_error"
    assert user["user"]["name"] == "alice"


async def test_form_and_json_bodies_and_unknown_methods(slack: SlackApiStandIn):
    """Form bodies take a token param, JSON needs the header, unknown methods say so."""
    async with httpx.AsyncClient(base_url=slack.base_url) as http:
        form = await http.post(
            "chat.postMessage",
            data={
                "token": TOKEN,
                "channel": "C1",
                "text": "f",
                "blocks": json.dumps([_section("f")]),
            },
        )
        as_json = await http.post(
            "chat.postMessage",
            json={"channel": "C1", "text": "j"},
            headers={"Authorization": f"Bearer {TOKEN}"},
        )
        token_in_json = await http.post("auth.test", json={"token": TOKEN})
        unknown = await http.post("chat.nope", headers={"Authorization": f"Bearer {TOKEN}"})

    assert form.json()["ok"] is True
    assert as_json.json()["ok"] is True
    assert as_json.json()["warning"] == "missing_charset"
    assert token_in_json.json()["error"] == "not_authed"
    assert unknown.json() == {"ok": False, "error": "unknown_method", "req_method": "chat.nope"}
    assert [m["text"] for m in slack.messages("C1")] == ["f", "j"]
    assert slack.calls_to("chat.postMessage")[0].args["blocks"] == [_section("f")]
    assert "token" not in slack.calls_to("chat.postMessage")[0].args


_BOT_IN_ANOTHER_PROCESS = """
import asyncio, os
from slack_sdk.web.async_client import AsyncWebClient

async def main():
    env = os.environ
    client = AsyncWebClient(token=env["SLACK_BOT_TOKEN"], base_url=env["SLACK_API_URL"])
    await client.chat_postMessage(channel="C1", text="from another process")

asyncio.run(main())
"""


async def test_a_bot_in_another_process_uses_the_stand_in(slack: SlackApiStandIn):
    """A bot process given base_url through its environment posts into the test's stand-in."""
    env = {**os.environ, "SLACK_API_URL": slack.base_url, "SLACK_BOT_TOKEN": TOKEN}
    process = await asyncio.create_subprocess_exec(sys.executable, "-c", _BOT_IN_ANOTHER_PROCESS, env=env)

    [call] = await slack.wait_for("chat.postMessage")

    assert await process.wait() == 0
    assert call.args["text"] == "from another process"
    assert [m["text"] for m in slack.messages("C1")] == ["from another process"]


async def test_wait_for_returns_matches_and_times_out_listing_calls(slack: SlackApiStandIn, client: AsyncWebClient):
    """wait_for returns once enough matching calls arrived and fails listing what did arrive."""
    waiter = asyncio.create_task(slack.wait_for("chat.postMessage", lambda args: args.get("text") == "b", count=1))
    await client.chat_postMessage(channel=CHANNEL, text="a")
    await client.chat_postMessage(channel=CHANNEL, text="b")

    [call] = await waiter
    with pytest.raises(AssertionError, match=r"chat\.postMessage"):
        await slack.wait_for("views.open", timeout=0.05)

    assert call.args["text"] == "b"


# ------------------------------------------------------------------ Bolt app


async def test_bolt_app_receives_app_mention_and_replies(slack: SlackApiStandIn, bolt: Bolt):
    """A signed app_mention reaches the listener, whose reply lands in the stand-in."""
    received: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    @bolt.app.event("app_mention")
    async def on_mention(event: dict[str, Any], say: Any) -> None:
        await received.put(event)
        await say(text="on it", thread_ts=event["ts"])

    sent = await bolt.sender.app_mention(CHANNEL, "U1", "<@UBOT> deploy")
    event = await _next(received)
    [reply] = await slack.wait_for("chat.postMessage")

    assert sent.status == 200
    assert event["ts"] == sent.ts
    assert event["blocks"][0]["elements"][0]["elements"][0] == {"type": "user", "user_id": "UBOT"}
    assert reply.args["thread_ts"] == sent.ts
    await bolt.sender.app_mention(CHANNEL, "U1", "<@UBOT> again")
    await slack.wait_for("chat.postMessage", count=2)
    # Bolt calls auth.test lazily, on the first request that needs authorizing, then caches it.
    assert len(slack.calls_to("auth.test")) == 1


async def test_bolt_rejects_bad_signatures_and_stale_timestamps(slack: SlackApiStandIn, bolt: Bolt):
    """Bolt answers 401 to a wrong signature or an old timestamp, before calling auth.test."""
    received: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    @bolt.app.event("app_mention")
    async def on_mention(event: dict[str, Any]) -> None:
        await received.put(event)

    forged = await bolt.sender.app_mention(CHANNEL, "U1", "<@UBOT> hi", bad_signature=True)
    stale = await bolt.sender.app_mention(CHANNEL, "U1", "<@UBOT> hi", stale=True)

    assert forged.status == 401
    assert stale.status == 401
    assert received.empty()
    assert slack.calls == []


async def test_bolt_answers_url_verification(slack: SlackApiStandIn, bolt: Bolt):
    """The url_verification handshake is answered with its challenge without calling auth.test."""
    sent = await bolt.sender.url_verification("the-challenge")

    assert sent.status == 200
    assert sent.json == {"challenge": "the-challenge"}
    assert slack.calls == []


async def test_bolt_sees_retries_with_the_same_event_id(bolt: Bolt):
    """A retried delivery keeps its event_id and carries X-Slack-Retry-Num/-Reason."""
    received: asyncio.Queue[tuple[str, dict[str, list[str]]]] = asyncio.Queue()

    @bolt.app.event("app_mention")
    async def on_mention(body: dict[str, Any], request: Any) -> None:
        await received.put((body["event_id"], request.headers))

    first = await bolt.sender.app_mention(CHANNEL, "U1", "<@UBOT> hi")
    again = await bolt.sender.retry(first, retry_num=1, retry_reason="http_timeout")
    first_id, _ = await _next(received)
    retry_id, retry_headers = await _next(received)

    assert again.event_id == first.event_id == first_id == retry_id
    assert retry_headers["x-slack-retry-num"] == ["1"]
    assert retry_headers["x-slack-retry-reason"] == ["http_timeout"]


async def test_bolt_ignores_the_bots_own_messages(bolt: Bolt):
    """A message by the bot user is acked but not dispatched; a person's message is."""
    received: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    @bolt.app.event("message")
    async def on_message(event: dict[str, Any]) -> None:
        await received.put(event)

    own = await bolt.sender.message("D1", "UBOT", "mine", channel_type="im", bot_id="BBOT")
    theirs = await bolt.sender.message("D1", "U1", "hello", channel_type="im")
    event = await _next(received)

    assert own.status == 200
    assert event["ts"] == theirs.ts
    assert event["channel_type"] == "im"
    assert received.empty()


async def test_bolt_receives_message_changed_with_its_real_shape(bolt: Bolt):
    """A message_changed event nests the edited message and the previous one."""
    received: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    @bolt.app.event({"type": "message", "subtype": "message_changed"})
    async def on_edit(event: dict[str, Any]) -> None:
        await received.put(event)

    original = await bolt.sender.message(CHANNEL, "U1", "helo", channel_type="channel")
    await bolt.sender.message(CHANNEL, "U1", "hello", ts=original.ts, subtype="message_changed", previous_text="helo")
    event = await _next(received)

    assert event["message"]["ts"] == original.ts
    assert event["message"]["text"] == "hello"
    assert event["previous_message"]["text"] == "helo"
    assert event["ts"] != original.ts


async def test_bolt_button_click_opens_a_modal_and_responds(slack: SlackApiStandIn, bolt: Bolt):
    """A block_actions click is acked; its trigger opens a modal and respond() edits the message."""
    posted = await bolt.app.client.chat_postMessage(
        channel=CHANNEL, text="approve?", blocks=[{"type": "actions", "elements": [_button()]}]
    )

    @bolt.app.action("approve")
    async def on_approve(ack: Any, body: dict[str, Any], client: Any, respond: Any) -> None:
        await ack()
        await client.views_open(trigger_id=body["trigger_id"], view=_modal())
        await respond(replace_original=True, text=f"approved {body['actions'][0]['value']}")

    sent = await bolt.sender.block_actions(
        "U1",
        CHANNEL,
        posted["ts"],
        "approve",
        "a1",
        slack.new_trigger_id(),
        message=slack.message(CHANNEL, posted["ts"]),
        response_url=slack.new_response_url(CHANNEL, user="U1", message_ts=posted["ts"]),
    )
    [opened] = await slack.wait_for("views.open")
    await slack.wait_for("response_url")

    assert sent.status == 200
    assert opened.error is None
    assert slack.message(CHANNEL, posted["ts"])["text"] == "approved a1"
    assert slack.message(CHANNEL, posted["ts"])["blocks"] == []


async def test_bolt_view_submission_carries_values_and_returns_errors(bolt: Bolt):
    """A view_submission delivers state values; an ack with errors comes back as JSON."""
    received: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    @bolt.app.view("approve_modal")
    async def on_submit(ack: Any, view: dict[str, Any]) -> None:
        await received.put(view)
        await ack(response_action="errors", errors={"reason": "Say why"})

    sent = await bolt.sender.view_submission(
        "U1", "approve_modal", json.dumps({"approval": "a1"}), {"reason": {"text": ""}}
    )
    view = await _next(received)

    assert view["state"]["values"]["reason"]["text"] == {"type": "plain_text_input", "value": ""}
    assert json.loads(view["private_metadata"]) == {"approval": "a1"}
    assert sent.json == {"response_action": "errors", "errors": {"reason": "Say why"}}


# --- OAuth installs ----------------------------------------------------------------------


async def _code_for(
    slack: SlackApiStandIn, team: str, redirect: str = "https://bot.example/slack/oauth_redirect"
) -> str:
    async with httpx.AsyncClient(follow_redirects=False) as browser:
        reply = await browser.get(
            slack.oauth_authorize_url,
            params={
                "client_id": slack.client_id,
                "scope": "chat:write",
                "state": "s1",
                "team": team,
                "redirect_uri": redirect,
            },
        )
    assert reply.status_code == 302
    location = httpx.URL(reply.headers["location"])
    assert str(location).startswith(redirect) and location.params["state"] == "s1"
    return location.params["code"]


async def test_an_oauth_code_is_exchanged_once_for_a_token_of_that_workspace(slack, client):
    """oauth.v2.access (real slack_sdk, HTTP Basic) trades a code once; auth.test and posts answer per token."""
    slack.add_workspace("T2", bot_user_id="UBOT2", installer="U1")
    code = await _code_for(slack, "T2")
    anonymous = AsyncWebClient(base_url=slack.base_url)
    granted = await anonymous.oauth_v2_access(client_id=slack.client_id, client_secret=slack.client_secret, code=code)
    token = granted["access_token"]
    assert granted["team"]["id"] == "T2" and granted["bot_user_id"] == "UBOT2" and granted["scope"] == "chat:write"
    assert slack.tokens_of("T2") == [token]
    with pytest.raises(SlackApiError) as used:
        await anonymous.oauth_v2_access(client_id=slack.client_id, client_secret=slack.client_secret, code=code)
    assert used.value.response["error"] == "invalid_code"

    second = AsyncWebClient(token=token, base_url=slack.base_url)
    assert (await second.auth_test())["team_id"] == "T2"
    assert (await client.auth_test())["team_id"] == "T1"
    await second.chat_postMessage(channel=CHANNEL, text="from T2")
    [post] = slack.calls_to("chat.postMessage")
    assert (post.token, post.team_id) == (token, "T2")


async def test_oauth_refuses_a_wrong_secret_and_revoked_tokens_stop_working(slack):
    """A wrong client secret gets bad_client_secret; after revoke the workspace's token is invalid_auth."""
    slack.add_workspace("T2")
    anonymous = AsyncWebClient(base_url=slack.base_url)
    with pytest.raises(SlackApiError) as wrong:
        await anonymous.oauth_v2_access(
            client_id=slack.client_id, client_secret="nope", code=await _code_for(slack, "T2")
        )
    assert wrong.value.response["error"] == "bad_client_secret"
    granted = await anonymous.oauth_v2_access(
        client_id=slack.client_id, client_secret=slack.client_secret, code=await _code_for(slack, "T2")
    )
    slack.revoke("T2")
    with pytest.raises(SlackApiError) as revoked:
        await AsyncWebClient(token=granted["access_token"], base_url=slack.base_url).auth_test()
    assert revoked.value.response["error"] == "invalid_auth"
