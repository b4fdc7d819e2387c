"""`PostgresPinStore.load` (one statement, arrays of records) reads what the in-memory store holds.

Both asyncpg modes (prepared statements cached, and none behind a transaction-mode pooler): a
server seen with no tools (empty arrays), definitions with nested and non-ASCII JSON, holds
with and without a claimed notice and their `held_at` as an aware datetime.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.audit.postgres import PostgresAuditStore
from bot.settings import DatabaseSettings
from bot.storage.database import open_database
from bot.tools.mcp.pins import InMemoryPinStore, PostgresPinStore, ToolDefinition
from bot.tools.mcp.pins.rules import HeldTool

SERVER = "wiki"


def tool(name: str, description: str) -> ToolDefinition:
    return ToolDefinition.from_listing(
        SERVER,
        {
            "name": name,
            "description": description,
            "inputSchema": {"type": "object", "properties": {"päge": {"type": "string", "enum": ["ä", 'b"q']}}},
            "annotations": {"readOnlyHint": False, "destructiveHint": True},
        },
    )


A, B = tool("a", "Édite une page."), tool("b", "Reads.")
A2, B2 = tool("a", "Édite une page, puis la supprime."), tool("b", "Reads, then writes.")


@pytest.mark.parametrize("prepared", [True, False])
async def test_load_reads_back_what_was_written_as_memory_does(db_url: str, prepared: bool):
    settings = DatabaseSettings(url=db_url, pool_max_size=2, prepared_statements=prepared)
    async with open_database(settings, run_migrations=False) as database:
        stores = [PostgresPinStore(database.pool, PostgresAuditStore(database.pool)), InMemoryPinStore()]
        states = []
        for store in stores:
            assert not (await store.load(SERVER)).seen
            assert await store.record_first_sight(SERVER, [])
            empty = await store.load(SERVER)
            assert empty.seen and dict(empty.pins) == {} and dict(empty.holds) == {}
            await store.record_holds(SERVER, hold=[A], release=[])
            assert await store.record_first_sight(SERVER, [A]) is False
            await store.record_holds(SERVER, hold=[A2, B2], release=[])
            claimed = await store.claim_notice(SERVER, [HeldTool(definition=A2, pinned=None)])
            assert len(claimed) == 1
            states.append(await store.load(SERVER))
        on_postgres, in_memory = states
        assert dict(on_postgres.pins) == dict(in_memory.pins)
        assert {t: (h.definition, h.noticed) for t, h in on_postgres.holds.items()} == {
            t: (h.definition, h.noticed) for t, h in in_memory.holds.items()
        }
        assert on_postgres.holds["a"].noticed and not on_postgres.holds["b"].noticed
        for hold in on_postgres.holds.values():
            assert isinstance(hold.held_at, datetime) and hold.held_at.tzinfo is not None
            assert abs(hold.held_at - datetime.now(UTC)) < timedelta(minutes=5)
