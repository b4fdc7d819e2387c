"""Long conversations through the whole core on PostgreSQL: the window, the summary, the stored state (docs/decisions/0013).

The model is scripted: a summary request (recognised by its instructions) is answered with a
numbered summary, every other call with a long answer, so a small `context_tokens` overflows
every few turns.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pytest
from langchain_core.messages import AIMessage, BaseMessage

from bot.agents.prompts import SUMMARY_INSTRUCTIONS
from bot.base.agent_kind import AgentKind
from bot.reviews.decisions import Approve
from tests.support.scripted_model import ScriptedChatModel, tool_call
from tests.support.service import Harness, actor, conversation, message, open_service

BUDGET = 2_000
"""Tokens: about seven turns of the script below."""

ANSWER = "The answer is long. " * 50
"""About 1000 bytes (250 tokens) per answer."""

SUMMARY_START = SUMMARY_INSTRUCTIONS[:40]


def is_summary_request(messages: Sequence[BaseMessage]) -> bool:
    return messages[0].text.startswith(SUMMARY_START)


class Script:
    """Summaries numbered 1, 2, ...; answers echo the question; `send ...` asks for the gated tool once."""

    def __init__(self) -> None:
        self.summaries = 0

    def __call__(self, messages: list[BaseMessage]) -> AIMessage:
        if is_summary_request(messages):
            self.summaries += 1
            return AIMessage(f"summary {self.summaries}")
        last = messages[-1]
        if last.type == "human" and last.text.startswith("send"):
            return AIMessage("", tool_calls=[tool_call("send", {"to": "bob", "body": "hi"})])
        return AIMessage(f"re: {last.text[:20]} {ANSWER}")


async def stored(h: Harness, kind: AgentKind = AgentKind.REACT) -> dict:
    state = await h.graph(conversation(), kind).aget_state({"configurable": {"thread_id": conversation().thread_id}})
    return dict(state.values)


def turns_of(model: ScriptedChatModel) -> list[list[BaseMessage]]:
    """The prompts of the conversation's own calls (not the summary requests)."""
    return [prompt for prompt in model.prompts if not is_summary_request(prompt)]


@pytest.mark.parametrize("kind", [AgentKind.REACT, AgentKind.SUBAGENTS])
async def test_a_long_conversation_is_summarised_once_per_overflow_and_its_state_stays_bounded(db_url, registry, kind):
    """30 messages on a 2000-token budget: a summary every few turns, never two in a row; the model
    always sees the latest summary; the stored messages stop growing."""
    script = Script()
    model = ScriptedChatModel(script=script)
    sizes = []
    async with open_service(db_url, model, registry, context_tokens=BUDGET, default_agent=kind) as h:
        counts = [0]
        for n in range(30):
            await h.service.handle_message(message(f"question {n}", message_id=f"1.{n}"))
            counts.append(script.summaries)
            sizes.append(len((await stored(h, kind))["messages"]))
        state = await stored(h, kind)
    folds = [n for n in range(30) if counts[n + 1] > counts[n]]
    assert len(folds) >= 3 and all(b - a <= 1 for a, b in itertools.pairwise(counts))
    assert all(b - a >= 2 for a, b in itertools.pairwise(folds)), folds  # once per overflow
    assert state["summary"] == f"summary {script.summaries}"
    last_turn = turns_of(model)[-1]
    assert f"summary {script.summaries}" in last_turn[0].text and "question 29" in last_turn[-1].text
    assert max(sizes[10:]) <= 16 and len(h.platform.answers) == 30
    # Each summary request carries the previous summary: nothing folded earlier is lost.
    requests = [prompt for prompt in model.prompts if is_summary_request(prompt)]
    assert all(f"summary {n}" in request[1].text for n, request in enumerate(requests[1:], start=1))


async def test_a_pending_review_survives_a_fold_and_its_call_runs_once_when_approved(db_url, registry, tool_log):
    """The turn that asks for a gated call overflows the budget: older turns fold, the card's call is
    kept, and approving it runs the tool once with the summary still in place."""
    script = Script()
    model = ScriptedChatModel(script=script)
    async with open_service(db_url, model, registry, context_tokens=BUDGET) as h:
        for n in range(9):
            await h.service.handle_message(message(f"question {n}", message_id=f"2.{n}"))
        folds = script.summaries
        await h.service.handle_message(message("send bob hi " + "please " * 700, message_id="2.99"))
        [card] = h.platform.cards.values()
        assert script.summaries == folds + 1  # the turn with the card folded older turns
        state = await stored(h)
        assert state["messages"][-1].tool_calls[0]["id"] == card.approval.tool_call_id
        await h.service.decide(card.approval.id, actor(), Approve())
        await h.service.tasks.join()
        after = await stored(h)
    assert tool_log.calls == [("send", {"to": "bob", "body": "hi", "urgent": False})]
    assert after["summary"].startswith("summary ")
    assert h.platform.answers[-1][1].startswith("re: ")
