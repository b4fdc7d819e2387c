"""Model faults through the Gemini stand-in, with the real client, the real graphs and PostgreSQL.

docs/decisions/0011 and docs/operations.md ("Model faults"): an answer with neither text nor a tool call, a blocked
prompt, a malformed call, 429 with retry advice, 500, timeouts and a refused tool schema. Each
ends in an answer or a clear notice, within bounded time, and the stored history stays valid:
the stand-in checks every later request the way the API does (no empty parts, calls paired with
results, signatures), so the follow-up message proves it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import pytest
from langchain_core.tools import StructuredTool

from bot.agents import prompts
from bot.base.agent_kind import AgentKind
from bot.base.errors import ModelErrorKind, NoAnswerReason
from bot.base.mode import Mode
from bot.ports import ModelFailed
from bot.tools.registry import ToolSpec
from tests.integration.upkeep.test_unfinished_work import upkeep_pass
from tests.standins.gemini import (
    blocked,
    call,
    empty,
    error,
    malformed_call,
    stopped,
    text,
)
from tests.support.db_faults import StatementDrop
from tests.support.gemini_service import gemini_core, model_notices, no_empty_answers, stored
from tests.support.recording_platform import RecordingPlatform
from tests.support.service import conversation, message
from tests.support.tools import make_test_registry

# --- answers without text (finding 1) --------------------------------------------------------


async def test_an_empty_answer_after_a_tool_result_is_asked_again_and_answered(db_url, registry):
    """Gemini answers a tool result with an empty part; asked once more, with a note, it answers."""
    replies = [call("lookup", {"query": "x"}), empty(), "found it"]
    async with gemini_core(db_url, registry, replies) as (h, gemini):
        await h.service.handle_message(message("look up x"))
        history = await stored(h)
    assert h.platform.answers == [(conversation().thread_id, "found it")]
    assert model_notices(h) == []
    assert no_empty_answers(history)
    retry = gemini.requests[-1]
    assert prompts.ASK_AGAIN_NOTES[NoAnswerReason.EMPTY].strip() in (retry.system_instruction or "")
    assert [r.status_code for r in gemini.requests] == [200, 200, 200]


@pytest.mark.parametrize("agent", [AgentKind.REACT, AgentKind.SUBAGENTS])
async def test_a_malformed_call_twice_is_told_and_the_next_message_is_answered(db_url, registry, agent):
    """Two malformed calls: one notice saying so, nothing posted or stored empty; the thread goes on."""
    async with gemini_core(db_url, registry, [malformed_call(), malformed_call()], agent=agent) as (h, gemini):
        await h.service.handle_message(message("do it"))
        await h.service.handle_message(message("hello again"))
        history = await stored(h, agent)
    assert model_notices(h) == [ModelFailed(kind=ModelErrorKind.NO_ANSWER, reason=NoAnswerReason.MALFORMED_CALL)]
    assert h.platform.answers == [(conversation().thread_id, "You said: hello again")]
    assert no_empty_answers(history)
    assert [r.status_code for r in gemini.requests] == [200, 200, 200]


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (blocked("SAFETY"), NoAnswerReason.BLOCKED),
        (stopped("SAFETY"), NoAnswerReason.SAFETY),
        (stopped("RECITATION"), NoAnswerReason.RECITATION),
        (empty(finish_reason="MAX_TOKENS"), NoAnswerReason.MAX_TOKENS),
    ],
    ids=["blocked-prompt", "safety", "recitation", "max-tokens"],
)
async def test_no_answer_that_asking_again_cannot_fix_is_told_at_once(db_url, registry, reply, reason):
    """A blocked prompt, a safety or recitation stop, the output limit: asked once, told why, thread usable."""
    async with gemini_core(db_url, registry, [reply]) as (h, gemini):
        await h.service.handle_message(message("tell me"))
        await h.service.handle_message(message("something else"))
        history = await stored(h)
    assert model_notices(h) == [ModelFailed(kind=ModelErrorKind.NO_ANSWER, reason=reason)]
    assert h.platform.answers == [(conversation().thread_id, "You said: something else")]
    assert no_empty_answers(history)
    assert len(gemini.requests) == 2


async def test_a_subagent_whose_prompt_is_blocked_reports_why_and_the_supervisor_answers(db_url, registry):
    """The researcher's request is blocked: the supervisor reads the reason and answers the user."""
    replies = [call("researcher", {"query": "find x"}), blocked("PROHIBITED_CONTENT")]
    async with gemini_core(db_url, registry, replies, agent=AgentKind.SUBAGENTS) as (h, gemini):
        await h.service.handle_message(message("research x"))
    [(_, answer)] = h.platform.answers
    why = prompts.NO_ANSWER_WHY[NoAnswerReason.BLOCKED]
    assert answer.startswith("Result: ") and why in answer
    assert model_notices(h) == []
    assert len(gemini.requests) == 3


# --- failures of the call: retries, bounded, announced --------------------------------------


async def test_a_429_waits_as_google_asks_and_the_wait_is_shown(db_url, registry):
    """429 with retryDelay 1s: the bot waits that long, the progress says it retries, then it answers."""
    advice = [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1s"}]
    async with gemini_core(db_url, registry, [error(429, details=advice)]) as (h, gemini):
        started = time.monotonic()
        await h.service.handle_message(message("hi"))
        elapsed = time.monotonic() - started
    assert h.platform.answers == [(conversation().thread_id, "You said: hi")]
    assert [r.status_code for r in gemini.requests] == [429, 200]
    assert elapsed >= 1.0
    retries = [a.retrying for _, a in h.platform.activities if a.retrying is not None]
    assert [(r.kind, r.wait_s) for r in retries] == [(ModelErrorKind.BUSY, 1.0)]


async def test_a_429_asking_for_longer_than_the_budget_is_told_at_once_with_the_wait(db_url, registry):
    """retryDelay 90s beyond GEMINI_RETRY_MAX_WAIT: one request, a notice saying how long Google asks to wait."""
    advice = [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "90s"}]
    async with gemini_core(db_url, registry, [error(429, details=advice)], retry_max_wait_s=30) as (h, gemini):
        started = time.monotonic()
        await h.service.handle_message(message("hi"))
        elapsed = time.monotonic() - started
        await h.service.handle_message(message("later"))
    assert model_notices(h) == [ModelFailed(kind=ModelErrorKind.BUSY, retry_after_s=90.0)]
    assert elapsed < 30
    assert [r.status_code for r in gemini.requests] == [429, 200]
    assert h.platform.answers == [(conversation().thread_id, "You said: later")]


