"""MCP words shared by Slack, Discord and the terminal: a card's origin line, and the pins' texts.

The line a card of an MCP server's tool shows is the same everywhere.
The server's hints are shown as what the server says, never as checked facts: they never make a
call run without review on their own (docs/decisions/0042-mcp-client.md). Each adapter escapes
the line for its own markup.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from adapters.words.display import reveal_invisible
from bot.admin.views import McpAccepted, McpAcceptRefused, McpOverview
from bot.policy.outlook import ToolOutlook
from bot.ports import ToolOrigin, ToolsHeld
from bot.tools.mcp.config import registry_name
from bot.tools.mcp.pins import ChangeKind, DefinitionChange, ValueChange
from bot.tools.server_wide import tool_server

ORIGIN = "MCP server {server}, tool {tool}"
HINTS = " · the server's hints: {hints}"


DEFINITION_CHANGED = (
    "The MCP server changed this tool's definition after the card was made, so the approved call did not run: "
    "an approval covers only the definition its approver saw. Ask again for a new card."
)
"""The line on the card of an approved call refused because its tool's definition changed since
(docs/decisions/0046-mcp-pins-wiring.md)."""


def origin_line(origin: ToolOrigin) -> str:
    """E.g. "MCP server notes, tool create_note · the server's hints: destructive" (no hints: no hints part)."""
    line = ORIGIN.format(server=origin.server, tool=origin.tool)
    return line + (HINTS.format(hints=", ".join(origin.hints)) if origin.hints else "")


# Pinned definitions: the admins' message, `/countersign mcp` and `mcp accept`
# (docs/decisions/0043-pinned-mcp-definitions.md). Server text (descriptions, schema values) is
# escaped and its invisible characters shown: a changed description is exactly what an admin
# must read as it is.

MAX_TOOLS_SHOWN = 10
"""Held tools shown in full in one message or reply; the rest are counted."""

HELD_TITLE = "MCP server {server} changed or added tools: their calls are refused until an admin accepts them"
HELD_ACCEPT = "Read what changed, then accept with `{command}` (admins)."
NEW_TOOL = "new tool"
CHANGED = "changed: {parts}"
MORE_TOOLS = "…and {count} more held tools (`/countersign mcp` lists them)"
MORE_LINES = "  …{count} more changed lines not shown"
ABSENT = "(none)"

OVERVIEW_TITLE = "MCP servers"
NO_SERVERS = "No MCP servers are configured (COUNTERSIGN_MCP_CONFIG is not set)."
STATE = {
    "connected": "connected",
    "connecting": "connecting",
    "retrying": "not connected, retrying",
    "stopped": "stopped",
}
NO_TOOLS = "  no tools offered"
HELD_LINE = "  held: {tool} ({what}) since {when}{told}"
NOT_TOLD = ", admins not told (the message was lost)"
PINS_UNREADABLE = "  held tools unknown: the pin store could not be read (see the bot's log)"
LEFT_OUT_LINE = "  left out: {tool}: {reason}"
MORE_LEFT_OUT = "  …and {count} more tools left out (the bot's log names them)"
LEFT_OUT_BY_FILE = (
    "  {count} tool left out by the file's includeTools/excludeTools",
    "  {count} tools left out by the file's includeTools/excludeTools",
)
OVER_LIMIT = (
    "  {count} {tools} left out, over the model's limit of {limit} tools; use includeTools/excludeTools: {names}"
)
MAX_NAMES_SHOWN = 5
"""Tool names shown in the line of the tools left out over the limit; the rest are counted."""
MAX_TEXT_SHOWN = 200
"""Characters of a left-out tool's name or reason shown (both may be the server's text)."""
ACCEPT_HINT = "  accept with `/countersign mcp accept {server}`"

ACCEPTED = "Accepted {count} of MCP server {server}, recorded in the audit log. How each tool's calls are decided now:"
DEFINITIONS = ("definition", "definitions")

# How an accepted tool's calls are decided (`bot.policy.outlook`), for the admins' workspace:
# said before and at the accept, since accepting changes no rule but may let a tool run unasked.
AFTER_NOTICE = "  once accepted, in this workspace: {how}"
AFTER_REPLY = "  from now on, in this workspace: {how}"
DECIDED = {
    "card": "every call needs a card",
    "card_when": "a call needs a card when {condition}, else runs without one",
    "no_card": "calls run WITHOUT a card",
    "denied": "calls are denied; nothing runs",
}
BY_DEFAULT = " (no rule for it or its server)"
BY_RULE = " (policy `{rule}`)"
BY_HINT = " (the server marks it read-only, and `read-only-hint {server} auto` is on)"
CHANNELS_DIFFER = "; a channel's own rule may decide otherwise there"
REFUSED = {
    "nothing_held": "Nothing to accept: MCP server {server} has no held tools. Nothing was changed.",
    "changed_again": (
        "Not accepted: MCP server {server} now lists definitions the admins were not shown ({tools}); they are "
        "held, and the admins are told what changed. Read that, then accept again. Nothing was changed."
    ),
    "stale": (
        "Not accepted: the held tools of MCP server {server} changed while you accepted ({tools}). "
        "Run `/countersign mcp` to see them, then accept again. Nothing was changed."
    ),
}


def change_lines(change: DefinitionChange, escape: Callable[[str], str]) -> list[str]:
    """What changed in one tool, bounded as `change` is: its kind, description lines, schema paths, hints."""
    lines = []
    for line in change.description:
        lines.append("  " + escape(reveal_invisible(line)))
    for value in change.schema:
        lines.append(f"  input schema {_value_change(value, escape)}")
    for value in change.hints:
        lines.append(f"  hint {_value_change(value, escape)}")
    if change.left_out:
        lines.append(MORE_LINES.format(count=change.left_out))
    return lines


def what_changed(change: DefinitionChange) -> str:
    """The kind of change in words: `new tool`, or e.g. `changed: description, input schema`."""
    return NEW_TOOL if change.kind is ChangeKind.NEW else CHANGED.format(parts=", ".join(change.changed))


def held_text(notice: ToolsHeld, bold: Callable[[str], str], escape: Callable[[str], str]) -> str:
    """The admins' message about newly held tools: which, what changed, how calls will be decided, how to accept."""
    lines = [bold(HELD_TITLE.format(server=escape(notice.server)))]
    lines += _changes(notice.changes, escape, notice.after, AFTER_NOTICE)
    lines.append(HELD_ACCEPT.format(command=notice.accept_command))
    return "\n".join(lines)


