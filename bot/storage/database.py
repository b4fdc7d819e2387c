"""Opening PostgreSQL: embedded or external, migrated, with the pools the bot uses.

Two pools on one server: asyncpg for our tables (fast, typed), psycopg for LangGraph's
`AsyncPostgresSaver` (which requires psycopg 3). Several saver instances share the psycopg
pool, because one instance serialises all its calls behind a single lock (PERFORMANCE.md).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import asyncpg
import psycopg
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from bot.base.errors import DatabaseUnavailableError, DatabaseUnreachableError
from bot.settings import DatabaseSettings
from bot.storage.connections import check_if_told, keep_session
from bot.storage.embedded import DATABASE_NAME, EmbeddedPostgres
from bot.storage.migrate import apply_migrations
from bot.storage.outages import is_outage
from bot.storage.urls import normalise, redact, with_database

log = logging.getLogger(__name__)

SAVER_INSTANCES = 4
"""Saver instances over the one psycopg pool (see the module docstring)."""


@dataclass(slots=True)
class Database:
    """What `open_database` yields.

    Attributes:
        url: the `postgresql://` URL in use (contains the password; never log it, use
            `bot.storage.urls.redact`).
        pool: asyncpg pool for Countersign's tables; json and jsonb columns map to Python values.
        lock_pool: asyncpg pool whose connections only hold conversation advisory locks. It is
            separate so that lock holders, which also query, can never take every connection
            of `pool` and wait on each other forever; its size caps concurrent turns.
        savers: LangGraph checkpointers sharing one psycopg pool, set up.
        pruning_saver: one more checkpointer on that pool, used only to prune old checkpoints
            (`bot.upkeep.retention_postgres`): an instance runs one call at a time, so a long
            prune on a graph's saver would hold up that graph's turns.
    """

    url: str
    pool: asyncpg.Pool
    lock_pool: asyncpg.Pool
    savers: list[AsyncPostgresSaver]
    pruning_saver: AsyncPostgresSaver


async def resolve_url(settings: DatabaseSettings, stack: AsyncExitStack) -> str:
    """The URL to use: `DATABASE_URL`, or the embedded server's (started, stopped on exit).

    Raises:
        DatabaseUnreachableError: the server cannot be reached now (`check_reachable`).
        DatabaseUnavailableError: the URL is malformed, the server refused us, or the embedded
            server could not be started.
    """
    if settings.url is not None:
        raw = settings.url.get_secret_value()
        try:
            url = normalise(raw)
        except ValueError as exc:
            raise DatabaseUnavailableError("DATABASE_URL", str(exc)) from None
        await check_reachable(url, settings.connect_timeout_s)
        return url
    embedded = EmbeddedPostgres(settings.data_dir)
    admin_url = await embedded.start()
    stack.push_async_callback(embedded.stop)
    await check_reachable(admin_url, settings.connect_timeout_s)
    await ensure_database(admin_url, DATABASE_NAME)
    return with_database(admin_url, DATABASE_NAME)


async def check_reachable(url: str, timeout_s: float) -> None:
    """Connect once to fail early with one readable line instead of a traceback.

    Raises:
        DatabaseUnreachableError: the server cannot be reached now (`is_outage`).
        DatabaseUnavailableError: it refused us (a wrong password, a missing database) or the
            URL is wrong; both name the redacted target and the driver's reason.
    """
    try:
        connection = await asyncpg.connect(url, timeout=timeout_s)
    except (TimeoutError, OSError, asyncpg.PostgresError, ValueError) as exc:
        detail = " ".join(str(exc).split()) or type(exc).__name__
        error = DatabaseUnreachableError if is_outage(exc) else DatabaseUnavailableError
        raise error(redact(url), detail) from None
    await connection.close()


async def ensure_database(admin_url: str, name: str) -> None:
    """Create database `name` on the server of `admin_url` unless it exists (also when two start at once)."""
    connection = await asyncpg.connect(admin_url)
    try:
        exists = await connection.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name)
        if not exists:
            try:
                await connection.execute(f'CREATE DATABASE "{name}"')
            except (asyncpg.DuplicateDatabaseError, asyncpg.UniqueViolationError):
                return  # another process starting on the same data directory created it first
            log.info("created database %s", name)
    finally:
        await connection.close()


async def migrate(url: str) -> list[str]:
    """Apply our migrations and LangGraph's checkpoint setup; return our applied ids.

    Raises:
        DatabaseUnreachableError: the server is read-only (a standby, as during a failover).
        MigrationLockedError: another process held the migration lock too long (an outage too).
        DatabaseUnavailableError, ConfigurationError: see `bot.storage.migrate.apply_migrations`.
        Exception: the driver's, when the connection fails or drops (`is_outage` tells).
    """
    applied = await apply_migrations(url)
    async with await _psycopg_connect(url) as connection:
        await AsyncPostgresSaver(connection).setup()
    return applied


async def _psycopg_connect(url: str) -> Any:

    return await psycopg.AsyncConnection.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row)


async def _init_connection(connection: asyncpg.Connection) -> None:
    for type_name in ("json", "jsonb"):
        await connection.set_type_codec(type_name, encoder=json.dumps, decoder=json.loads, schema="pg_catalog")


@asynccontextmanager
async def open_database(settings: DatabaseSettings, *, run_migrations: bool = True) -> AsyncIterator[Database]:
    """Open the database for the bot's lifetime.

    Args:
        settings: where the database is.
        run_migrations: apply migrations and the checkpoint setup first (on every start, so a
            fresh machine needs no separate step; both are idempotent).

    Raises:
        DatabaseUnreachableError: the server cannot be reached now, or is read-only (`migrate`).
        MigrationLockedError: another process's migrations held their lock too long (`migrate`).
        DatabaseUnavailableError: it refused us or the URL is wrong (`resolve_url`). A
            connection lost later in the opening raises the driver's error (`is_outage` tells).
    """
    async with AsyncExitStack() as stack:
        url = await resolve_url(settings, stack)
        if run_migrations:
            await migrate(url)
        # Behind a transaction-mode pooler, asyncpg must not cache prepared statements.
        cache = 100 if settings.prepared_statements else 0  # 100: asyncpg's default
        pool = await asyncpg.create_pool(
            url,
            min_size=1,
            max_size=settings.pool_max_size,
            init=_init_connection,
            reset=keep_session,
            statement_cache_size=cache,
        )
        stack.push_async_callback(pool.close)
        lock_pool = await asyncpg.create_pool(
            url, min_size=1, max_size=settings.pool_max_size, reset=keep_session, statement_cache_size=cache
        )
        stack.push_async_callback(lock_pool.close)
        checkpoint_pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            url,
            min_size=1,
            max_size=settings.pool_max_size,
            # psycopg: 0 prepares every statement at once (LangGraph's advice), None never.
            kwargs={
                "autocommit": True,
                "prepare_threshold": 0 if settings.prepared_statements else None,
                "row_factory": dict_row,
            },
            # A connection the server closed while it sat in the pool (PostgreSQL restarted,
            # an idle timeout) is replaced before it is handed out, not failed on.
            check=check_if_told,
            open=False,
        )
        await checkpoint_pool.open(wait=True, timeout=settings.connect_timeout_s)
        stack.push_async_callback(checkpoint_pool.close)
        savers = [AsyncPostgresSaver(checkpoint_pool) for _ in range(SAVER_INSTANCES)]
        yield Database(
            url=url, pool=pool, lock_pool=lock_pool, savers=savers, pruning_saver=AsyncPostgresSaver(checkpoint_pool)
        )
