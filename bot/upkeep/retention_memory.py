"""`InMemoryRetentionStore`: the `RetentionStore` in a process's memory, for tests.

It reads and deletes the conversation rows, inbox entries and audit rows of a `TurnTables`
(`bot.turns.memory_tables`), shared with the turns twins. A delete runs under the tables' lock,
as PostgreSQL deletes with the conversation's row locked.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

from bot.turns.memory_tables import ConversationRecord, TurnTables


class InMemoryRetentionStore:
    """A `RetentionStore` over `TurnTables` (see the module docstring).

    Not modelled: LangGraph's checkpoints, approvals and reviews. `prune` deletes no
    checkpoint (there are none) and only marks a due conversation at rest as pruned;
    `expire_idle_cards` finds no card; a conversation is idle whatever its reviews and the pause
    in its checkpoint would say; `delete_if_idle` deletes only its conversation row (the
    PostgreSQL store also deletes its checkpoints, approvals, reviews, trust grants, tool runs
    and MCP questions). Audit rows without a time (`AuditEntry.at` None) never age.

    Args:
        tables: the rows to share with other twins; fresh ones when omitted.
    """

    def __init__(self, tables: TurnTables | None = None) -> None:
        self.tables = tables if tables is not None else TurnTables()

    async def due_for_pruning(self, *, limit: int) -> list[str]:
        """See `RetentionStore.due_for_pruning`."""
        await asyncio.sleep(0)
        return [row.thread_id for row in self.tables.conversations.values() if _prunable(row)][:limit]

    async def prune(self, thread_id: str) -> bool:
        """See `RetentionStore.prune` (checkpoints are not modelled: only the due mark is cleared)."""
        await asyncio.sleep(0)
        row = self.tables.conversations.get(thread_id)
        if row is None or not _prunable(row):
            return False
        row.prune_due = False
        row.runs_since_prune = 0
        return True

    async def expire_idle_cards(self, *, idle_days: int, limit: int) -> list[str]:
        """See `RetentionStore.expire_idle_cards` (approvals are not modelled: no card to expire)."""
        await asyncio.sleep(0)
        return []

    async def idle_conversations(self, *, idle_days: int, limit: int) -> list[str]:
        """See `RetentionStore.idle_conversations`."""
        await asyncio.sleep(0)
        before = self.tables.clock() - timedelta(days=idle_days)
        idle = sorted(
            (row for row in self.tables.conversations.values() if self._idle(row, before)),
            key=lambda row: row.last_active_at,
        )
        return [row.thread_id for row in idle[:limit]]

    async def delete_if_idle(self, thread_id: str, *, idle_days: int) -> bool:
        """See `RetentionStore.delete_if_idle`."""
        await asyncio.sleep(0)
        t = self.tables
        async with t.lock:
            row = t.conversations.get(thread_id)
            if row is None or not self._idle(row, t.clock() - timedelta(days=idle_days)):
                return False
            del t.conversations[thread_id]
        return True

    async def forget_audit_older_than(self, *, days: int, limit: int) -> int:
        """See `RetentionStore.forget_audit_older_than`."""
        await asyncio.sleep(0)
        t = self.tables
        before = t.clock() - timedelta(days=days)
        old = sorted(
            (i for i, entry in enumerate(t.audit) if entry.at is not None and entry.at < before),
            key=lambda i: t.audit[i].at or before,
        )[:limit]
        gone = set(old)
        t.audit[:] = [entry for i, entry in enumerate(t.audit) if i not in gone]
        return len(gone)

    def _idle(self, row: ConversationRecord, before: datetime) -> bool:
        return (
            row.last_active_at < before
            and not row.running
            and not any(e.thread_id == row.thread_id and e.status == "accepted" for e in self.tables.inbox.values())
        )


def _prunable(row: ConversationRecord) -> bool:
    return row.prune_due and not row.running
