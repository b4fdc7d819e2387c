"""Gemini 3 thought signatures survive every place the bot rewrites the history.

The Gemini stand-in issues a signature with the first function call of each answer and, like
the API, refuses a call of the current turn that comes back without it; here it also refuses
the placeholder langchain-google-genai sends for a call whose signature got lost
(`allow_signature_placeholders=False`), so each test proves the real signature came back:
after the unique-call-id repair, an edit of a reviewed call, the history window, and inside
and after delegations.
"""

from __future__ import annotations

import json

from bot.base.agent_kind import AgentKind
from bot.reviews.decisions import Edit, EditedAction
from bot.reviews.lifecycle import ApprovalStatus
from tests.standins.gemini import GeminiReply, GeminiRequest, call, calls
from tests.standins.gemini_signatures import PLACEHOLDERS
from tests.support.gemini_service import gemini_core, model_notices
from tests.support.service import actor, conversation, message


def all_signed(request: GeminiRequest) -> bool:
    """Every model step of the request's history has its first call signed with a real signature."""
    for content in request.contents:
        calls_ = [p for p in content.get("parts", []) if "functionCall" in p]
        if content.get("role") == "model" and calls_:
            signature = calls_[0].get("thoughtSignature")
            if not signature or signature in PLACEHOLDERS:
                return False
    return True


def assert_every_request_accepted(requests: list[GeminiRequest]) -> None:
    assert [r.status_code for r in requests] == [200] * len(requests), [r.status_code for r in requests]
    assert all(all_signed(r) for r in requests)


async def test_a_call_renamed_because_gemini_reused_its_id_keeps_its_signature(db_url, registry, tool_log):
    """Gemini sends the same functionCall.id in two turns: the second call is renamed, its signature follows."""

    def same_id(request: GeminiRequest) -> GeminiReply | None:
        said = request.last_user_text or ""
        if said.startswith("look up ") and not request.function_responses:
            return call("lookup", {"query": said.removeprefix("look up ")}, call_id="c1")
        return None

    async with gemini_core(db_url, registry, [], rules=(same_id,)) as (h, gemini):
        await h.service.handle_message(message("look up a"))
        await h.service.handle_message(message("look up b"))
    assert_every_request_accepted(gemini.requests)
    assert [text for _, text in h.platform.answers] == [
        "Result: {'output': 'found a'}",
        "Result: {'output': 'found b'}",
    ]
    assert model_notices(h) == []
    assert tool_log.calls == [("lookup", {"query": "a"}), ("lookup", {"query": "b"})]


async def test_an_edited_call_keeps_its_signature(db_url, registry, tool_log):
    """A reviewer edits a gated call: the AI message is replaced by id, and the edited call goes back signed."""
    async with gemini_core(db_url, registry, [call("send", {"to": "bob", "body": "hi"})]) as (h, gemini):
        await h.service.handle_message(message("send it"))
        [card] = [c.approval for c in h.platform.cards.values() if c.approval.status is ApprovalStatus.PENDING]
        edit = Edit(edited_action=EditedAction(name="send", args={"to": "carol", "body": "hi"}))
        await h.service.decide(card.id, actor("alice"), edit)
        await h.service.tasks.join()
    assert tool_log.calls == [("send", {"to": "carol", "body": "hi", "urgent": False})]
    assert_every_request_accepted(gemini.requests)
    last = gemini.requests[-1]
    assert last.function_calls == [("send", {"to": "carol", "body": "hi"})]
    assert h.platform.answers == [(conversation().thread_id, "Result: {'output': 'sent to carol'}")]


async def test_a_turn_longer_than_the_window_keeps_every_signature(db_url, registry, tool_log):
    """Three tool rounds over a tiny budget: the first turn is folded into the summary (one request
    without tools), the whole current turn is kept, every call signed."""
    replies = [
        "hello",
        "alice said hi",  # the summary of the first turn
        call("lookup", {"query": "a"}),
        call("lookup", {"query": "b"}),
        call("lookup", {"query": "c"}),
    ]
    async with gemini_core(db_url, registry, replies, context_tokens=1) as (h, gemini):
        await h.service.handle_message(message("hi"))
        await h.service.handle_message(message("look up three things"))
    assert_every_request_accepted(gemini.requests)
    assert len(gemini.requests[-1].signed_calls) == 3
    assert gemini.requests[-1].last_user_text == "look up three things"
    assert "alice said hi" in json.dumps(gemini.requests[-1].body["systemInstruction"])
    assert [text for _, text in h.platform.answers] == ["hello", "Result: {'output': 'found c'}"]
    assert len(tool_log.calls) == 3


async def test_a_subagents_tool_round_and_the_supervisors_delegations_keep_their_signatures(db_url, registry):
    """Two delegations in one answer; each subagent calls a tool (its calls get fresh ids); all go back signed."""
    replies = [calls([("researcher", {"query": "find a"}), ("researcher", {"query": "find b"})])]

    def researcher(request: GeminiRequest) -> GeminiReply | None:
        task = request.last_user_text or ""
        if task.startswith("find ") and not request.function_responses:
            return call("lookup", {"query": task.removeprefix("find ")})
        return None

    async with gemini_core(db_url, registry, replies, agent=AgentKind.SUBAGENTS, rules=(researcher,)) as (h, gemini):
        await h.service.handle_message(message("research a and b"))
    assert_every_request_accepted(gemini.requests)
    [(_, answer)] = h.platform.answers
    assert "found a" in answer and "found b" in answer
    supervisor_final = gemini.requests[-1]
    assert [name for name, _ in supervisor_final.signed_calls] == ["researcher", "researcher"]
    assert model_notices(h) == []
