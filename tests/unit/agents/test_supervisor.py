"""The supervisor with subagents (docs/decisions/0008; docs/DESIGN.md, Agents), on both checkpointers.

Scripted models stand in for Gemini: the supervisor's model delegates, each subagent's model
calls the test tools (`lookup` runs at once, `send` waits for review, `wipe` is denied).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.types import Command

from bot.agents import prompts
from bot.agents.delegation import DelegationEvent
from bot.agents.subagent_specs import SubagentSpec
from bot.agents.supervisor import build_subagent, build_supervisor_agent, max_tool_rounds
from bot.base.errors import ModelError, ModelErrorKind, NoAnswerReason
from bot.policy.review import DefaultPolicy
from bot.tools.ledger.memory import InMemoryLedger
from tests.support.scripted_model import ScriptedChatModel, calls, tool_call

RESEARCHER = SubagentSpec(name="researcher", description="Looks things up.", prompt="You research.", tools=("lookup",))
OPERATOR = SubagentSpec(name="operator", description="Sends messages.", prompt="You operate.", tools=("send", "wipe"))


def config(limit: int = 25) -> dict:
    return {"configurable": {"thread_id": f"test:w:{uuid.uuid4().hex}"}, "recursion_limit": limit}


def ask(text: str) -> dict:
    return {"messages": [HumanMessage(text)]}


def results(messages: list[BaseMessage]) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage)]


def delegate(*pairs: tuple[str, str]) -> AIMessage:
    return calls(*(tool_call(name, {"query": query}) for name, query in pairs))


def supervisor(*first: tuple[str, str]) -> ScriptedChatModel:
    """Delegates `first` on a human message; after reports, answers with every report it saw."""

    def script(messages: list[BaseMessage]) -> AIMessage:
        if isinstance(messages[-1], ToolMessage):
            reports = [m.content for m in messages if isinstance(m, ToolMessage)]
            return AIMessage("combined: " + " | ".join(str(r) for r in reports))
        return delegate(*first)

    return ScriptedChatModel(script=script)


def worker(first: Callable[[str], AIMessage], **kwargs: Any) -> ScriptedChatModel:
    """A subagent model: `first(query)` on the task, then "report: <each result>"."""

    def script(messages: list[BaseMessage]) -> AIMessage:
        if isinstance(messages[-1], ToolMessage):
            return AIMessage("report: " + "; ".join(str(m.content) for m in results(messages)))
        return first(str(messages[-1].content))

    return ScriptedChatModel(script=script, **kwargs)


@pytest.fixture
def build(registry, saver):
    """Compile a supervisor over subagents, each with its own scripted model."""

    def make(sup: ScriptedChatModel, models: dict[str, ScriptedChatModel], specs=(RESEARCHER, OPERATOR), **kwargs):
        tools = {tool.name: tool for tool in registry.tools()}
        policy = DefaultPolicy(registry)
        ledger = kwargs.pop("ledger", InMemoryLedger())
        subagents = [
            build_subagent(
                spec,
                model=models[spec.name],
                tools=[tools[name] for name in spec.tools],
                policy=policy,
                ledger=ledger,
            )
            for spec in specs
        ]
        return build_supervisor_agent(model=sup, subagents=subagents, checkpointer=saver, **kwargs)

    return make


# --- delegation, isolation, memory ------------------------------------------------------------


async def test_delegation_returns_the_report_to_the_supervisor(build, tool_log):
    """The supervisor calls a subagent by name with `query`; the subagent's final text is the call's result."""
    researcher = worker(lambda q: calls(tool_call("lookup", {"query": q})))
    graph = build(
        supervisor(("researcher", "the price of tea")), {"researcher": researcher, "operator": worker(AIMessage)}
    )
    result = await graph.ainvoke(ask("what does tea cost?"), config())
    assert tool_log.calls == [("lookup", {"query": "the price of tea"})]
    [report] = results(result["messages"])
    assert report.name == "researcher" and report.content == "report: found the price of tea"
    assert result["messages"][-1].content == "combined: report: found the price of tea"


async def test_a_subagent_sees_only_its_prompt_and_the_query(build):
    """Isolation (docs/DESIGN.md, Agents): no user message, no supervisor history, no sibling's work reaches a subagent."""
    researcher = worker(lambda q: AIMessage(f"facts about {q}"))
    operator = worker(lambda q: AIMessage(f"done {q}"))
    sup = supervisor(("researcher", "task R"), ("operator", "task O"))
    graph = build(sup, {"researcher": researcher, "operator": operator})
    await graph.ainvoke(ask("secret user words"), config())
    for model, query, own in ((researcher, "task R", "You research."), (operator, "task O", "You operate.")):
        [prompt] = model.prompts
        assert [type(m) for m in prompt] == [SystemMessage, HumanMessage]
        assert prompt[1].content == query
        assert str(prompt[0].content).startswith(own) and prompts.SUBAGENT_REPORT_RULES.strip() in prompt[0].content
        assert "secret user words" not in " ".join(str(m.content) for m in prompt)
    assert "task O" not in " ".join(str(m.content) for m in researcher.prompts[0])
    assert "task R" not in " ".join(str(m.content) for m in operator.prompts[0])
    # The supervisor is told that subagents see only the query.
    assert prompts.SUPERVISOR_INSTRUCTIONS.strip() in str(sup.prompts[0][0].content)


