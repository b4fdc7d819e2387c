"""The five turns and upkeep stores over one backend, PostgreSQL or in memory, for their contract suites.

`open_turn_stores("postgres", pg_server)` opens a fresh database and the `Postgres*` stores on
it; `open_turn_stores("memory", pg_server)` the `InMemory*` twins over one `TurnTables`. Either
way the five share their data as in production (a message given up in the inbox gives its run
up in the conversation store). `stores_fixture` makes the parametrised pytest fixture.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import asyncpg

from bot.audit.postgres import PostgresAuditStore
from bot.reviews.postgres import PostgresApprovalStore
from bot.settings import DatabaseSettings
from bot.storage.database import open_database
from bot.turns.conversations import ConversationStore
from bot.turns.conversations_memory import InMemoryConversationStore
from bot.turns.conversations_postgres import PostgresConversationStore
from bot.turns.inbox import Inbox
from bot.turns.inbox_memory import InMemoryInbox
from bot.turns.inbox_postgres import PostgresInbox
from bot.turns.memory_tables import TurnTables
from bot.turns.stop.memory import InMemoryStopStore
from bot.turns.stop.postgres import PostgresStopStore
from bot.turns.stop.store import StopStore
from bot.upkeep.retention_memory import InMemoryRetentionStore
from bot.upkeep.retention_postgres import PostgresRetentionStore
from bot.upkeep.retention_store import RetentionStore
from bot.upkeep.unfinished_memory import InMemoryUpkeepStore
from bot.upkeep.unfinished_postgres import PostgresUpkeepStore
from bot.upkeep.unfinished_store import UpkeepStore

BACKENDS = ("postgres", "memory")


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnStores:
    """The stores under test, typed as their ports.

    Attributes:
        backend: `postgres` or `memory`.
        pool: the database's pool (PostgreSQL only, for PostgreSQL-only checks).
        tables: the twins' shared rows (in memory only).
    """

    backend: str
    conversations: ConversationStore
    inbox: Inbox
    stop: StopStore
    upkeep: UpkeepStore
    retention: RetentionStore
    pool: asyncpg.Pool | None = None
    tables: TurnTables | None = None

    async def audit_outcomes(self, thread_id: str) -> list[tuple[str, dict[str, Any]]]:
        """`(outcome, detail)` of the audit rows written about the conversation, oldest first."""
        if self.tables is not None:
            return [(e.outcome, e.detail) for e in self.tables.audit if e.thread_id == thread_id]
        assert self.pool is not None
        rows = await self.pool.fetch(
            "SELECT outcome, detail FROM audit_log WHERE thread_id = $1 ORDER BY id", thread_id
        )
        return [(row["outcome"], row["detail"]) for row in rows]


@asynccontextmanager
async def open_turn_stores(backend: str, pg_server: Any, *, prune_every_runs: int = 4) -> AsyncIterator[TurnStores]:
    """The five stores on `backend` (`postgres`: a fresh database from `pg_server`; `memory`)."""
    if backend == "memory":
        tables = TurnTables()
        yield TurnStores(
            backend=backend,
            conversations=InMemoryConversationStore(tables, prune_every_runs=prune_every_runs),
            inbox=InMemoryInbox(tables),
            stop=InMemoryStopStore(tables),
            upkeep=InMemoryUpkeepStore(tables),
            retention=InMemoryRetentionStore(tables),
            tables=tables,
        )
        return
    db_url = await pg_server.create_database()
    async with AsyncExitStack() as stack:
        stack.push_async_callback(pg_server.drop_database, db_url)
        database = await stack.enter_async_context(
            open_database(DatabaseSettings(url=db_url, pool_max_size=4), run_migrations=False)
        )
        audit = PostgresAuditStore(database.pool)
        yield TurnStores(
            backend=backend,
            conversations=PostgresConversationStore(database.pool, prune_every_runs=prune_every_runs),
            inbox=PostgresInbox(database.pool),
            stop=PostgresStopStore(database.pool, PostgresApprovalStore(database.pool, audit), audit),
            upkeep=PostgresUpkeepStore(database.pool),
            retention=PostgresRetentionStore(database.pool, database.pruning_saver),
            pool=database.pool,
        )
