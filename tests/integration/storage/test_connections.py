"""The pools' hooks (`bot.storage.connections`): no round trip per use, and no unsafe reuse."""

from __future__ import annotations

from typing import Any

from psycopg_pool import AsyncConnectionPool

from bot.storage.database import Database

WAIT_S = 30.0


async def last_query(database: Database, pid: int) -> tuple[str, str]:
    """What the backend `pid` ran last and its state, as the server sees it (another connection)."""
    row = await database.lock_pool.fetchrow("SELECT query, state FROM pg_stat_activity WHERE pid = $1", pid)
    assert row is not None, f"backend {pid} is gone"
    return row["query"], row["state"]


async def terminate(database: Database, pid: int) -> None:
    """Terminate backend `pid` and wait (up to `WAIT_S`) until it is gone, as a restart would."""
    assert await database.lock_pool.fetchval("SELECT pg_terminate_backend($1, $2)", pid, int(WAIT_S * 1000))


def checkpoint_pool(database: Database) -> AsyncConnectionPool[Any]:
    pool = database.savers[0].conn
    assert isinstance(pool, AsyncConnectionPool)
    return pool


async def test_an_asyncpg_connection_goes_back_to_its_pool_without_a_reset_query(database: Database) -> None:
    """asyncpg's default reset (`RESET ALL` and friends) would be the backend's last query after release."""
    async with database.pool.acquire() as connection:
        pid = connection.get_server_pid()
        await connection.fetchval("SELECT 41 + 1")
    assert await last_query(database, pid) == ("SELECT 41 + 1", "idle")


async def test_a_transaction_left_open_is_still_rolled_back_on_release(database: Database) -> None:
    """The no-op reset keeps asyncpg's own rollback: the next borrower never inherits a transaction."""
    connection = await database.pool.acquire()
    pid = connection.get_server_pid()
    await connection.execute("BEGIN")
    await connection.execute("CREATE TEMP TABLE left_open (x int) ON COMMIT DROP")
    assert (await last_query(database, pid))[1] == "idle in transaction"
    await database.pool.release(connection)
    assert await last_query(database, pid) == ("ROLLBACK", "idle")


async def test_a_checkpoint_connection_at_rest_is_lent_without_a_check_query(database: Database) -> None:
    """psycopg's `check_connection` would send an empty query on every checkout; the bot's check does not."""
    pool = checkpoint_pool(database)
    async with pool.connection() as connection:
        pid = connection.info.backend_pid
        await connection.execute("SELECT 6 * 7")
    async with pool.connection() as connection:
        assert connection.info.backend_pid == pid  # one connection at rest: the same one is lent
        assert await last_query(database, pid) == ("SELECT 6 * 7", "idle")


async def test_a_checkpoint_connection_the_server_closed_at_rest_is_replaced_before_it_is_lent(
    database: Database,
) -> None:
    """The FATAL notice and EOF of a terminated backend make the socket readable: the check runs and fails."""
    pool = checkpoint_pool(database)
    async with pool.connection() as connection:
        pid = connection.info.backend_pid
    await terminate(database, pid)
    async with pool.connection() as connection:
        assert connection.info.backend_pid != pid
        cursor = await connection.execute("SELECT 1")
        assert await cursor.fetchone() == {"?column?": 1}


async def test_an_asyncpg_connection_the_server_closed_at_rest_is_replaced(database: Database) -> None:
    """asyncpg notices the closed socket itself; the no-op reset changes nothing there."""
    async with database.pool.acquire() as connection:
        pid = connection.get_server_pid()
    await terminate(database, pid)
    async with database.pool.acquire() as connection:
        assert connection.get_server_pid() != pid
        assert await connection.fetchval("SELECT 1") == 1