async def test_memory_across_turns_is_the_supervisors_only(build):
    """The supervisor's second turn sees the first; a subagent's second delegation starts fresh."""
    researcher = worker(lambda q: AIMessage(f"facts about {q}"))
    sup = supervisor(("researcher", "topic"))
    graph = build(sup, {"researcher": researcher, "operator": worker(AIMessage)})
    cfg = config()
    await graph.ainvoke(ask("first question"), cfg)
    await graph.ainvoke(ask("second question"), cfg)
    second_turn = " ".join(str(m.content) for m in sup.prompts[-2])
    assert "first question" in second_turn and "facts about topic" in second_turn
    assert len(researcher.prompts) == 2
    assert [type(m) for m in researcher.prompts[1]] == [SystemMessage, HumanMessage]


async def test_two_delegations_of_one_answer_run_at_once(build):
    """Scatter-gather (docs/DESIGN.md, Agents): two subagents of one answer overlap in time; both reports come back in call order."""
    shared = worker(lambda q: AIMessage(f"answer to {q}"), delay_s=0.3)
    graph = build(supervisor(("researcher", "A"), ("operator", "B")), {"researcher": shared, "operator": shared})
    result = await graph.ainvoke(ask("both"), config())
    assert shared.max_active == 2
    assert [m.content for m in results(result["messages"])] == ["answer to A", "answer to B"]


async def test_delegation_events_are_streamed_for_progress(build):
    """Each delegation writes a start and an end event on the custom stream, naming the subagent."""
    graph = build(
        supervisor(("researcher", "A")), {"researcher": worker(lambda q: AIMessage("r")), "operator": worker(AIMessage)}
    )
    events = [
        part["data"]
        async for part in graph.astream(ask("go"), config(), stream_mode=["custom"], version="v2")
        if part["type"] == "custom"
    ]
    assert [(e.subagent, e.started, e.query) for e in events] == [("researcher", True, "A"), ("researcher", False, "A")]
    assert all(isinstance(e, DelegationEvent) for e in events)


# --- failures become reports ----------------------------------------------------------------


BLOCKED = {"prompt_feedback": {"block_reason": "SAFETY"}}


@pytest.mark.parametrize(
    ("metadata", "reason", "asked"),
    [({}, NoAnswerReason.EMPTY, 2), (BLOCKED, NoAnswerReason.BLOCKED, 1)],
    ids=["empty-asked-again", "blocked"],
)
async def test_a_subagent_without_text_returns_a_failure_text_saying_why(build, metadata, reason, asked):
    """A subagent whose model gives no answer returns a failure text with Gemini's reason, never an empty result."""
    researcher = worker(lambda q: AIMessage("", response_metadata=metadata))
    graph = build(supervisor(("researcher", "A")), {"researcher": researcher, "operator": worker(AIMessage)})
    result = await graph.ainvoke(ask("go"), config())
    [report] = results(result["messages"])
    expected = prompts.SUBAGENT_NO_ANSWER.format(name="researcher", why=prompts.NO_ANSWER_WHY[reason])
    assert (report.content, report.status) == (expected, "error")
    assert len(researcher.prompts) == asked
    assert result["messages"][-1].content.startswith("combined:")


