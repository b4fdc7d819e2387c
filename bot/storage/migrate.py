"""Schema migrations: versioned SQL in `migrations/`, applied by yoyo-migrations.

yoyo records applied migrations in its own table and takes a lock while applying (a row in
`yoyo_lock`), so two replicas starting at once do not apply a migration twice. yoyo takes any
database error while inserting that row for a lock held elsewhere, and gives up after
`LOCK_WAIT_S` with its `LockTimeout`; `_apply_blocking` tells the cases apart, so that a start
is tried again when that helps (docs/decisions/0037-outages-probes-and-tokens-at-rest.md): a
read-only server (a standby during a failover) and a lock another process holds are outages, a
lock row that cannot be written for another reason is what the server answers.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from bot.base.errors import ConfigurationError, DatabaseUnavailableError, DatabaseUnreachableError, MigrationLockedError
from bot.storage.outages import is_outage
from bot.storage.urls import for_yoyo, redact

log = logging.getLogger(__name__)

LOCK_WAIT_S = 10.0
"""Seconds one attempt waits for the migration lock another process holds (yoyo's default)."""


def migrations_dir() -> Path:
    """The `migrations/` directory: in the source tree, or packaged inside the wheel.

    Raises:
        FileNotFoundError: when neither exists.
    """
    here = Path(__file__).resolve()
    candidates = (
        here.parents[2] / "migrations",  # source checkout: <repo>/bot/storage/migrate.py
        here.parents[2] / "countersign" / "_migrations",  # installed wheel (force-include)
    )
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"no migrations directory in {', '.join(map(str, candidates))}")


async def apply_migrations(url: str) -> list[str]:
    """Apply every migration not applied yet.

    Args:
        url: a `postgresql://` URL.

    Returns:
        The ids of the migrations applied now (empty when up to date).

    Raises:
        DatabaseUnreachableError: the server is read-only (a standby, as during a failover).
        MigrationLockedError: another process held the migration lock for `LOCK_WAIT_S`.
        DatabaseUnavailableError: the lock could not be taken for another reason the server
            gave (e.g. no right to write `yoyo_lock`).
        ConfigurationError: the database was migrated by a newer Countersign.
        Exception: the driver's, when the connection fails or drops (`bot.storage.outages.is_outage`
            tells an outage).
    """
    return await asyncio.to_thread(_apply_blocking, url)


def _apply_blocking(url: str) -> list[str]:
    from yoyo import get_backend, read_migrations
    from yoyo.exceptions import LockTimeout

    backend = get_backend(for_yoyo(url))
    try:
        if backend.execute("SELECT current_setting('transaction_read_only')").fetchone()[0] == "on":
            # yoyo would spend its lock wait failing to insert the lock row, then call it held.
            raise DatabaseUnreachableError(redact(url), "the server is read-only (a standby, as during a failover)")
        migrations = read_migrations(str(migrations_dir()))
        try:
            with backend.lock(timeout=LOCK_WAIT_S):
                _refuse_a_newer_schema(backend, {m.hash for m in migrations})
                pending = backend.to_apply(migrations)
                backend.apply_migrations(pending)
        except LockTimeout:
            raise _why_not_locked(backend, url) from None
        applied = [m.id for m in pending]
    finally:
        backend.connection.close()
    if len(applied) == 1:
        log.info("applied migration %s", applied[0])
    elif applied:
        # A new database gets every migration: their range, not a line of names that pushes a
        # start-up error after it off the screen.
        log.info("applied %d migrations, %s to %s", len(applied), applied[0], applied[-1])
    return applied


def _why_not_locked(backend: Any, url: str) -> Exception:
    """Why yoyo could not take the migration lock for `LOCK_WAIT_S`: held by another process, or an error.

    A row in `yoyo_lock` is another process's lock: it is released when that process's
    migrations end (a row left by a process killed while migrating stays until it is deleted,
    which the message says). Without a row, the insert failed for a reason of its own, which
    one more insert, rolled back, brings out; one that goes through now means the lock was
    released meanwhile (an outage too: the next attempt takes it).
    """
    row = backend.execute(backend.format_sql("SELECT ctime FROM {0.lock_table_quoted}")).fetchone()
    if row is not None:
        return MigrationLockedError(redact(url), f"{row[0]:%Y-%m-%d %H:%M:%S} UTC" if row[0] else "unknown")
    try:
        with backend.transaction(rollback_on_exit=True):
            backend.execute(
                backend.format_sql("INSERT INTO {0.lock_table_quoted} (locked, ctime, pid) VALUES (1, now(), 0)")
            )
    except backend.DatabaseError as exc:
        reason = getattr(getattr(exc, "diag", None), "message_primary", None) or str(exc)  # psycopg's, or any
        detail = f"cannot take the migration lock (table yoyo_lock): {' '.join(reason.split())}"
        error = DatabaseUnreachableError if is_outage(exc) else DatabaseUnavailableError
        return error(redact(url), detail)
    # Released right after yoyo gave up: the next attempt takes it.
    return DatabaseUnreachableError(redact(url), "the migration lock (table yoyo_lock) was held by another process")


def _refuse_a_newer_schema(backend: Any, known: set[str]) -> None:
    """Stop when the database holds migrations this version does not know.

    An older Countersign on a newer schema would run against tables and checkpoints it does
    not understand (a card of a subagent it cannot resume, say) and could close cards without
    running them; refusing to start is the safe answer to a downgrade.

    Raises:
        ConfigurationError: naming the unknown migrations.
    """
    newer = [h for h in backend.get_applied_migration_hashes() if h not in known]
    if not newer:
        return
    ids = sorted(
        str(row[0])
        for h in newer
        for row in backend.execute(
            backend.format_sql("SELECT migration_id FROM {0.migration_table_quoted} WHERE migration_hash = :h"),
            {"h": h},
        ).fetchall()
    )
    raise ConfigurationError(
        f"the database was migrated by a newer Countersign (migrations {', '.join(ids) or 'unknown'}); "
        "run that version or a newer one, or restore a backup from before it"
    )
