"""What one turn costs PostgreSQL: server CPU, bytes written, bytes a conversation keeps.

A `PgMeter` watches one database from its own connection (its own backend is left out of
every figure). Around a turn, `mark` before and `since` after give:

- PostgreSQL CPU: user + system time of the server's processes serving the database (its
  backends, the bot's and the checkpointer's pools alike) and of the server's own processes
  (WAL writer, checkpointer, background writer, I/O workers, autovacuum), read from /proc
  through psutil. Linux counts it in clock ticks (10 ms here), so a single turn's figure is
  coarse; the mean over many turns is what to read. None when the server's processes are not
  on this machine (a `TEST_DATABASE_URL` elsewhere).
- Bytes written: the row versions the turn left in the conversation's rows (`xmin` newer than
  the mark), in LangGraph's tables (`checkpoints`, `checkpoint_blobs`, `checkpoint_writes`)
  and in ours (every other table with a `thread_id` column). Each is counted twice: `raw`,
  the values' own length (`octet_length`; jsonb as text), which is what the client serialised
  and sent, and `stored`, `pg_column_size` of each value, as PostgreSQL keeps it (after its
  TOAST compression). Row headers and indexes are not in these; a row updated several times
  in one turn counts once (its last version), and deletions count nothing.
- WAL bytes: `pg_current_wal_insert_lsn` moved by, across the whole server: every write of
  the turn with indexes, row headers, deletions and full-page images after a checkpoint. The
  other benchmark databases are idle meanwhile (one turn at a time).
- Stored bytes: the same `raw` / `stored` sums over all of the conversation's rows.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import asyncpg
import psutil

LANGGRAPH_TABLES = frozenset({"checkpoints", "checkpoint_blobs", "checkpoint_writes"})
"""LangGraph's checkpoint tables (langgraph-checkpoint-postgres); `checkpoint_migrations` has no rows per thread."""

_TEXT_TYPES = frozenset({"bytea", "text", "character varying", "character"})
_JSON_TYPES = frozenset({"json", "jsonb"})

_TABLES_SQL = """
SELECT c.relname AS table_name,
       array_agg(a.attname::text ORDER BY a.attnum) AS columns,
       array_agg(format_type(a.atttypid, NULL) ORDER BY a.attnum) AS types
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
WHERE c.relkind IN ('r', 'p') AND n.nspname = current_schema()
  AND EXISTS (
      SELECT 1 FROM pg_attribute t WHERE t.attrelid = c.oid AND t.attname = 'thread_id' AND NOT t.attisdropped
  )
GROUP BY c.relname
ORDER BY c.relname
"""

_NO_TABLES_SQL = (
    "SELECT 'ours' AS grp, 0::bigint AS raw, 0::bigint AS stored, 0::bigint AS new_raw, 0::bigint AS new_stored"
)

_SERVER_PIDS_SQL = """
SELECT pid FROM pg_stat_activity
WHERE pid <> pg_backend_pid() AND (datname = current_database() OR datname IS NULL)
"""


@dataclass(frozen=True, slots=True)
class Bytes:
    """Bytes of a conversation's rows (or of the row versions one turn wrote).

    Attributes:
        langgraph_raw: LangGraph's tables, values' own length.
        langgraph_stored: LangGraph's tables, as PostgreSQL stores the values.
        ours_raw: our tables (any other table with a `thread_id`), values' own length.
        ours_stored: our tables, as stored.
    """

    langgraph_raw: int = 0
    langgraph_stored: int = 0
    ours_raw: int = 0
    ours_stored: int = 0


@dataclass(frozen=True, slots=True)
class Mark:
    """The server's state before a turn.

    Attributes:
        cpu_s: CPU seconds so far of each server process serving the database, by pid.
        next_xid: the next transaction id, modulo 2**32 (as `xmin` shows it).
        wal_lsn: the WAL insert position.
    """

    cpu_s: dict[int, float]
    next_xid: int
    wal_lsn: str


@dataclass(frozen=True, slots=True)
class Delta:
    """What the server did between a `Mark` and now, for one conversation.

    Attributes:
        cpu_s: CPU seconds of the server's processes (None: not measurable from here).
        wal_bytes: WAL written by the whole server.
        written: bytes of the row versions written into the conversation's rows.
        stored: bytes of all the conversation's rows now.
    """

    cpu_s: float | None
    wal_bytes: int
    written: Bytes
    stored: Bytes