async def test_a_subagent_model_failure_is_reported_to_the_supervisor(build):
    """A model failure inside a subagent becomes its report; the supervisor still answers."""
    failing = ScriptedChatModel(replies=[ModelError(ModelErrorKind.UNAVAILABLE, "down")])
    graph = build(supervisor(("researcher", "A")), {"researcher": failing, "operator": worker(AIMessage)})
    result = await graph.ainvoke(ask("go"), config())
    [report] = results(result["messages"])
    assert report.content == prompts.SUBAGENT_FAILED.format(name="researcher", kind="unavailable")
    assert result["messages"][-1].content.startswith("combined:")


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (
            tool_call("ghost", {"query": "x"}),
            prompts.UNKNOWN_SUBAGENT.format(name="ghost", available="operator, researcher"),
        ),
        (tool_call("researcher", {}), prompts.INVALID_DELEGATION.format(name="researcher")),
        (tool_call("researcher", {"query": "  "}), prompts.INVALID_DELEGATION.format(name="researcher")),
        (tool_call("researcher", {"query": "x", "extra": 1}), prompts.INVALID_DELEGATION.format(name="researcher")),
    ],
)
async def test_a_bad_delegation_is_answered_with_an_error(build, call, expected):
    """An unknown subagent or a call without a proper `query` gets an error result; no subagent runs."""
    researcher = worker(AIMessage)
    sup = ScriptedChatModel(replies=[calls(call), AIMessage("sorry")])
    graph = build(sup, {"researcher": researcher, "operator": worker(AIMessage)})
    result = await graph.ainvoke(ask("go"), config())
    [answer] = results(result["messages"])
    assert answer.content == expected and answer.status == "error"
    assert researcher.prompts == []


# --- approvals inside subagents ---------------------------------------------------------------


def send_worker(**kwargs: Any) -> ScriptedChatModel:
    return worker(lambda q: calls(tool_call("send", {"to": q, "body": "hi"}), text=f"{q} must hear it"), **kwargs)


async def test_a_gated_call_inside_a_subagent_pauses_with_its_source_and_call_id(build, tool_log):
    """The interrupt payload names the subagent and carries the call id; nothing ran yet."""
    operator = send_worker()
    graph = build(supervisor(("operator", "bob")), {"researcher": worker(AIMessage), "operator": operator})
    result = await graph.ainvoke(ask("tell bob"), config())
    [interrupt] = result["__interrupt__"]
    [action] = interrupt.value["action_requests"]
    assert action["source"] == "operator" and action["name"] == "send"
    assert action["args"] == {"to": "bob", "body": "hi"} and action["description"] == "bob must hear it"
    assert action["tool_call_id"].startswith("call_")
    assert tool_log.calls == []


async def test_a_subagent_card_without_the_models_words_says_the_task(build, tool_log):
    """When a subagent's model calls a gated tool without text, the card's "why" is the task it was given."""
    operator = worker(lambda q: calls(tool_call("send", {"to": q, "body": "hi"})))
    graph = build(supervisor(("operator", "bob")), {"researcher": worker(AIMessage), "operator": operator})
    result = await graph.ainvoke(ask("tell bob"), config())
    [interrupt] = result["__interrupt__"]
    assert interrupt.value["action_requests"][0]["description"] == "Task: bob"


