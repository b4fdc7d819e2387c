"""Session starts spaced out across processes and machines, with PostgreSQL.

A platform may limit how often sessions start per bucket (Discord: one IDENTIFY per
`shard_id % max_concurrency` bucket every 5 seconds; its Gateway docs, "Session start limit").
Inside one process a library can space its own starts, but workers and replicas start theirs
at the same moment. `StartSpacing.take(bucket)` runs short transactions: each takes the
bucket's transaction-level advisory lock (`pg_advisory_xact_lock(<namespace>, hashtext(bucket))`)
and reads the bucket's last start (table `session_starts`, on the database's clock); when
`spacing_s` seconds have passed it records the new start and commits, and the caller starts its
session right away; else it commits and sleeps the rest of the interval with no connection
held, then looks again (another process may have started meanwhile). Many shards waiting
(a reconnect after a gateway outage) thus never take the pool from the rest of the bot.
The time is in a table rather than in how long a lock is held, so a process that dies just
after its start (its lock gone with its connection) still holds the next one off. Being
transaction-scoped, the lock also holds behind a transaction-mode pooler (docs/decisions/0018).
"""

from __future__ import annotations

import asyncio
import logging

import asyncpg

log = logging.getLogger(__name__)

START_LOCK_NAMESPACE = 0x4353_5331  # "CSS1": the first key of the two-key advisory lock form
"""Two-key advisory locks live apart from the one-key (bigint) conversation locks."""


class StartSpacing:
    """One session start per bucket per `spacing_s` seconds, over every process on the database.

    Args:
        pool: an asyncpg pool; a waiting `take` holds none of its connections.
        spacing_s: seconds between two starts of one bucket.
        prefix: names this kind of start in `session_starts` (`discord:` + the bucket).
    """

    def __init__(self, pool: asyncpg.Pool, spacing_s: float, *, prefix: str = "discord:") -> None:
        self._pool = pool
        self._spacing_s = spacing_s
        self._prefix = prefix

    async def take(self, bucket: int) -> None:
        """Wait until `bucket` last started `spacing_s` seconds ago or more, and record a start now.

        Args:
            bucket: a small non-negative integer (Discord: `shard_id % max_concurrency`).

        Raises:
            asyncpg.PostgresError, OSError: the database could not be asked.
        """
        key = f"{self._prefix}{bucket}"
        while True:
            async with self._pool.acquire() as connection, connection.transaction():
                await connection.execute("SELECT pg_advisory_xact_lock($1, hashtext($2))", START_LOCK_NAMESPACE, key)
                wait = await connection.fetchval(
                    "SELECT greatest(0, extract(epoch FROM started_at + make_interval(secs => $2) - clock_timestamp()))"
                    " FROM session_starts WHERE bucket = $1",
                    key,
                    self._spacing_s,
                )
                if not wait:
                    await connection.execute(
                        "INSERT INTO session_starts (bucket, started_at) VALUES ($1, clock_timestamp())"
                        " ON CONFLICT (bucket) DO UPDATE SET started_at = excluded.started_at",
                        key,
                    )
                    return
            # The connection goes back to the pool while this start waits its turn.
            log.info("session start %s waits %.1f s (its last start was too recent)", key, wait)
            await asyncio.sleep(float(wait))
