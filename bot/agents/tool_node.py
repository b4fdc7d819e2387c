"""`tool_node`: runs the calls that have no result yet, one at a time.

Why a tool node of our own (docs/DESIGN.md, Approvals): LangGraph's ToolNode would run every call of the
last AI message, rejected ones included. Results are kept in call order.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any
from uuid import uuid4

from langchain_core.messages import AIMessage, RemoveMessage, ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.types import interrupt

from bot.agents import prompts
from bot.agents.history import answers_after, last_tool_call_message
from bot.agents.nodes import Node
from bot.agents.state import AgentState
from bot.base.errors import ToolOutcomeUnknownError
from bot.base.mode import Mode
from bot.policy.review import PolicyContext, ReviewPolicy
from bot.reviews.trust.grants import TrustCheck
from bot.tools.ledger.store import Claim, Round, ToolResult, ToolRunLedger, TrustUse
from bot.tools.mcp.connection import InputRequiredError
from bot.tools.mcp.elicitation.forms import Action, Answer
from bot.tools.mcp.elicitation.rounds import (
    MAX_QUESTION_ROUNDS,
    ROUND_INPUT,
    InputAskedError,
    QuestionPause,
    RoundInput,
    asked_json,
    asked_of,
    only_questions,
    question_payload,
    responses_of,
    unusable,
)
from bot.tools.refusals import schema_problem
from bot.tools.registry import ToolView, definition_of
from bot.turns.stop.signal import StopSignal, is_cancellable, stop_signal, unless_stopped

log = logging.getLogger(__name__)

ToolNode = Node[dict[str, Any]]


def make_tool_node(
    tools: Mapping[str, BaseTool],
    ledger: ToolRunLedger,
    policy: ReviewPolicy | None = None,
    trust: TrustCheck | None = None,
) -> ToolNode:
    """Build the `tool_node` node.

    Args:
        tools: registered tools by name.
        ledger: claims each call before it runs, so no call runs twice (see `bot.tools.ledger.store`).
        policy: when given, a call planned `auto` that waited beside reviewed calls (so time
            passed, and an admin may have changed the policy) is checked again before it
            runs: now denied, it is answered as rejected by policy; now needing review, the
            model is told to call it again. Reviewed calls were re-checked when decided.
        trust: checks again, right before it runs, a reviewed call that `llm_call` found
            covered by a trust grant (`trusted`, docs/decisions/0022): a grant that no longer covers it
            (expired, revoked, a policy or approver change) runs nothing and the model is told
            to call again for a card; a covering grant is claimed through the ledger, which
            checks it once more with the claim. Without it, such a call does not run.

    A call `llm_call` found its tool refusing before doing anything (`refused`) never runs:
    `human_review` answered it with the tool's error, and so would this node.

    Once the run's turn is stopped (`bot.turns.stop.signal`), no further call starts: each
    gets a "not run: stopped" result; a call already running is let finish, or cancelled when
    its tool declared it may be (see `run_tool`).

    Every failure becomes an error `ToolMessage` the model can read (docs/DESIGN.md lists three
    kinds; unlike the template, an exception inside a tool is caught too, and logged):
    an unknown tool, arguments the tool's schema refuses, and an exception in the tool.
    """

    async def tool_node(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        messages = state["messages"]
        found = last_tool_call_message(messages)
        if found is None:
            return {"messages": []}
        index, ai = found
        answered = answers_after(messages, index)
        thread_id = str(config.get("configurable", {}).get("thread_id", ""))
        plan = state.get("review_plan") or {}
        trusted = state.get("trusted") or {}
        refused = state.get("refused") or {}
        context = PolicyContext.from_config(config)
        waited = any(
            plan.get(str(call["id"])) != Mode.AUTO.value and str(call["id"]) not in trusted | refused
            for call in ai.tool_calls
        )
        signal = stop_signal(config)
        results: dict[str, ToolMessage] = {}
        for call in ai.tool_calls:
            call_id = str(call["id"])
            if call_id in answered:
                continue
            if (
                signal is not None
                and signal.is_set
                and not await ledger.rounds(thread_id=thread_id, tool_call_id=call_id)
            ):
                # No new tool call once the turn is stopped (a call whose server asked a question
                # goes on below: its stopped question is answered `cancel`, the MCP way).
                results[call_id] = _error(call, prompts.STOPPED_CALL.format(name=signal.stopped_by or "someone"))
                continue
            if call_id in refused:  # `human_review` answered it already; never run it anyway
                results[call_id] = _error(call, refused[call_id])
                continue
            if policy is not None and waited and plan.get(call_id) == Mode.AUTO.value:
                refusal = await _refusal_now(call, policy, context)
                if refusal is not None:
                    results[call_id] = refusal
                    continue
            reviewed = plan.get(call_id, Mode.REVIEW.value) == Mode.REVIEW.value
            if reviewed and call_id in trusted:
                results[call_id] = await _run_trusted(call, tools, ledger, thread_id, trust, context, signal)
                continue
            results[call_id] = await run_tool(call, tools, ledger, thread_id, reviewed=reviewed, signal=signal)
        return {"messages": _in_call_order(ai, answered, results)}

    return tool_node


async def run_tool(
    call: ToolCall,
    tools: Mapping[str, BaseTool],
    ledger: ToolRunLedger,
    thread_id: str,
    *,
    reviewed: bool,
    trust: TrustUse | None = None,
    signal: StopSignal | None = None,
) -> ToolMessage:
    """Run one call and return its result; never raises for a tool's own failure.

    Args:
        call: the tool call (its arguments as approved, after an edit).
        tools: registered tools by name.
        ledger: claims the call first (see `bot.tools.ledger.store`).
        thread_id: the conversation.
        reviewed: whether the policy needs review for this call; the ledger then runs it only
            with a stored approval of exactly these arguments, or under `trust`. Either covers
            an MCP tool only under the definition it was made under (`definition_of` the tool
            about to run): under another, the call is not sent and the model is told to ask again.
        trust: the trust grant a reviewed call without a card runs under (docs/decisions/0022).
        signal: the run's stop; a tool that declared itself cancellable
            (`bot.tools.registry.CANCELLABLE`) is cancelled when the turn is stopped while
            it runs, and its result says so (recorded like any result, and the call's card,
            if it had one, says it may or may not have taken effect); any other tool finishes.

    A tool that is not offered now but would be (`ToolView.absent`: its MCP server is not
    connected), an unknown tool, or arguments its schema refuses are answered with the reason,
    before any claim: nothing ran. Unless the ledger holds a claim of the call already (a
    process died while the call ran, and the new one resumes before the MCP server is back):
    then the ledger's answer stands, its recorded result or an outcome unknown
    (docs/decisions/0042-mcp-client.md). A call whose MCP server asked for input before this
    re-run (`Claim.ASKED`) goes on from the rounds the ledger recorded (`_go_on`). A tool that
    raises `ToolOutcomeUnknownError` after sending its call is recorded like a call a stop cut
    short.
    """
    name = call["name"]
    call_id = str(call["id"])
    offered = _offered(call, tools)
    if isinstance(offered, ToolMessage) and not await ledger.started(thread_id=thread_id, tool_call_id=call_id):
        return offered
    claim = await ledger.claim(
        thread_id=thread_id,
        tool_call_id=call_id,
        tool_name=name,
        args=call.get("args") or {},
        reviewed=reviewed,
        trust=trust,
        definition=None if isinstance(offered, ToolMessage) else definition_of(offered),
    )
    if claim is Claim.ASKED:  # its server asked before this re-run: go on from what the ledger recorded
        rounds = await ledger.rounds(thread_id=thread_id, tool_call_id=call_id)
        return await _go_on(call, tools, ledger, thread_id, rounds, signal)
    if claim is Claim.FINISHED:
        stored = await ledger.recorded(thread_id=thread_id, tool_call_id=call_id)
        if stored is not None:
            log.info("%s ran before an interruption; using its recorded result (tool_call_id=%s)", name, call_id)
            return ToolMessage(content=stored.content, tool_call_id=call_id, name=name, status=stored.status)
    if claim in (Claim.ALREADY_STARTED, Claim.FINISHED):
        log.warning("not re-running %s (tool_call_id=%s thread_id=%s)", name, call_id, thread_id)
        return _error(call, prompts.ALREADY_STARTED_MESSAGE)
    if claim is Claim.NOT_APPROVED:
        return _error(call, prompts.NOT_APPROVED_MESSAGE)
    if claim is Claim.DEFINITION_CHANGED:
        return _error(call, prompts.DEFINITION_CHANGED.format(name=name))
    if claim is Claim.STOPPED:
        stopper = signal.stopped_by if signal is not None else ""
        return _error(call, prompts.STOPPED_CALL.format(name=stopper or "someone"))
    if isinstance(offered, ToolMessage):  # pragma: no cover - a call claimed before is never granted again
        await ledger.record(
            thread_id=thread_id, tool_call_id=call_id, result=ToolResult(content=offered.content, status="error")
        )
        return offered
    ran = await _run_once(call, offered, thread_id, signal)
    if isinstance(ran, InputAskedError):
        asked = asked_json(ran.asked)
        await ledger.record_round(thread_id=thread_id, tool_call_id=call_id, number=0, asked=asked)
        return await _go_on(call, tools, ledger, thread_id, [Round(number=0, asked=asked)], signal)
    result, cut_short = ran
    return await _recorded(call, ledger, thread_id, result, cut_short)


async def _run_once(
    call: ToolCall, tool: BaseTool, thread_id: str, signal: StopSignal | None
) -> tuple[ToolMessage, bool] | InputAskedError:
    """Invoke the tool once, cancelled by a stop when it may be: its result and whether its outcome is unknown.

    Or the server's questions (`InputAskedError`), which the caller asks the requester.
    """
    if is_cancellable(tool):
        stopped, finished = await unless_stopped(signal, _invoke(call, tool))
        stopper = signal.stopped_by if signal is not None else ""
        if stopped:
            log.info("%s cancelled by a stop (tool_call_id=%s thread_id=%s)", call["name"], call["id"], thread_id)
        return finished or (_error(call, prompts.CANCELLED_CALL.format(name=stopper or "someone")), True)
    return await _invoke(call, tool)


async def _recorded(
    call: ToolCall, ledger: ToolRunLedger, thread_id: str, result: ToolMessage, cut_short: bool
) -> ToolMessage:
    """Record a granted call's result in the ledger (`ToolRunLedger.record`) and return it."""
    name, call_id = call["name"], str(call["id"])
    try:
        await ledger.record(
            thread_id=thread_id,
            tool_call_id=call_id,
            result=ToolResult(content=result.content, status=result.status),
            cut_short=cut_short,
        )
    except Exception:
        # The result still reaches the checkpoint; only a crash before that would lose it.
        log.exception("could not record the result of %s (tool_call_id=%s thread_id=%s)", name, call_id, thread_id)
    return result


