"""`InMemoryUpkeepStore`: the `UpkeepStore` in a process's memory, for tests.

It reads and writes the inbox entries and conversation rows of a `TurnTables`
(`bot.turns.memory_tables`), shared with the inbox and conversation twins. Each method yields
to the event loop once, as a database round trip would, and then runs without awaiting.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Collection

from bot.turns.memory_tables import TurnTables


class InMemoryUpkeepStore:
    """An `UpkeepStore` over `TurnTables` (see the module docstring).

    Not modelled: reviews (no review is ever resuming, so none is listed, counted or
    uncounted), and a server restart: `server_started_at` is `TurnTables.started_at`, which
    changes only if a test sets it.

    Args:
        tables: the rows to share with other twins; fresh ones when omitted.
    """

    def __init__(self, tables: TurnTables | None = None) -> None:
        self.tables = tables if tables is not None else TurnTables()

    async def server_started_at(self) -> dt.datetime:
        """See `UpkeepStore.server_started_at`."""
        await asyncio.sleep(0)
        return self.tables.started_at

    async def due_threads(
        self, *, platforms: Collection[str], max_attempts: int, everything: bool = False, limit: int = 200
    ) -> list[str]:
        """See `UpkeepStore.due_threads`."""
        await asyncio.sleep(0)
        t = self.tables
        now = t.clock()

        def due(retry_at: dt.datetime | None) -> bool:
            # NULL <= now() is not true in PostgreSQL either.
            return everything or (retry_at is not None and retry_at <= now)

        threads = {
            e.thread_id
            for e in t.inbox.values()
            if e.status == "accepted" and e.attempts < max_attempts and due(e.retry_at)
        } | {
            row.thread_id
            for row in t.conversations.values()
            if row.running and row.attempts < max_attempts and due(row.retry_at)
        }
        wanted = set(platforms)
        return sorted(thread for thread in threads if thread.split(":", 1)[0] in wanted)[:limit]

    async def uncount_attempt(self, thread_id: str) -> None:
        """See `UpkeepStore.uncount_attempt`."""
        await asyncio.sleep(0)
        row = self.tables.conversations.get(thread_id)
        if row is not None and row.running:
            row.attempts = max(row.attempts - 1, 0)
            row.retry_at = self.tables.clock()

    async def count_attempt(self, thread_id: str, *, first_retry_s: float, max_retry_s: float) -> int:
        """See `UpkeepStore.count_attempt`."""
        await asyncio.sleep(0)
        row = self.tables.conversations.get(thread_id)
        if row is None or not row.running:
            return 0
        delay = min(first_retry_s * 2**row.attempts, max_retry_s)
        row.retry_at = self.tables.clock() + dt.timedelta(seconds=delay)
        row.attempts += 1
        return row.attempts