@pytest.mark.parametrize(
    ("decision", "ran", "report"),
    [
        ({"type": "approve"}, [("send", {"to": "bob", "body": "hi", "urgent": False})], "report: sent to bob"),
        (
            {"type": "edit", "edited_action": {"name": "send", "args": {"to": "carol", "body": "hello"}}},
            [("send", {"to": "carol", "body": "hello", "urgent": False})],
            "report: sent to carol",
        ),
        (
            {"type": "reject", "message": "not today"},
            [],
            "report: " + prompts.REJECTED_BY_REVIEWER.format(reason="not today"),
        ),
    ],
)
async def test_after_the_decision_the_subagent_continues_in_place(build, tool_log, decision, ran, report):
    """Approve, edit, reject inside a subagent: the tool runs at most once, the subagent is not restarted."""
    operator = send_worker()
    sup = supervisor(("operator", "bob"))
    graph = build(sup, {"researcher": worker(AIMessage), "operator": operator})
    cfg = config()
    [interrupt] = (await graph.ainvoke(ask("tell bob"), cfg))["__interrupt__"]
    result = await graph.ainvoke(Command(resume={interrupt.id: {"decisions": [decision]}}), cfg)
    assert tool_log.calls == ran
    assert len(operator.prompts) == 2  # one call before the card, one after the result: no restart
    assert len(sup.prompts) == 2
    [delegation] = results(result["messages"])
    assert delegation.content == report
    state = await graph.aget_state(cfg)
    assert state.interrupts == () and state.next == ()


async def test_both_delegations_pause_and_each_resumes_on_its_own(build, tool_log):
    """Two subagents waiting at once: two interrupt ids; each resumes alone; nothing finished is redone."""
    first = send_worker()
    second = send_worker()
    specs = (
        SubagentSpec(name="alpha", description="a", prompt="A.", tools=("send",)),
        SubagentSpec(name="beta", description="b", prompt="B.", tools=("send",)),
    )
    sup = supervisor(("alpha", "ann"), ("beta", "ben"))
    graph = build(sup, {"alpha": first, "beta": second}, specs=specs)
    cfg = config()
    interrupts = (await graph.ainvoke(ask("tell both"), cfg))["__interrupt__"]
    by_source = {i.value["action_requests"][0]["source"]: i for i in interrupts}
    assert set(by_source) == {"alpha", "beta"} and by_source["alpha"].id != by_source["beta"].id

    approve = {"decisions": [{"type": "approve"}]}
    partial = await graph.ainvoke(Command(resume={by_source["beta"].id: approve}), cfg)
    assert [i.id for i in partial["__interrupt__"]] == [by_source["alpha"].id]  # alpha still waits, same id
    assert tool_log.calls == [("send", {"to": "ben", "body": "hi", "urgent": False})]
    assert len(sup.prompts) == 1  # the supervisor waits for every report of the turn

    final = await graph.ainvoke(Command(resume={by_source["alpha"].id: approve}), cfg)
    assert [c[1]["to"] for c in tool_log.calls] == ["ben", "ann"]
    assert len(first.prompts) == 2 and len(second.prompts) == 2  # beta was not run again
    assert [m.content for m in results(final["messages"])] == ["report: sent to ann", "report: sent to ben"]
    assert final["messages"][-1].content == "combined: report: sent to ann | report: sent to ben"


async def test_a_value_for_an_interrupt_that_is_not_pending_never_runs_the_call(build, tool_log):
    """A resume naming a wrong interrupt id reaches the gate as a malformed value: the call is rejected, never run.

    LangGraph hands a map without a pending id to the only pending interrupt as its value
    (langgraph #8836 is the other face of it), so the runner names only ids it saw pending.
    """
    graph = build(supervisor(("operator", "bob")), {"researcher": worker(AIMessage), "operator": send_worker()})
    cfg = config()
    await graph.ainvoke(ask("tell bob"), cfg)
    result = await graph.ainvoke(Command(resume={"not-an-id": {"decisions": [{"type": "approve"}]}}), cfg)
    assert tool_log.calls == []
    [delegation] = results(result["messages"])
    assert prompts.REJECTED_NO_DECISION in delegation.content


async def test_policy_applies_inside_subagents(build, tool_log):
    """Inside a subagent, an auto tool runs at once and a denied one is refused, exactly as outside."""
    operator = worker(lambda q: calls(tool_call("wipe", {"target": q})))
    graph = build(supervisor(("operator", "db")), {"researcher": worker(AIMessage), "operator": operator})
    result = await graph.ainvoke(ask("wipe it"), config())
    assert "__interrupt__" not in result
    assert tool_log.calls == []
    [report] = results(result["messages"])
    assert prompts.REJECTED_BY_POLICY.format(name="wipe") in report.content