def overview_text(
    view: McpOverview, bold: Callable[[str], str], when: Callable[[datetime], str], escape: Callable[[str], str]
) -> str:
    """`/countersign mcp`: each server's state, its offered tools and hints, its held tools, its tools left out."""
    if not view.servers:
        return NO_SERVERS
    lines = [bold(OVERVIEW_TITLE)]
    for server in view.servers:
        state = STATE.get(server.state, server.state)
        if server.reason and server.state != "connected":
            state += f" ({server.reason})"
        elif server.protocol_version:
            state += f" (protocol {server.protocol_version})"
        key = f" ({server.key})" if server.key != server.server else ""
        lines.append(f"• {bold(server.server)}{key}: {state}")
        if server.tools:
            lines += [
                f"  `{tool.name}`" + (f" · the server's hints: {', '.join(tool.hints)}" if tool.hints else "")
                for tool in server.tools
            ]
        else:
            lines.append(NO_TOOLS)
        if server.pins_unreadable:
            lines.append(PINS_UNREADABLE)
        for held in server.held[:MAX_TOOLS_SHOWN]:
            told = "" if held.told else NOT_TOLD
            lines.append(
                HELD_LINE.format(
                    tool=f"`{held.name}`", what=what_changed(held.change), when=when(held.held_at), told=told
                )
            )
        if len(server.held) > MAX_TOOLS_SHOWN:
            lines.append("  " + MORE_TOOLS.format(count=len(server.held) - MAX_TOOLS_SHOWN))
        if server.held:
            lines.append(ACCEPT_HINT.format(server=server.server))
        for left in server.left_out[:MAX_TOOLS_SHOWN]:
            lines.append(
                LEFT_OUT_LINE.format(
                    tool=f"`{_server_text(left.name, escape)}`", reason=_server_text(left.reason, escape)
                )
            )
        if len(server.left_out) > MAX_TOOLS_SHOWN:
            lines.append(MORE_LEFT_OUT.format(count=len(server.left_out) - MAX_TOOLS_SHOWN))
        if server.left_out_by_file:
            count = server.left_out_by_file
            lines.append(LEFT_OUT_BY_FILE[0 if count == 1 else 1].format(count=count))
        if server.over_limit:
            lines.append(_over_limit_line(server.over_limit, server.max_tools))
    return "\n".join(lines)


