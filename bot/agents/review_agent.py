"""The ReAct graph with a review gate (docs/DESIGN.md, "Agents" and "Approvals").

`llm_call -> human_review -> tool_node -> llm_call`, END when the model makes no tool calls.
The gate is always in the graph; the policy decides which calls stop there, so a channel with
no gated tools behaves as plain ReAct.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, ToolCall
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from bot.agents.binding import BoundModel, bind_model
from bot.agents.llm_node import make_llm_call
from bot.agents.prompts import STEP_LIMIT_MESSAGE, SYSTEM_PROMPT
from bot.agents.review_node import make_human_review
from bot.agents.state import AgentState
from bot.agents.tool_node import make_tool_node
from bot.base.mode import Mode
from bot.policy.review import PolicyContext, ReviewPolicy, Ruling
from bot.reviews.trust.grants import TrustCheck
from bot.tools.ledger.store import ToolRunLedger
from bot.tools.registry import ToolView
from bot.turns.context.window import DEFAULT_CONTEXT_TOKENS, ContextWindow

STEPS_PER_TOOL_ROUND = 3
"""`human_review`, `tool_node`, `llm_call`: the steps one tool round costs (docs/DESIGN.md, Agents)."""

DEFAULT_RECURSION_LIMIT = 25
"""Steps per turn (the template's `MAX_AGENT_STEPS`, docs/DESIGN.md); with 3 steps a round, 7 tool rounds."""

ReviewAgent = CompiledStateGraph[AgentState, None, AgentState, AgentState]


def build_review_agent(
    *,
    model: BaseChatModel,
    tools: Sequence[BaseTool] | ToolView,
    policy: ReviewPolicy,
    checkpointer: BaseCheckpointSaver[Any],
    ledger: ToolRunLedger,
    system_prompt: str = SYSTEM_PROMPT,
    context_tokens: int = DEFAULT_CONTEXT_TOKENS,
    model_kwargs: dict[str, Any] | None = None,
    trust: TrustCheck | None = None,
) -> ReviewAgent:
    """Compile the review agent (the top-level ReAct graph of a conversation).

    Args:
        model: the chat model; the tools are bound here.
        tools: every tool the model may call: a live view of the registry (its tools are
            bound, reviewed and run as they are at each model call), or a fixed list.
        policy: decides which calls wait for review; every tool it names must be in `tools`.
        checkpointer: required, as docs/DESIGN.md says: a paused review lives only in the checkpoint.
        ledger: claims each tool call before it runs.
        system_prompt: prepended on every model call, never stored.
        context_tokens: tokens of history sent per model call; older turns are folded into a
            running summary (`bot.turns.context.window`).
        model_kwargs: extra call options bound with the tools (e.g. HTTP retry options).
        trust: finds the trust grant that lets a reviewed call run without a card (docs/decisions/0022);
            None: every reviewed call gets a card.

    Raises:
        ValueError: when the policy names a tool that is not in `tools`, so a typo shows at
            build time instead of a tool silently running without review (docs/DESIGN.md, Agents).
    """
    view = tools if isinstance(tools, ToolView) else ToolView.of(tools)
    unknown = sorted(policy.configured_tools() - set(view))
    if unknown:
        raise ValueError(f"the approval policy names unknown tool(s): {', '.join(unknown)}")
    graph = react_graph(
        model=model,
        tools=view,
        policy=policy,
        ledger=ledger,
        system_prompt=system_prompt,
        context_tokens=context_tokens,
        model_kwargs=model_kwargs,
        trust=trust,
    )
    return graph.compile(checkpointer=checkpointer)


def react_graph(
    *,
    model: BaseChatModel,
    tools: Sequence[BaseTool] | ToolView,
    policy: ReviewPolicy,
    ledger: ToolRunLedger,
    system_prompt: str,
    context_tokens: int,
    model_kwargs: dict[str, Any] | None = None,
    source: str | None = None,
    max_tool_rounds: int | None = None,
    step_limit_message: str = STEP_LIMIT_MESSAGE,
    closing_instruction: str | None = None,
    trust: TrustCheck | None = None,
) -> StateGraph[AgentState, None, AgentState, AgentState]:
    """The uncompiled ReAct graph with the review gate, shared by the agent and subagents.

    Args:
        model: the chat model; the tools are bound here, again whenever they changed.
        tools: every tool the model may call: a live view (`bot.tools.registry.ToolView`),
            read by every node at each step, or a fixed list.
        policy: decides which calls wait for review.
        ledger: claims each tool call before it runs.
        system_prompt: prepended on every model call, never stored.
        context_tokens: tokens of history sent per model call. The top-level agent folds older
            turns into a running summary; a subagent's history is one delegation, which is
            never cut or folded (see `bot.turns.context.window`).
        model_kwargs: extra call options bound with the tools.
        source: the subagent this graph is (its cards name it); None for the top-level agent.
        max_tool_rounds: the hard cap on tool rounds (`bot.agents.llm_node.make_llm_call`).
        step_limit_message: what replaces a tool call when a guard fires.
        closing_instruction: asks for a final text when a guard fires (subagents).
        trust: the trust check, asked by `llm_call` for calls the policy sends to review and by
            `tool_node` again before such a call runs (docs/decisions/0022); the same at every depth.
    """
    by_name = tools if isinstance(tools, ToolView) else ToolView.of(tools)
    policy = OwnToolsPolicy(policy, by_name)
    graph = StateGraph(AgentState)
    graph.add_node(
        "llm_call",
        make_llm_call(
            BoundModel(model, by_name, model_kwargs),
            policy=policy,
            system_prompt=system_prompt,
            steps_per_tool_round=STEPS_PER_TOOL_ROUND,
            context=ContextWindow(
                budget_tokens=context_tokens,
                summarizer=bind_model(model, (), model_kwargs) if source is None else None,
            ),
            max_tool_rounds=max_tool_rounds,
            step_limit_message=step_limit_message,
            closing_instruction=closing_instruction,
            trust=trust,
        ),
    )
    graph.add_node("human_review", make_human_review(by_name, source=source), destinations=("tool_node", "llm_call"))
    graph.add_node("tool_node", make_tool_node(by_name, ledger, policy, trust))
    graph.add_edge(START, "llm_call")
    graph.add_conditional_edges("llm_call", should_continue, ["human_review", END])
    graph.add_edge("tool_node", "llm_call")
    return graph


class OwnToolsPolicy:
    """`policy` for the graph's own tools, AUTO for a call of any other name.

    A subagent has only some of the registered tools; its model may still call another one
    (a name from its prompt, or a hallucination). The tool node answers such a call with the
    subagent's tool list and runs nothing, so, as for an unknown tool
    (`bot.policy.review.effective_mode`), a card for it would only ask an approver to
    approve something that can never run.

    Args:
        policy: the policy of the graph's tools.
        tools: the graph's tools by name, as they are at each call (a live view): a tool not
            offered now (its MCP server is down) never runs either.
    """

    def __init__(self, policy: ReviewPolicy, tools: Mapping[str, BaseTool]) -> None:
        self._policy = policy
        self._names = tools

    def configured_tools(self) -> frozenset[str]:
        """The wrapped policy's tools."""
        return self._policy.configured_tools()

    async def mode_for(self, call: ToolCall, context: PolicyContext) -> Mode:
        """The wrapped policy's mode for the graph's own tools, else AUTO (nothing runs)."""
        if call["name"] not in self._names:
            return Mode.AUTO
        return await self._policy.mode_for(call, context)

    async def ruling_for(self, call: ToolCall, context: PolicyContext) -> Ruling:
        """The wrapped policy's ruling for the graph's own tools, else AUTO (nothing runs)."""
        if call["name"] not in self._names:
            return Ruling(mode=Mode.AUTO)
        return await self._policy.ruling_for(call, context)


def should_continue(state: AgentState) -> str:
    """After `llm_call`: to the review gate when the last message has tool calls, else END."""
    last = state["messages"][-1] if state["messages"] else None
    if isinstance(last, AIMessage) and last.tool_calls:
        return "human_review"
    return END
