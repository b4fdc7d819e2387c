"""At-most-once tool runs: a call id is claimed before its tool runs.

LangGraph re-runs a node from its top when a turn is resumed after a crash, so a tool node that
died half-way would run its calls again. The ledger makes the second attempt see the first
claim and answer the model instead of repeating a side effect (DESIGN.md: "no tool run twice").
"""

from __future__ import annotations

from typing import Protocol


class ToolRunLedger(Protocol):
    """Records which tool calls have started."""

    async def claim(self, *, thread_id: str, tool_call_id: str, tool_name: str) -> bool:
        """Claim a call before running it.

        Returns:
            True the first time for this `(thread_id, tool_call_id)`, False ever after.
        """
        ...


class InMemoryLedger:
    """A process-local ledger, for the terminal without a database and for graph tests."""

    def __init__(self) -> None:
        self._claimed: set[tuple[str, str]] = set()

    async def claim(self, *, thread_id: str, tool_call_id: str, tool_name: str) -> bool:
        """See `ToolRunLedger.claim`."""
        key = (thread_id, tool_call_id)
        if key in self._claimed:
            return False
        self._claimed.add(key)
        return True
