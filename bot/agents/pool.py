"""Compiled graphs over one checkpoint pool, picked by agent and thread id.

`AsyncPostgresSaver` serialises every call of one instance behind a lock, so one saver caps the
bot at about one database operation at a time (PERFORMANCE.md: 74-80 vs 112-121 messages/s with
ten savers). Each agent is compiled once per saver; a thread always maps to the same saver.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence

from bot.agents.checkpointing import Checkpointing, checkpointing
from bot.agents.review_agent import ReviewAgent
from bot.base.agent_kind import AgentKind


class AgentPool:
    """For each agent, graphs that differ only in their saver instance.

    Args:
        graphs: per agent kind, one compiled graph per saver (the same number for every kind).

    Raises:
        ValueError: when a kind has no graph, or the kinds have different numbers of graphs.
    """

    def __init__(self, graphs: Mapping[AgentKind, Sequence[ReviewAgent]]) -> None:
        if not graphs or any(not compiled for compiled in graphs.values()):
            raise ValueError("AgentPool needs at least one graph per agent")
        if len({len(compiled) for compiled in graphs.values()}) != 1:
            raise ValueError("every agent needs one graph per saver")
        self._graphs = {kind: list(compiled) for kind, compiled in graphs.items()}
        self._kinds = {id(graph): kind for kind, compiled in graphs.items() for graph in compiled}

    @property
    def kinds(self) -> frozenset[AgentKind]:
        """The agents this pool can run."""
        return frozenset(self._graphs)

    def checkpointing_of(self, graph: ReviewAgent) -> Checkpointing:
        """How runs of `graph` (one of this pool's) store their checkpoints.

        Raises:
            KeyError: when `graph` is not one of this pool's graphs.
        """
        return checkpointing(self._kinds[id(graph)])

    def for_thread(self, thread_id: str, kind: AgentKind = AgentKind.REACT) -> ReviewAgent:
        """The graph of `kind` for `thread_id` (the saver is stable for the process's lifetime).

        Raises:
            KeyError: when the pool was built without `kind`.
        """
        compiled = self._graphs[kind]
        return compiled[zlib.crc32(thread_id.encode()) % len(compiled)]
