"""The graph's nodes and a stopped turn (bot/turns/stop/signal.py), on both checkpointers.

The signal is set from inside the run (by the model or by a tool), so each step boundary is
hit deterministically: no model call, no card and no tool call after the stop, one result per
call, and the closing message naming who stopped the turn.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.types import Command

from bot.agents import prompts
from bot.agents.review_agent import build_review_agent
from bot.base.mode import Mode
from bot.policy.review import DefaultPolicy
from bot.tools.ledger.memory import InMemoryLedger
from bot.tools.registry import ToolRegistry, ToolSpec
from bot.turns.stop.signal import STOP_KEY, StopSignal, is_cancellable, stopped_by, unless_stopped
from tests.support.gate import Gate
from tests.support.scripted_model import ScriptedChatModel, calls, tool_call


def run_config(signal: StopSignal) -> dict:
    return {"configurable": {"thread_id": f"test:w:{uuid.uuid4().hex}", STOP_KEY: signal}, "recursion_limit": 25}


def ask(text: str) -> dict:
    return {"messages": [HumanMessage(text)]}


def results(messages: list[BaseMessage]) -> list[tuple[str, str]]:
    return [(m.tool_call_id, m.text) for m in messages if isinstance(m, ToolMessage)]


NOT_RUN = prompts.STOPPED_CALL.format(name="alice")


async def test_a_stopped_turn_makes_no_model_call(make_graph, tool_log):
    """Stopped before the run: llm_call asks nothing and closes with who stopped it (marked for the runner)."""
    signal = StopSignal()
    signal.set(user_id="U1", name="alice")
    model = ScriptedChatModel(replies=[])
    result = await make_graph(model).ainvoke(ask("hi"), run_config(signal))
    last = result["messages"][-1]
    assert model.prompts == [] and tool_log.calls == []
    assert last.text == "Stopped by alice." and stopped_by(last) == {"user_id": "U1", "name": "alice"}
    assert stopped_by(AIMessage("Stopped by alice.")) is None  # only the marked message counts


async def test_a_stop_during_the_model_call_abandons_it(make_graph, tool_log):
    """The stop lands while the model is answering: the call is abandoned, nothing runs, no card."""
    signal, gate = StopSignal(), Gate()
    model = ScriptedChatModel(
        replies=[calls(tool_call("send", {"to": "bob", "body": "hi"}), tool_call("lookup", {"query": "x"}))],
        gate=gate,
    )
    gate.arm()
    running = asyncio.ensure_future(make_graph(model).ainvoke(ask("go"), run_config(signal)))
    await gate.wait_arrived()
    signal.set(user_id="U1", name="alice")
    result = await asyncio.wait_for(running, 60)  # the gate was never released
    assert "__interrupt__" not in result and tool_log.calls == [] and model.prompts == []
    assert [type(m) for m in result["messages"]] == [HumanMessage, AIMessage]
    assert result["messages"][-1].text == "Stopped by alice." and not result["messages"][-1].tool_calls


async def test_the_resume_of_a_stopped_pause_runs_nothing_even_what_was_approved(make_graph, tool_log):
    """Paused for `send` beside an auto `lookup`; resumed after the stop (with an approval): neither runs."""
    model = ScriptedChatModel(
        replies=[calls(tool_call("send", {"to": "bob", "body": "hi"}), tool_call("lookup", {"query": "x"}))]
    )
    graph = make_graph(model)
    signal = StopSignal()
    config = run_config(signal)
    paused = await graph.ainvoke(ask("go"), config)
    [interrupt] = paused["__interrupt__"]
    signal.set(user_id="U1", name="alice")
    result = await graph.ainvoke(Command(resume={interrupt.id: {"decisions": [{"type": "approve"}]}}), config)
    assert tool_log.calls == [] and len(model.prompts) == 1 and "__interrupt__" not in result
    ai = next(m for m in result["messages"] if isinstance(m, AIMessage) and m.tool_calls)
    assert results(result["messages"]) == [(call["id"], NOT_RUN) for call in ai.tool_calls]
    assert result["messages"][-1].text == "Stopped by alice."
    state = await graph.aget_state(config)
    assert not state.interrupts and not state.next


async def test_a_stop_by_a_running_tool_keeps_its_result_and_runs_no_other(saver):
    """The first call stops the turn while it runs: it finishes (not cancellable), the second one is not run."""
    signal, ran = StopSignal(), []

    @tool
    async def first(x: str) -> str:
        """The first step."""
        ran.append("first")
        signal.set(user_id="U1", name="alice")
        return "first done"

    @tool
    async def second(x: str) -> str:
        """The second step."""
        ran.append("second")
        return "second done"

    registry = ToolRegistry(
        [ToolSpec(tool=first, default_mode=Mode.AUTO), ToolSpec(tool=second, default_mode=Mode.AUTO)]
    )
    model = ScriptedChatModel(replies=[calls(tool_call("first", {"x": "1"}), tool_call("second", {"x": "2"}))])
    graph = build_review_agent(
        model=model, tools=registry.tools(), policy=DefaultPolicy(registry), checkpointer=saver, ledger=InMemoryLedger()
    )
    result = await graph.ainvoke(ask("go"), run_config(signal))
    assert ran == ["first"] and len(model.prompts) == 1
    assert [text for _, text in results(result["messages"])] == ["first done", NOT_RUN]
    assert result["messages"][-1].text == "Stopped by alice."


async def test_a_cancellable_tool_is_cancelled_and_its_result_says_so(saver):
    """A tool that declared itself cancellable is cancelled by the stop; its result is the cancellation."""
    signal, seen = StopSignal(), []

    @tool
    async def plain(url: str) -> str:
        """Not declared cancellable."""
        return "never"

    @tool
    async def slow(url: str) -> str:
        """Fetch slowly."""
        asyncio.get_running_loop().call_later(0.01, lambda: signal.set(user_id="U1", name="alice"))
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        return "never"

    spec = ToolSpec(tool=slow, default_mode=Mode.AUTO, cancellable=True)
    assert is_cancellable(spec.tool) and not is_cancellable(plain)
    registry = ToolRegistry([spec])
    ledger = InMemoryLedger()
    model = ScriptedChatModel(replies=[calls(tool_call("slow", {"url": "u"}))])
    graph = build_review_agent(
        model=model, tools=registry.tools(), policy=DefaultPolicy(registry), checkpointer=saver, ledger=ledger
    )
    config = run_config(signal)
    result = await graph.ainvoke(ask("go"), config)
    [(call_id, text)] = results(result["messages"])
    assert seen == ["cancelled"] and text == prompts.CANCELLED_CALL.format(name="alice")
    recorded = await ledger.recorded(thread_id=config["configurable"]["thread_id"], tool_call_id=call_id)
    assert recorded is not None and recorded.status == "error"


async def test_unless_stopped_prefers_a_result_and_cancels_work_when_the_stop_comes_first():
    """Work done first wins (also when both are done); a stop first cancels the work; a stop before does not start it."""
    signal = StopSignal()
    assert await unless_stopped(signal, asyncio.sleep(0, result="done")) == (False, "done")
    assert await unless_stopped(None, asyncio.sleep(0, result="done")) == (False, "done")
    cancelled = asyncio.Event()

    async def forever() -> str:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    asyncio.get_running_loop().call_later(0.01, lambda: signal.set(user_id="U1", name="alice"))
    assert await unless_stopped(signal, forever()) == (True, None)
    assert cancelled.is_set() and signal.stopped_by == "alice" and signal.stopped_by_id == "U1"
    signal.set(user_id="U2", name="bob")  # the first stop wins
    assert signal.stopped_by == "alice"
    started = []

    async def never_started() -> None:
        started.append(True)

    assert await unless_stopped(signal, never_started()) == (True, None)
    assert started == []
    with pytest.raises(ZeroDivisionError):
        await unless_stopped(StopSignal(), _fails())
    # A stop set by the work itself (in this task) does not cancel it: its result is kept, and
    # no cancellation is left pending for the next await.
    own = StopSignal()

    async def stops_itself() -> str:
        own.set(user_id="U1", name="alice")
        await asyncio.sleep(0)
        return "kept"

    assert await unless_stopped(own, stops_itself()) == (False, "kept")
    await asyncio.sleep(0)
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


async def _fails() -> None:
    raise ZeroDivisionError
