"""Finding work a fault left unfinished, in every conversation, for the upkeep (`bot.upkeep.unfinished_work`).

Three kinds, each with `attempts` and `retry_at` (migration 0004): an accepted message not
handled (`inbox`), a run whose outcome was not delivered (`conversations.running_since`), and
a review claimed for resuming but not resumed (`reviews`). An item is due once `retry_at` has
passed; the upkeep counts an attempt, under the conversation's lock, before it works on it,
so that a crash while it works counts too.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection

import asyncpg


class UpkeepStore:
    """Queries across the inbox, conversations and reviews.

    Args:
        pool: the asyncpg pool.
    """

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def server_started_at(self) -> dt.datetime:
        """When the PostgreSQL server last started (`pg_postmaster_start_time()`).

        A change between two looks means the server restarted or failed over: every connection
        was dropped, and work under way then failed with it.
        """
        started: dt.datetime = await self._pool.fetchval("SELECT pg_postmaster_start_time()")
        return started

    async def due_threads(
        self, *, platforms: Collection[str], max_attempts: int, everything: bool = False, limit: int = 200
    ) -> list[str]:
        """Conversations on `platforms` with unfinished work that is due, at most `limit`.

        Args:
            platforms: `ConversationRef.platform` names: those this process serves. Another
                platform's work is left to the processes that serve it; trying it here would
                fail and count attempts against it (docs/decisions/0031).
            max_attempts: messages and runs attempted this often are given up and not listed.
                A review still resuming is listed whatever its attempts: the attempt after the
                last gives it up (`TurnRunner.give_up_reviews`), and one an older version left
                resuming after its last attempt is given up so, instead of keeping its
                conversation busy for good.
            everything: list unfinished work whether or not it is due (at start, when every
                handler of before is gone; the conversation's lock still guards live ones).
            limit: at most this many conversations.
        """
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
        """Take back the attempt `count_attempt` counted: shutdown cut the work, it did not fail.

        Attempts exist to give up work that fails or crashes the process every time; a turn cut
        by one graceful stop after another (deploys during a long turn) must not be given up
        for it. The work is due at once, for the next process or a live replica.

        Call under the conversation's lock.
        """
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
        """Count an attempt at the conversation's unfinished run and resuming reviews.

        Call under the conversation's lock, right before working on it.

        Args:
            thread_id: the conversation.
            first_retry_s: seconds until the next attempt after a first one, doubled for
                every attempt after that, should this one fail too.
            max_retry_s: the longest such delay.

        Returns:
            The highest attempt count among them now (0 when there was nothing to count).
        """
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
