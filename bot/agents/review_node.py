"""`human_review`: the gate between the model's tool calls and the tool node (docs/DESIGN.md, Agents).

Every tool call passes through it; the policy decides which ones stop. Before `interrupt()`
the node only reads (state and policy), because it re-runs from its top on resume
(docs/development.md, convention 9), and `interrupt()` is never inside a `try` (a broad `except` would
swallow LangGraph's interrupt and let the tool run unapproved).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.types import Command, Send, interrupt

from bot.agents import prompts
from bot.agents.history import answers_after, last_tool_call_message
from bot.agents.nodes import Node
from bot.agents.state import AgentState
from bot.base.errors import InvalidDecisionError
from bot.base.mode import Mode
from bot.reviews.decisions import Approve, Edit, Reject, check_decision, parse_decision
from bot.reviews.records import SYSTEM_REASONS
from bot.reviews.requests import build_review_request
from bot.turns.stop.signal import StopSignal, stop_signal

Goto = str | Sequence[Send]
ReviewNode = Node[Command[Any]]
ToolRound = Callable[[Sequence[ToolCall]], Goto]
"""Where the calls that may run go: `"tool_node"` (ReAct), or one `Send` per call (supervisor)."""


def to_tool_node(calls: Sequence[ToolCall]) -> Goto:
    """The ReAct graph's tool round: the tool node runs every call that has no result yet."""
    return "tool_node"


def make_human_review(
    tools: Mapping[str, BaseTool], *, source: str | None = None, tool_round: ToolRound = to_tool_node
) -> ReviewNode:
    """Build the `human_review` node.

    Args:
        tools: the graph's tools by name, to describe calls and re-check edits.
        source: the subagent this gate belongs to (carried in the interrupt payload, so the
            card can say who asks); None for the top-level agent.
        tool_round: where the calls that may run go next.

    Each call's mode comes from the state's `review_plan`, written by `llm_call`; a call
    missing from it (a checkpoint from before the plan existed) needs review (fail closed). A
    reviewed call that `llm_call` found covered by a trust grant (`trusted`, fixed with the plan
    so that a re-run on resume pairs the decisions with the same calls) is let through to the
    tool node, which checks the grant again. A call whose tool refuses its arguments before
    doing anything (`refused`, fixed with the plan too) opens no card and never runs, whatever
    its mode: it is answered at once with the tool's error; a denied call is answered as
    denied (docs/decisions/0010-canonical-arguments.md).

    The node pairs decisions with reviewed calls by position. Two defaults point in opposite
    directions (docs/DESIGN.md, Agents): a call that needs no review is approved; a reviewed call with no
    (or an unusable) decision is rejected, because running an unapproved action may not be
    undoable. An edit keeps the call id and replaces the AI message by id.

    Once the run's turn is stopped (`bot.turns.stop.signal`), the gate raises no interrupt and
    runs nothing: every call of the answer gets a "not run: stopped" result.
    """

    async def human_review(state: AgentState, config: RunnableConfig) -> Command[Any]:
        found = last_tool_call_message(state["messages"])
        if found is None:
            return Command(goto="llm_call")
        index, ai = found
        signal = stop_signal(config)
        if signal is not None and signal.is_set:
            # A stopped turn opens no card: every call is answered as stopped (also on the
            # resume that answers a pause the stop closed), and `llm_call` closes the turn.
            return _stopped(ai, answers_after(state["messages"], index), signal)
        plan = state.get("review_plan") or {}
        trusted = state.get("trusted") or {}
        refused = state.get("refused") or {}
        modes = [Mode(plan.get(str(call["id"]), Mode.REVIEW.value)) for call in ai.tool_calls]
        # Calls a trust grant covered when the plan was made get no card; the tool node checks
        # the grant again before each runs. Calls whose tool refuses their arguments get no
        # card either: they are answered with the tool's error below, and never run.
        reviewed = [
            call
            for call, mode in zip(ai.tool_calls, modes, strict=True)
            if mode is Mode.REVIEW and str(call["id"]) not in trusted and str(call["id"]) not in refused
        ]

        outcomes: dict[str, Approve | Edit | str] = {}
        if reviewed:
            response = interrupt(build_review_request(reviewed, tools, _why(ai, state, source), source=source))
            if signal is not None and signal.is_set:
                return _stopped(ai, answers_after(state["messages"], index), signal)
            outcomes = _outcomes_by_call(response, reviewed, tools)

        calls: list[ToolCall] = []
        answers: list[ToolMessage] = []
        edited = False
        for call, mode in zip(ai.tool_calls, modes, strict=True):
            if mode is Mode.DENY:
                answers.append(_rejection(call, prompts.REJECTED_BY_POLICY.format(name=call["name"])))
            elif str(call["id"]) in refused:
                answers.append(_rejection(call, refused[str(call["id"])]))
            elif mode is Mode.REVIEW and str(call["id"]) not in trusted:
                outcome = outcomes[str(call["id"])]
                if isinstance(outcome, str):
                    answers.append(_rejection(call, outcome))
                elif isinstance(outcome, Edit):
                    edited = True
                    call = ToolCall(
                        name=call["name"],
                        args=dict(outcome.edited_action.args),
                        id=call["id"],
                        type="tool_call",
                    )
            calls.append(call)

        update: list[Any] = []
        if edited:
            update.append(ai.model_copy(update={"tool_calls": calls}))
        update.extend(answers)
        answered = {answer.tool_call_id for answer in answers}
        runnable = [call for call in calls if str(call["id"]) not in answered]
        goto: Goto = tool_round(runnable) if runnable else "llm_call"
        return Command(update={"messages": update}, goto=goto)

    return human_review


