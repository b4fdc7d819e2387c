"""`InMemoryPinStore`: the `PinStore` in a process's memory, for tests and the terminal.

It keeps its data in a `PinTables` value that several instances may share: instances over one
`PinTables` behave like workers over one database, and a new instance over the same tables like
a restarted process. Each method runs without awaiting in between (the event loop's one thread
makes it atomic), after yielding to the loop once at its start as a database round trip would,
so that concurrent callers interleave as they would against PostgreSQL.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from bot.audit.entries import AuditEntry
from bot.base.conversation import Actor
from bot.tools.mcp.pins.audit import accepted_entries, held_entries, pinned_entries
from bot.tools.mcp.pins.definitions import ToolDefinition
from bot.tools.mcp.pins.rules import AcceptPlan, HeldTool, Hold, ServerPins


@dataclass(slots=True)
class PinTables:
    """The in-memory store's data, shareable between instances.

    Attributes:
        seen: servers whose first sight was recorded.
        pins: `(server, tool) -> pinned definition`.
        holds: `(server, tool) -> hold` (its `noticed` is derived from `notices` on load).
        notices: `(server, tool, digest)` of every claimed admins' message.
        audit: the audit rows written, oldest first.
    """

    seen: set[str] = field(default_factory=set)
    pins: dict[tuple[str, str], ToolDefinition] = field(default_factory=dict)
    holds: dict[tuple[str, str], Hold] = field(default_factory=dict)
    notices: set[tuple[str, str, str]] = field(default_factory=set)
    audit: list[AuditEntry] = field(default_factory=list)


class InMemoryPinStore:
    """A `PinStore` over `PinTables` (see the module docstring).

    Args:
        tables: the data to share with other instances; a fresh one when omitted.
    """

    def __init__(self, tables: PinTables | None = None) -> None:
        self.tables = tables if tables is not None else PinTables()

    async def load(self, server: str) -> ServerPins:
        """See `PinStore.load`."""
        await asyncio.sleep(0)
        t = self.tables
        return ServerPins(
            server=server,
            seen=server in t.seen,
            pins={tool: d for (s, tool), d in t.pins.items() if s == server},
            holds={
                tool: Hold(
                    definition=hold.definition,
                    held_at=hold.held_at,
                    noticed=(server, tool, hold.definition.digest) in t.notices,
                )
                for (s, tool), hold in t.holds.items()
                if s == server
            },
        )

    async def record_first_sight(self, server: str, definitions: Sequence[ToolDefinition]) -> bool:
        """See `PinStore.record_first_sight`."""
        await asyncio.sleep(0)
        t = self.tables
        if server in t.seen:
            return False
        t.seen.add(server)
        t.pins.update(((server, d.name), d) for d in definitions)
        t.audit.extend(pinned_entries(definitions))
        return True

    async def record_holds(
        self, server: str, *, hold: Sequence[ToolDefinition], release: Sequence[ToolDefinition]
    ) -> None:
        """See `PinStore.record_holds`."""
        await asyncio.sleep(0)
        t = self.tables
        if server not in t.seen:
            raise ValueError(f"MCP server {server!r} was never seen")
        now = datetime.now(UTC)
        for definition in hold:
            key = (server, definition.name)
            pinned, stored = t.pins.get(key), t.holds.get(key)
            if pinned is not None and pinned.digest == definition.digest:
                continue
            if stored is None or stored.definition.digest != definition.digest:
                t.holds[key] = Hold(definition=definition, held_at=now)
        for definition in release:
            key = (server, definition.name)
            pinned = t.pins.get(key)
            if pinned is not None and pinned.digest == definition.digest:
                t.holds.pop(key, None)

    async def claim_notice(self, server: str, held: Sequence[HeldTool]) -> tuple[HeldTool, ...]:
        """See `PinStore.claim_notice`."""
        await asyncio.sleep(0)
        t = self.tables
        claimed = []
        for tool in held:
            digest = tool.definition.digest
            stored = t.holds.get((server, tool.definition.name))
            notice = (server, tool.definition.name, digest)
            if stored is None or stored.definition.digest != digest or notice in t.notices:
                continue
            t.notices.add(notice)
            claimed.append(tool)
        t.audit.extend(held_entries(claimed))
        return tuple(claimed)

    async def accept(self, plan: AcceptPlan, actor: Actor) -> bool:
        """See `PinStore.accept`."""
        await asyncio.sleep(0)
        t = self.tables
        server = plan.server
        held = {tool: hold.definition.digest for (s, tool), hold in t.holds.items() if s == server}
        if server not in t.seen or held != plan.shown:
            return False
        for definition in plan.definitions:
            t.pins[(server, definition.name)] = definition
            del t.holds[(server, definition.name)]
        t.audit.extend(accepted_entries(plan, actor))
        return True