class PgMeter:
    """Measures one database from a connection of its own; open it with `PgMeter.open`.

    Args:
        connection: the meter's connection to the measured database.
        bytes_sql: the statement `_bytes_sql` built for the database's tables.
        local: whether the server's processes can be read from this machine.
    """

    def __init__(self, connection: asyncpg.Connection, bytes_sql: str, *, local: bool) -> None:
        self._connection = connection
        self._bytes_sql = bytes_sql
        self.local = local

    @classmethod
    @contextlib.asynccontextmanager
    async def open(cls, url: str) -> AsyncIterator[PgMeter]:
        """A meter for the database at `url` (its tables are read once, now)."""
        connection = await asyncpg.connect(url)
        try:
            tables = await connection.fetch(_TABLES_SQL)
            own_pid = int(await connection.fetchval("SELECT pg_backend_pid()"))
            yield cls(connection, _bytes_sql(tables), local=_is_local_postgres(own_pid))
        finally:
            await connection.close()

    async def mark(self) -> Mark:
        """The state to measure a turn against; take it right before the turn."""
        row = await self._connection.fetchrow(
            "SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint % 4294967296 AS xid, "
            "pg_current_wal_insert_lsn()::text AS lsn"
        )
        assert row is not None
        return Mark(cpu_s=await self._server_cpu(), next_xid=int(row["xid"]), wal_lsn=str(row["lsn"]))

    async def since(self, mark: Mark, thread_id: str) -> Delta:
        """What the server did since `mark`, and what `thread_id`'s rows hold now."""
        cpu_s = await self.cpu_since(mark)
        wal = await self._connection.fetchval(
            "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::text::pg_lsn)::bigint", mark.wal_lsn
        )
        written, stored = await self._bytes(thread_id, mark.next_xid)
        return Delta(cpu_s=cpu_s, wal_bytes=int(wal), written=written, stored=stored)

    async def cpu_since(self, mark: Mark) -> float | None:
        """CPU seconds of the server's processes since `mark` (None: not measurable from here)."""
        if not self.local:
            return None
        cpu_after = await self._server_cpu()
        # A process gone since the mark is lost (rare: pools keep their connections); a new one
        # counts whole.
        return sum(after - mark.cpu_s.get(pid, 0.0) for pid, after in cpu_after.items())

    async def fetchval(self, sql: str) -> Any:
        """The first value of `sql`'s first row, read on the meter's own connection.

        That connection's backend is left out of every figure, so a benchmark can poll the
        measured database here without being measured.
        """
        return await self._connection.fetchval(sql)

    async def stored(self, thread_id: str) -> Bytes:
        """All of `thread_id`'s rows, in LangGraph's tables and ours."""
        _, stored = await self._bytes(thread_id, 0)
        return stored

    async def _bytes(self, thread_id: str, next_xid: int) -> tuple[Bytes, Bytes]:
        written: dict[str, int] = {}
        stored: dict[str, int] = {}
        for row in await self._connection.fetch(self._bytes_sql, thread_id, next_xid):
            group = str(row["grp"])
            for kind in ("raw", "stored"):
                stored[f"{group}_{kind}"] = stored.get(f"{group}_{kind}", 0) + int(row[kind])
                written[f"{group}_{kind}"] = written.get(f"{group}_{kind}", 0) + int(row[f"new_{kind}"])
        return Bytes(**written), Bytes(**stored)

    async def _server_cpu(self) -> dict[int, float]:
        if not self.local:
            return {}
        cpu: dict[int, float] = {}
        for row in await self._connection.fetch(_SERVER_PIDS_SQL):
            pid = int(row["pid"])
            with contextlib.suppress(psutil.Error):
                times = psutil.Process(pid).cpu_times()
                cpu[pid] = times.user + times.system
        return cpu


def _is_local_postgres(pid: int) -> bool:
    """Whether `pid` (the meter's own backend, as the server reports it) is a PostgreSQL process here."""
    try:
        return "postgres" in psutil.Process(pid).name()
    except psutil.Error:
        return False


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def _bytes_sql(tables: list[asyncpg.Record]) -> str:
    """One statement summing, per table, the bytes of one thread's rows and of those newer than $2.

    $1 is the thread id; $2 a transaction id modulo 2**32: a row version is new when its
    `xmin` is at most 2**31 ahead of it (transaction ids wrap around).
    """
    parts = []
    for table in tables:
        name = str(table["table_name"])
        columns = list(zip(table["columns"], table["types"], strict=True))
        raw = " + ".join(f"coalesce({_raw_size(column, kind)}, 0)" for column, kind in columns)
        stored = " + ".join(f"coalesce(pg_column_size({_quote(column)}), 0)" for column, _ in columns)
        group = "langgraph" if name in LANGGRAPH_TABLES else "ours"
        # Identifiers come from the catalog and are quoted; values are parameters.
        parts.append(
            f"SELECT '{group}' AS grp, coalesce(sum(raw), 0)::bigint AS raw, "  # noqa: S608
            "coalesce(sum(stored), 0)::bigint AS stored, "
            "coalesce(sum(raw) FILTER (WHERE fresh), 0)::bigint AS new_raw, "
            "coalesce(sum(stored) FILTER (WHERE fresh), 0)::bigint AS new_stored "
            f"FROM (SELECT {raw} AS raw, {stored} AS stored, "
            "((xmin::text::bigint - $2::bigint) & 4294967295) < 2147483648 AS fresh "
            f"FROM {_quote(name)} WHERE thread_id = $1) AS {_quote(name + '_rows')}"
        )
    if not parts:
        return _NO_TABLES_SQL
    return "\nUNION ALL\n".join(parts)


def _raw_size(column: str, kind: str) -> str:
    if kind in _TEXT_TYPES:
        return f"octet_length({_quote(column)})"
    if kind in _JSON_TYPES:
        return f"octet_length({_quote(column)}::text)"
    return f"pg_column_size({_quote(column)})"
