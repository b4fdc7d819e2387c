"""The interrupt payload: LangChain's HITL request shape (DESIGN.md "Approvals").

`{"action_requests": [{"name", "args", "description", "tool_call_id", "source", "definition"}],
"review_configs": [{"action_name", "allowed_decisions"}]}`, one entry per reviewed tool call,
in call order. `tool_call_id`, `source` (the subagent whose gate paused, None for the
top-level agent) and `definition` (an MCP tool's pinned definition digest as the model was
offered it; absent for the bot's own tools) are Countersign's additions, which the HITL shape
allows: the approvals table is keyed from them, never from a guess over the message history,
and an approved call runs only under that definition (docs/decisions/0046-mcp-pins-wiring.md).
The payload must be JSON serialisable: it is stored in the checkpoint and mirrored into our
approvals table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import ToolCall
from langchain_core.tools import BaseTool

from bot.tools.registry import definition_of

ALLOWED_DECISIONS = ("approve", "edit", "reject")
MAX_DESCRIPTION_CHARS = 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionRequest:
    """One action request of a stored interrupt, as the core reads it back.

    Attributes:
        tool_call_id: the call's id; None only in payloads written before ids were carried
            (such a call can never pass the tool-run ledger's approval check: fail closed).
        name: the tool.
        args: the proposed arguments.
        description: why the model wants it (its text next to the call, or the tool's line).
        source: the subagent whose review gate paused, or None for the top-level agent.
        definition: the pinned digest of the MCP tool's definition when the call was held for
            review (`bot.tools.registry.DEFINITION`); None for the bot's own tools, and in
            payloads written before it was carried (such an MCP call then never runs).
    """

    tool_call_id: str | None
    name: str
    args: dict[str, Any]
    description: str
    source: str | None
    definition: str | None = None


def build_review_request(
    calls: Sequence[ToolCall], tools: Mapping[str, BaseTool], reasoning: str = "", *, source: str | None = None
) -> dict[str, Any]:
    """Build the payload passed to `interrupt()` for `calls`.

    Args:
        calls: the tool calls that need review, in the order the model made them.
        tools: registered tools by name (for the description, and an MCP tool's definition
            digest, which the approval binds).
        reasoning: the model's text next to the calls, if any; it becomes the description
            ("why") on every card of this pause.
        source: the subagent whose gate this is, None for the top-level agent.

    Returns:
        A JSON-serialisable dict in the HITL shape.
    """
    return {
        "action_requests": [_action_request(call, tools, reasoning, source) for call in calls],
        "review_configs": [
            {"action_name": call["name"], "allowed_decisions": list(ALLOWED_DECISIONS)} for call in calls
        ],
    }


def _action_request(
    call: ToolCall, tools: Mapping[str, BaseTool], reasoning: str, source: str | None
) -> dict[str, Any]:
    request = {
        "name": call["name"],
        "args": dict(call.get("args") or {}),
        "description": _description(call, tools, reasoning),
        "tool_call_id": str(call["id"]),
        "source": source,
    }
    definition = definition_of(tools.get(call["name"]))
    if definition is not None:  # an MCP tool's: the approval binds it
        request["definition"] = definition
    return request


def _description(call: ToolCall, tools: Mapping[str, BaseTool], reasoning: str) -> str:
    text = reasoning.strip()
    if not text:
        tool = tools.get(call["name"])
        text = (tool.description.strip().splitlines() or [""])[0] if tool else ""
    if len(text) > MAX_DESCRIPTION_CHARS:
        text = text[: MAX_DESCRIPTION_CHARS - 1] + "…"
    return text


def action_requests(payload: object) -> list[ActionRequest]:
    """The action requests of an interrupt payload, in order; never raises.

    Args:
        payload: `Interrupt.value` as stored in the checkpoint (see `build_review_request`);
            anything that is not a dict has no action requests.
    """
    raw = payload.get("action_requests") if isinstance(payload, dict) else None
    found: list[ActionRequest] = []
    for item in raw if isinstance(raw, list) else []:
        if not isinstance(item, dict):
            continue
        call_id, source, args = item.get("tool_call_id"), item.get("source"), item.get("args")
        definition = item.get("definition")
        found.append(
            ActionRequest(
                tool_call_id=str(call_id) if call_id else None,
                name=str(item.get("name") or ""),
                args=dict(args) if isinstance(args, dict) else {},
                description=str(item.get("description") or ""),
                source=str(source) if source else None,
                definition=definition if isinstance(definition, str) else None,
            )
        )
    return found
