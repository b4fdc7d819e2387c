"""The review agent's rules, kept from the project template (docs/DESIGN.md, Agents and Approvals), on both checkpointers."""

from __future__ import annotations

import logging
import uuid

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.types import Command

from bot.agents import prompts
from bot.agents.review_agent import build_review_agent
from bot.base.errors import InvalidDecisionError, NoAnswerError, NoAnswerReason
from bot.base.mode import Mode
from bot.policy.review import DefaultPolicy
from bot.reviews.decisions import validate_decisions
from bot.tools.ledger.memory import InMemoryLedger
from bot.tools.registry import ToolRegistry, ToolSpec
from tests.support.scripted_model import ScriptedChatModel, calls, tool_call


def config(limit: int = 25) -> dict:
    return {"configurable": {"thread_id": f"test:w:{uuid.uuid4().hex}"}, "recursion_limit": limit}


def ask(text: str) -> dict:
    return {"messages": [HumanMessage(text)]}


def tool_messages(state_messages) -> list[ToolMessage]:
    return [m for m in state_messages if isinstance(m, ToolMessage)]


def stored_call_ids(state_messages) -> list[str]:
    """The ids of the stored tool calls, in order: `llm_call` gives each call a fresh one."""
    return [str(call["id"]) for m in state_messages if isinstance(m, AIMessage) for call in m.tool_calls]


# --- step guard (docs/DESIGN.md, Agents: the step guard) ---------------


@pytest.mark.parametrize(("limit", "tool_rounds"), [(6, 1), (7, 1), (10, 2), (25, 7)])
async def test_step_guard_closes_the_turn_before_the_limit(make_graph, tool_log, limit, tool_rounds):
    """A model that always wants a tool gets `tool_rounds` rounds, then a closing answer, never GraphRecursionError."""
    model = ScriptedChatModel(script=lambda _: calls(tool_call("lookup", {"query": "x"})))
    graph = make_graph(model)
    result = await graph.ainvoke(ask("loop forever"), config(limit))
    assert len(tool_log.calls) == tool_rounds
    last = result["messages"][-1]
    assert isinstance(last, AIMessage)
    assert last.content == prompts.STEP_LIMIT_MESSAGE
    assert last.tool_calls == []
    assert len(model.prompts) == tool_rounds + 1


async def test_step_guard_keeps_the_thread_usable(make_graph, tool_log):
    """After the guard fired, the next message in the same thread is answered normally."""
    replies = [calls(tool_call("lookup", {"query": "x"}))] * 2 + [AIMessage("fine")]
    model = ScriptedChatModel(replies=replies)
    graph = make_graph(model)
    cfg = config(6)
    await graph.ainvoke(ask("loop"), cfg)
    result = await graph.ainvoke(ask("now answer"), cfg)
    assert result["messages"][-1].content == "fine"


# --- answers without text (docs/decisions/0011) ----------------------------------------------


async def test_an_empty_answer_is_asked_once_more_with_a_note_and_never_stored(make_graph, tool_log):
    """An empty reply after a tool result: the model is asked again with a note; only the real answer is stored."""
    replies = [calls(tool_call("lookup", {"query": "x"})), AIMessage(""), AIMessage("found x")]
    model = ScriptedChatModel(replies=replies)
    result = await make_graph(model).ainvoke(ask("look up x"), config())
    assert [m.text for m in result["messages"] if isinstance(m, AIMessage)] == ["", "found x"]
    assert result["messages"][-1].tool_calls == [] and result["messages"][1].tool_calls
    assert prompts.ASK_AGAIN_NOTES[NoAnswerReason.EMPTY] in str(model.prompts[-1][0].content)
    assert prompts.ASK_AGAIN_NOTES[NoAnswerReason.EMPTY] not in str(model.prompts[-2][0].content)


async def test_no_answer_twice_raises_and_leaves_the_thread_usable(make_graph):
    """A malformed call, twice: NoAnswerError says why, nothing is stored, the next message is answered."""
    malformed = AIMessage(content=[], response_metadata={"finish_reason": "MALFORMED_FUNCTION_CALL"})
    model = ScriptedChatModel(replies=[malformed, malformed, AIMessage("hello")])
    graph = make_graph(model)
    cfg = config()
    with pytest.raises(NoAnswerError) as info:
        await graph.ainvoke(ask("do it"), cfg)
    assert info.value.reason is NoAnswerReason.MALFORMED_CALL
    result = await graph.ainvoke(ask("hi"), cfg)
    assert [type(m).__name__ for m in result["messages"]] == ["HumanMessage", "HumanMessage", "AIMessage"]
    assert result["messages"][-1].text == "hello"