def _offered(call: ToolCall, tools: Mapping[str, BaseTool]) -> BaseTool | ToolMessage:
    """The tool that may run `call` now, or the error result saying why none may (nothing ran)."""
    name = call["name"]
    tool = tools.get(name)
    if tool is None:
        absent = tools.absent(name) if isinstance(tools, ToolView) else None
        if absent is not None:  # e.g. its MCP server is not connected now
            return _error(call, prompts.TOOL_UNAVAILABLE.format(name=name, reason=absent))
        return _error(call, f"Error: {name} is not a valid tool, try one of: {_some_names(name, tools)}.")
    problem = schema_problem(tool, call.get("args") or {})
    if problem is not None:
        return _error(call, f"Error: invalid arguments for {name}: {problem}. Fix them and try again.")
    return tool


async def _go_on(
    call: ToolCall,
    tools: Mapping[str, BaseTool],
    ledger: ToolRunLedger,
    thread_id: str,
    rounds: list[Round],
    signal: StopSignal | None,
) -> ToolMessage:
    """Ask the requester an MCP server's questions, and send the call again with their answers.

    Each round's questions pause the graph (`interrupt`, addressed to the requester; the
    service shows and answers it, `bot.tools.mcp.elicitation`). LangGraph re-runs this node
    from its top on resume and pairs answers with `interrupt` calls by their order, so every
    round recorded before is asked again here (its answer comes back at once) and never sent
    again: a round after the first is claimed in the ledger before it is sent, and what it
    asked is recorded as soon as it comes (docs/decisions/0054-mcp-elicitation.md). The call's
    final result is recorded like any call's. A round that asks anything but questions (or a
    question Countersign cannot show), one past `MAX_QUESTION_ROUNDS`, or one claimed and cut
    short ends the call as outcome unknown.
    """
    name, call_id = call["name"], str(call["id"])
    # A call that ended still asks its recorded questions again below, up to its last: the
    # answers of later calls' questions in this node are paired with `interrupt` by position.
    stored = await ledger.recorded(thread_id=thread_id, tool_call_id=call_id)
    final = (
        ToolMessage(content=stored.content, tool_call_id=call_id, name=name, status=stored.status)
        if stored is not None
        else None
    )
    recorded = {each.number: each.asked for each in rounds}
    number = 0
    while True:
        asked_value = recorded.get(number)
        if final is not None and (asked_value is None or _ends(asked_value, number)):
            return final  # the round that ended the call, or the call's recorded end
        if asked_value is None:  # claimed and cut short: never sent twice
            log.warning("round %d of %s was cut short (tool_call_id=%s thread_id=%s)", number, name, call_id, thread_id)
            return await _recorded(
                call, ledger, thread_id, _error(call, prompts.MCP_ROUND_CUT_SHORT.format(name=name)), True
            )
        asked = asked_of(asked_value)
        if not only_questions(asked):  # a later round asked for sampling, roots or only its state
            text = prompts.MCP_INPUT_REQUIRED.format(name=name, what=InputRequiredError(asked).what)
            return await _recorded(call, ledger, thread_id, _error(call, text), True)
        reason = unusable(asked)
        if reason is not None:
            text = prompts.MCP_UNUSABLE_QUESTION.format(name=name, reason=reason)
            return await _recorded(call, ledger, thread_id, _error(call, text), True)
        if number >= MAX_QUESTION_ROUNDS:
            text = prompts.MCP_TOO_MANY_QUESTIONS.format(name=name, rounds=number)
            return await _recorded(call, ledger, thread_id, _error(call, text), True)
        payload = question_payload(
            tool_call_id=call_id, tool_name=name, server=_server_of(name), number=number, asked=asked
        )
        answer = interrupt(payload)  # never inside a `try`: LangGraph's pause must pass
        pause = QuestionPause.of(payload)
        responses = responses_of(answer, pause) if pause is not None else {}
        number += 1
        if number in recorded:
            continue  # sent before this re-run; what it asked is recorded
        if not await ledger.claim_round(thread_id=thread_id, tool_call_id=call_id, number=number):
            recorded[number] = None
            continue
        tool = tools.get(name)
        if tool is None:  # its server left meanwhile: the round was claimed, nothing was sent
            absent = tools.absent(name) if isinstance(tools, ToolView) else None
            text = prompts.TOOL_UNAVAILABLE.format(name=name, reason=absent or "it is no longer offered")
            return await _recorded(call, ledger, thread_id, _error(call, text), False)
        stopped = signal is not None and signal.is_set
        if stopped:  # a stopped turn's questions are answered `cancel`, whatever came before the stop
            responses = {key: Answer(action=Action.CANCEL).as_result() for key in responses}
        token = ROUND_INPUT.set(RoundInput(input_responses=responses, request_state=asked.request_state))
        try:
            # The stop does not cut the `cancel` round short: it is how the server hears of it.
            ran = await (_invoke(call, tool) if stopped else _run_once(call, tool, thread_id, signal))
        finally:
            ROUND_INPUT.reset(token)
        if isinstance(ran, InputAskedError):
            asked_now = asked_json(ran.asked)
            recorded[number] = asked_now
            await ledger.record_round(thread_id=thread_id, tool_call_id=call_id, number=number, asked=asked_now)
            continue
        result, cut_short = ran
        return await _recorded(call, ledger, thread_id, result, cut_short)


