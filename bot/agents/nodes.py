"""The shape LangGraph expects of a node that takes the run config."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Protocol, TypeVar

from langchain_core.runnables import RunnableConfig

from bot.agents.state import AgentState

Update_co = TypeVar("Update_co", covariant=True)


class Node(Protocol[Update_co]):
    """`async def node(state, config) -> update`.

    The parameter names matter: LangGraph's `_NodeWithConfig` protocol matches on them.
    """

    def __call__(self, state: AgentState, config: RunnableConfig) -> Awaitable[Update_co]:
        """Run the node."""
        ...