async def test_a_blocked_prompt_is_not_asked_again(make_graph):
    """A blocked prompt gives the same answer however often it is asked: one call, then NoAnswerError."""
    blocked = AIMessage("", response_metadata={"prompt_feedback": {"block_reason": "SAFETY"}})
    model = ScriptedChatModel(replies=[blocked])
    with pytest.raises(NoAnswerError) as info:
        await make_graph(model).ainvoke(ask("x"), config())
    assert info.value.reason is NoAnswerReason.BLOCKED
    assert len(model.prompts) == 1


# --- plain ReAct behaviour and tool errors (docs/DESIGN.md, Agents: tool errors) -------------------


async def test_ungated_tool_runs_without_interrupt(make_graph, tool_log):
    """A call whose mode is auto runs at once; the turn ends with the model's answer."""
    model = ScriptedChatModel(replies=[calls(tool_call("lookup", {"query": "cats"})), AIMessage("cats found")])
    result = await make_graph(model).ainvoke(ask("find cats"), config())
    assert "__interrupt__" not in result
    assert tool_log.calls == [("lookup", {"query": "cats"})]
    assert [m.content for m in tool_messages(result["messages"])] == ["found cats"]
    assert result["messages"][-1].content == "cats found"


async def test_system_prompt_is_prepended_every_call_and_never_stored(make_graph):
    """Every model call starts with the system prompt; the stored history has none."""
    model = ScriptedChatModel(replies=[calls(tool_call("lookup", {"query": "a"})), AIMessage("done")])
    graph = make_graph(model, system_prompt="BE BRIEF")
    result = await graph.ainvoke(ask("hi"), config())
    assert all(isinstance(p[0], SystemMessage) and p[0].content == "BE BRIEF" for p in model.prompts)
    assert len(model.prompts) == 2
    assert not any(isinstance(m, SystemMessage) for m in result["messages"])


async def test_unknown_tool_returns_an_error_listing_the_tools(make_graph, tool_log):
    """A call to a tool that does not exist comes back to the model as an error naming the real tools."""
    model = ScriptedChatModel(replies=[calls(tool_call("teleport", {"to": "mars"})), AIMessage("sorry")])
    result = await make_graph(model).ainvoke(ask("go"), config())
    [error] = tool_messages(result["messages"])
    assert error.status == "error"
    assert "teleport is not a valid tool" in error.content
    assert "lookup" in error.content and "send" in error.content
    assert tool_log.calls == []
    assert result["messages"][-1].content == "sorry"


async def test_invalid_arguments_return_a_validation_error(make_graph, tool_log):
    """Arguments that do not fit the tool's schema come back as an error naming the field."""
    model = ScriptedChatModel(replies=[calls(tool_call("lookup", {"q": 1})), AIMessage("retrying")])
    result = await make_graph(model).ainvoke(ask("go"), config())
    [error] = tool_messages(result["messages"])
    assert error.status == "error"
    assert "invalid arguments for lookup" in error.content and "query" in error.content
    assert tool_log.calls == []


async def test_exception_inside_a_tool_becomes_an_error_result(make_graph, tool_log, caplog):
    """A tool that raises gives the model an error result and a log line; the turn still ends with an answer."""
    model = ScriptedChatModel(replies=[calls(tool_call("explode", {"reason": "disk"})), AIMessage("it failed")])
    with caplog.at_level(logging.ERROR, logger="bot.agents.tool_node"):
        result = await make_graph(model).ainvoke(ask("go"), config())
    [error] = tool_messages(result["messages"])
    assert error.status == "error"
    assert "explode failed: RuntimeError: boom: disk" in error.content
    assert result["messages"][-1].content == "it failed"
    assert any("tool explode failed" in r.getMessage() for r in caplog.records)


# --- review: interrupt payload, approve, edit, reject (docs/DESIGN.md, Agents) ----------------------------


