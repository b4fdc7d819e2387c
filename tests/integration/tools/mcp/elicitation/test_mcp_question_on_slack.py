"""An MCP server's question on Slack: a card in the thread, answered by its requester in a modal.

The real bot (Bolt over HTTP, real PostgreSQL) talks to the Slack Web API stand-in; the model is
the Gemini stand-in, whose "pay <n>" calls `bank__pay` of a real FastMCP server over Streamable
HTTP that asks a question (a form, or a link) in its first round and acts on the answer in the
next (docs/decisions/0050-elicitation-forms-on-slack-and-discord.md,
docs/decisions/0054-mcp-elicitation.md). What the server saw is its own record. The last test
drives `SlackPlatform` alone, for the card of a question that expired or was stopped.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from adapters.slack import forms
from adapters.slack.platform import SlackPlatform, UserDirectory
from adapters.slack.workspaces import WorkspaceClients
from bot.base.conversation import Actor, ConversationRef
from bot.ports import ReviewPending
from bot.settings import Settings
from bot.tools.mcp.elicitation.forms import Action, Answer
from bot.tools.mcp.elicitation.store import QuestionRecord, QuestionStatus
from tests.e2e import conftest as e2e
from tests.e2e.conftest import ALICE, BOB, CHANNEL, make_settings
from tests.e2e.drivers import SlackDriver
from tests.integration.tools.mcp.elicitation.test_mcp_elicitation import asking_server
from tests.standins.gemini import GeminiReply, GeminiRequest, GeminiStandIn, ScriptedResponder, call, text
from tests.standins.slack_api import SlackApiStandIn
from tests.support.barriers import wait_until
from tests.support.mcp_server import serve_http

slack, target, bot, events = e2e.slack, e2e.target, e2e.bot, e2e.events
"""The end-to-end fixtures: the Web API stand-in, the HTTP target, the bot (Bolt over HTTP), signed requests."""

LINK = "https://bank.example/sso"
WAIT_S = 120.0
THREAD = ConversationRef(platform="slack", workspace_id="T1", channel_id=CHANNEL, thread="1700000000.000100")


def paying_script() -> ScriptedResponder:
    """ "pay <n>" calls `bank__pay`; after its result the model answers "Result: <the result>"."""

    def rule(request: GeminiRequest) -> GeminiReply | None:
        if request.function_responses:
            return text("Result: " + json.dumps([r for _, r in request.function_responses], sort_keys=True))
        words = (request.last_user_text or "").split()
        if words[:1] == ["pay"] and len(words) > 1:
            return call("bank__pay", {"amount": int(words[1])})
        return text("You said: " + " ".join(words))

    return ScriptedResponder(rules=[rule])


@pytest.fixture
async def gemini() -> AsyncIterator[GeminiStandIn]:
    async with GeminiStandIn(paying_script(), api_key="e2e-gemini-key") as server:
        yield server


@pytest.fixture
def seen() -> list[dict[str, Any]]:
    return []


@pytest.fixture
async def bank(request, seen) -> AsyncIterator[str]:
    """The asking server's URL: a form question, or (parametrized `link`, indirect) a link question."""
    async with serve_http(asking_server(seen, url=getattr(request, "param", "form") == "link")) as url:
        yield url


@pytest.fixture
def settings(db_url, gemini, slack, target, tmp_path: Path, bank) -> Settings:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"bank": {"url": bank}}}), encoding="utf-8")
    base = make_settings(db_url, gemini, slack, target)
    return base.model_copy(update={"tools": base.tools.model_copy(update={"mcp_config": config})})


@pytest.fixture
async def driver(bot, events, slack) -> SlackDriver:
    """The Slack driver, once the bot offers the bank's tools (the model may call them)."""
    assert bot.runtime is not None
    registry = bot.runtime.registry
    await wait_until(lambda: "bank__pay" in registry.names(), "the MCP server's tools offered")
    return SlackDriver(bot, events, slack)


def _buttons(message: dict[str, Any]) -> dict[str, str]:
    """A message's buttons: action id -> value."""
    return {
        e["action_id"]: e.get("value", "")
        for b in message.get("blocks") or []
        if b.get("type") == "actions"
        for e in b["elements"]
    }


async def asked(driver: SlackDriver, slack: SlackApiStandIn) -> tuple[str, str, str | None]:
    """Ask for the payment, approve its card, wait for the question's card: (its ts, the question id, its thread)."""
    await driver.ask("alice", "pay 100")
    [card] = await driver.cards()
    await driver.approve(card, "alice")
    [posted] = await slack.wait_for(
        "chat.postMessage",
        lambda a: forms.QUESTION_BLOCK in json.dumps(a.get("blocks") or []),
        timeout=WAIT_S,
    )
    ts = str(posted.response["ts"]) if posted.response else ""
    question_id = next(iter(_buttons(slack.message(CHANNEL, ts)).values()))
    return ts, question_id, posted.args.get("thread_ts")


