"""On Slack an MCP server's question is told to its requester only, and not answered there yet.

Slack's modals for questions come next (docs/decisions/0050-elicitation-forms-on-slack-and-discord.md);
until then the requester is told privately what the server asked and the core answers `cancel`
(docs/decisions/0054-mcp-elicitation.md). The real `slack_sdk` client talks to the Web API stand-in.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest

from adapters.slack.platform import SlackPlatform, UserDirectory
from adapters.slack.workspaces import WorkspaceClients
from bot.conversation import ConversationRef
from bot.tools.mcp.elicitation.store import QuestionRecord
from tests.standins.slack_api import SlackApiStandIn

TOKEN = "xoxb-test"
CONVERSATION = ConversationRef(platform="slack", workspace_id="T1", channel_id="C1", thread="1700000000.000100")


@pytest.fixture
async def slack() -> AsyncIterator[tuple[SlackApiStandIn, SlackPlatform]]:
    async with (
        SlackApiStandIn(bot_token=TOKEN, bot_user_id="UBOT", team_id="T1") as stand_in,
        aiohttp.ClientSession() as session,
    ):
        stand_in.add_user("U123", name="alice")
        clients = WorkspaceClients(session, stand_in.base_url, token=TOKEN)
        yield stand_in, SlackPlatform(clients, UserDirectory(clients))


def question(params: dict) -> QuestionRecord:
    return QuestionRecord(
        id="q1",
        thread_id=CONVERSATION.thread_id,
        workspace_id="T1",
        interrupt_id="i1",
        tool_call_id="c1",
        round=0,
        key="confirm",
        tool_name="bank__pay",
        server="bank",
        requester_id="U123",
        requester_name="alice",
        request={"method": "elicitation/create", "params": params},
    )


async def test_a_form_question_is_whispered_to_the_requester_and_not_taken_here(slack):
    """The requester alone reads the server's message and that Countersign answered cancel; no reference comes back."""
    stand_in, platform = slack
    params = {"mode": "form", "message": "Pay 100 to whom?", "requestedSchema": {"type": "object", "properties": {}}}
    assert await platform.post_question(CONVERSATION, question(params)) is None
    [call] = stand_in.calls_to("chat.postEphemeral")
    text = str(call.args["text"])
    assert call.args["user"] == "U123" and call.args["channel"] == "C1"
    assert "Pay 100 to whom?" in text and "*bank*" in text and "*cancel*" in text
    assert stand_in.calls_to("chat.postMessage") == []


async def test_a_link_question_never_shows_its_link(slack):
    """A URL-mode question says a link was asked for, without the link."""
    stand_in, platform = slack
    params = {
        "mode": "url",
        "message": "Sign in",
        "url": "https://bank.example/sso?token=secret",
        "elicitationId": "e1",
    }
    assert await platform.post_question(CONVERSATION, question(params)) is None
    [call] = stand_in.calls_to("chat.postEphemeral")
    assert "secret" not in str(call.args) and "open a link" in str(call.args["text"])
