"""The interrupt payload: LangChain's HITL request shape (DESIGN.md "Approvals").

`{"action_requests": [{"name", "args", "description"}], "review_configs": [{"action_name",
"allowed_decisions"}]}`, one entry per reviewed tool call, in call order. It must be JSON
serialisable: it is stored in the checkpoint and mirrored into our approvals table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import ToolCall
from langchain_core.tools import BaseTool

ALLOWED_DECISIONS = ("approve", "edit", "reject")
MAX_DESCRIPTION_CHARS = 1000


def build_review_request(
    calls: Sequence[ToolCall], tools: Mapping[str, BaseTool], reasoning: str = ""
) -> dict[str, Any]:
    """Build the payload passed to `interrupt()` for `calls`.

    Args:
        calls: the tool calls that need review, in the order the model made them.
        tools: registered tools by name (for the description).
        reasoning: the model's text next to the calls, if any; it becomes the description
            ("why") on every card of this pause.

    Returns:
        A JSON-serialisable dict in the HITL shape.
    """
    return {
        "action_requests": [
            {
                "name": call["name"],
                "args": dict(call.get("args") or {}),
                "description": _description(call, tools, reasoning),
            }
            for call in calls
        ],
        "review_configs": [
            {"action_name": call["name"], "allowed_decisions": list(ALLOWED_DECISIONS)} for call in calls
        ],
    }


def _description(call: ToolCall, tools: Mapping[str, BaseTool], reasoning: str) -> str:
    text = reasoning.strip()
    if not text:
        tool = tools.get(call["name"])
        text = (tool.description.strip().splitlines() or [""])[0] if tool else ""
    if len(text) > MAX_DESCRIPTION_CHARS:
        text = text[: MAX_DESCRIPTION_CHARS - 1] + "…"
    return text