async def click(driver: SlackDriver, who: str, ts: str, action: str, question_id: str, thread: str | None) -> None:
    delivery = await driver.events.block_actions(
        who, CHANNEL, ts, action, question_id, driver.slack.new_trigger_id(), forms.QUESTION_BLOCK, thread
    )
    assert delivery.status == 200


async def whispered(slack: SlackApiStandIn, user: str, count: int = 1) -> dict[str, Any]:
    calls = await slack.wait_for("chat.postEphemeral", lambda a: a.get("user") == user, count=count, timeout=WAIT_S)
    return calls[count - 1].args


async def test_the_requester_answers_in_a_modal_and_the_call_goes_on(driver, slack, seen):
    """Answer… opens the form; a value the schema refuses is shown at its field and nothing is sent; a valid one reaches the server, the card says answered, the result follows."""
    ts, question_id, thread = await asked(driver, slack)
    card = slack.message(CHANNEL, ts)
    assert f"<@{ALICE}>" in json.dumps(card["blocks"]) and "Pay 100 to whom?" in json.dumps(card["blocks"])
    assert set(_buttons(card)) == {forms.ACTION_ANSWER, forms.ACTION_DECLINE, forms.ACTION_CANCEL}

    await click(driver, ALICE, ts, forms.ACTION_ANSWER, question_id, thread)
    [opened] = await slack.wait_for("views.open", timeout=WAIT_S)
    view = opened.args["view"]
    assert view["callback_id"] == forms.VIEW_QUESTION and view["private_metadata"] == question_id
    inputs = {b["block_id"]: b["element"]["type"] for b in view["blocks"] if b["type"] == "input"}
    assert inputs == {"field:payee": "plain_text_input", "field:times": "number_input"}

    wrong = await driver.events.view_submission(
        ALICE, forms.VIEW_QUESTION, question_id, {"field:payee": {"answer": "bob"}, "field:times": {"answer": "7"}}
    )
    assert wrong.status == 200 and wrong.json["response_action"] == "errors", wrong.body
    assert set(wrong.json["errors"]) == {"field:times"} and "3" in wrong.json["errors"]["field:times"]
    assert [e["round"] for e in seen] == ["ask"]

    right = await driver.events.view_submission(
        ALICE, forms.VIEW_QUESTION, question_id, {"field:payee": {"answer": "bob"}, "field:times": {"answer": "2"}}
    )
    assert right.status == 200 and not right.body, right.body  # an empty ack closes the modal
    answer = await driver.answer()
    assert "paid 100 to bob" in answer
    assert seen[1:] == [{"round": "answer", "state": "s1", "action": "accept", "content": {"payee": "bob", "times": 2}}]
    await slack.wait_for("chat.update", lambda a: a.get("ts") == ts, timeout=WAIT_S)
    finished = slack.message(CHANNEL, ts)
    assert _buttons(finished) == {} and f"Answered by <@{ALICE}>" in json.dumps(finished["blocks"])


async def test_only_the_requester_may_answer_and_decline_tells_the_server(driver, slack, seen):
    """Another user pressing Answer… is told whose question it is and gets no modal; the requester's Decline reaches the server; later clicks and a late form change nothing."""
    ts, question_id, thread = await asked(driver, slack)
    await click(driver, BOB, ts, forms.ACTION_ANSWER, question_id, thread)
    told = await whispered(slack, BOB)
    assert told["text"] == f"Only <@{ALICE}> can answer this question: they asked for the call."
    await click(driver, BOB, ts, forms.ACTION_DECLINE, question_id, thread)
    assert (await whispered(slack, BOB, 2))["text"] == told["text"]
    assert slack.calls_to("views.open") == [] and [e["round"] for e in seen] == ["ask"]

    await click(driver, ALICE, ts, forms.ACTION_DECLINE, question_id, thread)
    answer = await driver.answer()
    assert "not paid: decline" in answer
    assert [e["action"] for e in seen if e["round"] == "answer"] == ["decline"]
    await slack.wait_for("chat.update", lambda a: a.get("ts") == ts, timeout=WAIT_S)
    assert f"Declined by <@{ALICE}>" in json.dumps(slack.message(CHANNEL, ts)["blocks"])

    await click(driver, ALICE, ts, forms.ACTION_ANSWER, question_id, thread)
    assert (await whispered(slack, ALICE))["text"] == "That question was answered already."
    await click(driver, ALICE, ts, forms.ACTION_DECLINE, "no-such-question", thread)
    assert "not known" in (await whispered(slack, ALICE, 2))["text"]
    assert slack.calls_to("views.open") == []
    late = await driver.events.view_submission(
        ALICE, forms.VIEW_QUESTION, question_id, {"field:payee": {"answer": "bob"}, "field:times": {"answer": "2"}}
    )
    assert late.json["response_action"] == "update", late.body
    assert "answered already" in json.dumps(late.json["view"])
    assert [e["action"] for e in seen if e["round"] == "answer"] == ["decline"]


