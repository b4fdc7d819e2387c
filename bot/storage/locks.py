"""One graph run per conversation at a time, across processes.

A PostgreSQL transaction-level advisory lock keyed by the thread id
(`pg_advisory_xact_lock(hashtextextended(thread_id, 0))`) serialises runs across replicas; an
in-process `asyncio.Lock` in front of it makes local waiters queue without each holding a pool
connection. The lock lives in a transaction kept open on a connection of the lock pool for as
long as it is held, so it is released by the server whenever that transaction ends: at the
end of the block, or when the connection drops (the process died, PostgreSQL restarted, an
idle timeout). Being transaction-scoped, it also holds behind a transaction-mode connection
pooler, which pins a server connection to a client only for a transaction.

When the connection drops while the lock is held, another replica may take the lock at once.
The holder must not go on unguarded: the task running the block is cancelled and the block
ends with `LockLostError`. Work cut short that way is finished later, under the lock, by
whoever holds it next (`bot.upkeep.unfinished_work`, docs/decisions/0009).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from bot.base.errors import CountersignError

log = logging.getLogger(__name__)


class LockLostError(CountersignError):
    """The connection holding a conversation's lock dropped while the block ran."""


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
        """Hold the lock for `thread_id` for the duration of the block (waits for it).

        Raises:
            LockLostError: the lock's connection dropped while the block ran; the block was
                cancelled at that moment.
        """
        async with (
            self._local_lock(thread_id) as lock,
            lock,
            self._pool.acquire() as connection,
            _transaction(connection, thread_id),
        ):
            await connection.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", thread_id)
            async with _guarded(connection, thread_id):
                yield

    @asynccontextmanager
    async def try_hold(self, thread_id: str) -> AsyncIterator[bool]:
        """Hold the lock for `thread_id` if it is free now; yield whether it is held.

        For background upkeep, which must never wait behind a running turn.

        Raises:
            LockLostError: as for `hold`.
        """
        local = self._local.get(thread_id)
        if local is not None and local.locked():
            yield False
            return
        async with (
            self._local_lock(thread_id) as lock,
            lock,
            self._pool.acquire() as connection,
            _transaction(connection, thread_id),
        ):
            held = await connection.fetchval("SELECT pg_try_advisory_xact_lock(hashtextextended($1, 0))", thread_id)
            if not held:
                yield False
                return
            async with _guarded(connection, thread_id):
                yield True

    @asynccontextmanager
    async def _local_lock(self, thread_id: str) -> AsyncIterator[asyncio.Lock]:
        """The in-process lock of `thread_id`, forgotten when nobody uses it any more."""
        lock = self._local.setdefault(thread_id, asyncio.Lock())
        self._users[thread_id] = self._users.get(thread_id, 0) + 1
        try:
            yield lock
        finally:
            self._users[thread_id] -= 1
            if self._users[thread_id] == 0:
                del self._users[thread_id]
                del self._local[thread_id]


@asynccontextmanager
async def _transaction(connection: PoolConnectionProxy, thread_id: str) -> AsyncIterator[None]:
    """A transaction that ends the lock when it ends; a broken connection is not an error here."""
    transaction = connection.transaction()
    await transaction.start()
    try:
        yield
    finally:
        try:
            await transaction.commit()
        except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as exc:
            # The connection is broken: the server ended the transaction, and the lock with it.
            log.warning("could not end the lock's transaction (thread_id=%s): %s", thread_id, exc)
            with contextlib.suppress(asyncpg.InterfaceError):  # already released by the pool
                connection.terminate()


@asynccontextmanager
async def _guarded(connection: PoolConnectionProxy, thread_id: str) -> AsyncIterator[None]:
    """Cancel the block if `connection` drops, and end it with `LockLostError`."""
    task = asyncio.current_task()
    lost = False

    def on_termination(_: object) -> None:
        nonlocal lost
        lost = True
        if task is not None:
            task.cancel()

    connection.add_termination_listener(on_termination)
    try:
        yield
    except asyncio.CancelledError:
        if not lost or task is None:
            raise
        task.uncancel()
        log.error("the connection holding the lock dropped; the run was stopped (thread_id=%s)", thread_id)
        raise LockLostError(f"lost the lock of {thread_id}") from None
    finally:
        with contextlib.suppress(asyncpg.InterfaceError):  # a dropped connection is already released
            connection.remove_termination_listener(on_termination)
