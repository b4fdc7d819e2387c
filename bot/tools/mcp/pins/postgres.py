"""`PostgresPinStore`: the `PinStore` in PostgreSQL (tables of migrations/0017.mcp-pins.sql).

Every change takes the server's row in `mcp_pin_servers` `FOR UPDATE` first, so changes to one
server's pins, holds and notices are applied one at a time across workers and replicas, each
against the pins as they are then; audit rows go in the same transaction as their change.
A load is one statement, so it reads one snapshot: it never mixes the pins from before an accept
with the holds from after it.
"""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from bot.audit.postgres import PostgresAuditStore
from bot.base.conversation import Actor
from bot.tools.mcp.pins.audit import accepted_entries, held_entries, pinned_entries
from bot.tools.mcp.pins.definitions import ToolDefinition
from bot.tools.mcp.pins.rules import AcceptPlan, HeldTool, Hold, ServerPins


class PostgresPinStore:
    """A `PinStore` on asyncpg (see the module docstring).

    Args:
        pool: the asyncpg pool (json codecs installed by `bot.storage.database.open_database`).
        audit: the audit log; its rows are written in the change's transaction.
    """

    def __init__(self, pool: asyncpg.Pool, audit: PostgresAuditStore) -> None:
        self._pool = pool
        self._audit = audit

    async def load(self, server: str) -> ServerPins:
        """See `PinStore.load`."""
        row = await self._pool.fetchrow(
            """
            SELECT EXISTS (SELECT 1 FROM mcp_pin_servers WHERE server = $1) AS seen,
                   ARRAY(SELECT (tool, definition) FROM mcp_pins WHERE server = $1) AS pins,
                   ARRAY(SELECT (h.tool, h.definition, h.held_at, n.tool IS NOT NULL)
                           FROM mcp_pin_holds h
                           LEFT JOIN mcp_pin_notices n ON (n.server, n.tool, n.digest) = (h.server, h.tool, h.digest)
                          WHERE h.server = $1) AS holds
            """,
            server,
        )
        if row is None or not row["seen"]:
            return ServerPins(server=server)
        pins, holds = row["pins"], row["holds"]
        return ServerPins(
            server=server,
            seen=True,
            pins={tool: ToolDefinition.from_listing(server, definition) for tool, definition in pins},
            holds={
                tool: Hold(definition=ToolDefinition.from_listing(server, definition), held_at=held_at, noticed=noticed)
                for tool, definition, held_at, noticed in holds
            },
        )

    async def record_first_sight(self, server: str, definitions: Sequence[ToolDefinition]) -> bool:
        """See `PinStore.record_first_sight`."""
        async with self._pool.acquire() as connection, connection.transaction():
            # A concurrent first sight waits here for the other's commit, then inserts nothing.
            first = await connection.fetchval(
                "INSERT INTO mcp_pin_servers (server) VALUES ($1) ON CONFLICT DO NOTHING RETURNING true", server
            )
            if not first:
                return False
            await connection.executemany(
                "INSERT INTO mcp_pins (server, tool, digest, definition) VALUES ($1, $2, $3, $4)",
                [(server, d.name, d.digest, d.pinned()) for d in definitions],
            )
            for entry in pinned_entries(definitions):
                await self._audit.record(entry, connection=connection)
        return True

    async def record_holds(
        self, server: str, *, hold: Sequence[ToolDefinition], release: Sequence[ToolDefinition]
    ) -> None:
        """See `PinStore.record_holds`."""
        async with self._pool.acquire() as connection, connection.transaction():
            if not await _lock(connection, server):
                raise ValueError(f"MCP server {server!r} was never seen")
            await connection.executemany(
                """INSERT INTO mcp_pin_holds AS h (server, tool, digest, definition)
                   SELECT $1, $2, $3, $4
                    WHERE NOT EXISTS (SELECT 1 FROM mcp_pins WHERE server = $1 AND tool = $2 AND digest = $3)
                   ON CONFLICT (server, tool) DO UPDATE
                      SET digest = EXCLUDED.digest, definition = EXCLUDED.definition, held_at = now()
                    WHERE h.digest <> EXCLUDED.digest""",
                [(server, d.name, d.digest, d.pinned()) for d in hold],
            )
            await connection.executemany(
                """DELETE FROM mcp_pin_holds
                    WHERE server = $1 AND tool = $2
                      AND EXISTS (SELECT 1 FROM mcp_pins WHERE server = $1 AND tool = $2 AND digest = $3)""",
                [(server, d.name, d.digest) for d in release],
            )

    async def claim_notice(self, server: str, held: Sequence[HeldTool]) -> tuple[HeldTool, ...]:
        """See `PinStore.claim_notice`."""
        if not held:
            return ()
        async with self._pool.acquire() as connection, connection.transaction():
            await _lock(connection, server)
            rows = await connection.fetch(
                """INSERT INTO mcp_pin_notices (server, tool, digest)
                   SELECT $1, t.tool, t.digest FROM unnest($2::text[], $3::text[]) AS t (tool, digest)
                    WHERE EXISTS (SELECT 1 FROM mcp_pin_holds
                                   WHERE server = $1 AND tool = t.tool AND digest = t.digest)
                   ON CONFLICT DO NOTHING
                   RETURNING tool, digest""",
                server,
                [tool.definition.name for tool in held],
                [tool.definition.digest for tool in held],
            )
            won = {(row["tool"], row["digest"]) for row in rows}
            claimed = tuple(tool for tool in held if (tool.definition.name, tool.definition.digest) in won)
            for entry in held_entries(claimed):
                await self._audit.record(entry, connection=connection)
        return claimed

    async def accept(self, plan: AcceptPlan, actor: Actor) -> bool:
        """See `PinStore.accept`."""
        async with self._pool.acquire() as connection, connection.transaction():
            if not await _lock(connection, plan.server):
                return False
            rows = await connection.fetch("SELECT tool, digest FROM mcp_pin_holds WHERE server = $1", plan.server)
            if {row["tool"]: row["digest"] for row in rows} != plan.shown:
                return False
            await connection.executemany(
                """INSERT INTO mcp_pins (server, tool, digest, definition, pinned_by) VALUES ($1, $2, $3, $4, $5)
                   ON CONFLICT (server, tool) DO UPDATE
                      SET digest = EXCLUDED.digest, definition = EXCLUDED.definition,
                          pinned_at = now(), pinned_by = EXCLUDED.pinned_by""",
                [(plan.server, d.name, d.digest, d.pinned(), actor.user_id) for d in plan.definitions],
            )
            await connection.execute("DELETE FROM mcp_pin_holds WHERE server = $1", plan.server)
            for entry in accepted_entries(plan, actor):
                await self._audit.record(entry, connection=connection)
        return True


async def _lock(connection: PoolConnectionProxy, server: str) -> bool:
    """Take the server's row until the transaction ends; False when the server was never seen."""
    return bool(await connection.fetchval("SELECT true FROM mcp_pin_servers WHERE server = $1 FOR UPDATE", server))
