"""Counting what a turn asks of PostgreSQL: checkpoint saver calls, asyncpg statements, stored rows.

The counters are installed only around untimed turns (`count_calls`), so the timed series run
the untouched objects. Saver calls are counted on the instances (`AsyncPostgresSaver` has no
`__slots__`); asyncpg statements on the `Connection` class, because `Pool` has `__slots__` and
pool connections forward every call to `Connection`'s class attribute. Nothing else may use
asyncpg in this process while the block runs (the benchmark runs one turn at a time).
"""

from __future__ import annotations

import contextlib
import functools
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg

from bot.storage.database import Database

SAVER_CALLS = ("aget_tuple", "alist", "aput", "aput_writes")
"""The saver methods a graph run calls: one read per invocation, one call per write."""
STATEMENTS = ("execute", "executemany", "fetch", "fetchrow", "fetchval", "fetchmany")
"""asyncpg's query methods; `transaction()` and the pool's reset on release go through `execute`."""
ASYNCPG = "asyncpg statements"


def _counted(method: Callable[..., Awaitable[Any]], key: str, counts: Counter[str]) -> Callable[..., Awaitable[Any]]:
    # functools.wraps keeps the signature visible: LangGraph inspects `aput_writes` for `task_path`.
    @functools.wraps(method)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        counts[key] += 1
        return await method(*args, **kwargs)

    return wrapper


@contextlib.contextmanager
def count_calls(database: Database) -> Iterator[Counter[str]]:
    """Count saver calls (`saver.<method>`) and asyncpg statements while the block runs."""
    counts: Counter[str] = Counter()
    connection_class = asyncpg.connection.Connection
    originals = {name: vars(connection_class)[name] for name in STATEMENTS}
    for saver in database.savers:
        for name in SAVER_CALLS:
            setattr(saver, name, _counted(getattr(saver, name), f"saver.{name}", counts))
    for name, method in originals.items():
        setattr(connection_class, name, _counted(method, ASYNCPG, counts))
    try:
        yield counts
    finally:
        for name, method in originals.items():
            setattr(connection_class, name, method)
        for saver in database.savers:
            for name in SAVER_CALLS:
                delattr(saver, name)


@dataclass(frozen=True, slots=True)
class Stored:
    """What some threads left in LangGraph's checkpoint tables."""

    checkpoints_top: int
    checkpoints_nested: int
    writes: int
    blobs: int
    bytes: int


_STORED_SQL = """
SELECT
    (SELECT count(*) FROM checkpoints WHERE thread_id = ANY($1::text[]) AND checkpoint_ns = '') AS top,
    (SELECT count(*) FROM checkpoints WHERE thread_id = ANY($1::text[]) AND checkpoint_ns <> '') AS nested,
    (SELECT count(*) FROM checkpoint_writes WHERE thread_id = ANY($1::text[])) AS writes,
    (SELECT count(*) FROM checkpoint_blobs WHERE thread_id = ANY($1::text[])) AS blobs,
    (SELECT coalesce(sum(octet_length(checkpoint::text) + octet_length(metadata::text)), 0)
        FROM checkpoints WHERE thread_id = ANY($1::text[]))
    + (SELECT coalesce(sum(octet_length(blob)), 0) FROM checkpoint_blobs WHERE thread_id = ANY($1::text[]))
    + (SELECT coalesce(sum(octet_length(blob)), 0) FROM checkpoint_writes WHERE thread_id = ANY($1::text[]))
    AS bytes
"""


async def stored(pool: asyncpg.Pool, thread_ids: Sequence[str]) -> Stored:
    """Rows and bytes the threads have in `checkpoints`, `checkpoint_writes`, `checkpoint_blobs`."""
    row = await pool.fetchrow(_STORED_SQL, list(thread_ids))
    assert row is not None
    return Stored(
        checkpoints_top=int(row["top"]),
        checkpoints_nested=int(row["nested"]),
        writes=int(row["writes"]),
        blobs=int(row["blobs"]),
        bytes=int(row["bytes"]),
    )
