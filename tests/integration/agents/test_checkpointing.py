"""The ReAct agent's checkpoints (docs/decisions/0027).

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
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from bot.agents.prompts import STEP_LIMIT_MESSAGE
from bot.base.agent_kind import AgentKind
from bot.base.mode import Mode
from bot.reviews.decisions import Approve
from bot.tools.registry import ToolRegistry, ToolSpec
from bot.turns.runner import TurnRunner
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
    """The checkpoint holds the model's call, under the id its result answers, while the call runs; the round costs two writes."""
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
        final = await h.graph(conv).aget_state({"configurable": {"thread_id": conv.thread_id}})
    [asked] = [m for m in stored["messages"] if isinstance(m, AIMessage)]
    [result] = [m for m in final.values["messages"] if isinstance(m, ToolMessage)]
    assert [(c["name"], c["args"], c["id"]) for c in asked.tool_calls] == [
        ("peek", {"query": "x"}, result.tool_call_id)
    ]
    assert result.tool_call_id != "call-peek-1"  # stored under a fresh id, never the model's
    assert stored["next"] == ("human_review",)
    assert rows == 2
    assert h.platform.answers == [(conv.thread_id, "done")]


@pytest.mark.parametrize("limit", [7, 8, 9, 10, 25])
async def test_the_step_guard_allows_the_rounds_one_invocation_allows(db_url, registry, tool_log, limit):
    """A model that always asks for a call: the turn ends with the step-limit answer after as many rounds as one invocation of the graph would run (docs/DESIGN.md, Agents)."""
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


AUTHOR = {"countersign_author": {"user_id": "alice", "name": "alice"}}


async def add_conversation(h: Harness, conv) -> None:
    await h.database.pool.execute(
        "INSERT INTO conversations (thread_id, platform, workspace_id, channel_id) VALUES ($1, 'test', 'W1', $2)",
        conv.thread_id,
        conv.channel_id,
    )


async def test_a_pause_stored_by_per_step_checkpoints_is_resumed_and_chains(db_url, registry, tool_log):
    """Upgrade: a pause written by a run on LangGraph's default durability is approved; the resumed run goes on through two unreviewed rounds."""
    model = ScriptedChatModel(
        replies=[
            calls(tool_call("send", {"to": "bob", "body": "hi"})),
            calls(tool_call("lookup", {"query": "x"})),
            calls(tool_call("lookup", {"query": "y"})),
            AIMessage("done"),
        ]
    )
    async with open_service(db_url, model, registry) as h:
        conv = conversation()
        await add_conversation(h, conv)
        config = {"configurable": {"thread_id": conv.thread_id}, "recursion_limit": 25}
        paused = await h.graph(conv).ainvoke(
            {"messages": [HumanMessage("send bob hi", additional_kwargs=AUTHOR)]}, config
        )
        assert paused.get("__interrupt__")
        await h.service.handle_message(message("well?"))  # settle opens the pause's review
        [card] = h.platform.cards.values()
        await h.service.decide(card.approval.id, actor("alice"), Approve())
        await h.service.tasks.join()
        state = await h.graph(conv).aget_state(config)
    assert tool_log.calls == [
        ("send", {"to": "bob", "body": "hi", "urgent": False}),
        ("lookup", {"query": "x"}),
        ("lookup", {"query": "y"}),
    ]
    assert h.platform.answers[-1][1] == "done" and not state.next


@pytest.mark.parametrize("decision", ["approve", "reject"])
@pytest.mark.parametrize("limit", [7, 8, 10, 25])
async def test_a_resumed_loop_gets_the_rounds_one_invocation_allows(db_url, registry, tool_log, limit, decision):
    """A card decided, then a model that always asks for a call: the resumed run ends with the step-limit answer after as many rounds as one invocation of the resume would run."""
    from langgraph.types import Command

    from bot.reviews.decisions import Reject

    def script(messages):
        if not any(m.type == "tool" for m in messages):
            return calls(tool_call("send", {"to": "bob", "body": "hi"}))
        return calls(tool_call("lookup", {"query": "again"}))

    def lookups() -> int:
        return len([c for c in tool_log.calls if c[0] == "lookup"])

    model = ScriptedChatModel(script=script)
    async with open_service(db_url, model, registry, recursion_limit=limit) as h:
        await h.service.handle_message(message("go", message_id="9.1"))
        [card] = h.platform.cards.values()
        choice = Approve() if decision == "approve" else Reject(message="no")
        await h.service.decide(card.approval.id, actor("alice"), choice)
        await h.service.tasks.join()
        chained = lookups()
        reference = conversation(channel="C2")
        await add_conversation(h, reference)
        one = {"configurable": {"thread_id": reference.thread_id}, "recursion_limit": limit}
        graph = h.graph(reference)
        assert (await graph.ainvoke({"messages": [HumanMessage("go", additional_kwargs=AUTHOR)]}, one)).get(
            "__interrupt__"
        )
        resume = {"type": "approve"} if decision == "approve" else {"type": "reject", "message": "no"}
        result = await graph.ainvoke(Command(resume={"decisions": [resume]}), one)
    single = lookups() - chained
    assert result["messages"][-1].content == STEP_LIMIT_MESSAGE
    assert chained == single, f"{chained} rounds chained, {single} in one invocation (limit {limit})"
    assert h.platform.answers[-1][1] == STEP_LIMIT_MESSAGE


async def test_a_stop_at_the_static_stop_runs_none_of_the_calls(db_url, registry, tool_log, monkeypatch):
    """The turn's stop set between the invocation that stored the calls and the next one: no call runs, the turn says it was stopped."""
    import bot.turns.runner as turns_module

    model = ScriptedChatModel(replies=[calls(tool_call("lookup", {"query": "a"})), AIMessage("closing")])
    signals: list[Any] = []
    stream, waiting = TurnRunner._stream, turns_module._calls_waiting

    async def watched(self, conversation, graph, graph_input, progress, tracker, seen, signal, **kwargs):
        signals.append(signal)
        return await stream(self, conversation, graph, graph_input, progress, tracker, seen, signal, **kwargs)

    def stop_here(values):
        going_on = waiting(values)
        if going_on:
            signals[-1].set(user_id="alice", name="alice")
        return going_on

    monkeypatch.setattr(TurnRunner, "_stream", watched)
    monkeypatch.setattr(turns_module, "_calls_waiting", stop_here)
    async with open_service(db_url, model, registry) as h:
        await h.service.handle_message(message("look up a", message_id="4.1"))
        await h.service.tasks.join()
    assert tool_log.calls == []
    assert [type(n).__name__ for _, n, _ in h.platform.notices] == ["TurnStopped"]
