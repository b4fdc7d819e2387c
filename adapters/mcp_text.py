"""The line a card of an MCP server's tool shows, the same on Slack, Discord and in the terminal.

The server's hints are shown as what the server says, never as checked facts: they never make a
call run without review on their own (docs/decisions/0042-mcp-client.md). Each adapter escapes
the line for its own markup.
"""

from __future__ import annotations

from bot.ports import ToolOrigin

ORIGIN = "MCP server {server}, tool {tool}"
HINTS = " · the server's hints: {hints}"


def origin_line(origin: ToolOrigin) -> str:
    """E.g. "MCP server notes, tool create_note · the server's hints: destructive" (no hints: no hints part)."""
    line = ORIGIN.format(server=origin.server, tool=origin.tool)
    return line + (HINTS.format(hints=", ".join(origin.hints)) if origin.hints else "")
