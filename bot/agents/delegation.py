"""One delegation: the supervisor's call of a subagent, run as its own LangGraph task.

DESIGN.md ("LangGraph traps"): interrupts raised inside one task share one interrupt id, so
each delegation is its own task (one `Send` per call, see `delegation_sends`); the subagent's
graph is compiled without a checkpointer of its own, so it inherits the conversation's per
invocation, checkpoints under this task's namespace, can interrupt, and on resume continues
where it stopped (its finished steps are not run again, nor are sibling delegations that
finished). This node re-runs from its top on every resume, so nothing before the subagent's
invocation may have a side effect: it only reads the call and reports progress.

Fresh context (docs/DESIGN.md, Agents): the subagent sees its own prompt and the query, nothing else; only
the text of its last message returns to the supervisor, as the delegation's tool result.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import patch_config
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.config import get_stream_writer
from langgraph.types import Send
from pydantic import BaseModel, Field

from bot.agents import prompts
from bot.agents.no_answer import no_answer_reason
from bot.agents.review_agent import ReviewAgent
from bot.agents.state import AgentState
from bot.agents.subagent_specs import SubagentSpec
from bot.base.errors import ModelError, NoAnswerError
from bot.base.log_context import about
from bot.base.mode import Mode
from bot.policy.review import PolicyContext, Ruling
from bot.turns.stop.signal import stop_signal

log = logging.getLogger(__name__)

DELEGATE = "delegate"
"""The supervisor's node that runs one delegation."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Subagent:
    """A configured subagent and its compiled graph (compiled with no checkpointer of its own)."""

    spec: SubagentSpec
    graph: ReviewAgent


@dataclass(frozen=True, slots=True, kw_only=True)
class DelegationEvent:
    """Written to the run's custom stream when a delegation starts or ends (progress only).

    Attributes:
        subagent: the subagent's name.
        call_id: the supervisor's tool call id of this delegation.
        started: True when it starts (again, after a resume), False when it has reported.
        query: the task it was given.
    """

    subagent: str
    call_id: str
    started: bool
    query: str = ""


class DelegationArgs(BaseModel):
    """The one argument the supervisor gives a subagent (DESIGN.md "Subagents")."""

    query: str = Field(description="The whole task, self-contained: the subagent sees nothing but this text.")


def delegation_tool(spec: SubagentSpec) -> BaseTool:
    """The tool the supervisor's model sees for `spec`: its name, its description, `query`.

    The tool only declares the call; `make_delegate`'s node runs it, as a graph task.
    """

    async def _not_called(query: str) -> str:
        raise RuntimeError("a delegation runs as a graph task, never as a tool call")

    return StructuredTool.from_function(
        coroutine=_not_called, name=spec.name, description=spec.description, args_schema=DelegationArgs
    )


class DelegationPolicy:
    """The supervisor's review policy: a delegation itself never waits for a card.

    Subagents are not registered tools, so no admin rule can name them; what they do is gated
    inside them, call by call. Answering AUTO without reading the workspace's configuration
    saves that read on every supervisor round (a hallucinated name is AUTO too: the delegate
    node answers it with the list of subagents, and nothing runs).

    Args:
        names: the subagents' names.
    """

    def __init__(self, names: Sequence[str]) -> None:
        self._names = frozenset(names)

    def configured_tools(self) -> frozenset[str]:
        """The subagents' names (the supervisor's tools)."""
        return self._names

    async def mode_for(self, call: ToolCall, context: PolicyContext) -> Mode:
        """AUTO: delegations run at once; the tools inside them are gated."""
        return Mode.AUTO

    async def ruling_for(self, call: ToolCall, context: PolicyContext) -> Ruling:
        """AUTO, as `mode_for`."""
        return Ruling(mode=Mode.AUTO)


MAX_DELEGATIONS = 6
"""Delegations one supervisor answer may start at once; calls beyond are answered, not run.

Each delegation is a model loop with its own tools, and possibly cards: a model that asks for
dozens at once would flood the conversation and the quota. The model reads why and can ask
again for the rest."""