def _ends(asked: Mapping[str, Any], number: int) -> bool:
    """Whether round `number`, which asked `asked`, ended the call without a question being asked."""
    result = asked_of(asked)
    return not only_questions(result) or unusable(result) is not None or number >= MAX_QUESTION_ROUNDS


def _server_of(name: str) -> str:
    """The MCP server of the tool `name` (its registry name is `<server>__<tool>`)."""
    return name.split("__", 1)[0]


_NAMES_SHOWN = 20
"""Tool names an unknown tool's error lists at most (a bot with MCP servers may offer hundreds)."""


def _some_names(name: str, tools: Mapping[str, BaseTool]) -> str:
    """Up to `_NAMES_SHOWN` offered tool names, those of `name`'s MCP server first, and how many more."""
    server, separator, _ = name.partition("__")
    names = sorted(tools, key=lambda other: (not (separator and other.startswith(server + separator)), other))
    shown = ", ".join(names[:_NAMES_SHOWN]) or "none"
    more = len(names) - _NAMES_SHOWN
    return shown + (f" (and {more} more)" if more > 0 else "")


async def _invoke(call: ToolCall, tool: BaseTool) -> tuple[ToolMessage, bool] | InputAskedError:
    """Run the tool: its result, and whether its outcome is unknown; or an MCP server's questions.

    Its own failure becomes an error result (DESIGN.md "Tool errors"); a tool that lost sight
    of a call it had sent (`ToolOutcomeUnknownError`) gives its message as an error result
    whose outcome is unknown. An MCP server that answered with questions for a person
    (`InputAskedError`) is handed back for the tool node to ask them.
    """
    name, call_id = call["name"], str(call["id"])
    try:
        output = await tool.ainvoke({**call, "type": "tool_call"})
    except InputAskedError as exc:
        log.info("MCP server %s asked a question in %s (tool_call_id=%s)", exc.server, name, call_id)
        return exc
    except ToolOutcomeUnknownError as exc:
        log.warning("the outcome of %s is unknown (tool_call_id=%s): %s", name, call_id, exc.message)
        return _error(call, exc.message), True
    except Exception as exc:
        log.exception("tool %s failed (tool_call_id=%s)", name, call_id)
        return _error(call, f"Error: {name} failed: {type(exc).__name__}: {exc}"), False
    if isinstance(output, ToolMessage):
        if output.name is None:
            output.name = name
        return output, False
    return ToolMessage(content=str(output), tool_call_id=call_id, name=name), False


