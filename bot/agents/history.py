"""Pure helpers over the message history: what is unanswered, what the model may see."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolCall, ToolMessage
from langchain_core.tools import BaseTool

from bot.agents.prompts import INTERRUPTED_CALL_MESSAGE
from bot.agents.signatures import with_renamed_calls
from bot.base.errors import InvalidArgumentsError
from bot.tools.canonical import MAX_ARGS_DEPTH, canonical_args, canonical_number, cut_deeper_than, nested_deeper_than

log = logging.getLogger(__name__)


def last_tool_call_message(messages: Sequence[AnyMessage]) -> tuple[int, AIMessage] | None:
    """The last AI message that has tool calls, with its index, if no human spoke since."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, AIMessage):
            return (index, message) if message.tool_calls else None
        if isinstance(message, HumanMessage):
            return None
    return None


def answers_after(messages: Sequence[AnyMessage], index: int) -> dict[str, ToolMessage]:
    """Tool messages following the AI message at `index`, by `tool_call_id`."""
    answers: dict[str, ToolMessage] = {}
    for message in messages[index + 1 :]:
        if not isinstance(message, ToolMessage):
            break
        answers[message.tool_call_id] = message
    return answers


def unanswered_tool_calls(messages: Sequence[AnyMessage]) -> list[ToolCall]:
    """Calls of the last tool-calling AI message that have no `ToolMessage` yet (docs/DESIGN.md, Agents)."""
    found = last_tool_call_message(messages)
    if found is None:
        return []
    index, ai = found
    answered = answers_after(messages, index)
    return [call for call in ai.tool_calls if call["id"] not in answered]


def repaired(messages: Sequence[AnyMessage]) -> list[AnyMessage]:
    """The history as the model may see it: every call followed by its results, nothing empty.

    Every tool call is followed by exactly one result, in call order (Gemini pairs results with
    calls by position, DESIGN.md), with a synthetic error result where a crash left one
    missing; an orphan result (its call not directly before it) is left out, and so is an AI
    message with neither text nor a tool call (stored by an older version), since the client
    would send it as an empty text part, which the API refuses on every call
    (`bot.agents.no_answer`). Nothing here is stored; what is sent is then bounded by
    `bot.turns.context.window.ContextWindow`.

    Args:
        messages: the stored history (or a part of it starting at a human message).
    """
    out: list[AnyMessage] = []
    index = 0
    while index < len(messages):
        message = messages[index]
        index += 1
        if isinstance(message, ToolMessage):
            continue  # an orphan result: its call is not directly before it
        if isinstance(message, AIMessage) and not message.tool_calls and not message.text:
            continue  # no answer: nothing for the model, and an empty part for the API
        out.append(message)
        if not (isinstance(message, AIMessage) and message.tool_calls):
            continue
        answers: dict[str, ToolMessage] = {}
        while index < len(messages) and isinstance(messages[index], ToolMessage):
            tool_message = messages[index]
            if isinstance(tool_message, ToolMessage):
                answers.setdefault(tool_message.tool_call_id, tool_message)
            index += 1
        for call in message.tool_calls:
            answer = answers.get(str(call["id"]))
            out.append(
                answer
                if answer is not None
                else ToolMessage(
                    content=INTERRUPTED_CALL_MESSAGE,
                    tool_call_id=str(call["id"]),
                    name=call["name"],
                    status="error",
                )
            )
    return out


def with_shallow_args(message: AIMessage) -> tuple[AIMessage, frozenset[int]]:
    """The message with each call's arguments nested deeper than `MAX_ARGS_DEPTH` cut there, and those calls.

    The first thing done to the model's answer, before anything walks its arguments: the
    checkpoint serializer refuses nesting not much deeper (about 250 levels), so such an answer
    could not be saved and its thread would be stuck. An approver's edit is refused at the same
    depth (`bot.reviews.decisions.storable_problem`). The cut arguments
    (`bot.tools.canonical.cut_deeper_than`) are what is stored; `llm_call` answers those calls
    at once, with no card, and they never run.

    Returns:
        The message (itself when no call is too deep), and the positions in `tool_calls` of
        the calls that were cut.
    """
    deep = frozenset(
        position for position, call in enumerate(message.tool_calls) if nested_deeper_than(call["args"], MAX_ARGS_DEPTH)
    )
    if not deep:
        return message, deep
    calls = [
        {**call, "args": cut_deeper_than(call["args"], MAX_ARGS_DEPTH)} if position in deep else call
        for position, call in enumerate(message.tool_calls)
    ]
    return message.model_copy(update={"tool_calls": calls}), deep


