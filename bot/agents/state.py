"""The agent state shared by every graph (docs/DESIGN.md, Agents: the state)."""

from __future__ import annotations

from typing import Annotated, NotRequired, TypedDict

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from langgraph.managed import RemainingSteps


class AgentState(TypedDict):
    """The conversation state.

    `messages` grow through `add_messages` (a message with a known id replaces the old one);
    LangGraph fills `remaining_steps` from the invocation's `recursion_limit`, no node writes it.
    """

    messages: Annotated[list[AnyMessage], add_messages]
    remaining_steps: RemainingSteps
    review_plan: dict[str, str]
    """The mode of each tool call of the last AI message (`call id -> auto|review|deny`),
    decided by `llm_call` when the message arrives. `human_review` reads it instead of asking
    the policy again, because it re-runs on resume and a policy changed in between must not
    change which calls the decisions belong to."""
    trusted: NotRequired[dict[str, str]]
    """The calls of the last AI message planned `review` that a live trust grant covered when
    the message arrived (`call id -> grant id`, docs/decisions/0022), decided by `llm_call` with the plan:
    `human_review` opens no card for them, and `tool_node` checks the grant again before each
    runs. Absent or empty: none."""
    refused: NotRequired[dict[str, str]]
    """The calls of the last AI message whose arguments their tool refuses before doing anything
    (`call id -> the error the model reads`, `bot.tools.refusals`), decided by `llm_call` with
    the plan, for every mode but `deny`: `human_review` answers them at once, with no card, and
    nothing runs them. Absent or empty: none."""
    tool_rounds: NotRequired[int]
    """Tool rounds started so far, counted only by graphs with a hard cap (subagents; see
    `make_llm_call`). LangGraph gives every invocation, and so every resume, a fresh
    `recursion_limit`, so the step guard alone bounds rounds per invocation, not per task; this
    counter lives in the checkpoint and bounds the whole delegation (docs/DESIGN.md, Agents: a prompt budget
    shapes, code guarantees)."""
    summary: NotRequired[str]
    """The running summary of the turns folded out of `messages` (`bot.turns.context.window`);
    absent or "" until the first fold."""
    token_scale: NotRequired[float]
    """The model's tokens per estimated token, from its count of the last call it was sent
    (`bot.turns.context.window.measured_scale`); absent: 1.0."""