async def _run_trusted(
    call: ToolCall,
    tools: Mapping[str, BaseTool],
    ledger: ToolRunLedger,
    thread_id: str,
    trust: TrustCheck | None,
    context: PolicyContext,
    signal: StopSignal | None = None,
) -> ToolMessage:
    """Run a call a trust grant covered when planned, if a grant still covers it now (docs/decisions/0022).

    The check is made again here because time may have passed since the plan (the call waited
    beside another call's card, or the run was resumed after a fault). A call whose trust
    ended does not run; if it ran before an interruption, its recorded result stands. The
    check asks the platform about the approver, which takes a moment, and the run's stop signal
    may reach this replica up to a second after the stop: the ledger's claim refuses a call of
    a turn whose stop is recorded (`Claim.STOPPED`), so a stop that came meanwhile still keeps
    the call from starting.
    """
    grant = await trust.covering(call, context) if trust is not None else None
    call_id = str(call["id"])
    if grant is None:
        stored = await ledger.recorded(thread_id=thread_id, tool_call_id=call_id)
        if stored is not None:
            return ToolMessage(content=stored.content, tool_call_id=call_id, name=call["name"], status=stored.status)
        log.info("trust no longer covers %s; not run (tool_call_id=%s thread_id=%s)", call["name"], call_id, thread_id)
        return _error(call, prompts.TRUST_ENDED.format(name=call["name"]))
    use = TrustUse(grant_id=grant.id, requester_id=context.requester_id)
    return await run_tool(call, tools, ledger, thread_id, reviewed=True, trust=use, signal=signal)


