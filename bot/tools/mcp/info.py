"""What the bot knows of one listed MCP tool: where it comes from, its hints, its pinned definition."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import mcp_types

from bot.tools.mcp.pins.definitions import ToolDefinition


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolHints:
    """What the server says of its tool (MCP's `ToolAnnotations`): hints, never a guarantee.

    Each is None when the server did not say. They are shown on the card; they never make a
    call run without review on their own.
    """

    read_only: bool | None = None
    destructive: bool | None = None
    idempotent: bool | None = None
    open_world: bool | None = None

    @classmethod
    def of(cls, annotations: mcp_types.ToolAnnotations | None) -> ToolHints:
        """The hints of a listed tool's annotations (all None without any)."""
        if annotations is None:
            return cls()
        return cls(
            read_only=annotations.read_only_hint,
            destructive=annotations.destructive_hint,
            idempotent=annotations.idempotent_hint,
            open_world=annotations.open_world_hint,
        )

    def words(self) -> tuple[str, ...]:
        """The hints the server gave, as card words: "read-only", "destructive", "idempotent", "open world"."""
        said = (
            (self.read_only, "read-only"),
            (self.destructive, "destructive"),
            (self.idempotent, "idempotent"),
            (self.open_world, "open world"),
        )
        return tuple(word for value, word in said if value)


@dataclass(frozen=True, slots=True, kw_only=True)
class McpToolInfo:
    """Where an MCP tool comes from and how its server defined it.

    Attributes:
        server: the server's key in the MCP servers file.
        upstream: the tool's name on the server.
        description: the server's description of it.
        hints: its annotations' hints.
        definition: the tool as the server listed it (`name`, `description`, `inputSchema`,
            `annotations`, ... in MCP's JSON spelling).
        contract: what is pinned of it (`bot.tools.mcp.pins`): its name, description, input
            schema and hints.
        digest: `contract.digest`, SHA-256 of the canonical JSON of those: changes whenever what
            the tool is said to do changes.
    """

    server: str
    upstream: str
    description: str
    hints: ToolHints
    definition: Mapping[str, Any] = field(repr=False)
    contract: ToolDefinition = field(repr=False)

    @property
    def digest(self) -> str:
        """The pinned digest of the tool (`ToolDefinition.digest`)."""
        return self.contract.digest


def tool_info(server: str, tool: mcp_types.Tool) -> McpToolInfo:
    """The `McpToolInfo` of a listed tool of the server `server` (its key).

    Raises:
        bot.tools.mcp.pins.MalformedDefinitionError: the entry cannot be pinned (leave the tool out).
    """
    definition = tool.model_dump(mode="json", by_alias=True, exclude_none=True)
    return McpToolInfo(
        server=server,
        upstream=tool.name,
        description=tool.description or tool.title or "",
        hints=ToolHints.of(tool.annotations),
        definition=definition,
        contract=ToolDefinition.from_listing(server, definition),
    )
