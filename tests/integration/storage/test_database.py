"""Opening the database: embedded start, migrations, readable failures."""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

import asyncpg
import pytest
from pydantic import ValidationError

from bot.base.errors import (
    ConfigurationError,
    DatabaseUnavailableError,
    DatabaseUnreachableError,
    MigrationLockedError,
    UnreachableError,
)
from bot.settings import DatabaseSettings
from bot.storage import migrate as migrations
from bot.storage.database import check_reachable, migrate, open_database
from bot.storage.urls import redact, with_database
from countersign.starting import outage_reason


async def test_open_database_creates_our_tables_and_checkpoint_tables(db_url: str) -> None:
    """A migrated database has our tables and LangGraph's checkpoint tables."""
    async with open_database(DatabaseSettings(url=db_url)) as db:
        tables = {
            r["tablename"] for r in await db.pool.fetch("SELECT tablename FROM pg_tables WHERE schemaname='public'")
        }
    assert {
        "conversations",
        "reviews",
        "approvals",
        "audit_log",
        "inbox",
        "tool_runs",
    } <= tables
    assert {"checkpoints", "checkpoint_writes", "checkpoint_blobs"} <= tables


async def test_unreachable_server_gives_one_readable_line() -> None:
    """A URL nobody listens on fails with the redacted target and no password."""
    settings = DatabaseSettings(url="postgresql://bob:hunter2@127.0.0.1:1/db", connect_timeout_s=2)
    with pytest.raises(DatabaseUnavailableError) as caught:
        async with open_database(settings):
            pass
    message = str(caught.value)
    assert message.startswith("cannot reach PostgreSQL at postgresql://bob:***@127.0.0.1:1/db: ")
    assert "hunter2" not in message
    assert "\n" not in message


async def test_nobody_listening_is_an_outage_and_a_missing_database_a_refusal(pg_server) -> None:
    """A port nobody listens on is tried again later (an outage); a database the live server lacks is not."""
    with pytest.raises(DatabaseUnreachableError) as unreachable:
        await check_reachable("postgresql://bob:hunter2@127.0.0.1:1/db", 2)
    assert isinstance(unreachable.value, UnreachableError)
    with pytest.raises(DatabaseUnavailableError) as refused:
        await check_reachable(with_database(pg_server.admin_url, "no_such_database"), 2)
    assert not isinstance(refused.value, UnreachableError)
    assert 'database "no_such_database" does not exist' in str(refused.value)


async def test_wrong_scheme_is_refused() -> None:
    """A URL that is not PostgreSQL's is a setting error, refused before any connection is tried."""
    with pytest.raises(ValidationError, match=r"DATABASE_URL must start with postgresql://"):
        DatabaseSettings(url="mysql://x@y/z")


async def test_audit_log_is_append_only(database) -> None:
    """UPDATE and DELETE on the audit log are refused by the database itself."""
    await database.pool.execute(
        "INSERT INTO audit_log (kind, workspace_id, outcome) VALUES ('decision', 'T1', 'approved')"
    )
    with pytest.raises(asyncpg.RaiseError, match="append-only"):
        await database.pool.execute("UPDATE audit_log SET outcome = 'rejected'")
    with pytest.raises(asyncpg.RaiseError, match="append-only"):
        await database.pool.execute("DELETE FROM audit_log")


async def test_a_database_migrated_by_a_newer_version_is_refused(db_url: str) -> None:
    """A migration this version does not know (a downgrade) stops the start with one line naming it."""
    connection = await asyncpg.connect(db_url)
    try:
        await connection.execute(
            "INSERT INTO _yoyo_migration (migration_hash, migration_id, applied_at_utc) "
            "VALUES ('f' || md5('future'), '0099.from-the-future', now())"
        )
    finally:
        await connection.close()
    with pytest.raises(ConfigurationError) as info:
        await migrate(db_url)
    assert str(info.value) == (
        "the database was migrated by a newer Countersign (migrations 0099.from-the-future); "
        "run that version or a newer one, or restore a backup from before it"
    )