async def _refusal_now(call: ToolCall, policy: ReviewPolicy, context: PolicyContext) -> ToolMessage | None:
    """The answer for an `auto` call that the policy, read again, no longer lets run; else None."""
    mode = await policy.mode_for(call, context)
    if mode is Mode.DENY:
        return _error(call, prompts.REJECTED_BY_POLICY.format(name=call["name"]))
    if mode is Mode.REVIEW:
        return _error(call, prompts.POLICY_CHANGED_NEEDS_REVIEW.format(name=call["name"]))
    return None


def _in_call_order(ai: AIMessage, answered: Mapping[str, ToolMessage], results: Mapping[str, ToolMessage]) -> list[Any]:
    """The update that leaves results in call order (DESIGN.md: Gemini pairs by position).

    Rejections written by `human_review` came first; they are removed and appended again,
    with new ids, interleaved with the fresh results.
    """
    if not answered:
        return [results[str(call["id"])] for call in ai.tool_calls if str(call["id"]) in results]
    update: list[Any] = [RemoveMessage(id=str(m.id)) for m in answered.values()]
    for call in ai.tool_calls:
        call_id = str(call["id"])
        if call_id in results:
            update.append(results[call_id])
        elif call_id in answered:
            update.append(answered[call_id].model_copy(update={"id": str(uuid4())}))
    return update


def _error(call: ToolCall, text: str) -> ToolMessage:
    return ToolMessage(content=text, tool_call_id=str(call["id"]), name=call["name"], status="error")
