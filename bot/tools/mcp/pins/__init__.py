"""Pinned MCP tool definitions: a changed or new tool is held until an admin accepts it.

One home for the feature (docs/decisions/0043-pinned-mcp-definitions.md):

- `definitions`: `ToolDefinition` and its digest (what is pinned, and why only that);
- `diff`: what changed between two definitions, readable and bounded;
- `rules`: the pure rules (offered, pinned on first sight, held, gone; accept);
- `store`: the `PinStore` port; `postgres` and `memory` implement it (one contract suite);
- `audit`: the audit rows (kind `pin`), written by the stores with their changes;
- `pinning`: the rules run against a store, for the MCP supervisor and the admin commands.
"""

from bot.tools.mcp.pins.definitions import MalformedDefinitionError, ToolDefinition
from bot.tools.mcp.pins.diff import ChangeKind, DefinitionChange, ValueChange
from bot.tools.mcp.pins.memory import InMemoryPinStore, PinTables
from bot.tools.mcp.pins.pinning import Observation, accept_server, check_call, observe
from bot.tools.mcp.pins.postgres import PostgresPinStore
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
from bot.tools.mcp.pins.store import PinStore

__all__ = [
    "AcceptPlan",
    "AcceptRefusal",
    "AcceptRefused",
    "ChangeKind",
    "DefinitionChange",
    "DuplicateToolError",
    "HeldTool",
    "HoldNotice",
    "InMemoryPinStore",
    "MalformedDefinitionError",
    "Observation",
    "PinStore",
    "PinTables",
    "PostgresPinStore",
    "Review",
    "ServerPins",
    "ToolDefinition",
    "ValueChange",
    "accept_server",
    "check_call",
    "observe",
]