def delegation_sends(calls: Sequence[ToolCall]) -> list[Send]:
    """One task per delegation, in call order (`make_human_review`'s `tool_round`)."""
    return [Send(DELEGATE, {"call": dict(call), "position": position}) for position, call in enumerate(calls)]


def make_delegate(subagents: Mapping[str, Subagent]) -> Any:
    """Build the node that runs one delegation and answers its call with the subagent's report.

    Args:
        subagents: by name.

    The node never raises for what the subagent did: an unknown name, a missing `query`, a
    model failure inside the subagent and a report without text all become the text of the
    delegation's `ToolMessage`; so does a stopped turn (`bot.turns.stop.signal`), which starts
    no delegation. A subagent already running stops at its own next step and reports so.
    `GraphInterrupt` from the subagent's review gate is not caught: it pauses the whole
    conversation.
    """

    async def delegate(task: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        call = task["call"]
        name, call_id = str(call["name"]), str(call["id"])
        subagent = subagents.get(name)
        if subagent is None:
            available = ", ".join(sorted(subagents)) or "none"
            return _answer(call, prompts.UNKNOWN_SUBAGENT.format(name=name, available=available), error=True)
        if int(task.get("position", 0)) >= MAX_DELEGATIONS:
            return _answer(call, prompts.TOO_MANY_DELEGATIONS.format(limit=MAX_DELEGATIONS), error=True)
        args = call.get("args") or {}
        query = args.get("query") if isinstance(args, dict) else None
        if not isinstance(query, str) or not query.strip() or set(args) - {"query"}:
            return _answer(call, prompts.INVALID_DELEGATION.format(name=name), error=True)
        signal = stop_signal(config)
        if signal is not None and signal.is_set:
            # No new delegation (its model calls) once the turn is stopped; a delegation paused
            # for a card is answered here too, without running its subagent again.
            return _answer(call, prompts.STOPPED_CALL.format(name=signal.stopped_by or "someone"), error=True)
        write = get_stream_writer()
        write(DelegationEvent(subagent=name, call_id=call_id, started=True, query=query))
        try:
            start: AgentState = {"messages": [HumanMessage(content=query)]}  # type: ignore[typeddict-item]
            with about(subagent=name):
                result = await subagent.graph.ainvoke(
                    start,
                    patch_config(config, recursion_limit=subagent.spec.step_limit),
                )
        except ModelError as exc:
            thread_id = config.get("configurable", {}).get("thread_id")
            log.warning("subagent %s: model failed (thread_id=%s): %s", name, thread_id, exc)
            report, failed = _failure(name, exc), True
        else:
            report, failed = _report(result, name)
        write(DelegationEvent(subagent=name, call_id=call_id, started=False, query=query))
        return _answer(call, report, error=failed)

    return delegate


def _report(result: Mapping[str, Any], name: str) -> tuple[str, bool]:
    """The text of the subagent's last message, or a failure text saying why it has none."""
    messages = result.get("messages") or []
    last = messages[-1] if messages else None
    if isinstance(last, AIMessage) and last.text.strip():
        return last.text, False
    reason = no_answer_reason(last) if isinstance(last, AIMessage) else None
    if reason is not None:
        return prompts.SUBAGENT_NO_ANSWER.format(name=name, why=prompts.NO_ANSWER_WHY[reason]), True
    return prompts.SUBAGENT_NO_REPORT.format(name=name), True


def _failure(name: str, error: ModelError) -> str:
    """What the supervisor reads about a subagent whose model failed or gave no answer."""
    if isinstance(error, NoAnswerError):
        return prompts.SUBAGENT_NO_ANSWER.format(name=name, why=prompts.NO_ANSWER_WHY[error.reason])
    return prompts.SUBAGENT_FAILED.format(name=name, kind=error.kind.value)


def _answer(call: Mapping[str, Any], text: str, *, error: bool) -> dict[str, Any]:
    message = ToolMessage(
        content=text, tool_call_id=str(call["id"]), name=str(call["name"]), status="error" if error else "success"
    )
    return {"messages": [message]}
