"""The supervisor with subagents (docs/DESIGN.md, "Agents").

The supervisor is an ordinary ReAct graph with the review gate and step guard whose tools are
the subagents: `llm_call -> human_review -> delegate (one task per call) -> llm_call`, END when
the model calls no subagent. Several delegations of one answer run concurrently
(scatter-gather, docs/DESIGN.md, Agents); the supervisor's next model call sees every report.

Each subagent is a ReAct graph with the same gate (so a gated tool inside it pauses the whole
conversation with a card that names it), its own step limit, and a hard cap on tool rounds
counted in its state, because LangGraph gives every resume a fresh step budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph

from bot.agents import prompts
from bot.agents.binding import BoundModel, bind_model
from bot.agents.delegation import (
    DELEGATE,
    DelegationPolicy,
    Subagent,
    delegation_sends,
    delegation_tool,
    make_delegate,
)
from bot.agents.llm_node import make_llm_call
from bot.agents.review_agent import STEPS_PER_TOOL_ROUND, ReviewAgent, react_graph, should_continue
from bot.agents.review_node import make_human_review
from bot.agents.state import AgentState
from bot.agents.subagent_specs import SubagentSpec
from bot.policy.review import ReviewPolicy
from bot.reviews.trust.grants import TrustCheck
from bot.tools.ledger.store import ToolRunLedger
from bot.tools.registry import ToolView
from bot.turns.context.window import DEFAULT_CONTEXT_TOKENS, ContextWindow


def max_tool_rounds(step_limit: int) -> int:
    """The hard cap on a subagent's tool rounds: what its step limit allows in one invocation.

    The step guard lets a round start while more than `STEPS_PER_TOOL_ROUND` steps remain, and
    the first model call sees `step_limit - 1`, so a limit of 15 allows 4 rounds (25 allows 7,
    as docs/DESIGN.md counts); the cap holds the delegation to that across resumes too.
    """
    return max(0, (step_limit - 2) // STEPS_PER_TOOL_ROUND)


def build_subagent(
    spec: SubagentSpec,
    *,
    model: BaseChatModel,
    tools: Sequence[BaseTool] | ToolView,
    policy: ReviewPolicy,
    ledger: ToolRunLedger,
    context_tokens: int = DEFAULT_CONTEXT_TOKENS,
    model_kwargs: dict[str, Any] | None = None,
    trust: TrustCheck | None = None,
) -> Subagent:
    """Compile one subagent.

    Args:
        spec: its configuration (tools must already be checked against the registry).
        model: its model (its own, or the supervisor's).
        tools: the registered tools `spec.tools` names, in that order: a live view
            (`ToolRegistry.view(spec.tools)`: a listed MCP tool is offered while its server is
            connected), or a fixed list.
        policy: the same policy as everywhere: a GET runs, a POST waits for a card.
        ledger: the same ledger as everywhere, so the approved-digest check covers its calls.
        context_tokens: tokens of history sent per model call (a delegation is never cut).
        model_kwargs: call options bound with the tools.
        trust: the same trust check as everywhere (docs/decisions/0022): a grant covers a call at any depth.

    The graph has no checkpointer of its own (LangGraph's default for a subgraph: it inherits
    the parent's per invocation), which is what lets it interrupt and resume inside the
    supervisor's task; `checkpointer=False` could not interrupt.
    """
    graph = react_graph(
        model=model,
        tools=tools,
        policy=policy,
        ledger=ledger,
        system_prompt=spec.prompt + "\n" + prompts.SUBAGENT_REPORT_RULES,
        context_tokens=context_tokens,
        model_kwargs=model_kwargs,
        source=spec.name,
        max_tool_rounds=max_tool_rounds(spec.step_limit),
        step_limit_message=prompts.SUBAGENT_STEP_LIMIT,
        closing_instruction=prompts.SUBAGENT_CLOSING,
        trust=trust,
    )
    return Subagent(spec=spec, graph=graph.compile(name=spec.name))


def build_supervisor_agent(
    *,
    model: BaseChatModel,
    subagents: Sequence[Subagent],
    checkpointer: BaseCheckpointSaver[Any],
    system_prompt: str = prompts.SYSTEM_PROMPT,
    context_tokens: int = DEFAULT_CONTEXT_TOKENS,
    model_kwargs: dict[str, Any] | None = None,
) -> ReviewAgent:
    """Compile the supervisor graph.

    Args:
        model: the supervisor's model; each subagent becomes one of its tools.
        subagents: compiled subagents (see `build_subagent`); names are unique. The gate's
            policy is `DelegationPolicy`: delegations run at once, the tools inside them are
            gated by the policy each subagent was built with.
        checkpointer: the conversation's saver; the subagents checkpoint through it too.
        system_prompt: the agent's prompt; the delegation instructions are appended.
        context_tokens: tokens of history sent per model call; older turns are folded into a
            running summary (`bot.turns.context.window`).
        model_kwargs: call options bound with the tools.

    Raises:
        ValueError: when there are no subagents or two share a name.
    """
    names = [subagent.spec.name for subagent in subagents]
    if not names or len(set(names)) != len(names):
        raise ValueError(f"the supervisor needs subagents with unique names, got {names}")
    tools = ToolView.of(delegation_tool(subagent.spec) for subagent in subagents)
    graph = StateGraph(AgentState)
    graph.add_node(
        "llm_call",
        make_llm_call(
            BoundModel(model, tools, model_kwargs),
            policy=DelegationPolicy(names),
            system_prompt=system_prompt + prompts.SUPERVISOR_INSTRUCTIONS,
            own_checks=False,
            steps_per_tool_round=STEPS_PER_TOOL_ROUND,
            context=ContextWindow(budget_tokens=context_tokens, summarizer=bind_model(model, (), model_kwargs)),
        ),
    )
    graph.add_node(
        "human_review",
        make_human_review(tools, tool_round=delegation_sends),
        destinations=(DELEGATE, "llm_call"),
    )
    graph.add_node(DELEGATE, make_delegate({subagent.spec.name: subagent for subagent in subagents}))
    graph.add_edge(START, "llm_call")
    graph.add_conditional_edges("llm_call", should_continue, ["human_review", END])
    graph.add_edge(DELEGATE, "llm_call")
    return graph.compile(checkpointer=checkpointer)
