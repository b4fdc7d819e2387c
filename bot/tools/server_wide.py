"""Server-wide names: `<server>__*` stands for every tool of one MCP server.

Admin settings (`policy`, `approvers`, `quorum`, `expiry`, `self-approval`, `trust`,
`escalate`) and a subagent's `tools` may name `<server>__*` where they take a tool name; such a
setting is stored under that name and applies to each `<server>__<tool>` that has no setting of
its own (docs/decisions/0045-server-wide-mcp-rules.md). Everything here is about names only; which
servers exist is the registry's to say (`bot.tools.registry.ToolRegistry.servers`).
"""

from __future__ import annotations

from collections.abc import Collection

SEPARATOR = "__"
"""Between a server's name and its tool's name (`bot.tools.mcp.config.registry_name`)."""
WILDCARD = "*"


def server_pattern(server: str) -> str:
    """The name that stands for every tool of the server `server` (its safe name): `<server>__*`."""
    return f"{server}{SEPARATOR}{WILDCARD}"


def pattern_server(name: str) -> str | None:
    """The server a `<server>__*` name stands for, or None when `name` is not such a name."""
    suffix = SEPARATOR + WILDCARD
    if not name.endswith(suffix) or len(name) == len(suffix):
        return None
    server = name[: -len(suffix)]
    return server if WILDCARD not in server else None


def tool_server(tool_name: str) -> str | None:
    """The server part of an MCP tool's name `<server>__<tool>`, or None for a name without one.

    A server's name never holds `__` nor ends with `_` (`bot.tools.mcp.config.load_mcp_config`
    refuses such keys), so the first `__` is where it ends: `gh__admin__delete` is the tool
    `admin__delete` of the server `gh`, never a tool of a server `gh__admin`.
    """
    server, separator, tool = tool_name.partition(SEPARATOR)
    return server if separator and server and tool else None


def server_patterns(tool_name: str) -> tuple[str, ...]:
    """The `<server>__*` that stands for `tool_name` (its server's), or empty for a name without a server.

    Empty for a built-in tool's name and for a `<server>__*` itself. A tuple, so that callers
    can try the tool's own name and then its server's in one loop.
    """
    if pattern_server(tool_name) is not None:
        return ()
    server = tool_server(tool_name)
    return (server_pattern(server),) if server is not None else ()


def covers(listed: Collection[str], tool_name: str) -> bool:
    """Whether a list of names (a subagent's `tools`) takes in `tool_name`, by name or by its `<server>__*`."""
    return tool_name in listed or any(pattern in listed for pattern in server_patterns(tool_name))
