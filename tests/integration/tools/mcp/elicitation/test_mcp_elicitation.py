"""An MCP server's question in the middle of an approved call, answered by its requester at the terminal.

The server answers `tools/call` with an `InputRequiredResult` asking a form question; the tool
node pauses the graph, the terminal asks the requester, and the call is sent again with their
answer (docs/decisions/0054-mcp-elicitation.md). What the server saw is its own record.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Context, FastMCP
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from mcp_types import ElicitRequest, ElicitRequestFormParams, ElicitRequestURLParams, InputRequiredResult

from adapters.console import ConsoleChat, ConsolePlatform
from adapters.console import messages as msg
from bot.agents.subagent_specs import SubagentSpec
from bot.base.agent_kind import AgentKind
from bot.base.errors import NotPermittedError
from bot.reviews.decisions import Approve
from bot.tools.mcp.elicitation.desk import AlreadyAnsweredError, QuestionNotFoundError
from bot.tools.mcp.elicitation.forms import Action, Answer, AnswerError
from bot.tools.mcp.elicitation.store import QuestionRecord
from tests.integration.console.test_console_policies import Terminal
from tests.integration.tools.mcp.test_mcp_tools import connected, registry_with, servers_for, tool_results
from tests.support.barriers import wait_until
from tests.support.mcp_server import serve_http
from tests.support.recording_platform import RecordingPlatform
from tests.support.scripted_model import ScriptedChatModel, calls, tool_call
from tests.support.service import actor, conversation, message, open_service

SCHEMA = {
    "type": "object",
    "properties": {
        "payee": {"type": "string", "title": "Payee", "description": "who gets the money"},
        "times": {"type": "integer", "title": "Times", "minimum": 1, "maximum": 3},
    },
    "required": ["payee", "times"],
}
WAIT_S = 120


def asking_server(seen: list[dict[str, Any]], *, url: bool = False) -> FastMCP:
    """A 2026-era server whose `pay` asks a form (or a link) in its first round and acts on the answer in the next."""
    mcp = FastMCP("bank")

    @mcp.tool
    async def pay(amount: int, ctx: Context) -> str | InputRequiredResult:
        """Pay `amount`."""
        responses = ctx.input_responses
        if not responses:
            seen.append({"round": "ask", "amount": amount})
            params: Any = (
                ElicitRequestURLParams(
                    message="Sign in to the bank", url="https://bank.example/sso", elicitation_id="e1"
                )
                if url
                else ElicitRequestFormParams(message=f"Pay {amount} to whom?", requested_schema=SCHEMA)
            )
            return InputRequiredResult(input_requests={"confirm": ElicitRequest(params=params)}, request_state="s1")
        answer = responses["confirm"]
        seen.append({"round": "answer", "state": ctx.request_state, "action": answer.action, "content": answer.content})
        if answer.action == "accept":
            return f"paid {amount}" + (f" to {answer.content['payee']}" if answer.content else "")
        return f"not paid: {answer.action}"

    return mcp


def model_paying() -> ScriptedChatModel:
    return ScriptedChatModel(replies=[calls(tool_call("bank__pay", {"amount": 100})), AIMessage("done")])


@contextlib.asynccontextmanager
async def question_asked(
    tmp_path: Path, db_url: str, platform: RecordingPlatform, seen: list[dict[str, Any]]
) -> AsyncIterator[tuple[Any, QuestionRecord, ScriptedChatModel]]:
    """alice's `pay 100`, approved by her, run until `asking_server(seen)` (as `bank`) asks its question on `platform`.

    Yields the service harness, the question as the platform was shown it, and the model.
    """
    async with serve_http(asking_server(seen)) as address:
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
                [question] = platform.questions.values()
                yield h, question, model
        finally:
            await servers.aclose(10)


async def chat(db_url, tmp_path, seen, *lines: str, url: bool = False) -> tuple[str, ScriptedChatModel, Terminal]:
    """Chat `lines` (a card's approval first) against the asking server; everything printed."""
    async with serve_http(asking_server(seen, url=url)) as address:
        servers = servers_for(tmp_path, {"bank": {"url": address}})
        servers.start()
        try:
            await connected(servers, "bank")
            model = model_paying()
            out: list[str] = []
            terminal = Terminal("pay 100", "a", *lines)
            platform = ConsolePlatform(write=out.append, operator="olga")
            async with open_service(db_url, model, registry_with(servers), platform) as h:
                await asyncio.wait_for(
                    ConsoleChat(h.service, platform, read=terminal.read, admin=h.admin).run(), WAIT_S
                )
        finally:
            await servers.aclose(10)
    return "\n".join(out), model, terminal


async def test_an_accepted_form_reaches_the_server_and_the_call_completes(tmp_path, db_url):
    """Accept, fill the fields: the server gets the typed content in a second round and the model reads its result."""
    seen: list[dict[str, Any]] = []
    text, model, _ = await chat(db_url, tmp_path, seen, "a", "bob", "2")
    assert seen == [
        {"round": "ask", "amount": 100},
        {"round": "answer", "state": "s1", "action": "accept", "content": {"payee": "bob", "times": 2}},
    ]
    assert "The MCP server bank asks @olga during bank__pay:" in text
    assert "Pay 100 to whom?" in text
    [result] = tool_results(model)
    assert result.content == "paid 100 to bob" and result.status == "success"
    assert "bot> done" in text


async def test_a_declined_question_tells_the_server_so(tmp_path, db_url):
    """Decline: the server gets `decline` in the next round, and decides the call's result."""
    seen: list[dict[str, Any]] = []
    _, model, _ = await chat(db_url, tmp_path, seen, "d")
    assert [event["action"] for event in seen if event["round"] == "answer"] == ["decline"]
    assert tool_results(model)[0].content == "not paid: decline"


async def test_a_cancelled_question_tells_the_server_so(tmp_path, db_url):
    """Cancel: the server gets `cancel`."""
    seen: list[dict[str, Any]] = []
    _, model, _ = await chat(db_url, tmp_path, seen, "c")
    assert [event["action"] for event in seen if event["round"] == "answer"] == ["cancel"]
    assert tool_results(model)[0].content == "not paid: cancel"


async def test_an_invalid_value_is_asked_again_with_the_reason(tmp_path, db_url):
    """A value the schema refuses is asked again, saying why; nothing reaches the server until it fits."""
    seen: list[dict[str, Any]] = []
    text, model, terminal = await chat(db_url, tmp_path, seen, "a", "bob", "7", "3")
    assert "Try again." in text
    assert [p for p in terminal.prompts if p.strip().startswith("Times")] == ["   Times: ", "   Times: "]
    assert [event.get("content") for event in seen if event["round"] == "answer"] == [{"payee": "bob", "times": 3}]
    assert tool_results(model)[0].content == "paid 100 to bob"


async def test_quit_at_a_field_leaves_and_the_question_waits(tmp_path, db_url):
    """/quit typed at a field of the form leaves, as at the question's prompt: nothing is sent, the question waits."""
    seen: list[dict[str, Any]] = []
    text, model, terminal = await chat(db_url, tmp_path, seen, "a", "/quit", "2")
    assert "   The question waits; you are asked again next time." in text
    assert [event["round"] for event in seen] == ["ask"]
    assert tool_results(model) == []
    assert [p for p in terminal.prompts if p.strip().startswith("Payee")] == ["   Payee: "]


async def test_a_link_question_shows_the_link_and_accept_carries_no_content(tmp_path, db_url):
    """A URL-mode question prints its link to the requester; accept means they opened it."""
    seen: list[dict[str, Any]] = []
    text, model, _ = await chat(db_url, tmp_path, seen, "a", url=True)
    assert "link: https://bank.example/sso" in text
    assert [(e["action"], e["content"]) for e in seen if e["round"] == "answer"] == [("accept", None)]
    assert tool_results(model)[0].content == "paid 100"


async def test_a_question_survives_a_restart_and_its_answer_completes_the_call(tmp_path, db_url):
    """The bot leaves at the question; the next start asks it again, and the answer completes the call.

    The server saw its first round exactly once.
    """
    seen: list[dict[str, Any]] = []
    async with serve_http(asking_server(seen)) as address:
        servers = servers_for(tmp_path, {"bank": {"url": address}})
        servers.start()
        try:
            await connected(servers, "bank")
            first: list[str] = []
            platform = ConsolePlatform(write=first.append, operator="olga")
            async with open_service(db_url, model_paying(), registry_with(servers), platform) as h:
                terminal = Terminal("pay 100", "a")  # then the end of input, at the question
                await asyncio.wait_for(
                    ConsoleChat(h.service, platform, read=terminal.read, admin=h.admin).run(), WAIT_S
                )
            assert any("Pay 100 to whom?" in line for line in first)
            assert "   The question waits; you are asked again next time." in first
            model = ScriptedChatModel(replies=[AIMessage("done")])
            second: list[str] = []
            platform = ConsolePlatform(write=second.append, operator="olga")
            async with open_service(db_url, model, registry_with(servers), platform) as h:
                terminal = Terminal("a", "bob", "1")
                chat_again = ConsoleChat(h.service, platform, read=terminal.read, admin=h.admin)
                await asyncio.wait_for(chat_again.run(recover=True), WAIT_S)
        finally:
            await servers.aclose(10)
    assert [event["round"] for event in seen] == ["ask", "answer"]
    assert seen[1]["content"] == {"payee": "bob", "times": 1}
    assert any("Pay 100 to whom?" in line for line in second)
    assert tool_results(model)[0].content == "paid 100 to bob"
    assert "bot> done" in second


async def test_an_unanswered_question_expires_like_a_card_and_the_server_gets_cancel(tmp_path, db_url):
    """A question past its tool's card expiry is closed: the requester is told, and the server gets `cancel`."""
    seen: list[dict[str, Any]] = []
    async with serve_http(asking_server(seen)) as address:
        servers = servers_for(tmp_path, {"bank": {"url": address}})
        servers.start()
        try:
            await connected(servers, "bank")
            model = model_paying()
            out: list[str] = []
            platform = ConsolePlatform(write=out.append, operator="olga")
            terminal = Terminal("/countersign expiry 10m", "pay 100", "a", end=False)
            async with open_service(db_url, model, registry_with(servers), platform) as h:
                running = asyncio.create_task(ConsoleChat(h.service, platform, read=terminal.read, admin=h.admin).run())
                await wait_until(lambda: terminal.prompts[-1:] == [msg.QUESTION_CHOICES], "the question")
                await h.database.pool.execute("UPDATE mcp_questions SET expires_at = now() - interval '1 second'")
                assert h.service.question_expiry is not None
                h.service.question_expiry.wake()
                await wait_until(lambda: "bot> done" in out and terminal.prompts[-1] == "you> ", "the next prompt")
                terminal.type("/quit")
                await asyncio.wait_for(running, WAIT_S)
                audit = await h.database.pool.fetch(
                    "SELECT outcome, detail FROM audit_log WHERE kind = 'question' ORDER BY id"
                )
        finally:
            await servers.aclose(10)
    text = "\n".join(out)
    assert "   expires in 10 minutes without an answer" in text
    assert "expired without an answer; the server was told `cancel`." in text
    assert [event.get("action") for event in seen] == [None, "cancel"]
    assert tool_results(model)[0].content == "not paid: cancel"
    assert [row["outcome"] for row in audit] == ["asked", "expired"]


async def test_an_accepted_answer_is_audited_without_its_values(tmp_path, db_url):
    """The audit log keeps who answered, the action and the field names, never what was typed."""
    seen: list[dict[str, Any]] = []
    async with serve_http(asking_server(seen)) as address:
        servers = servers_for(tmp_path, {"bank": {"url": address}})
        servers.start()
        try:
            await connected(servers, "bank")
            platform = ConsolePlatform(write=lambda line: None, operator="olga")
            async with open_service(db_url, model_paying(), registry_with(servers), platform) as h:
                terminal = Terminal("pay 100", "a", "a", "secret-payee", "2")
                await asyncio.wait_for(
                    ConsoleChat(h.service, platform, read=terminal.read, admin=h.admin).run(), WAIT_S
                )
                rows = await h.database.pool.fetch(
                    "SELECT outcome, actor_id, detail::text AS detail FROM audit_log WHERE kind = 'question' ORDER BY id"
                )
        finally:
            await servers.aclose(10)
    assert [(row["outcome"], row["actor_id"]) for row in rows] == [("asked", None), ("answered", "olga")]
    assert '"fields": ["payee", "times"]' in rows[1]["detail"] and '"action": "accept"' in rows[1]["detail"]
    assert all("secret-payee" not in row["detail"] for row in rows)


async def test_a_stop_at_the_question_answers_cancel_and_ends_the_turn(tmp_path, db_url):
    """`/countersign stop` while the question waits: the server gets `cancel`, the turn ends as stopped."""
    seen: list[dict[str, Any]] = []
    text, _, _ = await chat(db_url, tmp_path, seen, "/countersign stop")
    assert [event.get("action") for event in seen] == [None, "cancel"]
    assert "closed by a stop; the server was told `cancel`." in text
    assert "■  Stopped by" in text and "bot> done" not in text


def insistent_server(seen: list[dict[str, Any]], *, rounds: int) -> FastMCP:
    """A server whose `pay` asks a yes/no question in each of its first `rounds` rounds, then pays."""
    mcp = FastMCP("bank")
    schema = {"type": "object", "properties": {"ok": {"type": "boolean", "title": "Sure"}}, "required": ["ok"]}

    @mcp.tool
    async def pay(amount: int, ctx: Context) -> str | InputRequiredResult:
        """Pay `amount`."""
        number = int(ctx.request_state or "0")
        responses = ctx.input_responses or {}
        seen.append({"round": number, "actions": {key: answer.action for key, answer in responses.items()}})
        if number < rounds:
            request = ElicitRequest(
                params=ElicitRequestFormParams(message=f"Sure ({number})?", requested_schema=schema)
            )
            return InputRequiredResult(input_requests={f"q{number}": request}, request_state=str(number + 1))
        return f"paid {amount} after {number} questions"

    return mcp


async def insist(db_url, tmp_path, seen, rounds: int, *lines: str) -> tuple[str, ScriptedChatModel]:
    async with serve_http(insistent_server(seen, rounds=rounds)) as address:
        servers = servers_for(tmp_path, {"bank": {"url": address}})
        servers.start()
        try:
            await connected(servers, "bank")
            model = model_paying()
            out: list[str] = []
            terminal = Terminal("/countersign policy bank__pay auto", "pay 100", *lines)
            platform = ConsolePlatform(write=out.append, operator="olga")
            async with open_service(db_url, model, registry_with(servers), platform) as h:
                await asyncio.wait_for(
                    ConsoleChat(h.service, platform, read=terminal.read, admin=h.admin).run(), WAIT_S
                )
        finally:
            await servers.aclose(10)
    return "\n".join(out), model


async def test_each_round_of_questions_is_asked_and_sent_once(tmp_path, db_url):
    """Two rounds of questions: each is asked in turn, and each round reaches the server exactly once."""
    seen: list[dict[str, Any]] = []
    text, model = await insist(db_url, tmp_path, seen, 2, "a", "yes", "a", "no")
    assert seen == [
        {"round": 0, "actions": {}},
        {"round": 1, "actions": {"q0": "accept"}},
        {"round": 2, "actions": {"q1": "accept"}},
    ]
    assert "Sure (0)?" in text and "Sure (1)?" in text
    assert tool_results(model)[0].content == "paid 100 after 2 questions"


async def test_a_server_that_keeps_asking_is_cut_off_as_outcome_unknown(tmp_path, db_url):
    """After five rounds of questions the call is not sent again: the model reads that its outcome is unknown."""
    seen: list[dict[str, Any]] = []
    _, model = await insist(db_url, tmp_path, seen, 99, *["d"] * 5)
    assert [event["round"] for event in seen] == [0, 1, 2, 3, 4, 5]
    [result] = tool_results(model)
    assert "kept asking questions (5 rounds answered)" in str(result.content) and result.status == "error"


async def test_a_teammate_who_accepts_is_refused_before_the_form_is_asked(tmp_path, db_url):
    """`a` as a pretend teammate is refused at once (no field asked); the prompt says whose answer it would be."""
    seen: list[dict[str, Any]] = []
    text, model, terminal = await chat(db_url, tmp_path, seen, "/as bob", "a", "/as", "a", "bob", "2")
    assert "!  Only olga, who asked for the call, can answer this question (use /as olga)." in text
    assert "   as bob: [a]ccept / [d]ecline / [c]ancel? " in terminal.prompts
    assert [p for p in terminal.prompts if p.strip().startswith("Payee")] == ["   Payee: "]
    assert tool_results(model)[0].content == "paid 100 to bob"


async def test_only_the_requester_may_answer(tmp_path, db_url):
    """A teammate's answer is refused (audited) and the question is asked again; the requester's goes through."""
    seen: list[dict[str, Any]] = []
    text, model, _ = await chat(db_url, tmp_path, seen, "/as bob", "d", "/as", "c")
    assert "!  Only olga, who asked for the call, can answer this question (use /as olga)." in text
    assert [event.get("action") for event in seen] == [None, "cancel"]
    assert tool_results(model)[0].content == "not paid: cancel"


async def test_a_platform_that_cannot_ask_has_the_question_answered_cancel(tmp_path, db_url):
    """Where answers cannot be taken (Slack, Discord today), the requester is shown it and the server gets `cancel`."""
    seen: list[dict[str, Any]] = []
    platform = RecordingPlatform(asks_questions=False)
    async with question_asked(tmp_path, db_url, platform, seen) as (h, question, model):
        stored = await h.service.question(question.id)
    assert question.requester_id == "alice" and question.server == "bank"
    assert stored.status.value == "answered" and stored.answer is not None and stored.answer.action.value == "cancel"
    assert [event.get("action") for event in seen] == [None, "cancel"]
    assert tool_results(model)[0].content == "not paid: cancel"
    assert platform.answers[-1][1] == "done"


async def test_a_question_inside_a_subagent_reaches_the_requester_and_its_answer_the_server(tmp_path, db_url):
    """A subagent's MCP call asks: the question is the requester's, and the delegation goes on with the answer."""
    seen: list[dict[str, Any]] = []
    alpha = SubagentSpec(name="alpha", description="Pays.", prompt="You are alpha.", tools=("bank__pay",))

    def script(messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if str(messages[0].content).startswith(alpha.prompt):
            if isinstance(last, ToolMessage):
                return AIMessage(f"alpha reports: {last.content}")
            return calls(tool_call("bank__pay", {"amount": 100}))
        if isinstance(last, ToolMessage):
            return AIMessage(f"answer: {last.content}")
        return calls(tool_call("alpha", {"query": "pay 100"}))

    platform = RecordingPlatform()
    async with serve_http(asking_server(seen)) as address:
        servers = servers_for(tmp_path, {"bank": {"url": address}})
        servers.start()
        try:
            await connected(servers, "bank")
            model = ScriptedChatModel(script=script)
            async with open_service(
                db_url, model, registry_with(servers), platform, subagents=(alpha,), default_agent=AgentKind.SUBAGENTS
            ) as h:
                await h.service.handle_message(message("pay 100"))
                [approval] = await h.service.pending_approvals(conversation())
                assert approval.source == "alpha"
                await h.service.decide(approval.id, actor("alice"), Approve())
                await asyncio.wait_for(h.service.tasks.join(), WAIT_S)
                [question] = platform.questions.values()
                assert question.requester_id == "alice" and question.is_open
                answer = Answer(action=Action.ACCEPT, content={"payee": "bob", "times": 1})
                await h.service.answer_question(question.id, actor("alice"), answer)
                await asyncio.wait_for(h.service.tasks.join(), WAIT_S)
        finally:
            await servers.aclose(10)
    assert [event.get("action") for event in seen] == [None, "accept"]
    assert platform.answers[-1][1] == "answer: alpha reports: paid 100 to bob"


async def test_an_answer_that_does_not_fit_changes_nothing(tmp_path, db_url):
    """An accepted form whose content the schema refuses raises `AnswerError`; the question stays open for a good one."""
    seen: list[dict[str, Any]] = []
    platform = RecordingPlatform()
    async with question_asked(tmp_path, db_url, platform, seen) as (h, question, model):
        bad = Answer(action=Action.ACCEPT, content={"payee": "bob", "times": 9})
        with pytest.raises(AnswerError):
            await h.service.answer_question(question.id, actor("alice"), bad)
        with pytest.raises(NotPermittedError):
            await h.service.answer_question(question.id, actor("mallory"), Answer(action=Action.DECLINE))
        assert (await h.service.question(question.id)).is_open
        await h.service.answer_question(question.id, actor("alice"), Answer(action=Action.DECLINE))
        with pytest.raises(AlreadyAnsweredError):
            await h.service.answer_question(question.id, actor("alice"), Answer(action=Action.CANCEL))
        with pytest.raises(QuestionNotFoundError):
            await h.service.answer_question("nope", actor("alice"), Answer(action=Action.CANCEL))
        await asyncio.wait_for(h.service.tasks.join(), WAIT_S)
    assert [event.get("action") for event in seen] == [None, "decline"]
    assert tool_results(model)[0].content == "not paid: decline"


async def test_two_asking_calls_of_one_answer_each_get_their_own_answer(tmp_path, db_url):
    """Two calls of one model answer both ask: each question is asked in turn, and each answer reaches its own call."""
    seen: list[dict[str, Any]] = []
    model = ScriptedChatModel(
        replies=[
            calls(tool_call("bank__pay", {"amount": 100}), tool_call("bank__pay", {"amount": 200})),
            AIMessage("done"),
        ]
    )
    async with serve_http(asking_server(seen)) as address:
        servers = servers_for(tmp_path, {"bank": {"url": address}})
        servers.start()
        try:
            await connected(servers, "bank")
            out: list[str] = []
            lines = ("/countersign policy bank__pay auto", "pay both", "a", "bob", "1", "d")
            terminal = Terminal(*lines)
            platform = ConsolePlatform(write=out.append, operator="olga")
            async with open_service(db_url, model, registry_with(servers), platform) as h:
                await asyncio.wait_for(
                    ConsoleChat(h.service, platform, read=terminal.read, admin=h.admin).run(), WAIT_S
                )
        finally:
            await servers.aclose(10)
    assert [(e["round"], e.get("amount"), e.get("action")) for e in seen] == [
        ("ask", 100, None),
        ("answer", None, "accept"),
        ("ask", 200, None),
        ("answer", None, "decline"),
    ]
    assert [m.content for m in tool_results(model)] == ["paid 100 to bob", "not paid: decline"]
