"""The `AuditStore` contract: one suite, run against PostgreSQL and in memory (docs/decisions/0063-store-ports.md)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import asyncpg
import pytest

from bot.audit.entries import AuditEntry, AuditKind
from bot.audit.memory import InMemoryAuditStore
from bot.audit.postgres import PostgresAuditStore
from bot.audit.store import AuditStore
from bot.settings import DatabaseSettings
from bot.storage.database import Database, open_database
from tests.support import postgres

WS = "T1"


def entry(outcome: str = "approved", *, workspace_id: str = WS, **fields: Any) -> AuditEntry:
    return AuditEntry(kind=AuditKind.DECISION, workspace_id=workspace_id, outcome=outcome, **fields)


@pytest.fixture(params=["postgres", "memory"])
async def store(request: pytest.FixtureRequest, pg_server: postgres.TestServer) -> AsyncIterator[AuditStore]:
    """The store under test, on PostgreSQL (a fresh database) or in memory."""
    if request.param == "memory":
        yield InMemoryAuditStore()
        return
    db_url = await pg_server.create_database()
    try:
        async with open_database(DatabaseSettings(url=db_url, pool_max_size=3), run_migrations=False) as database:
            yield PostgresAuditStore(database.pool)
    finally:
        await pg_server.drop_database(db_url)


async def test_a_recorded_row_reads_back_whole_with_its_time(store: AuditStore):
    """Every field is kept; the store sets `at`."""
    await store.record(
        entry(
            thread_id="slack:T1:C1:1.0",
            approval_id="a1",
            tool_name="deploy",
            actor_id="U1",
            actor_name="Ada",
            proposed_args={"env": "prod", "n": 3},
            final_args={"env": "staging", "n": 3},
            reason="looks fine",
            detail={"source": "ops", "votes": ["Ada"]},
        )
    )
    [row] = await store.recent(WS)
    assert row.kind is AuditKind.DECISION
    assert (row.workspace_id, row.outcome, row.thread_id, row.approval_id) == (WS, "approved", "slack:T1:C1:1.0", "a1")
    assert (row.tool_name, row.actor_id, row.actor_name, row.reason) == ("deploy", "U1", "Ada", "looks fine")
    assert row.proposed_args == {"env": "prod", "n": 3}
    assert row.final_args == {"env": "staging", "n": 3}
    assert row.detail == {"source": "ops", "votes": ["Ada"]}
    assert isinstance(row.at, datetime) and row.at.tzinfo is not None


async def test_json_values_read_back_as_stored(store: AuditStore):
    """Tuples come back as lists, an integer beyond 64 bits as its float, absent arguments as None."""
    await store.record(entry(proposed_args={"ids": (1, 2), "big": 2**70}, detail={"pair": ("a", "b")}))
    [row] = await store.recent(WS)
    assert row.proposed_args == {"ids": [1, 2], "big": float(2**70)}
    assert isinstance(row.proposed_args["big"], float)
    assert row.final_args is None
    assert row.detail == {"pair": ["a", "b"]}


async def test_recent_is_newest_first_and_limited(store: AuditStore):
    for n in range(5):
        await store.record(entry(f"o{n}"))
    assert [row.outcome for row in await store.recent(WS)] == ["o4", "o3", "o2", "o1", "o0"]
    assert [row.outcome for row in await store.recent(WS, limit=2)] == ["o4", "o3"]


async def test_recent_is_one_workspaces_and_every_workspaces_pin_rows(store: AuditStore):
    """Rows of another workspace are not shown; the bot's own `pin` rows (no workspace) are everyone's."""
    await store.record(entry("mine"))
    await store.record(entry("theirs", workspace_id="T2"))
    await store.record(AuditEntry(kind=AuditKind.PIN, workspace_id="", outcome="pinned", tool_name="gh__issues"))
    await store.record(AuditEntry(kind=AuditKind.CONFIG, workspace_id="", outcome="not_a_pin"))
    assert [row.outcome for row in await store.recent(WS)] == ["pinned", "mine"]
    assert [row.outcome for row in await store.recent("T2")] == ["pinned", "theirs"]


async def test_recent_filters_by_tool_or_asking_subagent_and_by_person(store: AuditStore):
    await store.record(entry("deploy", tool_name="deploy", actor_id="U1"))
    await store.record(entry("asked_by_ops", tool_name="shell", actor_id="U2", detail={"source": "ops"}))
    await store.record(entry("other", tool_name="shell", actor_id="U1"))
    assert [row.outcome for row in await store.recent(WS, tool_name="deploy")] == ["deploy"]
    assert [row.outcome for row in await store.recent(WS, tool_name="ops")] == ["asked_by_ops"]
    assert [row.outcome for row in await store.recent(WS, actor_id="U1")] == ["other", "deploy"]
    assert [row.outcome for row in await store.recent(WS, tool_name="shell", actor_id="U1")] == ["other"]
    assert await store.recent(WS, tool_name="nothing") == []


async def test_concurrent_records_all_land(store: AuditStore):
    await asyncio.gather(*(store.record(entry(f"o{n}")) for n in range(10)))
    assert sorted(row.outcome for row in await store.recent(WS, limit=50)) == sorted(f"o{n}" for n in range(10))


async def test_postgres_a_row_on_a_callers_connection_is_part_of_its_transaction(database: Database):
    """PostgreSQL only: `record(..., connection=...)` commits or rolls back with the caller's change."""
    audit = PostgresAuditStore(database.pool)

    async def failing_change() -> None:
        async with database.pool.acquire() as connection, connection.transaction():
            await audit.record(entry("rolled_back"), connection=connection)
            raise RuntimeError("the change failed")

    with pytest.raises(RuntimeError):
        await failing_change()
    async with database.pool.acquire() as connection, connection.transaction():
        await audit.record(entry("committed"), connection=connection)
    assert [row.outcome for row in await audit.recent(WS)] == ["committed"]
    with pytest.raises(asyncpg.RaiseError, match="append-only"):
        await database.pool.execute("DELETE FROM audit_log")
