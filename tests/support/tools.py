"""Small tools for graph and service tests, recording every run."""

from __future__ import annotations

from typing import Any

from langchain_core.tools import tool

from bot.base.mode import Mode
from bot.tools.registry import ToolRegistry, ToolSpec


class ToolLog:
    """What the test tools were called with, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []


def make_test_registry(log: ToolLog) -> ToolRegistry:
    """lookup (auto), send (review), explode (auto, always raises), wipe (deny)."""

    @tool
    async def lookup(query: str) -> str:
        """Look something up."""
        log.calls.append(("lookup", {"query": query}))
        return f"found {query}"

    @tool
    async def send(to: str, body: str, urgent: bool = False) -> str:
        """Send a message to someone."""
        log.calls.append(("send", {"to": to, "body": body, "urgent": urgent}))
        return f"sent to {to}"

    @tool
    async def explode(reason: str) -> str:
        """Always fails."""
        log.calls.append(("explode", {"reason": reason}))
        raise RuntimeError(f"boom: {reason}")

    @tool
    async def wipe(target: str) -> str:
        """Never allowed."""
        log.calls.append(("wipe", {"target": target}))
        return "wiped"

    return ToolRegistry(
        [
            ToolSpec(tool=lookup, default_mode=Mode.AUTO),
            ToolSpec(tool=send, default_mode=Mode.REVIEW),
            ToolSpec(tool=explode, default_mode=Mode.AUTO),
            ToolSpec(tool=wipe, default_mode=Mode.DENY),
        ]
    )
