"""The port the audit log is kept behind: `PostgresAuditStore` in production, `InMemoryAuditStore` in tests.

The log is append-only: rows are added and read, never changed or removed by the bot (in
PostgreSQL a trigger refuses UPDATE and DELETE; retention alone prunes old rows). A store that
writes a change with its audit row, atomically, writes the row through its own twin: the
PostgreSQL stores on their transaction's connection (`PostgresAuditStore.record(...,
connection=...)`), the in-memory ones in the same step (`InMemoryAuditStore.append`). Both
implementations pass one contract suite (tests/integration/audit/test_audit_store_contract.py;
docs/decisions/0063-store-ports.md).
"""

from __future__ import annotations

from typing import Protocol

from bot.audit.entries import AuditEntry


class AuditStore(Protocol):
    """Writes and reads audit rows."""

    async def record(self, entry: AuditEntry) -> None:
        """Append `entry`; its `at` is set by the store (the moment it is written)."""
        ...

    async def recent(
        self,
        workspace_id: str,
        *,
        limit: int = 20,
        tool_name: str | None = None,
        actor_id: str | None = None,
    ) -> list[AuditEntry]:
        """The newest rows of a workspace, newest first, optionally filtered.

        The bot's own rows about its MCP servers' tools (kind `pin` without a workspace: pinned at
        first sight, held) are every workspace's: the servers serve them all
        (docs/decisions/0043-pinned-mcp-definitions.md). Rows read back hold their JSON values
        as stored: arguments in canonical form (`bot.tools.canonical.canonical_values`), tuples
        as lists.

        Args:
            workspace_id: the workspace.
            limit: at most this many rows.
            tool_name: only rows about this tool, or about calls this subagent asked for
                (`detail["source"]`).
            actor_id: only rows of this person.
        """
        ...
