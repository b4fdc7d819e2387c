"""Pinned MCP tool definitions: a changed or new tool is held until an admin accepts it.

One home for the feature (docs/decisions/XXXX-pinned-mcp-definitions.md):

- `definitions`: `ToolDefinition` and its digest (what is pinned, and why only that);
- `diff`: what changed between two definitions, readable and bounded;
- `rules`: the pure rules (offered, pinned on first sight, held, gone; accept);
"""

from bot.tools.mcp.pins.definitions import MalformedDefinitionError, ToolDefinition
from bot.tools.mcp.pins.diff import ChangeKind, DefinitionChange, ValueChange
from bot.tools.mcp.pins.rules import (
    AcceptPlan,
    AcceptRefusal,
    AcceptRefused,
    DuplicateToolError,
    HeldTool,
    HoldNotice,
    Review,
    ServerPins,
)

__all__ = [
    "AcceptPlan",
    "AcceptRefusal",
    "AcceptRefused",
    "ChangeKind",
    "DefinitionChange",
    "DuplicateToolError",
    "HeldTool",
    "HoldNotice",
    "MalformedDefinitionError",
    "Review",
    "ServerPins",
    "ToolDefinition",
    "ValueChange",
]
