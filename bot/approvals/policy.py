"""What needs review: each tool call gets a mode before anything runs.

Issue 2 ships the built-in defaults only (each tool's `ToolSpec`); admin-configured policy
replaces `DefaultPolicy` later without touching the graph, because the graph sees only the
`ReviewPolicy` protocol.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from langchain_core.messages import ToolCall

from bot.approvals.mode import Mode
from bot.tools.registry import ToolRegistry

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyContext:
    """Where a call is being made, for policies that differ per workspace or channel."""

    thread_id: str
    workspace_id: str
    channel_id: str


class ReviewPolicy(Protocol):
    """Decides each tool call's mode. Must be a pure read: the review node re-runs on resume."""

    def configured_tools(self) -> frozenset[str]:
        """Names of the tools this policy has rules for (checked against the graph's tools)."""
        ...

    async def mode_for(self, call: ToolCall, context: PolicyContext) -> Mode:
        """The mode for `call` in `context`; must fail closed (REVIEW) when unsure."""
        ...


class DefaultPolicy:
    """Each registered tool's built-in default (`ToolSpec.default_mode` and `review_when`).

    Unknown tool names get AUTO: they never run anyway, the tool node answers them with an
    error listing the real tools, and a card for a non-existent tool would only confuse.
    """

    def __init__(self, registry: ToolRegistry) -> None:
        self._registry = registry

    def configured_tools(self) -> frozenset[str]:
        """All registered tool names."""
        return frozenset(self._registry.names())

    async def mode_for(self, call: ToolCall, context: PolicyContext) -> Mode:
        """Apply the tool's default mode and, for REVIEW, its `review_when` condition."""
        spec = self._registry.get(call["name"])
        if spec is None:
            return Mode.AUTO
        mode = Mode(spec.default_mode)
        if mode is Mode.REVIEW and spec.review_when is not None:
            return Mode.REVIEW if _condition_holds(spec.review_when, call, context) else Mode.AUTO
        return mode


def _condition_holds(condition: Any, call: ToolCall, context: PolicyContext) -> bool:
    """Evaluate a `review_when` condition; an error counts as "holds" (fail closed)."""
    args: Mapping[str, Any] = call.get("args") or {}
    try:
        return bool(condition(args))
    except Exception:
        log.warning(
            "review condition of %s failed; requiring review (thread_id=%s)",
            call["name"],
            context.thread_id,
            exc_info=True,
        )
        return True