def _why(ai: AIMessage, state: AgentState, source: str | None) -> str:
    """The card's "why": the model's words beside the calls; for a subagent without any, its task.

    A subagent's only human message is the query the supervisor gave it, which says why it
    wants the call better than the tool's own description would.
    """
    if ai.text.strip() or source is None:
        return ai.text
    task = next((m for m in state["messages"] if isinstance(m, HumanMessage)), None)
    return f"Task: {task.text}" if task is not None and task.text.strip() else ""


def _outcomes_by_call(
    response: object, reviewed: Sequence[ToolCall], tools: Mapping[str, BaseTool]
) -> dict[str, Approve | Edit | str]:
    """Pair the resume value's decisions with the reviewed calls; never raises.

    Returns:
        For each reviewed call id: the approve or (checked) edit decision, or the text of the
        error result the model reads when the call does not run.

    The service validated the decisions before resuming; this is the second line for callers
    that resume the graph directly, and it fails closed.
    """
    raw = response.get("decisions") if isinstance(response, dict) else None
    items: list[object] = list(raw) if isinstance(raw, list) else []
    outcomes: dict[str, Approve | Edit | str] = {}
    for index, call in enumerate(reviewed):
        call_id = str(call["id"])
        if index >= len(items):
            outcomes[call_id] = prompts.REJECTED_NO_DECISION
            continue
        action = {"name": call["name"], "args": call["args"]}
        try:
            decision = check_decision(parse_decision(items[index]), action, tools.get(call["name"]))
        except InvalidDecisionError as exc:
            outcomes[call_id] = prompts.REJECTED_INVALID_DECISION.format(problem=exc.message)
            continue
        outcomes[call_id] = _reject_text(decision) if isinstance(decision, Reject) else decision
    return outcomes


def _reject_text(decision: Reject) -> str:
    reason = (decision.message or "").strip()
    if not reason:
        return prompts.REJECTED_BY_REVIEWER_NO_REASON
    if reason in SYSTEM_REASONS:  # an expiry or a policy denial: no reviewer said it
        return prompts.REJECTED_BY_COUNTERSIGN.format(reason=reason)
    return prompts.REJECTED_BY_REVIEWER.format(reason=reason)


def _stopped(ai: AIMessage, answered: Mapping[str, ToolMessage], signal: StopSignal) -> Command[Any]:
    """The gate's answer once the turn is stopped: every unanswered call did not run, in call order."""
    text = prompts.STOPPED_CALL.format(name=signal.stopped_by or "someone")
    update = [_rejection(call, text) for call in ai.tool_calls if str(call["id"]) not in answered]
    return Command(update={"messages": update}, goto="llm_call")


def _rejection(call: ToolCall, text: str) -> ToolMessage:
    return ToolMessage(content=text, tool_call_id=str(call["id"]), name=call["name"], status="error")