def without_nul(message: AIMessage) -> AIMessage:
    """The message with U+0000 replaced by U+FFFD in its text and tool-call arguments.

    An integer beyond 64 bits in the arguments becomes a float, for the same reason: the
    checkpoint could not be written and the turn would fail.

    PostgreSQL's text and jsonb cannot hold U+0000; a model that emits one would make the
    approval (or audit) row impossible to store and wedge the thread. Replacing it before the
    message enters the state keeps the stored, reviewed and executed arguments identical.
    """
    content, calls = _scrub(message.content), [{**call, "args": _scrub(call["args"])} for call in message.tool_calls]
    if content == message.content and repr(calls) == repr(message.tool_calls):  # repr: 2**64 == 2.0**64
        return message
    return message.model_copy(update={"content": content, "tool_calls": calls})


def _scrub(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, int | float):
        return canonical_number(value)  # the checkpoint serializer (msgpack) holds 64-bit integers only
    if isinstance(value, list):
        return [_scrub(item) for item in value]
    if isinstance(value, dict):
        return {_scrub(key): _scrub(item) for key, item in value.items()}
    return value


def with_canonical_args(message: AIMessage, tools: Mapping[str, BaseTool]) -> AIMessage:
    """The message with every tool call's arguments in their canonical form (`bot.tools.canonical`).

    This is where the model's calls enter the system: from here on the policy judges, the card
    shows, the approval binds and the tool runs these arguments (docs/decisions/0010).
    A call whose arguments the tool's form refuses keeps them as sent: `llm_call` answers it at
    once with the form's reason, with no card (`bot.tools.refusals`), and the policy fails
    closed on it (`bot.policy.review.effective_mode`).

    Args:
        message: the model's answer (NUL already replaced, see `without_nul`).
        tools: the graph's tools by name; a call of another name gets `canonical_values` only.
    """
    calls = []
    for call in message.tool_calls:
        try:
            args = canonical_args(tools.get(call["name"]), call["args"])
        except InvalidArgumentsError as exc:
            log.info("the arguments of %s have no canonical form: %s", call["name"], exc.message)
            args = call["args"]
        calls.append({**call, "args": args})
    if repr(calls) == repr(message.tool_calls):  # repr: 2**64 == 2.0**64
        return message
    return message.model_copy(update={"tool_calls": calls})


def with_fresh_call_ids(message: AIMessage) -> AIMessage:
    """The message with every tool call under a fresh id, one no earlier call of the thread had.

    Gemini may send `functionCall.id`, and nothing stops two calls of one answer from sharing
    one (or leaving it empty), nor a later answer, or another subagent's model, from using an
    id again (docs/decisions/0008-subagents-and-reviews.md). The review plan, the approvals
    table, the tool-run ledger and the tool results are all keyed by call id (the ledger and
    approvals by `(thread_id, tool_call_id)`), so a reused id would let one call's mode or
    approval stand for another's, or make an approved call find an earlier call's run and
    answer with its result instead of running. The state cannot tell which ids were used: a
    summary fold or a context reset removes earlier calls from it while the ledger keeps their
    runs. So every call gets a new id where it enters the state, whatever the model sent.

    The ids never go back to Gemini (function calls are matched to results by position and
    name), but Gemini 3's thought signatures are kept by call id, so each call's signature
    moves with it (`bot.agents.signatures`).

    Args:
        message: the model's answer.

    Returns:
        A copy whose calls have ids `call_<32 hex digits>` (the message itself when it has no
        tool call).
    """
    renamed = {position: f"call_{uuid.uuid4().hex}" for position in range(len(message.tool_calls))}
    return with_renamed_calls(message, renamed)