@pytest.mark.parametrize("prepared", [True, False])
async def test_prepared_statements_can_be_turned_off_for_a_transaction_mode_pooler(db_url: str, prepared: bool) -> None:
    """DATABASE_PREPARED_STATEMENTS=false: neither pool leaves a prepared statement on a server connection."""
    settings = DatabaseSettings(url=db_url, pool_max_size=2, prepared_statements=prepared)
    async with open_database(settings, run_migrations=False) as db:
        async with db.pool.acquire() as connection:
            await connection.fetchval("SELECT count(*) FROM conversations WHERE thread_id = $1", "x")
            ours = await connection.fetchval("SELECT count(*) FROM pg_prepared_statements")
        saver = db.savers[0]
        assert saver.conn is not None
        async with saver.conn.connection() as conn:  # the checkpointer's psycopg pool
            await conn.execute("SELECT count(*) FROM checkpoints WHERE thread_id = %s", ("x",))
            row = await (await conn.execute("SELECT count(*) AS n FROM pg_prepared_statements")).fetchone()
    assert (ours > 0) is prepared
    assert (row["n"] > 0) is prepared


async def test_a_read_only_server_at_start_is_an_outage_said_at_once(db_url: str) -> None:
    """A standby during a failover answers every write "read-only" (25006): the start is tried again, named so, without waiting for the migration lock."""
    name = urlsplit(db_url).path.lstrip("/")
    connection = await asyncpg.connect(db_url)
    try:
        # What a hot standby is to every session (PostgreSQL: read_only_sql_transaction).
        await connection.execute(f'ALTER DATABASE "{name}" SET default_transaction_read_only = on')
    finally:
        await connection.close()
    started = asyncio.get_running_loop().time()
    with pytest.raises(DatabaseUnreachableError) as caught:
        async with open_database(DatabaseSettings(url=db_url, pool_max_size=2)):
            pass
    assert asyncio.get_running_loop().time() - started < migrations.LOCK_WAIT_S
    assert outage_reason(caught.value) == (
        f"cannot reach PostgreSQL at {redact(db_url)}: the server is read-only (a standby, as during a failover)"
    )


async def hold_the_migration_lock(db_url: str) -> asyncpg.Connection:
    """Another replica's migrations under way: its row in `yoyo_lock` (the caller closes the connection)."""
    holder = await asyncpg.connect(db_url)
    await holder.execute("INSERT INTO yoyo_lock (locked, ctime, pid) VALUES (1, '2030-01-02 03:04:05', 4242)")
    return holder


async def test_a_migration_lock_held_elsewhere_is_waited_for_as_an_outage(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another replica migrates longer than an attempt waits: the attempt fails as an outage naming the lock (tried again), and goes through once it is released."""
    monkeypatch.setattr(migrations, "LOCK_WAIT_S", 0.5)
    holder = await hold_the_migration_lock(db_url)
    try:
        with pytest.raises(MigrationLockedError) as caught:
            await migrate(db_url)
        assert outage_reason(caught.value) == (
            f"another process holds the migration lock of PostgreSQL at {redact(db_url)} (since 2030-01-02 03:04:05 UTC): "
            "its migrations are running, or it was killed while they ran (then delete the row of table yoyo_lock)"
        )

        await holder.execute("DELETE FROM yoyo_lock WHERE pid = 4242")  # its migrations ended
        assert await migrate(db_url) == []  # the next attempt: up to date
    finally:
        await holder.close()


async def test_a_migration_lock_that_cannot_be_written_is_refused_with_the_servers_reason(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lock row cannot be written for a reason of the server's own (here a trigger; a missing grant alike): that reason, not "locked"."""
    monkeypatch.setattr(migrations, "LOCK_WAIT_S", 0.5)
    connection = await asyncpg.connect(db_url)
    try:
        await connection.execute(
            """
            CREATE FUNCTION refuse_lock() RETURNS trigger LANGUAGE plpgsql AS
              $$ BEGIN RAISE EXCEPTION 'no migrations from this role'; END $$;
            CREATE TRIGGER refuse_lock BEFORE INSERT ON yoyo_lock FOR EACH ROW EXECUTE FUNCTION refuse_lock();
            """
        )
    finally:
        await connection.close()
    with pytest.raises(DatabaseUnavailableError) as caught:
        await migrate(db_url)
    assert outage_reason(caught.value) is None
    assert str(caught.value) == (
        f"cannot reach PostgreSQL at {redact(db_url)}: cannot take the migration lock (table yoyo_lock): "
        "no migrations from this role"
    )