async def test_gated_call_interrupts_with_the_hitl_payload(make_graph, tool_log):
    """A call that needs review pauses the graph with LangChain's HITL request shape; nothing ran."""
    call = tool_call("send", {"to": "bob", "body": "hi"})
    model = ScriptedChatModel(replies=[calls(call, text="Bob asked for it.")])
    graph = make_graph(model)
    cfg = config()
    result = await graph.ainvoke(ask("tell bob hi"), cfg)
    [interrupt] = result["__interrupt__"]
    [stored_id] = stored_call_ids(result["messages"])
    assert stored_id != call["id"]  # never the model's id
    assert interrupt.value == {
        "action_requests": [
            {
                "name": "send",
                "args": {"to": "bob", "body": "hi"},
                "description": "Bob asked for it.",
                "tool_call_id": stored_id,
                "source": None,
            }
        ],
        "review_configs": [{"action_name": "send", "allowed_decisions": ["approve", "edit", "reject"]}],
    }
    assert tool_log.calls == []
    state = await graph.aget_state(cfg)
    assert state.next == ("human_review",)


async def test_approve_runs_the_call_once_with_the_proposed_args(make_graph, tool_log):
    """Approve: the tool runs exactly once with the model's arguments and the model answers."""
    model = ScriptedChatModel(replies=[calls(tool_call("send", {"to": "bob", "body": "hi"})), AIMessage("sent!")])
    graph = make_graph(model)
    cfg = config()
    await graph.ainvoke(ask("tell bob hi"), cfg)
    result = await graph.ainvoke(Command(resume={"decisions": [{"type": "approve"}]}), cfg)
    assert tool_log.calls == [("send", {"to": "bob", "body": "hi", "urgent": False})]
    assert result["messages"][-1].content == "sent!"


async def test_edit_runs_the_edited_args_and_replaces_the_ai_message_by_id(make_graph, tool_log):
    """Edit: the tool runs with the edited args; the stored AI message keeps its id and shows the edit."""
    call = tool_call("send", {"to": "bob", "body": "hi"})
    model = ScriptedChatModel(replies=[calls(call), AIMessage("sent to carol")])
    graph = make_graph(model)
    cfg = config()
    paused = await graph.ainvoke(ask("tell bob hi"), cfg)
    [stored_id] = stored_call_ids(paused["messages"])
    edit = {
        "type": "edit",
        "edited_action": {"name": "send", "args": {"to": "carol", "body": "hello"}},
    }
    result = await graph.ainvoke(Command(resume={"decisions": [edit]}), cfg)
    assert tool_log.calls == [("send", {"to": "carol", "body": "hello", "urgent": False})]
    ai_with_calls = [m for m in result["messages"] if isinstance(m, AIMessage) and m.tool_calls]
    assert len(ai_with_calls) == 1
    assert ai_with_calls[0].tool_calls[0]["args"] == {"to": "carol", "body": "hello"}
    assert ai_with_calls[0].tool_calls[0]["id"] == stored_id
    [result_message] = tool_messages(result["messages"])
    assert result_message.tool_call_id == stored_id


async def test_reject_with_reason_never_runs_and_the_model_sees_the_reason(make_graph, tool_log):
    """Reject: no tool run; the model reads an error result carrying the reviewer's reason."""
    model = ScriptedChatModel(
        replies=[calls(tool_call("send", {"to": "bob", "body": "hi"})), AIMessage("ok, not sent")]
    )
    graph = make_graph(model)
    cfg = config()
    await graph.ainvoke(ask("tell bob hi"), cfg)
    result = await graph.ainvoke(Command(resume={"decisions": [{"type": "reject", "message": "bob is on leave"}]}), cfg)
    assert tool_log.calls == []
    [rejection] = tool_messages(result["messages"])
    assert rejection.status == "error"
    assert rejection.content == "Rejected by a reviewer: bob is on leave"
    last_prompt = model.prompts[-1]
    assert any(isinstance(m, ToolMessage) and "bob is on leave" in m.content for m in last_prompt)
    assert result["messages"][-1].content == "ok, not sent"


async def test_missing_decision_counts_as_rejected(make_graph, tool_log):
    """Resuming the graph directly with no decision rejects the call (docs/DESIGN.md, Agents: fail closed)."""
    model = ScriptedChatModel(replies=[calls(tool_call("send", {"to": "bob", "body": "hi"})), AIMessage("not sent")])
    graph = make_graph(model)
    cfg = config()
    await graph.ainvoke(ask("tell bob hi"), cfg)
    result = await graph.ainvoke(Command(resume={"decisions": []}), cfg)
    assert tool_log.calls == []
    [rejection] = tool_messages(result["messages"])
    assert rejection.content == prompts.REJECTED_NO_DECISION