async def test_server_errors_are_retried_and_then_told(db_url, registry):
    """Two 500s then an answer; later 500s on every attempt end in one 'unavailable' notice after 3 attempts."""
    async with gemini_core(db_url, registry, [error(500), error(500)]) as (h, gemini):
        await h.service.handle_message(message("first"))
        gemini.fail_next(3, status=500)
        await h.service.handle_message(message("second"))
        await h.service.handle_message(message("third"))
    assert [r.status_code for r in gemini.requests] == [500, 500, 200, 500, 500, 500, 200]
    assert model_notices(h) == [ModelFailed(kind=ModelErrorKind.UNAVAILABLE)]
    assert [text for _, text in h.platform.answers] == ["You said: first", "You said: third"]


async def test_a_timed_out_call_is_tried_again(db_url, registry):
    """The first answer takes longer than GEMINI_TIMEOUT: the bot gives up on it and asks again."""
    async with gemini_core(db_url, registry, [text("too late", delay_seconds=5)], timeout_s=1) as (h, gemini):
        started = time.monotonic()
        await h.service.handle_message(message("hi"))
        elapsed = time.monotonic() - started
    assert h.platform.answers == [(conversation().thread_id, "You said: hi")]
    assert len(gemini.requests) == 2
    assert elapsed < 5


async def test_a_tool_schema_the_api_refuses_is_told_without_retrying(db_url, tool_log):
    """A tool with a parameter name Gemini forbids: one 400, a notice for an administrator, no retry."""
    dashed = StructuredTool.from_function(
        coroutine=_never,
        name="ticket",
        description="Open a ticket.",
        args_schema={"type": "object", "properties": {"ticket-id": {"type": "string"}}, "required": ["ticket-id"]},
    )
    registry = make_test_registry(tool_log)
    registry.register(ToolSpec(tool=dashed, default_mode=Mode.AUTO))
    async with gemini_core(db_url, registry, []) as (h, gemini):
        await h.service.handle_message(message("open a ticket"))
    assert model_notices(h) == [ModelFailed(kind=ModelErrorKind.TOOLS_REFUSED)]
    assert [r.status_code for r in gemini.requests] == [400]
    assert h.platform.answers == []


async def _never(**kwargs: Any) -> str:
    raise AssertionError("the model never gets to call it")


async def test_a_subagents_model_wait_is_shown_too(db_url, registry):
    """A 429 inside a delegation: the supervisor's progress shows the retry; the answer follows."""
    advice = [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1s"}]
    replies = [call("researcher", {"query": "find x"}), error(429, details=advice), "x is 42"]
    async with gemini_core(db_url, registry, replies, agent=AgentKind.SUBAGENTS) as (h, gemini):
        await h.service.handle_message(message("research x"))
    retries = [a for _, a in h.platform.activities if a.retrying is not None]
    assert [(a.subagents, a.retrying.kind) for a in retries if a.retrying] == [(("researcher",), ModelErrorKind.BUSY)]
    [(_, answer)] = h.platform.answers
    assert "x is 42" in answer
    assert [r.status_code for r in gemini.requests] == [200, 429, 200, 200]


# --- one outcome per message -------------------------------------------------------------------


@dataclass
class DroppingAfterTheNotice(RecordingPlatform):
    """Tells; right after a "model failed" notice, the database drops the bot's next write to the conversation."""

    drop: StatementDrop | None = None

    async def notify(self, conversation, notice, *, recipient):
        await super().notify(conversation, notice, recipient=recipient)
        if isinstance(notice, ModelFailed) and self.drop is not None:
            drop, self.drop = self.drop, None
            await drop.arm(
                "SELECT 1 FROM conversations WHERE thread_id = $1 FOR UPDATE",
                conversation.thread_id,
                statement="UPDATE conversations SET running_since = NULL",
            )
            self.dropped = drop

    dropped: StatementDrop | None = None


async def test_a_database_drop_right_after_a_model_failure_notice_adds_no_notice_and_no_answer(db_url, registry):
    """Gemini fails, "model failed" is told, then the database drops: no second notice, no late answer; the resend is answered once."""
    platform = DroppingAfterTheNotice(drop=StatementDrop(db_url))
    async with gemini_core(db_url, registry, [error(500)] * 3, platform=platform) as (h, gemini):
        await h.service.handle_message(message("hello", message_id="40.1"))
        assert platform.dropped is not None
        await platform.dropped.done()
        assert platform.dropped.dropped  # the bot's write failed under it
        await upkeep_pass(h)  # what the upkeep does within a minute, with nobody writing
        assert h.platform.answers == []
        await h.service.handle_message(message("hello", message_id="40.2"))  # the user sends it again
        assert await upkeep_pass(h) == []
    assert [type(notice) for _, notice, _ in h.platform.notices] == [ModelFailed]
    assert h.platform.answers == [(conversation().thread_id, "You said: hello")]
    assert [r.status_code for r in gemini.requests] == [500, 500, 500, 200]
