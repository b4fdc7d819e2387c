"""Schema migrations: versioned SQL in `migrations/`, applied by yoyo-migrations.

yoyo records applied migrations in its own table and takes a lock while applying, so two
replicas starting at once do not apply a migration twice.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from bot.errors import ConfigurationError
from bot.storage.urls import for_yoyo

log = logging.getLogger(__name__)


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
    """
    return await asyncio.to_thread(_apply_blocking, url)


def _apply_blocking(url: str) -> list[str]:
    from yoyo import get_backend, read_migrations

    backend = get_backend(for_yoyo(url))
    try:
        migrations = read_migrations(str(migrations_dir()))
        with backend.lock():
            _refuse_a_newer_schema(backend, {m.hash for m in migrations})
            pending = backend.to_apply(migrations)
            backend.apply_migrations(pending)
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
