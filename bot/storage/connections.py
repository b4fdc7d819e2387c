"""What a pooled connection needs when it goes back to its pool and before it is lent again.

Both drivers' defaults cost a round trip to the server on every use of a pooled connection:
asyncpg sends `SELECT pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *; RESET ALL;` on every
release, and psycopg's `AsyncConnectionPool.check_connection` sends an empty query on every
checkout. A text turn used 17 such round trips, about a tenth of its time (docs/decisions/0014).
Both pools take a hook instead (asyncpg's `reset=`, psycopg_pool's `check=`); these are the
bot's, and docs/decisions/0014 says why they are safe.
"""

from __future__ import annotations

import select
from typing import Any

import asyncpg
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool


async def keep_session(connection: asyncpg.Connection) -> None:
    """The asyncpg pools' `reset=`: nothing to undo beyond what asyncpg itself does first.

    Before calling this, asyncpg rolls back a transaction left open and drops LISTEN callbacks
    (`Connection._reset`). The bot leaves no other session state on a pooled connection: its
    advisory locks and settings are transaction-level (`pg_advisory_xact_lock`,
    `set_config(..., true)`), and it opens no cursors WITH HOLD and issues no LISTEN. A change
    that adds session state must undo it itself, or go back to asyncpg's `Connection.reset`.
    """
    del connection


def _readable(fileno: int) -> bool:
    """Whether data (or EOF, or an error) waits on the socket; never blocks."""
    poller = select.poll()
    poller.register(fileno, select.POLLIN | select.POLLERR | select.POLLHUP)
    return bool(poller.poll(0))


async def check_if_told(connection: AsyncConnection[Any]) -> None:
    """The psycopg pool's `check=`: ask the server only when the connection may have been closed.

    A connection at rest in the pool has read every answer to its last query, so nothing
    arrives on its socket until the server (or a pooler, or the kernel) says something: a
    FATAL notice and EOF when PostgreSQL restarts or terminates the backend, EOF at an idle
    timeout, an error when the peer is gone. Only then is the empty query of
    `AsyncConnectionPool.check_connection` sent; it raises, and the pool replaces the
    connection before lending it. A connection that is already closed or broken is checked too.

    Raises:
        Exception: psycopg's, when the connection is unusable (the pool then discards it).
    """
    if connection.closed or connection.broken or _readable(connection.pgconn.socket):
        await AsyncConnectionPool.check_connection(connection)
