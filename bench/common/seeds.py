"""The bare stack every benchmark compares against: the template's ReAct graph on `AsyncPostgresSaver`.

The template's graph (`llm_call` with the system prompt and the *whole* history, LangGraph's
prebuilt `ToolNode`, `should_continue`; state = `messages` with plain `add_messages` +
`remaining_steps`) with the bot's own model client (`build_chat_model` + `call_options`), tool
registry and system prompt, checkpointed by the bot's `open_database(...).savers[0]` (one
`AsyncPostgresSaver` over a psycopg pool of `DATABASE_POOL_SIZE`, 10 by default). It is
written here rather than taken from the bot, whose graphs carry its context window and any
later change to them.

This module imports only what that stack needs (no Slack, Discord or test stand-ins), so that a
process running it alone (`bench.bare_server`) holds no more than the template's stack would.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, SystemMessage
from langchain_core.tools import BaseTool
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import _messages_delta_reducer, add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.managed import RemainingSteps
from langgraph.prebuilt import ToolNode

from bot.agents.model import build_chat_model, call_options
from bot.agents.prompts import STEP_LIMIT_MESSAGE, SYSTEM_PROMPT
from bot.settings import Settings
from bot.storage.database import open_database
from bot.tools.operator import build_registry

SEEDS_STEPS_PER_TOOL_ROUND = 2
"""The template's step guard for the graph without a review node: `tool_node`, `llm_call`."""


class SeedsState(TypedDict):
    """The template's state: messages with `add_messages`, and the steps left."""

    messages: Annotated[list[AnyMessage], add_messages]
    remaining_steps: RemainingSteps


class DeltaSeedsState(TypedDict):
    """The template's state with `messages` in a `DeltaChannel` (beta), LangGraph's documented way.

    The channel stores only the writes of each step, plus a full snapshot every
    `snapshot_frequency` (100) updates; a read replays the writes since the last snapshot.
    """

    messages: Annotated[list[AnyMessage], DeltaChannel(_messages_delta_reducer)]
    remaining_steps: RemainingSteps


SeedsGraph = CompiledStateGraph[SeedsState, None, SeedsState, SeedsState]
AnySeedsState = SeedsState | DeltaSeedsState
"""What the seeds graph's functions read. The two states have the same keys and value types, and
a union is no class, so LangGraph takes no input schema from it (a `SeedsState` annotation would
add its `add_messages` channel to the graph with `DeltaSeedsState`, which LangGraph refuses)."""


def seeds_graph(
    *,
    model: BaseChatModel,
    tools: Sequence[BaseTool],
    checkpointer: BaseCheckpointSaver[Any],
    system_prompt: str,
    model_kwargs: dict[str, Any],
    delta: bool = False,
) -> SeedsGraph:
    """Seed 000's ReAct graph: `llm_call` (system prompt + whole history) <-> `ToolNode`.

    Args:
        model: the chat model; `tools` and `model_kwargs` are bound to it.
        tools: the tools the model may call.
        checkpointer: where the state is kept.
        system_prompt: prepended on every model call, never stored.
        model_kwargs: call options bound with the tools.
        delta: keep `messages` in a `DeltaChannel` (`DeltaSeedsState`) instead of `add_messages`.
    """
    bound = model.bind_tools(list(tools), **model_kwargs)

    async def llm_call(state: AnySeedsState) -> dict[str, list[AnyMessage]]:
        response = await bound.ainvoke([SystemMessage(content=system_prompt), *state["messages"]])
        if not isinstance(response, AIMessage):
            raise TypeError(f"the model answered with {type(response).__name__}")
        if response.tool_calls and state["remaining_steps"] <= SEEDS_STEPS_PER_TOOL_ROUND:
            response = AIMessage(id=response.id, content=STEP_LIMIT_MESSAGE)
        return {"messages": [response]}

    def should_continue(state: AnySeedsState) -> str:
        last = state["messages"][-1]
        return "tool_node" if isinstance(last, AIMessage) and last.tool_calls else END

    graph = StateGraph(DeltaSeedsState if delta else SeedsState)
    graph.add_node("llm_call", llm_call)
    graph.add_node("tool_node", ToolNode(list(tools)))
    graph.add_edge(START, "llm_call")
    graph.add_conditional_edges("llm_call", should_continue, ["tool_node", END])
    graph.add_edge("tool_node", "llm_call")
    return graph.compile(checkpointer=checkpointer)


@dataclass(frozen=True, slots=True)
class SeedsStack:
    """The bare stack, opened.

    Attributes:
        graph: the compiled seeds graph.
        saver: its checkpointer.
        recursion_limit: LangGraph steps per invocation (`COUNTERSIGN_RECURSION_LIMIT`).
    """

    graph: SeedsGraph
    saver: AsyncPostgresSaver
    recursion_limit: int


@contextlib.asynccontextmanager
async def open_seeds_stack(settings: Settings, *, delta: bool = False) -> AsyncIterator[SeedsStack]:
    """The template's graph on `settings.database`, with the bot's model client, tools and prompt.

    The database must be migrated already (the bench clones a migrated template); its pools
    and the model client are closed on exit.

    Args:
        settings: the database (pool size included), the Gemini client, the tools, the agent.
        delta: keep `messages` in a `DeltaChannel` (`DeltaSeedsState`).

    Raises:
        DatabaseUnavailableError: the database cannot be reached.
    """
    model = build_chat_model(settings.gemini)
    registry = build_registry(settings.tools, settings.agent.tools_module)
    try:
        async with open_database(settings.database, run_migrations=False) as database:
            graph = seeds_graph(
                model=model,
                tools=registry.tools(),
                checkpointer=database.savers[0],
                system_prompt=settings.agent.system_prompt or SYSTEM_PROMPT,
                model_kwargs=call_options(settings.gemini),
                delta=delta,
            )
            yield SeedsStack(graph=graph, saver=database.savers[0], recursion_limit=settings.agent.recursion_limit)
    finally:
        await model.aclose()
