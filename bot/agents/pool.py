"""Several compiled graphs over one checkpoint pool, picked by thread id.

`AsyncPostgresSaver` serialises every call of one instance behind a lock, so one saver caps the
bot at about one database operation at a time (PERFORMANCE.md: 74-80 vs 112-121 messages/s with
ten savers). Each graph here has its own saver; a thread always maps to the same graph.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

from bot.agents.review_agent import ReviewAgent


class AgentPool:
    """Graphs that differ only in their saver instance.

    Args:
        graphs: at least one compiled review agent.

    Raises:
        ValueError: when `graphs` is empty.
    """

    def __init__(self, graphs: Sequence[ReviewAgent]) -> None:
        if not graphs:
            raise ValueError("AgentPool needs at least one graph")
        self._graphs = list(graphs)

    def for_thread(self, thread_id: str) -> ReviewAgent:
        """The graph for `thread_id` (stable for the process's lifetime)."""
        return self._graphs[zlib.crc32(thread_id.encode()) % len(self._graphs)]
