"""IDENTIFY buckets spaced across processes with a PostgreSQL advisory lock (docs/decisions/0018)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import asyncpg
import pytest

from bot.storage.start_spacing import StartSpacing


@pytest.fixture
async def pools(db_url: str) -> AsyncIterator[tuple[asyncpg.Pool, asyncpg.Pool]]:
    """Two pools on one database, as two processes have."""
    first = await asyncpg.create_pool(db_url, min_size=1, max_size=3)
    second = await asyncpg.create_pool(db_url, min_size=1, max_size=3)
    try:
        yield first, second
    finally:
        await first.close()
        await second.close()


async def test_one_bucket_waits_for_the_spacing_of_another_process(pools):
    """Two processes take bucket 0 at once: the second gets it no sooner than the spacing after the first."""
    spacing = 1.5
    a, b = StartSpacing(pools[0], spacing), StartSpacing(pools[1], spacing)
    taken: list[float] = []

    async def take(gate: StartSpacing) -> None:
        await gate.take(0)
        taken.append(time.monotonic())

    try:
        await asyncio.wait_for(asyncio.gather(take(a), take(b)), timeout=60)
    finally:
        await a.aclose()
        await b.aclose()
    assert taken[1] - taken[0] >= spacing


async def test_other_buckets_do_not_wait(pools):
    """While another process holds bucket 0 (for 10 minutes), bucket 1 is taken at once."""
    a, b = StartSpacing(pools[0], 600), StartSpacing(pools[1], 600)
    try:
        await asyncio.wait_for(a.take(0), timeout=30)
        await asyncio.wait_for(b.take(1), timeout=30)
        waiting = asyncio.create_task(b.take(0))
        await a.aclose()  # releases bucket 0 long before its 600 s are up
        await asyncio.wait_for(waiting, timeout=30)
    finally:
        await a.aclose()
        await b.aclose()
