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
"""Between a server's name and its tool's name (`bot.tools.mcp.tools.tool_name`)."""
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


def server_patterns(tool_name: str) -> tuple[str, ...]:
    """Every `<server>__*` that could stand for `tool_name`, the most specific (longest) first.

    `a__b__c` could be the tool `b__c` of the server `a` or the tool `c` of the server `a__b`:
    both `a__b__*` and `a__*` are returned. Only a configured server's pattern can be saved, so
    in practice one of them is ever set. Empty for a name without `__` (a built-in tool).
    """
    if pattern_server(tool_name) is not None:
        return ()
    found = []
    start = 1  # a server's name is never empty
    while (index := tool_name.find(SEPARATOR, start)) != -1:
        if index + len(SEPARATOR) < len(tool_name):
            found.append(server_pattern(tool_name[:index]))
        start = index + 1
    return tuple(reversed(found))


def covers(listed: Collection[str], tool_name: str) -> bool:
    """Whether a list of names (a subagent's `tools`) takes in `tool_name`, by name or by its `<server>__*`."""
    return tool_name in listed or any(pattern in listed for pattern in server_patterns(tool_name))
