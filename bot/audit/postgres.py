"""`PostgresAuditStore`: the `AuditStore` in PostgreSQL (`audit_log`; a trigger refuses UPDATE and DELETE)."""

from __future__ import annotations

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from bot.audit.entries import AuditEntry, AuditKind
from bot.tools.canonical import canonical_values

_INSERT = """
INSERT INTO audit_log (kind, workspace_id, thread_id, approval_id, tool_name, actor_id,
                       actor_name, outcome, proposed_args, final_args, reason, detail)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
"""


class PostgresAuditStore:
    """An `AuditStore` on asyncpg.

    Args:
        pool: the asyncpg pool (json and jsonb codecs installed by `open_database`).
    """

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def record(self, entry: AuditEntry, *, connection: PoolConnectionProxy | None = None) -> None:
        """See `AuditStore.record`.

        Args:
            entry: the row.
            connection: a PostgreSQL store's connection, in its transaction: the row is then
                part of that transaction (written with the change it records, or not at all).
        """
        args = (
            entry.kind.value,
            entry.workspace_id,
            entry.thread_id,
            entry.approval_id,
            entry.tool_name,
            entry.actor_id,
            entry.actor_name,
            entry.outcome,
            entry.proposed_args,
            entry.final_args,
            entry.reason,
            entry.detail,
        )
        if connection is not None:
            await connection.execute(_INSERT, *args)
        else:
            await self._pool.execute(_INSERT, *args)

    async def recent(
        self,
        workspace_id: str,
        *,
        limit: int = 20,
        tool_name: str | None = None,
        actor_id: str | None = None,
    ) -> list[AuditEntry]:
        """See `AuditStore.recent`."""
        rows = await self._pool.fetch(
            """
            SELECT * FROM audit_log
            WHERE (workspace_id = $1 OR (workspace_id = '' AND kind = 'pin'))
              AND ($2::text IS NULL OR tool_name = $2 OR detail->>'source' = $2)
              AND ($3::text IS NULL OR actor_id = $3)
            ORDER BY id DESC LIMIT $4
            """,
            workspace_id,
            tool_name,
            actor_id,
            limit,
        )
        return [
            AuditEntry(
                kind=AuditKind(row["kind"]),
                workspace_id=row["workspace_id"],
                outcome=row["outcome"],
                thread_id=row["thread_id"],
                approval_id=row["approval_id"],
                tool_name=row["tool_name"],
                actor_id=row["actor_id"],
                actor_name=row["actor_name"],
                # The same canonical numbers as the approval records (`canonical_values`).
                proposed_args=None if row["proposed_args"] is None else canonical_values(row["proposed_args"]),
                final_args=None if row["final_args"] is None else canonical_values(row["final_args"]),
                reason=row["reason"],
                detail=row["detail"],
                at=row["at"],
            )
            for row in rows
        ]
