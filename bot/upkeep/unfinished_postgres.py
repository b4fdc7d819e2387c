"""`PostgresUpkeepStore`: the `UpkeepStore` in PostgreSQL."""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection

import asyncpg


class PostgresUpkeepStore:
    """An `UpkeepStore`: queries across the `inbox`, `conversations` and `reviews` tables.

    Args:
        pool: the asyncpg pool.
    """

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def server_started_at(self) -> dt.datetime:
        """See `UpkeepStore.server_started_at`."""
        started: dt.datetime = await self._pool.fetchval("SELECT pg_postmaster_start_time()")
        return started

    async def due_threads(
        self, *, platforms: Collection[str], max_attempts: int, everything: bool = False, limit: int = 200
    ) -> list[str]:
        """See `UpkeepStore.due_threads`."""
        rows = await self._pool.fetch(
            """
            SELECT thread_id FROM (
                SELECT thread_id FROM inbox
                 WHERE status = 'accepted' AND thread_id IS NOT NULL AND attempts < $1
                   AND ($2 OR retry_at <= now())
                UNION
                SELECT thread_id FROM conversations
                 WHERE running_since IS NOT NULL AND attempts < $1 AND ($2 OR retry_at <= now())
                UNION
                SELECT thread_id FROM reviews
                 WHERE status = 'resuming' AND ($2 OR retry_at <= now())
            ) AS due
            WHERE split_part(thread_id, ':', 1) = ANY($4::text[])
            LIMIT $3
            """,
            max_attempts,
            everything,
            limit,
            list(platforms),
        )
        return [row["thread_id"] for row in rows]

    async def uncount_attempt(self, thread_id: str) -> None:
        """See `UpkeepStore.uncount_attempt`."""
        await self._pool.execute(
            """
            WITH runs AS (
                UPDATE conversations SET attempts = greatest(attempts - 1, 0), retry_at = now()
                WHERE thread_id = $1 AND running_since IS NOT NULL
            )
            UPDATE reviews SET attempts = greatest(attempts - 1, 0), retry_at = now()
            WHERE thread_id = $1 AND status = 'resuming'
            """,
            thread_id,
        )

    async def count_attempt(self, thread_id: str, *, first_retry_s: float, max_retry_s: float) -> int:
        """See `UpkeepStore.count_attempt`."""
        counted = await self._pool.fetchval(
            """
            WITH runs AS (
                UPDATE conversations
                SET attempts = attempts + 1,
                    retry_at = now() + make_interval(secs => least($2 * power(2, attempts), $3))
                WHERE thread_id = $1 AND running_since IS NOT NULL RETURNING attempts
            ), resumes AS (
                UPDATE reviews
                SET attempts = attempts + 1,
                    retry_at = now() + make_interval(secs => least($2 * power(2, attempts), $3))
                WHERE thread_id = $1 AND status = 'resuming' RETURNING attempts
            )
            SELECT max(attempts) FROM (SELECT attempts FROM runs UNION ALL SELECT attempts FROM resumes) AS counted
            """,
            thread_id,
            first_retry_s,
            max_retry_s,
        )
        return int(counted or 0)
