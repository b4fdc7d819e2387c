"""The audit rows of pinned definitions (kind `pin`): pinned at first sight, held, accepted.

The stores write these rows in the transaction that makes the change (`PinStore`), so a row
is written exactly when its change is: a worker that loses a race for a first sight or for a
held definition's message writes none. One row per tool, named by its `<server>__<tool>` name
(so that `/countersign audit <server>__<tool>` finds it), with the server and the digests in
`detail`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from bot.audit.entries import AuditEntry, AuditKind
from bot.base.conversation import Actor
from bot.tools.mcp.pins.definitions import ToolDefinition
from bot.tools.mcp.pins.diff import ChangeKind, DefinitionChange
from bot.tools.mcp.pins.rules import AcceptPlan, HeldTool

BOT_WIDE: Final = ""
"""The `workspace_id` of rows about what no workspace did (the bot saw a server's tools): an MCP
server is the bot's, and serves every workspace."""

PINNED: Final = "pinned"
"""Outcome: a definition pinned at the server's first sight (trust on first use)."""
HELD: Final = "held"
"""Outcome: a listed definition differs from its pin, or is a new tool; its calls are refused."""
ACCEPTED: Final = "accepted"
"""Outcome: an admin accepted a held definition; it is the pin now."""


def pinned_entries(definitions: Sequence[ToolDefinition]) -> list[AuditEntry]:
    """One `pinned` row per definition of a server's first sight (the system acted)."""
    return [
        AuditEntry(
            kind=AuditKind.PIN,
            workspace_id=BOT_WIDE,
            tool_name=definition.registry_name,
            outcome=PINNED,
            reason="first sight",
            detail={
                "server": definition.server,
                "tool": definition.name,
                "digest": definition.digest,
                "hints": dict(definition.annotations),
            },
        )
        for definition in definitions
    ]


def held_entries(held: Sequence[HeldTool]) -> list[AuditEntry]:
    """One `held` row per held definition whose admins' message was claimed now (the system acted).

    `reason` says what changed ("new tool", or e.g. "changed: description, input schema").
    """
    entries = []
    for tool in held:
        change = tool.change
        entries.append(
            AuditEntry(
                kind=AuditKind.PIN,
                workspace_id=BOT_WIDE,
                tool_name=tool.definition.registry_name,
                outcome=HELD,
                reason=_what_changed(change),
                detail={
                    "server": change.server,
                    "tool": change.tool,
                    "kind": change.kind.value,
                    "pinned_digest": change.before_digest,
                    "digest": change.after_digest,
                },
            )
        )
    return entries


def accepted_entries(plan: AcceptPlan, actor: Actor) -> list[AuditEntry]:
    """One `accepted` row per definition an admin's accept pinned, in the admin's workspace.

    `detail` keeps the digests before and after, the bounded diff the admin was shown
    (`DefinitionChange.as_json`) and its digest (`diff_digest`).
    """
    return [
        AuditEntry(
            kind=AuditKind.PIN,
            workspace_id=actor.workspace_id,
            tool_name=definition.registry_name,
            actor_id=actor.user_id,
            actor_name=actor.display_name,
            outcome=ACCEPTED,
            reason=_what_changed(change),
            detail={
                "platform": actor.platform,
                "server": plan.server,
                "tool": definition.name,
                "pinned_digest": change.before_digest,
                "digest": definition.digest,
                "diff_digest": change.digest,
                "diff": change.as_json(),
            },
        )
        for definition, change in zip(plan.definitions, plan.changes, strict=True)
    ]


def _what_changed(change: DefinitionChange) -> str:
    return "new tool" if change.kind is ChangeKind.NEW else "changed: " + ", ".join(change.changed)
