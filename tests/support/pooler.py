"""PgBouncer in transaction mode in front of the test server (Debian's `pgbouncer` package)."""

from __future__ import annotations

import asyncio
import os
import pwd
import shutil
import signal
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import asyncpg

from tests.support.bot_process import free_port


def _pgbouncer() -> str:
    binary = shutil.which("pgbouncer") or shutil.which("/usr/sbin/pgbouncer")
    if binary is None:
        raise FileNotFoundError("pgbouncer is not installed (apt-get install pgbouncer)")
    return binary


def _socket_dir(db_url: str) -> str:
    parts = urlsplit(db_url)
    return parse_qs(parts.query).get("host", [parts.hostname or "127.0.0.1"])[0]


def _run_as(db_url: str) -> list[str]:
    """PgBouncer refuses to run as root: run it as the user owning the server's socket directory."""
    if not (hasattr(os, "geteuid") and os.geteuid() == 0):
        return []
    socket_dir = Path(_socket_dir(db_url))
    owner = pwd.getpwuid(socket_dir.stat().st_uid).pw_name if socket_dir.is_dir() else "postgres"
    return ["-u", "postgres" if owner == "root" else owner]


def _config(db_url: str, port: int) -> tuple[Path, Path]:
    """Write PgBouncer's configuration in a directory its user can read; return (config, log)."""
    parts = urlsplit(db_url)
    socket_dir = _socket_dir(db_url)
    database = parts.path.lstrip("/")
    workdir = Path(tempfile.mkdtemp(prefix="countersign-pgbouncer-"))
    workdir.chmod(0o777)  # PgBouncer runs as another user when the tests run as root
    log = workdir / "pgbouncer.log"
    config = workdir / "pgbouncer.ini"
    config.write_text(
        f"""[databases]
{database} = host={socket_dir} port={parts.port or 5432} dbname={database} user=postgres

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = any
pool_mode = transaction
default_pool_size = 20
max_client_conn = 200
ignore_startup_parameters = extra_float_digits,options
logfile = {log}
pidfile = {workdir / "pgbouncer.pid"}
"""
    )
    config.chmod(0o644)
    return config, log


@asynccontextmanager
async def transaction_pooler(db_url: str) -> AsyncIterator[str]:
    """Run PgBouncer (`pool_mode = transaction`) in front of `db_url`'s server; yield a URL through it.

    Raises:
        FileNotFoundError: when `pgbouncer` is not installed (`.ci/run` installs it).
        RuntimeError: when it does not start (its log is in the message).
    """
    port = free_port()
    config, log = _config(db_url, port)
    failure: BaseException | None = None
    process = await asyncio.create_subprocess_exec(
        _pgbouncer(),
        *_run_as(db_url),
        str(config),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    url = f"postgresql://postgres@127.0.0.1:{port}/{urlsplit(db_url).path.lstrip('/')}"
    try:
        for _ in range(200):
            if process.returncode is not None:
                break
            try:
                connection = await asyncpg.connect(url, statement_cache_size=0)
            except (OSError, asyncpg.PostgresError) as exc:
                failure = exc
                await asyncio.sleep(0.05)
                continue
            await connection.close()
            break
        else:
            written = log.read_text() if log.exists() else ""
            raise RuntimeError(f"pgbouncer did not accept connections ({failure!r}):\n{written}")
        if process.returncode is not None:
            output = (await process.stdout.read()).decode() if process.stdout else ""
            raise RuntimeError(f"pgbouncer exited {process.returncode}: {output}")
        yield url
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGINT)
            await process.wait()
        shutil.rmtree(config.parent, ignore_errors=True)
