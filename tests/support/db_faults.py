"""The database failing one of the bot's statements at a chosen moment, for real.

A row or table lock held on a connection of the test's own makes the bot's statement wait on
the server; the test then ends that statement's server session (`pg_terminate_backend`), which
is what the bot sees when the database drops its connection in the middle of a statement: the
statement fails (the pool reconnects for the next one). Nothing in the bot is replaced.
"""

from __future__ import annotations

import asyncio

import asyncpg

from tests.support.barriers import GENEROUS_S, wait_until_async


async def statement_waits(connection: asyncpg.Connection, statement: str) -> bool:
    """Whether a statement starting with `statement` waits for a row lock (one the test holds)."""
    waiting = await connection.fetchval(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE $1", f"%{statement}%"
    )
    return bool(waiting)


async def waiting_backends(connection: asyncpg.Connection, statement: str) -> list[int]:
    """The server sessions whose statement starting with `statement` waits for a lock."""
    rows = await connection.fetch(
        "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE $1", f"%{statement}%"
    )
    return [row["pid"] for row in rows]


class StatementDrop:
    """Drops the connection under the bot's next statement of one kind, once armed.

    `arm` locks a row on a connection of its own; a background task waits until a statement
    starting with `statement` waits for that lock, ends its session, and releases the lock.

    Args:
        db_url: the bot's database.
    """

    def __init__(self, db_url: str) -> None:
        self._db_url = db_url
        self._task: asyncio.Task[None] | None = None
        self.dropped: list[int] = []
        """The server sessions ended (their statements failed)."""

    async def arm(self, lock: str, *args: object, statement: str) -> None:
        """Lock with `lock` (e.g. `SELECT ... FOR UPDATE`, with `args`) now; drop the next `statement` that waits for it."""
        holder = await asyncpg.connect(self._db_url)
        held = holder.transaction()
        await held.start()
        await holder.execute(lock, *args)
        self._task = asyncio.create_task(self._drop(holder, held, statement))

    async def done(self) -> None:
        """Wait until the statement was dropped and the lock released (fails after a generous wait)."""
        assert self._task is not None, "the drop was never armed"
        await asyncio.wait_for(self._task, GENEROUS_S)

    async def _drop(self, holder: asyncpg.Connection, held: asyncpg.transaction.Transaction, statement: str) -> None:
        watcher = await asyncpg.connect(self._db_url)
        backends: list[int] = []

        async def waiting() -> bool:
            nonlocal backends
            backends = await waiting_backends(watcher, statement)
            return bool(backends)

        async def gone() -> bool:
            return not await watcher.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1::int[])", backends
            )

        try:
            await wait_until_async(waiting, f"{statement} waiting for the test's lock")
            await watcher.execute("SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid", backends)
            await wait_until_async(gone, "the dropped sessions ending")
            self.dropped = backends
        finally:
            await held.rollback()
            await holder.close()
            await watcher.close()
