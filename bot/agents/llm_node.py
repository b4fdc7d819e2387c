"""`llm_call`: the model reads the conversation and answers or asks for tools (docs/DESIGN.md, Agents)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.config import get_stream_writer

from bot.agents.binding import BoundModel
from bot.agents.checkpointing import step_budget
from bot.agents.history import with_canonical_args, with_fresh_call_ids, with_shallow_args, without_nul
from bot.agents.model_errors import to_model_error
from bot.agents.no_answer import ASK_AGAIN, gemini_says, no_answer_reason
from bot.agents.nodes import Node
from bot.agents.prompts import ARGS_TOO_DEEP, ASK_AGAIN_NOTES, REFUSED_BY_TOOL, STEP_LIMIT_MESSAGE, STOPPED_ANSWER
from bot.agents.state import AgentState
from bot.base.errors import NoAnswerError
from bot.base.mode import Mode
from bot.policy.review import PolicyContext, ReviewPolicy, Ruling
from bot.reviews.trust.grants import TrustCheck
from bot.tools.canonical import MAX_ARGS_DEPTH
from bot.tools.refusals import refusal
from bot.turns.context.window import ContextWindow, measured_scale
from bot.turns.stop.signal import StopSignal, stop_signal, stopped_answer, unless_stopped

log = logging.getLogger(__name__)

LlmNode = Node[dict[str, Any]]


@dataclass(frozen=True, slots=True, kw_only=True)
class RefusedHere:
    """Written to the run's custom stream when a call is refused where it was asked for want of a decider.

    A call in a Discord DM that a server the requester shares with the bot would have someone
    else decide (`bot.policy.review.Ruling.referred`): `human_review` answers it as rejected
    by policy, and `bot.turns.runner.TurnRunner` tells the requester where to ask instead.

    Attributes:
        tool_name: the call's tool.
        ruling: the policy's ruling (`ask_in`, `unchecked`).
    """

    tool_name: str
    ruling: Ruling


def _tell_in_stream(event: RefusedHere) -> None:
    """Write `event` to the LangGraph run's custom stream; outside a run (a direct call, a test), do nothing."""
    try:
        writer = get_stream_writer()
    except (RuntimeError, KeyError):
        return
    writer(event)


