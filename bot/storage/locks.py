"""One graph run per conversation at a time, across processes.

A PostgreSQL session advisory lock keyed by the thread id serialises runs across replicas; an
in-process `asyncio.Lock` in front of it makes local waiters queue without each holding a pool
connection. If the process dies, PostgreSQL drops the session and with it the lock; if the
unlock itself is cancelled, asyncpg's connection reset on release runs
`pg_advisory_unlock_all()`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
from asyncpg.pool import PoolConnectionProxy

log = logging.getLogger(__name__)


class ThreadLocks:
    """Mutual exclusion per `thread_id`.

    Args:
        pool: a pool used only for locks (see `Database.lock_pool`); each held lock occupies
            one connection, so its size caps the turns running at once.
    """

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool
        self._local: dict[str, asyncio.Lock] = {}
        self._users: dict[str, int] = {}

    @asynccontextmanager
    async def hold(self, thread_id: str) -> AsyncIterator[None]:
        """Hold the lock for `thread_id` for the duration of the block (waits for it)."""
        lock = self._local.setdefault(thread_id, asyncio.Lock())
        self._users[thread_id] = self._users.get(thread_id, 0) + 1
        try:
            async with lock, self._pool.acquire() as connection:
                await connection.execute("SELECT pg_advisory_lock(hashtextextended($1, 0))", thread_id)
                try:
                    yield
                finally:
                    await _unlock(connection, thread_id)
        finally:
            self._users[thread_id] -= 1
            if self._users[thread_id] == 0:
                del self._users[thread_id]
                del self._local[thread_id]


async def _unlock(connection: PoolConnectionProxy, thread_id: str) -> None:
    try:
        await connection.execute("SELECT pg_advisory_unlock(hashtextextended($1, 0))", thread_id)
    except (asyncpg.PostgresError, OSError):
        # The connection is broken: the server ends the session and releases the lock itself.
        log.warning("could not release the advisory lock (thread_id=%s)", thread_id, exc_info=True)
        await connection.close(timeout=1)
