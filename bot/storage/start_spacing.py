"""Session starts spaced out across processes and machines, with a PostgreSQL advisory lock.

A platform may limit how often sessions start per bucket (Discord: one IDENTIFY per
`shard_id % max_concurrency` bucket every 5 seconds; its Gateway docs, "Session start limit").
Inside one process a library can space its own starts, but replicas and workers start theirs
at the same moment. `StartSpacing.take(bucket)` waits for the bucket's transaction-level
advisory lock (`pg_advisory_xact_lock(<namespace>, bucket)`) and returns while still holding
it; the transaction stays open `spacing_s` seconds longer, so nobody else takes that bucket
before the start has gone out and its interval has passed. Being transaction-scoped, the lock
also holds behind a transaction-mode pooler. When the holder dies, the server ends its
transaction and the next start may come sooner: a platform answers that with a retry, not a
ban (docs/decisions/0018).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import asyncpg

log = logging.getLogger(__name__)

START_LOCK_NAMESPACE = 0x4353_5331  # "CSS1": the first key of the two-key advisory lock form
"""Two-key advisory locks live apart from the one-key (bigint) conversation locks."""


class StartSpacing:
    """One session start per bucket per `spacing_s` seconds, over every process on the database.

    Args:
        pool: an asyncpg pool; each taken bucket occupies one connection for `spacing_s`.
        spacing_s: seconds, counted from `take` returning, before the bucket is free again.
    """

    def __init__(self, pool: asyncpg.Pool, spacing_s: float) -> None:
        self._pool = pool
        self._spacing_s = spacing_s
        self._holders: set[asyncio.Task[None]] = set()

    async def take(self, bucket: int) -> None:
        """Wait until `bucket` is free, then hold it for `spacing_s` seconds from now.

        Returns as soon as the lock is held: the caller starts its session right away.

        Args:
            bucket: a small non-negative integer (Discord: `shard_id % max_concurrency`).

        Raises:
            asyncpg.PostgresError, OSError: the database could not be asked.
        """
        taken = asyncio.get_running_loop().create_future()
        holder = asyncio.create_task(self._hold(bucket, taken), name=f"start slot {bucket}")
        self._holders.add(holder)
        holder.add_done_callback(self._holders.discard)
        try:
            await taken
        except asyncio.CancelledError:
            holder.cancel()  # the caller gave up waiting: do not take the bucket for nobody
            raise

    async def _hold(self, bucket: int, taken: asyncio.Future[None]) -> None:
        try:
            async with self._pool.acquire() as connection, connection.transaction():
                await connection.execute("SELECT pg_advisory_xact_lock($1, $2)", START_LOCK_NAMESPACE, bucket)
                taken.set_result(None)
                await asyncio.sleep(self._spacing_s)
        except BaseException as exc:
            if not taken.done():
                taken.set_exception(exc)
            elif not isinstance(exc, asyncio.CancelledError):
                log.warning("the start slot of bucket %d was released early: %s", bucket, exc)
            if isinstance(exc, asyncio.CancelledError):
                raise

    async def aclose(self) -> None:
        """Release every bucket held now (at shutdown)."""
        for holder in list(self._holders):
            holder.cancel()
        for holder in list(self._holders):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await holder