async def test_mixed_batch_runs_auto_and_approved_calls_only(make_graph, tool_log):
    """One turn with an auto call and two reviewed calls: only approved ones run; results follow call order."""
    a = tool_call("lookup", {"query": "address"})
    b = tool_call("send", {"to": "bob", "body": "1"})
    c = tool_call("send", {"to": "eve", "body": "2"})
    model = ScriptedChatModel(replies=[calls(a, b, c), AIMessage("done")])
    graph = make_graph(model)
    cfg = config()
    first = await graph.ainvoke(ask("do things"), cfg)
    [interrupt] = first["__interrupt__"]
    assert [r["args"]["to"] for r in interrupt.value["action_requests"]] == ["bob", "eve"]
    assert tool_log.calls == []  # nothing runs before the review, not even the auto call
    result = await graph.ainvoke(
        Command(resume={"decisions": [{"type": "approve"}, {"type": "reject", "message": "not eve"}]}),
        cfg,
    )
    assert [name for name, _ in tool_log.calls] == ["lookup", "send"]
    assert tool_log.calls[1][1]["to"] == "bob"
    results = tool_messages(result["messages"])
    assert [m.tool_call_id for m in results] == stored_call_ids(result["messages"])
    assert [m.name for m in results] == ["lookup", "send", "send"]
    assert results[2].status == "error"


async def test_decisions_pair_with_calls_by_position(make_graph, tool_log):
    """The first decision answers the first reviewed call, the second the second."""
    b = tool_call("send", {"to": "bob", "body": "1"})
    c = tool_call("send", {"to": "eve", "body": "2"})
    model = ScriptedChatModel(replies=[calls(b, c), AIMessage("done")])
    graph = make_graph(model)
    cfg = config()
    await graph.ainvoke(ask("send both"), cfg)
    result = await graph.ainvoke(Command(resume={"decisions": [{"type": "reject"}, {"type": "approve"}]}), cfg)
    assert [args["to"] for _, args in tool_log.calls] == ["eve"]
    results = tool_messages(result["messages"])
    # Gemini pairs results with calls by position: a rejection listed first must be the first call's.
    assert [m.tool_call_id for m in results] == stored_call_ids(result["messages"])
    assert results[0].status == "error" and results[1].content == "sent to eve"


async def test_results_stay_in_call_order_when_a_later_call_is_rejected(make_graph, tool_log):
    """Approve the first, reject the second: the stored results are in call order, not decision order."""
    b = tool_call("send", {"to": "bob", "body": "1"})
    c = tool_call("send", {"to": "eve", "body": "2"})
    model = ScriptedChatModel(replies=[calls(b, c), AIMessage("done")])
    graph = make_graph(model)
    cfg = config()
    await graph.ainvoke(ask("send both"), cfg)
    result = await graph.ainvoke(Command(resume={"decisions": [{"type": "approve"}, {"type": "reject"}]}), cfg)
    results = tool_messages(result["messages"])
    ids = stored_call_ids(result["messages"])
    assert [m.tool_call_id for m in results] == ids
    assert [m.status for m in results] == ["success", "error"]
    final_prompt_tools = [m.tool_call_id for m in model.prompts[-1] if isinstance(m, ToolMessage)]
    assert final_prompt_tools == ids


async def test_all_rejected_goes_straight_back_to_the_model(make_graph, tool_log):
    """When every reviewed call is rejected, no tool runs and the model answers from the rejections."""
    model = ScriptedChatModel(replies=[calls(tool_call("send", {"to": "bob", "body": "1"})), AIMessage("understood")])
    graph = make_graph(model)
    cfg = config()
    await graph.ainvoke(ask("send"), cfg)
    result = await graph.ainvoke(Command(resume={"decisions": [{"type": "reject"}]}), cfg)
    assert tool_log.calls == []
    assert result["messages"][-1].content == "understood"


async def test_denied_tool_is_rejected_by_policy_without_a_pause(make_graph, tool_log):
    """A tool whose mode is deny never runs and causes no interrupt; the model reads why."""
    model = ScriptedChatModel(replies=[calls(tool_call("wipe", {"target": "prod"})), AIMessage("cannot")])
    result = await make_graph(model).ainvoke(ask("wipe prod"), config())
    assert "__interrupt__" not in result
    assert tool_log.calls == []
    [denied] = tool_messages(result["messages"])
    assert denied.content == prompts.REJECTED_BY_POLICY.format(name="wipe")


# --- validation before resume (docs/DESIGN.md, Approvals: decisions validated before resume) ------


