"""IDENTIFY buckets spaced across processes with PostgreSQL (docs/decisions/0018)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import asyncpg
import pytest

from bot.storage.start_spacing import StartSpacing


@pytest.fixture
async def pools(db_url: str) -> AsyncIterator[tuple[asyncpg.Pool, asyncpg.Pool]]:
    """Two pools on one migrated database, as two processes have."""
    first = await asyncpg.create_pool(db_url, min_size=1, max_size=3)
    second = await asyncpg.create_pool(db_url, min_size=1, max_size=3)
    try:
        yield first, second
    finally:
        await first.close()
        await second.close()


async def timed_take(gate: StartSpacing, bucket: int) -> float:
    await asyncio.wait_for(gate.take(bucket), timeout=60)
    return time.monotonic()


async def test_one_bucket_is_spaced_across_processes(pools):
    """Two processes take bucket 0 at once: the second start comes no sooner than the spacing after the first."""
    spacing = 1.5
    a, b = StartSpacing(pools[0], spacing), StartSpacing(pools[1], spacing)
    # The first start is recorded after `asked` and before its `take` returns, so the second
    # may return less than `spacing` after the first returned, but never before asked + spacing.
    asked = time.monotonic()
    _, second = sorted(await asyncio.gather(timed_take(a, 0), timed_take(b, 0)))
    assert second - asked >= spacing


async def test_the_spacing_outlives_the_process_that_started(pools, db_url):
    """A process that started and died at once (its connection gone) still holds the next start off."""
    spacing = 1.5
    one_connection = await asyncpg.create_pool(db_url, min_size=1, max_size=1)
    asked = time.monotonic()  # before the start is recorded (see the test above)
    await timed_take(StartSpacing(one_connection, spacing), 0)
    await one_connection.close()  # the process is gone, and its connection with it
    assert await timed_take(StartSpacing(pools[1], spacing), 0) - asked >= spacing


async def test_other_buckets_do_not_wait(pools):
    """Bucket 0 started a moment ago with a 10-minute spacing: bucket 1 starts at once, bucket 0 waits."""
    a, b = StartSpacing(pools[0], 600), StartSpacing(pools[1], 600)
    await timed_take(a, 0)
    await timed_take(b, 1)
    waiting = asyncio.create_task(b.take(0))
    done, _ = await asyncio.wait({waiting}, timeout=1)
    assert not done, "bucket 0 started again within its spacing"
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
