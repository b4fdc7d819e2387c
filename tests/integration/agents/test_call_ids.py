"""A model that reuses a call id of a folded or reset turn: every call runs under an id of its own.

Decision 0008 lets a model send the same `functionCall.id` again. The tool-run ledger and the
approvals are keyed by `(thread_id, tool_call_id)`, so a call stored under an id an earlier call
of the conversation had would find that call's run and answer with its result instead of
running. Real PostgreSQL, the real core; the model is scripted and always sends the id `fc-1`.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from bot.admin.commands import ResetContext
from bot.admin.views import ContextReset
from bot.reviews.decisions import Approve
from bot.reviews.lifecycle import ApprovalStatus
from tests.integration.turns.context.test_long_conversations import ANSWER, BUDGET, is_summary_request, stored
from tests.support.recording_platform import RecordingPlatform
from tests.support.scripted_model import ScriptedChatModel, tool_call
from tests.support.service import Harness, actor, conversation, message, open_service

REUSED = "fc-1"
ADMIN = "boss"


class ReusingScript:
    """`send <name>` asks for the gated `send`, `look <query>` for the auto `lookup`, both as `fc-1`."""

    def __init__(self) -> None:
        self.summaries = 0

    def __call__(self, messages: list[BaseMessage]) -> AIMessage:
        if is_summary_request(messages):
            self.summaries += 1
            return AIMessage(f"summary {self.summaries}")
        last = messages[-1]
        if isinstance(last, ToolMessage):
            return AIMessage(f"done: {last.text}")
        verb, _, rest = last.text.partition(" ")
        if verb == "send":
            return AIMessage("", tool_calls=[tool_call("send", {"to": rest, "body": "hi"}, REUSED)])
        if verb == "look":
            return AIMessage("", tool_calls=[tool_call("lookup", {"query": rest}, REUSED)])
        return AIMessage(f"re: {last.text[:20]} {ANSWER}")


async def _call(h: Harness, text: str, message_id: str, *, gated: bool) -> None:
    """Say `text`; for a gated call, approve its card and wait for the resumed run."""
    await h.service.handle_message(message(text, message_id=message_id))
    if gated:
        [card] = [c for c in h.platform.cards.values() if c.approval.status is ApprovalStatus.PENDING]
        await h.service.decide(card.approval.id, actor(), Approve())
        await h.service.tasks.join()


def _call_ids(messages: Sequence[BaseMessage]) -> list[str]:
    return [str(call["id"]) for m in messages if isinstance(m, AIMessage) for call in m.tool_calls]


async def _forget_first_turn(h: Harness, how: str, script: ReusingScript) -> None:
    """Take the first call's turn out of the graph state: a summary fold, or an admin's context reset."""
    if how == "reset":
        reply = await h.admin.execute(actor(ADMIN), ResetContext(), here="C1", conversation=conversation())
        assert isinstance(reply, ContextReset) and reply.changed
    else:
        for n in range(10):
            await h.service.handle_message(message(f"question {n}", message_id=f"q.{n}"))
        assert script.summaries >= 1
    assert _call_ids((await stored(h))["messages"]) == []  # the earlier call is no longer in the state


@pytest.mark.parametrize("how", ["fold", "reset"])
@pytest.mark.parametrize(("verb", "tool", "gated"), [("send", "send", True), ("look", "lookup", False)])
async def test_a_call_reusing_an_earlier_calls_id_runs_with_its_own_result(
    db_url, registry, tool_log, how, verb, tool, gated
):
    """After a fold or a context reset, a call the model sends under the id an earlier call had runs
    (approved or auto), the model reads its own result, and the card says it ran."""
    script = ReusingScript()
    model = ScriptedChatModel(script=script)
    platform = RecordingPlatform(admins={ADMIN})
    async with open_service(db_url, model, registry, platform, context_tokens=BUDGET) as h:
        await _call(h, f"{verb} first", "1", gated=gated)
        [first_id] = _call_ids((await stored(h))["messages"])
        await _forget_first_turn(h, how, script)
        await _call(h, f"{verb} second", "2", gated=gated)
        state = await stored(h)
        [second_id] = _call_ids(state["messages"])
        thread_id = conversation().thread_id
        recorded = await h.ledger.recorded(thread_id=thread_id, tool_call_id=second_id)
        cards = [card.approval for card in platform.cards.values()]
    ran = [args for name, args in tool_log.calls if name == tool]
    assert [args.get("to", args.get("query")) for args in ran] == ["first", "second"]
    assert second_id not in (REUSED, first_id)
    [result] = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert result.tool_call_id == second_id and "second" in result.text and "first" not in result.text
    assert recorded is not None and "second" in str(recorded.content)
    assert platform.answers[-1][1] == f"done: {result.text}"
    if gated:
        assert [(a.tool_call_id, a.status) for a in cards] == [
            (first_id, ApprovalStatus.APPROVED),
            (second_id, ApprovalStatus.APPROVED),
        ]
        assert all(not a.outcome_unknown for a in cards)
