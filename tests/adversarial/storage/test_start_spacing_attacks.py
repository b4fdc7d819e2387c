"""Attacks on the IDENTIFY spacing (bot/storage/start_spacing.py): many shards re-identifying at once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest

from bot.storage.start_spacing import StartSpacing
from tests.support.barriers import GENEROUS_S


@pytest.fixture
async def pool(db_url: str) -> AsyncIterator[asyncpg.Pool]:
    """A process's pool: three connections for everything it does (turns, clicks, shard starts)."""
    pool = await asyncpg.create_pool(db_url, min_size=1, max_size=3)
    try:
        yield pool
    finally:
        await pool.close()


async def test_shards_waiting_to_identify_leave_the_pool_to_the_bot(pool):
    """Five shards of one bucket re-identify after a gateway outage, each waiting its turn (minutes here).

    While they wait, the rest of the process (a click, a turn) must still get a database
    connection: waiting for a start must not hold one, or a bot with more shards than pool
    connections stops serving until every shard is back.
    """
    gate = StartSpacing(pool, 600)
    await asyncio.wait_for(gate.take(0), GENEROUS_S)
    waiting = [asyncio.create_task(gate.take(0)) for _ in range(5)]
    try:
        await asyncio.sleep(0)  # each waiter asks the pool first
        assert await asyncio.wait_for(pool.fetchval("SELECT 1"), GENEROUS_S) == 1
        done, _ = await asyncio.wait(waiting, timeout=0.5)
        assert not done, "a shard identified within the spacing"
    finally:
        for task in waiting:
            task.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)