def _over_limit_line(names: tuple[str, ...], limit: int) -> str:
    """E.g. "  2 tools left out, over the model's limit of 512 tools; use includeTools/excludeTools: `a`, `b`"."""
    shown = ", ".join(f"`{name}`" for name in names[:MAX_NAMES_SHOWN])
    if len(names) > MAX_NAMES_SHOWN:
        shown += f" and {len(names) - MAX_NAMES_SHOWN} more"
    return OVER_LIMIT.format(count=len(names), tools="tool" if len(names) == 1 else "tools", limit=limit, names=shown)


def _server_text(text: str, escape: Callable[[str], str]) -> str:
    """A server's text for a reply: bounded, its invisible characters shown, escaped for the markup.

    Backticks become quotes, so that a name cannot end the code span it is shown in.
    """
    cut = text if len(text) <= MAX_TEXT_SHOWN else text[: MAX_TEXT_SHOWN - 1] + "…"
    return escape(reveal_invisible(cut).replace("`", "'"))


def accepted_text(reply: McpAccepted, escape: Callable[[str], str]) -> str:
    """`/countersign mcp accept`: what was accepted, the diff that was shown, how each tool's calls are decided now."""
    count = len(reply.changes)
    definitions = f"{count} {DEFINITIONS[0] if count == 1 else DEFINITIONS[1]}"
    lines = [ACCEPTED.format(count=definitions, server=escape(reply.server))]
    lines += _changes(reply.changes, escape, reply.after, AFTER_REPLY)
    return "\n".join(lines)


def accept_refused_text(reply: McpAcceptRefused, escape: Callable[[str], str]) -> str:
    """Why `/countersign mcp accept` pinned nothing, in one line."""
    tools = ", ".join(f"`{escape(tool)}`" for tool in reply.tools) or ABSENT
    return REFUSED.get(reply.reason, REFUSED["stale"]).format(server=escape(reply.server), tools=tools)


def after_text(after: ToolOutlook, escape: Callable[[str], str]) -> str:
    """How one accepted tool's calls are decided, in words, e.g. "calls run WITHOUT a card (policy `notes__*`)"."""
    how = DECIDED[after.decided.value].format(condition=f"`{escape(after.condition or '')}`")
    if after.by_hint:
        how += BY_HINT.format(server=tool_server(after.tool) or after.tool)
    elif after.rule is not None:
        how += BY_RULE.format(rule=after.rule)
    else:
        how += BY_DEFAULT
    return how + (CHANNELS_DIFFER if after.channels_differ else "")


def _changes(
    changes: tuple[DefinitionChange, ...],
    escape: Callable[[str], str],
    after: tuple[ToolOutlook, ...] = (),
    after_line: str = AFTER_REPLY,
) -> list[str]:
    lines = []
    outlooks = {outlook.tool: outlook for outlook in after}
    for change in changes[:MAX_TOOLS_SHOWN]:
        name = registry_name(change.server, change.tool)
        lines.append(f"• `{name}`: {what_changed(change)}")
        if name in outlooks:
            lines.append(after_line.format(how=after_text(outlooks[name], escape)))
        lines += change_lines(change, escape)
    if len(changes) > MAX_TOOLS_SHOWN:
        lines.append(MORE_TOOLS.format(count=len(changes) - MAX_TOOLS_SHOWN))
    return lines


def _value_change(value: ValueChange, escape: Callable[[str], str]) -> str:
    before = escape(reveal_invisible(value.before)) if value.before is not None else ABSENT
    after = escape(reveal_invisible(value.after)) if value.after is not None else ABSENT
    return f"{escape(value.path)}: {before} → {after}"
