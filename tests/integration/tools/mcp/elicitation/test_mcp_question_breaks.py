"""An MCP server's question at its edges: racing answers, an answer past its expiry, a link that cannot be shown.

Each test drives the real service against a real FastMCP server and PostgreSQL, and checks what
the server saw and what the model read (docs/decisions/0054-mcp-elicitation.md).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from fastmcp import Context, FastMCP
from mcp_types import ElicitRequest, ElicitRequestURLParams, InputRequiredResult

from bot.ports import ReviewPending
from bot.reviews.decisions import Approve
from bot.tools.mcp.elicitation.desk import AlreadyAnsweredError
from bot.tools.mcp.elicitation.forms import Action, Answer
from bot.tools.mcp.elicitation.store import QuestionStatus
from tests.integration.tools.mcp.elicitation.test_mcp_elicitation import WAIT_S, model_paying, question_asked
from tests.integration.tools.mcp.test_mcp_tools import connected, registry_with, servers_for, tool_results
from tests.support.barriers import wait_until
from tests.support.mcp_server import serve_http
from tests.support.recording_platform import RecordingPlatform
from tests.support.service import actor, conversation, message, open_service

TOKEN = "one-time-SECRET-7f3a"


def linking_server(seen: list[dict[str, Any]], url: str) -> FastMCP:
    """A server whose `pay` asks the requester to open `url`, then pays."""
    mcp = FastMCP("bank")

    @mcp.tool
    async def pay(amount: int, ctx: Context) -> str | InputRequiredResult:
        """Pay `amount`."""
        if not ctx.input_responses:
            seen.append({"round": "ask"})
            params = ElicitRequestURLParams(message="Sign in", url=url, elicitation_id="e1")
            return InputRequiredResult(input_requests={"confirm": ElicitRequest(params=params)}, request_state="s1")
        seen.append({"round": "answer", "action": ctx.input_responses["confirm"].action})
        return f"paid {amount}"

    return mcp


async def test_two_answers_at_once_apply_one_and_tell_the_other(tmp_path, db_url):
    """A double submit (Decline and Answer racing): one answer reaches the server, the other is told it came too late."""
    seen: list[dict[str, Any]] = []
    platform = RecordingPlatform()
    async with question_asked(tmp_path, db_url, platform, seen) as (h, question, model):
        accept = Answer(action=Action.ACCEPT, content={"payee": "bob", "times": 1})
        results = await asyncio.gather(
            *(
                h.service.answer_question(question.id, actor("alice"), answer)
                for answer in (accept, Answer(action=Action.DECLINE), accept)
            ),
            return_exceptions=True,
        )
        await asyncio.wait_for(h.service.tasks.join(), WAIT_S)
    assert sum(result is None for result in results) == 1
    assert all(isinstance(result, AlreadyAnsweredError) for result in results if result is not None)
    assert [event["round"] for event in seen] == ["ask", "answer"]
    assert len(tool_results(model)) == 1


async def test_an_answer_past_its_expiry_is_refused_before_the_sweep(tmp_path, db_url):
    """An answer after `expires_at` is refused as expired even if the sweeper has not closed it yet; the server gets `cancel`."""
    seen: list[dict[str, Any]] = []
    platform = RecordingPlatform()
    async with question_asked(tmp_path, db_url, platform, seen) as (h, question, _):
        await h.database.pool.execute("UPDATE mcp_questions SET expires_at = now() - interval '1 second'")
        late = Answer(action=Action.ACCEPT, content={"payee": "bob", "times": 1})
        with pytest.raises(AlreadyAnsweredError) as refused:
            await h.service.answer_question(question.id, actor("alice"), late)
        assert refused.value.status is QuestionStatus.EXPIRED
        await wait_until(lambda: len(seen) == 2, "the server's cancel round", timeout=WAIT_S)
        await asyncio.wait_for(h.service.tasks.join(), WAIT_S)
        stored = await h.service.question(question.id)
    assert stored.status is QuestionStatus.EXPIRED
    assert [event.get("action") for event in seen] == [None, "cancel"]


@pytest.mark.parametrize(
    "url",
    [f"myapp://signin?token={TOKEN}", f"https://bank.example/sso?token={TOKEN}\u200b"],
    ids=["custom-scheme", "invisible-char"],
)
async def test_a_link_that_cannot_be_shown_never_reaches_the_model(tmp_path, db_url, url):
    """A link question Countersign refuses to show ends the call without putting its (one-time) URL in the model's context."""
    seen: list[dict[str, Any]] = []
    platform = RecordingPlatform()
    async with serve_http(linking_server(seen, url)) as address:
        servers = servers_for(tmp_path, {"bank": {"url": address}})
        servers.start()
        try:
            await connected(servers, "bank")
            model = model_paying()
            async with open_service(db_url, model, registry_with(servers), platform) as h:
                await h.service.handle_message(message("pay 100"))
                [approval] = await h.service.pending_approvals(conversation())
                await h.service.decide(approval.id, actor("alice"), Approve())
                await asyncio.wait_for(h.service.tasks.join(), WAIT_S)
                audit = await h.database.pool.fetch("SELECT detail::text AS detail FROM audit_log")
        finally:
            await servers.aclose(10)
    [result] = tool_results(model)
    assert "cannot show" in str(result.content) and result.status == "error"
    assert TOKEN not in str(result.content)
    assert all(TOKEN not in row["detail"] for row in audit)
    assert seen == [{"round": "ask"}]


async def test_a_message_while_a_question_waits_is_told_what_it_waits_for(tmp_path, db_url):
    """A new message while a server's question waits is not fed to the model; its sender is told the question it waits for."""
    seen: list[dict[str, Any]] = []
    platform = RecordingPlatform()
    async with question_asked(tmp_path, db_url, platform, seen) as (h, question, model):
        prompts = len(model.prompts)
        await h.service.handle_message(message("hello?", user="bob"))
        assert len(model.prompts) == prompts
        [(_, notice, recipient)] = platform.notices
        assert isinstance(notice, ReviewPending) and recipient == "bob"
        assert [q.id for q in notice.questions] == [question.id]
        await h.service.answer_question(question.id, actor("alice"), Answer(action=Action.DECLINE))
        await asyncio.wait_for(h.service.tasks.join(), WAIT_S)
    assert tool_results(model)[0].content == "not paid: decline"
