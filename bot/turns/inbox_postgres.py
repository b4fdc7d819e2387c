"""`PostgresInbox`: the `Inbox` in PostgreSQL (the `inbox` table)."""

from __future__ import annotations

import asyncpg

from bot.base.conversation import IncomingMessage
from bot.turns.inbox import FIRST_RETRY_S, Begun, GivenUp, InboxEntry, message_from_json, message_to_json


class PostgresInbox:
    """An `Inbox` on the `inbox` table (`give_up` and `take_back` also mark the run in `conversations`).

    Args:
        pool: the asyncpg pool (jsonb as Python values).
    """

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def accept(self, key: str, message: IncomingMessage) -> str | None:
        """See `Inbox.accept`."""
        row = await self._pool.fetchrow(
            """
            WITH claimed AS (
                INSERT INTO inbox (event_key, thread_id, message, status, retry_at)
                VALUES ($1, $2, $3, 'accepted', now() + make_interval(secs => $4))
                ON CONFLICT (event_key) DO NOTHING
                RETURNING true AS new
            )
            SELECT (SELECT new FROM claimed) AS new, (SELECT status FROM inbox WHERE event_key = $1) AS status
            """,
            key,
            message.conversation.thread_id,
            message_to_json(message),
            FIRST_RETRY_S,
        )
        if row is None or row["new"]:
            return None
        # NULL: the other claim is not committed yet, so its handler is still at work.
        return str(row["status"] or "accepted")

    async def begin(self, key: str, *, first_retry_s: float, max_retry_s: float) -> Begun | None:
        """See `Inbox.begin`."""
        row = await self._pool.fetchrow(
            """
            UPDATE inbox SET attempts = attempts + 1,
                retry_at = now() + make_interval(secs => least($2 * power(2, attempts), $3))
            WHERE event_key = $1 AND status = 'accepted'
            RETURNING attempts, EXISTS (
                SELECT 1 FROM inbox o
                WHERE o.thread_id = inbox.thread_id AND o.status = 'accepted' AND o.message IS NOT NULL
                  AND (o.received_at, o.event_key) < (inbox.received_at, inbox.event_key)
            ) AS behind, extract(epoch FROM now() - received_at)::float8 AS waited_s
            """,
            key,
            first_retry_s,
            max_retry_s,
        )
        if row is None:
            return None
        return Begun(attempts=int(row["attempts"]), behind=bool(row["behind"]), waited_s=float(row["waited_s"]))

    async def uncount(self, key: str) -> None:
        """See `Inbox.uncount`."""
        await self._pool.execute(
            "UPDATE inbox SET attempts = greatest(attempts - 1, 1), retry_at = now() "
            "WHERE event_key = $1 AND status = 'accepted'",
            key,
        )

    async def handled(self, key: str) -> None:
        """See `Inbox.handled`."""
        await self._pool.execute(
            "UPDATE inbox SET status = 'handled' WHERE event_key = $1 AND status = 'accepted'", key
        )

    async def give_up(self, key: str) -> GivenUp | None:
        """See `Inbox.give_up`."""
        async with self._pool.acquire() as connection, connection.transaction():
            thread_id = await connection.fetchval(
                "UPDATE inbox SET status = 'abandoned' WHERE event_key = $1 AND status = 'accepted' "
                "RETURNING thread_id",
                key,
            )
            if thread_id is None:
                return None
            run = await connection.fetchval(
                """
                UPDATE conversations SET run_given_up = true
                WHERE thread_id = $1 AND turn_message = $2 AND running_since IS NOT NULL AND NOT run_given_up
                RETURNING true
                """,
                thread_id,
                key,
            )
        return GivenUp(key=key, run=bool(run))

    async def take_back(self, given_up: GivenUp) -> None:
        """See `Inbox.take_back`."""
        async with self._pool.acquire() as connection, connection.transaction():
            thread_id = await connection.fetchval(
                "UPDATE inbox SET status = 'accepted', retry_at = now() WHERE event_key = $1 AND status = 'abandoned' "
                "RETURNING thread_id",
                given_up.key,
            )
            if thread_id is not None and given_up.run:
                await connection.execute(
                    "UPDATE conversations SET run_given_up = false WHERE thread_id = $1 AND turn_message = $2",
                    thread_id,
                    given_up.key,
                )

    async def unhandled(self, thread_id: str) -> list[InboxEntry]:
        """See `Inbox.unhandled`."""
        rows = await self._pool.fetch(
            """
            SELECT event_key, message, extract(epoch FROM now() - received_at)::float8 AS waited_s FROM inbox
            WHERE thread_id = $1 AND status = 'accepted' AND message IS NOT NULL
            ORDER BY received_at, event_key
            """,
            thread_id,
        )
        return [
            InboxEntry(key=row["event_key"], message=message_from_json(row["message"]), waited_s=float(row["waited_s"]))
            for row in rows
        ]

    async def forget_older_than(self, hours: float) -> int:
        """See `Inbox.forget_older_than`."""
        result: str = await self._pool.execute(
            "DELETE FROM inbox WHERE received_at < now() - make_interval(secs => $1) AND status <> 'accepted'",
            hours * 3600,
        )
        return int(result.split()[-1])