@pytest.mark.parametrize("bank", ["link"], indirect=True)
async def test_a_link_is_shown_to_the_requester_alone(driver, slack, seen):
    """Open link… accepts and shows the link in an ephemeral message to the requester; no channel message ever holds it."""
    ts, question_id, thread = await asked(driver, slack)
    assert set(_buttons(slack.message(CHANNEL, ts))) == {
        forms.ACTION_OPEN_LINK,
        forms.ACTION_DECLINE,
        forms.ACTION_CANCEL,
    }
    await click(driver, ALICE, ts, forms.ACTION_OPEN_LINK, question_id, thread)
    shown = await whispered(slack, ALICE)
    assert LINK in json.dumps(shown["blocks"]) and shown["channel"] == CHANNEL
    answer = await driver.answer()
    assert "paid 100" in answer
    assert [(e["action"], e["content"]) for e in seen if e["round"] == "answer"] == [("accept", None)]
    await slack.wait_for("chat.update", lambda a: a.get("ts") == ts, timeout=WAIT_S)
    public = slack.calls_to("chat.postMessage") + slack.calls_to("chat.update")
    assert all(LINK not in json.dumps(c.args) for c in public)
    assert [c.args["user"] for c in slack.calls_to("chat.postEphemeral") if LINK in json.dumps(c.args)] == [ALICE]


@pytest.fixture
async def platform() -> AsyncIterator[tuple[SlackApiStandIn, SlackPlatform]]:
    """`SlackPlatform` alone, its real client against a Web API stand-in of its own."""
    async with (
        SlackApiStandIn(bot_token="xoxb-test", bot_user_id="UBOT", team_id="T1") as api,
        aiohttp.ClientSession() as session,
    ):
        api.add_user(ALICE, "alice")
        api.add_channel(CHANNEL, name="general")
        clients = WorkspaceClients(session, api.base_url, token="xoxb-test")
        yield api, SlackPlatform(clients, UserDirectory(clients))


def record(**changes: Any) -> QuestionRecord:
    params = {"mode": "form", "message": "Pay 100 to whom?", "requestedSchema": {"type": "object", "properties": {}}}
    question = QuestionRecord(
        id="q1",
        thread_id=THREAD.thread_id,
        workspace_id="T1",
        interrupt_id="i1",
        tool_call_id="c1",
        round=0,
        key="confirm",
        tool_name="bank__pay",
        server="bank",
        requester_id=ALICE,
        requester_name="alice",
        request={"method": "elicitation/create", "params": params},
    )
    return replace(question, **changes)


@pytest.mark.parametrize(
    ("status", "answer", "by", "says"),
    [
        (QuestionStatus.EXPIRED, Answer(action=Action.CANCEL), None, "Expired unanswered"),
        (QuestionStatus.STOPPED, Answer(action=Action.CANCEL), BOB, f"Cancelled by <@{BOB}>"),
        (QuestionStatus.ANSWERED, Answer(action=Action.CANCEL), ALICE, f"Cancelled by <@{ALICE}>"),
    ],
)
async def test_the_card_is_posted_in_the_thread_and_redrawn_once_closed(platform, status, answer, by, says):
    """The card goes in the conversation's thread and its reference names it; once closed it says how, without buttons."""
    api, slack_platform = platform
    ref = await slack_platform.post_question(THREAD, record())
    [posted] = api.calls_to("chat.postMessage")
    assert posted.args["thread_ts"] == THREAD.thread and ref == f"{CHANNEL}/{posted.response['ts']}"
    closed = record(status=status, answer=answer, answered_by_id=by, answered_at=datetime.now(UTC), ref=ref)
    await slack_platform.update_question(THREAD, ref, closed)
    [update] = api.calls_to("chat.update")
    assert update.args["ts"] == posted.response["ts"] and says in json.dumps(update.args["blocks"])
    assert not any(b["type"] == "actions" for b in update.args["blocks"])


async def test_a_message_held_by_a_question_is_told_whose_answer_it_waits_for(platform):
    """The sender of a message held by a question is told, privately, whose answer to which server it waits for, escaped."""
    api, slack_platform = platform
    api.add_user(BOB, "bob")
    waiting = record(requester_name="alice <!channel>", server="*bank*")
    notice = ReviewPending(approvals=(), questions=(waiting,))
    bob = Actor(platform="slack", workspace_id="T1", user_id=BOB, display_name="bob")
    await slack_platform.notify(THREAD, notice, recipient=bob)
    [told] = api.calls_to("chat.postEphemeral")
    assert told.args["user"] == BOB
    text = told.args["text"]
    assert "waiting for alice &lt;!channel&gt; to answer a question from the MCP server" in text
    assert "<!channel>" not in text and "again in a moment" not in text