# --- step limits ------------------------------------------------------------------------------


@pytest.mark.parametrize(("limit", "rounds"), [(5, 1), (8, 2), (15, 4)])
async def test_a_subagent_stops_at_its_limit_with_a_closing_report(build, tool_log, limit, rounds):
    """A subagent that always wants a tool gets its rounds, then writes a report; never GraphRecursionError."""

    def script(messages: list[BaseMessage]) -> AIMessage:
        if str(messages[0].content).endswith(prompts.SUBAGENT_CLOSING):
            return AIMessage("partial report")
        return calls(tool_call("lookup", {"query": "more"}))

    looping = ScriptedChatModel(script=script)
    spec = SubagentSpec(name="researcher", description="r", prompt="R.", tools=("lookup",), step_limit=limit)
    graph = build(supervisor(("researcher", "x")), {"researcher": looping}, specs=(spec,))
    result = await graph.ainvoke(ask("go"), config())
    assert len(tool_log.calls) == rounds == max_tool_rounds(limit)
    [report] = results(result["messages"])
    assert report.content == "partial report"


async def test_the_round_cap_holds_across_resumes(build, tool_log):
    """Each resume gets fresh LangGraph steps, but the subagent's tool rounds stay capped in its state."""
    always_send = ScriptedChatModel(
        script=lambda messages: calls(tool_call("send", {"to": "bob", "body": str(len(messages))}))
    )
    spec = SubagentSpec(name="operator", description="o", prompt="O.", tools=("send",), step_limit=8)
    graph = build(supervisor(("operator", "x")), {"operator": always_send}, specs=(spec,))
    cfg = config()
    result = await graph.ainvoke(ask("go"), cfg)
    cards = 0
    while result.get("__interrupt__"):
        cards += 1
        assert cards <= 10
        [interrupt] = result["__interrupt__"]
        result = await graph.ainvoke(Command(resume={interrupt.id: {"decisions": [{"type": "approve"}]}}), cfg)
    assert cards == len(tool_log.calls) == max_tool_rounds(8) == 2
    [report] = results(result["messages"])
    # The closing answer had no text either: the report says so and quotes every result.
    assert report.content == prompts.SUBAGENT_STEP_LIMIT + " Results so far: 1. send: sent to bob 2. send: sent to bob"


async def test_the_supervisors_step_guard_closes_the_turn(build):
    """A supervisor that always delegates ends with the step-limit answer, never GraphRecursionError."""
    sup = ScriptedChatModel(script=lambda _: delegate(("researcher", "again")))
    graph = build(sup, {"researcher": worker(lambda q: AIMessage("r")), "operator": worker(AIMessage)})
    result = await graph.ainvoke(ask("loop"), config(10))
    assert result["messages"][-1].content == prompts.STEP_LIMIT_MESSAGE
    assert len(results(result["messages"])) == 2


async def test_delegations_beyond_the_limit_are_answered_not_run(build):
    """A model asking for more subagent tasks than MAX_DELEGATIONS at once gets the rest refused, in order."""
    from bot.agents.delegation import MAX_DELEGATIONS

    researcher = worker(lambda q: AIMessage(f"done {q}"))
    sup = supervisor(*[("researcher", f"t{i}") for i in range(MAX_DELEGATIONS + 2)])
    graph = build(sup, {"researcher": researcher, "operator": worker(AIMessage)})
    result = await graph.ainvoke(ask("everything"), config())
    answers = results(result["messages"])
    assert len(researcher.prompts) == MAX_DELEGATIONS
    assert [a.content for a in answers[:MAX_DELEGATIONS]] == [f"done t{i}" for i in range(MAX_DELEGATIONS)]
    assert all(
        a.content == prompts.TOO_MANY_DELEGATIONS.format(limit=MAX_DELEGATIONS) for a in answers[MAX_DELEGATIONS:]
    )