@pytest.mark.parametrize(
    ("decisions", "message"),
    [
        ([], "expected 1 decision"),
        ([{"type": "approve"}, {"type": "approve"}], "expected 1 decision"),
        ([{"type": "maybe"}], "malformed decision"),
        ([{"type": "edit"}], "malformed decision"),
        (
            [{"type": "edit", "edited_action": {"name": "wipe", "args": {"target": "x"}}}],
            "cannot change the tool",
        ),
        (
            [{"type": "edit", "edited_action": {"name": "send", "args": {"to": "bob"}}}],
            "invalid arguments for send",
        ),
        (
            [
                {
                    "type": "edit",
                    "edited_action": {"name": "send", "args": {"to": "b", "body": "x", "cc": "y"}},
                }
            ],
            "no argument 'cc'",
        ),
        ([{"type": "reject", "message": "x" * 2001}], "reason is too long"),
    ],
)
async def test_invalid_decisions_are_refused_and_the_review_stays_completable(
    make_graph, registry, tool_log, decisions, message
):
    """An invalid resume value is refused before the graph is touched; a valid one then completes the review."""
    model = ScriptedChatModel(replies=[calls(tool_call("send", {"to": "bob", "body": "hi"})), AIMessage("sent")])
    graph = make_graph(model)
    cfg = config()
    first = await graph.ainvoke(ask("send"), cfg)
    request = first["__interrupt__"][0].value
    tools = {t.name: t for t in registry.tools()}
    with pytest.raises(InvalidDecisionError, match=message):
        validate_decisions(decisions, request, tools)
    state = await graph.aget_state(cfg)
    assert state.interrupts and state.interrupts[0].value == request
    good = validate_decisions([{"type": "approve"}], request, tools)
    result = await graph.ainvoke(Command(resume={"decisions": [d.model_dump() for d in good]}), cfg)
    assert result["messages"][-1].content == "sent"
    assert len(tool_log.calls) == 1


async def test_invalid_decision_reaching_the_graph_fails_closed(make_graph, tool_log):
    """A caller that skips validation cannot make a reviewed call run with a bad edit: it is rejected."""
    model = ScriptedChatModel(replies=[calls(tool_call("send", {"to": "bob", "body": "hi"})), AIMessage("nope")])
    graph = make_graph(model)
    cfg = config()
    await graph.ainvoke(ask("send"), cfg)
    bad = {"type": "edit", "edited_action": {"name": "send", "args": {"to": 5}}}
    result = await graph.ainvoke(Command(resume={"decisions": [bad]}), cfg)
    assert tool_log.calls == []
    [rejection] = tool_messages(result["messages"])
    assert rejection.content.startswith("Rejected: the reviewer's decision was invalid")


# --- build-time checks and at-most-once runs ------------------------------------------------


def test_policy_naming_an_unknown_tool_fails_at_build_time(registry):
    """ValueError at build time when the approval policy names a tool the graph does not have (docs/DESIGN.md, Agents)."""
    bigger = ToolRegistry([*registry, ToolSpec(tool=_ghost_tool(), default_mode=Mode.REVIEW)])
    with pytest.raises(ValueError, match="unknown tool\\(s\\): ghost"):
        build_review_agent(
            model=ScriptedChatModel(),
            tools=registry.tools(),
            policy=DefaultPolicy(bigger),
            checkpointer=None,  # type: ignore[arg-type]
            ledger=InMemoryLedger(),
        )


async def test_a_claimed_call_is_never_run_twice(make_graph, tool_log):
    """When the ledger already holds the stored call's id (a crash after it started), the tool does not run again."""
    ledger = InMemoryLedger()
    model = ScriptedChatModel(replies=[calls(tool_call("send", {"to": "bob", "body": "hi"})), AIMessage("unknown")])
    graph = make_graph(model, ledger=ledger)
    cfg = config()
    paused = await graph.ainvoke(ask("go"), cfg)
    [stored_id] = stored_call_ids(paused["messages"])
    await ledger.claim(
        thread_id=cfg["configurable"]["thread_id"], tool_call_id=stored_id, tool_name="send", args={}, reviewed=False
    )
    result = await graph.ainvoke(Command(resume={"decisions": [{"type": "approve"}]}), cfg)
    assert tool_log.calls == []
    [answer] = tool_messages(result["messages"])
    assert answer.content == prompts.ALREADY_STARTED_MESSAGE


def _ghost_tool():
    from langchain_core.tools import tool

    @tool
    async def ghost(x: str) -> str:
        """Not bound to the graph."""
        return x

    return ghost
