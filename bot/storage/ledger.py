"""The tool-run ledger in PostgreSQL (see `bot.tools.ledger`)."""

from __future__ import annotations

import asyncpg


class PostgresLedger:
    """Claims tool calls in the `tool_runs` table; shared by every replica.

    Args:
        pool: the asyncpg pool.
    """

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def claim(self, *, thread_id: str, tool_call_id: str, tool_name: str) -> bool:
        """True the first time for `(thread_id, tool_call_id)`, False ever after."""
        claimed = await self._pool.fetchval(
            """
            INSERT INTO tool_runs (thread_id, tool_call_id, tool_name) VALUES ($1, $2, $3)
            ON CONFLICT DO NOTHING RETURNING true
            """,
            thread_id,
            tool_call_id,
            tool_name,
        )
        return bool(claimed)
