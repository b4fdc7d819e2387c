"""The ReAct agent's checkpoints (issue 10 item 3; docs/decisions/0027).

Its runs write a checkpoint when they stop (`durability="exit"`) and stop before
`human_review`, so a model answer with calls is stored before any call runs; the runner goes
on at once in the same turn, carrying the turn's step limit across the invocations. Here: what
is written per turn, that a call's id is stored before it runs, that the step guard stops a
looping model after exactly the rounds one invocation would allow, and that a card still waits
and is decided as before. The supervisor keeps `durability="async"`.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool

from bot.agents.kind import AgentKind
from bot.agents.prompts import STEP_LIMIT_MESSAGE
from bot.approvals.decisions import Approve
from bot.approvals.mode import Mode
from bot.tools.registry import ToolRegistry, ToolSpec
from bot.turns import TurnRunner
from tests.support.scripted_model import ScriptedChatModel, calls, tool_call
from tests.support.service import Harness, actor, conversation, message, open_service


async def checkpoint_rows(h: Harness, thread_id: str) -> int:
    return int(await h.database.pool.fetchval("SELECT count(*) FROM checkpoints WHERE thread_id = $1", thread_id))


async def test_a_text_answer_writes_one_checkpoint(db_url, registry):
    """A message answered in words stores one checkpoint (the bare stack's default writes three)."""
    model = ScriptedChatModel(replies=[AIMessage("hello"), AIMessage("again")])
    async with open_service(db_url, model, registry) as h:
        conv = conversation()
        await h.service.handle_message(message("hi", message_id="1.1"))
        assert await checkpoint_rows(h, conv.thread_id) == 1
        await h.service.handle_message(message("and again", message_id="1.2"))
        assert await checkpoint_rows(h, conv.thread_id) == 2
    assert [answer for _, answer in h.platform.answers] == ["hello", "again"]


async def test_an_unreviewed_call_is_stored_before_it_runs(db_url):
    """The checkpoint holds the model's call, under its id, while the call runs; the round costs two writes."""
    stored: dict[str, Any] = {}
    harness: list[Harness] = []
    conv = conversation()

    @tool
    async def peek(query: str) -> str:
        """Look at what is stored."""
        graph = harness[0].graph(conv)
        state = await graph.aget_state({"configurable": {"thread_id": conv.thread_id}})
        stored["messages"] = state.values.get("messages", [])
        stored["next"] = state.next
        return f"peeked {query}"

    registry = ToolRegistry([ToolSpec(tool=peek, default_mode=Mode.AUTO)])
    call = tool_call("peek", {"query": "x"}, call_id="call-peek-1")
    model = ScriptedChatModel(replies=[calls(call), AIMessage("done")])
    async with open_service(db_url, model, registry) as h:
        harness.append(h)
        await h.service.handle_message(message("peek", message_id="2.1"))
        rows = await checkpoint_rows(h, conv.thread_id)
    [asked] = [m for m in stored["messages"] if isinstance(m, AIMessage)]
    assert [c["id"] for c in asked.tool_calls] == ["call-peek-1"]
    assert stored["next"] == ("human_review",)
    assert rows == 2
    assert h.platform.answers == [(conv.thread_id, "done")]


@pytest.mark.parametrize("limit", [7, 8, 9, 10, 25])
async def test_the_step_guard_allows_the_rounds_one_invocation_allows(db_url, registry, tool_log, limit):
    """A model that always asks for a call: the turn ends with the step-limit answer after as many rounds as one invocation of the graph would run (seed 000)."""
    model = ScriptedChatModel(script=lambda _: calls(tool_call("lookup", {"query": "again"})))
    async with open_service(db_url, model, registry, recursion_limit=limit) as h:
        await h.service.handle_message(message("loop", message_id="3.1"))
        chained = len(tool_log.calls)
        reference = conversation(channel="C2")
        await h.database.pool.execute(
            "INSERT INTO conversations (thread_id, platform, workspace_id, channel_id) VALUES ($1, 'test', 'W1', 'C2')",
            reference.thread_id,
        )
        one = {"configurable": {"thread_id": reference.thread_id}, "recursion_limit": limit}
        result = await h.graph(reference).ainvoke({"messages": [HumanMessage("loop")]}, one)
    single = len(tool_log.calls) - chained
    assert result["messages"][-1].content == STEP_LIMIT_MESSAGE
    assert single >= 1
    assert chained == single, f"{chained} rounds chained, {single} in one invocation (limit {limit})"
    assert h.platform.answers[-1][1] == STEP_LIMIT_MESSAGE


async def test_a_card_waits_and_its_approval_runs_the_call(db_url, registry, tool_log, monkeypatch):
    """A reviewed call pauses the turn with one card, opened once the run stored it; Approve runs it once."""
    looked: list[str] = []

    async def look(self, conversation, graph, interrupt) -> bool:
        looked.append(interrupt.id)
        return True

    monkeypatch.setattr(TurnRunner, "_pause_stored", look)
    model = ScriptedChatModel(
        replies=[
            calls(tool_call("lookup", {"query": "a"})),
            calls(tool_call("send", {"to": "bob", "body": "hi"})),
            AIMessage("sent"),
        ]
    )
    async with open_service(db_url, model, registry) as h:
        await h.service.handle_message(message("look up a, then tell bob", message_id="4.1"))
        [card] = h.platform.cards.values()
        assert tool_log.calls == [("lookup", {"query": "a"})]
        await h.service.decide(card.approval.id, actor("alice"), Approve())
        await h.service.tasks.join()
    assert tool_log.calls == [("lookup", {"query": "a"}), ("send", {"to": "bob", "body": "hi", "urgent": False})]
    assert h.platform.answers == [(conversation().thread_id, "sent")]
    assert looked == []  # stored by the time the run ended: nothing to wait for


async def test_the_supervisor_keeps_writing_each_step(db_url, registry):
    """The supervisor's runs write a checkpoint per step (`durability="async"`): its subagents' cards show at once."""
    model = ScriptedChatModel(replies=[AIMessage("hello")])
    async with open_service(db_url, model, registry, default_agent=AgentKind.SUBAGENTS) as h:
        await h.service.handle_message(message("hi", message_id="5.1"))
        assert await checkpoint_rows(h, conversation().thread_id) > 1