def make_llm_call(
    model: BoundModel,
    *,
    policy: ReviewPolicy,
    system_prompt: str,
    steps_per_tool_round: int,
    context: ContextWindow,
    max_tool_rounds: int | None = None,
    step_limit_message: str = STEP_LIMIT_MESSAGE,
    closing_instruction: str | None = None,
    own_checks: bool = True,
    trust: TrustCheck | None = None,
) -> LlmNode:
    """Build the `llm_call` node.

    Args:
        model: the chat model bound to the graph's tools, bound again per call when they
            changed (an MCP server connected or went away; `bot.agents.binding`).
        policy: gives each tool call of the answer its mode, stored as `review_plan`; a call
            refused for want of a decider where it was asked (a Discord DM) is also written to
            the run's custom stream as `RefusedHere`, so that its requester is told where to ask.
        system_prompt: prepended on every call and never stored, so a new prompt applies to
            running conversations at once (docs/DESIGN.md, Agents); the running summary is appended to it.
        steps_per_tool_round: graph steps one tool round costs (3 with `human_review`).
        context: bounds what is sent per call and folds older turns into the running summary
            (`bot.turns.context.window`); a fold removes the folded messages from the state.
        max_tool_rounds: when set, a hard cap on tool rounds over the graph's whole state
            (counted in `tool_rounds`): the answer that would start one more round is replaced
            by `step_limit_message`, however many steps LangGraph still allows.
        step_limit_message: what replaces a tool call when a guard fires.
        closing_instruction: when set and a guard fires, the model is asked once more, with
            this appended to the system prompt, for a final text (a subagent's report of what
            it has so far); any tool call in that answer is dropped, and `step_limit_message`
            stands in when it has no text. The extra call costs no graph step.
        own_checks: apply the canonical forms of the model's `tools` to the calls before the
            policy sees them (`bot.agents.history.with_canonical_args`), and store in
            `refused` a call whose tool refuses its arguments before doing anything
            (`bot.tools.refusals.refusal`), with the error the model reads, whatever its mode
            but `deny`: `human_review` answers it at once, with no card, and nothing runs it
            (docs/decisions/0010-canonical-arguments.md). False (the supervisor's
            delegations, which answer a bad call in their own words): only
            `bot.tools.canonical.canonical_values`, and no refusal but the next one.
        trust: asked, for each call the plan sends to review that its tool does not refuse,
            and only for those, whether a live trust grant covers it; covered calls are stored
            in `trusted` and get no card. None: no trust applies.

    The step guard (docs/DESIGN.md, Agents): a tool call is replaced by `STEP_LIMIT_MESSAGE` when
    `remaining_steps <= steps_per_tool_round`, because the round it starts would leave the
    next `llm_call` without a step and the turn would end in `GraphRecursionError`. `<=`, not
    `<`, matters for odd limits (docs/DESIGN.md, Agents: `recursion_limit` 7). A run made of
    chained invocations carries a `StepBudget` in its config (`bot.agents.checkpointing`); the
    node reports its step to it, so the next invocation gets the steps this one left.

    A call whose arguments are nested deeper than `bot.tools.canonical.MAX_ARGS_DEPTH` (the
    depth an approver's edit may have) is stored with its arguments cut at that depth, and
    refused like a call its tool refuses (`ARGS_TOO_DEEP`), whatever `own_checks` says: such
    arguments could not even be saved in the checkpoint (`bot.agents.history.with_shallow_args`).

    Every tool call of an answer is stored under a fresh id, whatever id the model sent, at any
    depth (`bot.agents.history.with_fresh_call_ids`): the ledger and the approvals know each call
    by its id, and a folded or reset turn's ids are no longer in the state to compare with.

    An answer with neither text nor a tool call (`bot.agents.no_answer`) is never stored. When
    asking again can help (a malformed function call, an empty reply), the model is asked once
    more, with a note saying what went wrong appended to the system prompt (docs/decisions/0011).

    Stop (`bot.turns.stop.signal`): once the run's turn is stopped, no model call is made and
    the answer is the closing "Stopped by <name>." message; a model call (or a summary) under
    way when the stop arrives is abandoned.

    Raises (from the node):
        bot.base.errors.ModelError: the model failed after its bounded retries.
        bot.base.errors.NoAnswerError: the model gave no answer, also when asked once more.
    """
    tools: Mapping[str, BaseTool] = model.tools if own_checks else {}

    async def _ask(messages: list[BaseMessage], config: RunnableConfig) -> AIMessage:
        try:
            return _as_ai(await model.current().ainvoke(messages, config))
        except Exception as exc:
            raise to_model_error(exc) from exc

    async def _answer(history: Sequence[BaseMessage], prompt: str, config: RunnableConfig) -> AIMessage:
        """The model's answer to `history`; raises `NoAnswerError` instead of returning no answer."""
        response = await _ask([SystemMessage(content=prompt), *history], config)
        reason = no_answer_reason(response)
        if reason in ASK_AGAIN:
            log.warning("the model gave no answer (%s); asking once more (%s)", gemini_says(response), _about(config))
            note = ASK_AGAIN_NOTES[reason]
            response = await _ask([SystemMessage(content=prompt + note), *history], config)
            reason = no_answer_reason(response)
        if reason is not None:
            raise NoAnswerError(reason, gemini_says(response))
        return response

    async def llm_call(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        budget = step_budget(config)
        if budget is not None:  # a run made of chained invocations (`bot.agents.checkpointing`)
            budget.observe(int((config.get("metadata") or {})["langgraph_step"]), state["remaining_steps"])
        signal = stop_signal(config)
        stopped, update = await unless_stopped(signal, _call(state, config))
        if stopped or update is None:
            # No model call once the turn is stopped; one under way is abandoned (no side
            # effects). The closing message records, for the model, who stopped the turn.
            closing = stopped_answer(signal or StopSignal(), STOPPED_ANSWER.format(name=_stopper(signal)))
            return {"messages": [closing], "review_plan": {}}
        return update

    async def _call(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        scale = state.get("token_scale") or 1.0
        fitted = await context.fit(
            state["messages"],
            system_prompt=system_prompt,
            summary=state.get("summary") or "",
            scale=scale,
            config=config,
        )
        messages: list[BaseMessage] = [SystemMessage(content=fitted.system_prompt), *fitted.view]
        response = await _answer(fitted.view, fitted.system_prompt, config)
        measured = measured_scale(_input_tokens(response), messages, model.tool_tokens(), scale)
        response, too_deep = with_shallow_args(response)  # first: nothing else walks such arguments
        response = with_canonical_args(without_nul(response), tools)
        response = with_fresh_call_ids(response)  # never the model's ids (`with_fresh_call_ids`)
        deep_ids = {str(call["id"]) for position, call in enumerate(response.tool_calls) if position in too_deep}
        rounds = state.get("tool_rounds", 0)
        capped = max_tool_rounds is not None and rounds >= max_tool_rounds
        if response.tool_calls and (state["remaining_steps"] <= steps_per_tool_round or capped):
            response = await _closing_answer(response, messages, config)
        where = PolicyContext.from_config(config)
        plan: dict[str, str] = {}
        refused: dict[str, str] = {}
        for call in response.tool_calls:
            ruling = await policy.ruling_for(call, where)
            plan[str(call["id"])] = ruling.mode.value
            if ruling.referred:
                _tell_in_stream(RefusedHere(tool_name=call["name"], ruling=ruling))
            if ruling.mode is Mode.DENY:  # a denied tool is answered as denied, whatever its arguments
                continue
            if str(call["id"]) in deep_ids:
                log.info("%s: arguments nested too deep; refused (thread_id=%s)", call["name"], where.thread_id)
                refused[str(call["id"])] = ARGS_TOO_DEEP.format(name=call["name"], depth=MAX_ARGS_DEPTH)
            else:
                answer = _refused_by_tool(call, tools, where)
                if answer is not None:
                    refused[str(call["id"])] = answer
        update: dict[str, Any] = {"messages": [*fitted.removed, response], "review_plan": plan}
        if refused or state.get("refused"):
            update["refused"] = refused
        if trust is not None:
            reviewed = [
                call
                for call in response.tool_calls
                if plan[str(call["id"])] == Mode.REVIEW.value and str(call["id"]) not in refused
            ]
            if reviewed or state.get("trusted"):
                update["trusted"] = await _trusted(reviewed, trust, where)
        if fitted.removed:
            update["summary"] = fitted.summary
        if measured is not None:
            update["token_scale"] = measured
        if max_tool_rounds is not None and response.tool_calls:
            update["tool_rounds"] = rounds + 1
        return update

    async def _closing_answer(response: AIMessage, messages: list[BaseMessage], config: RunnableConfig) -> AIMessage:
        """What replaces a tool-calling answer when a guard fires (see `closing_instruction`)."""
        if closing_instruction is not None:
            closing = [SystemMessage(content=f"{messages[0].text}{closing_instruction}"), *messages[1:]]
            final = await _ask(closing, config)
            if final.text.strip():
                return AIMessage(id=response.id, content=without_nul(final).text)
            # No report after all: the results are still worth more than "unknown" to whoever
            # reads this (a subagent's supervisor sees nothing else of its work).
            return AIMessage(id=response.id, content=step_limit_message + _results_so_far(messages))
        return AIMessage(id=response.id, content=step_limit_message)

    return llm_call


def _refused_by_tool(call: ToolCall, tools: Mapping[str, BaseTool], where: PolicyContext) -> str | None:
    """The error answering `call` at once when its tool refuses its arguments as written; else None.

    Only the tool's own refusals before it does anything count (`bot.tools.refusals.refusal`);
    a call of an unknown tool is left to the tool node, which names the real tools.
    """
    tool = tools.get(call["name"])
    problem = refusal(tool, call["args"]) if tool is not None else None
    if problem is None:
        return None
    log.info("%s refuses its arguments; answered at once, no card (thread_id=%s)", call["name"], where.thread_id)
    return REFUSED_BY_TOOL.format(problem=problem, name=call["name"])


async def _trusted(calls: Sequence[ToolCall], trust: TrustCheck, where: PolicyContext) -> dict[str, str]:
    """The calls a live trust grant covers, by call id, with the grant's id (checked one by one)."""
    covered: dict[str, str] = {}
    for call in calls:
        grant = await trust.covering(call, where)
        if grant is not None:
            log.info("%s is covered by trust %s: no card (thread_id=%s)", call["name"], grant.id, where.thread_id)
            covered[str(call["id"])] = grant.id
    return covered


RESULT_CHARS = 300
"""Characters of each tool result quoted in a closing report written without the model."""


def _results_so_far(messages: Sequence[BaseMessage]) -> str:
    """`Results so far: 1. <tool>: <result, cut> ...` over every tool result, or "" when there is none."""
    results = [m for m in messages if isinstance(m, ToolMessage)]
    if not results:
        return ""
    lines = []
    for number, result in enumerate(results, start=1):
        text = " ".join(str(result.text).split())
        text = text if len(text) <= RESULT_CHARS else text[: RESULT_CHARS - 1] + "…"
        lines.append(f"{number}. {result.name or 'a tool'}: {text}")
    return " Results so far: " + " ".join(lines)


def _stopper(signal: StopSignal | None) -> str:
    return (signal.stopped_by if signal is not None else "") or "someone"


def _input_tokens(response: AIMessage) -> int | None:
    usage = response.usage_metadata
    return usage.get("input_tokens") if usage else None


def _about(config: RunnableConfig) -> str:
    return f"thread_id={config.get('configurable', {}).get('thread_id')}"


def _as_ai(message: BaseMessage) -> AIMessage:
    return message if isinstance(message, AIMessage) else AIMessage(content=message.content, id=message.id)
