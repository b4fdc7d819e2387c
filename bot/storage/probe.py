"""A connection of its own for the operator's probes: `/readyz` and `/metrics` never wait for the pools.

Message intake may hold every connection of the bot's pools for a while (a burst of Slack
events, each stored before it is acknowledged); a probe that borrowed from them would wait
behind that burst, time out, and call a busy but healthy database unreachable (a load balancer
would then take a working replica out). `DatabaseProbe` keeps one connection apart instead
(docs/decisions/0037-outages-probes-and-tokens-at-rest.md).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import asyncpg

log = logging.getLogger(__name__)


class DatabaseProbe:
    """One asyncpg connection, outside every pool, for the probes' few queries.

    It is opened on first use and again after any failure (a lost connection, a timeout); the
    queries take turns on it, each bounded by `timeout_s`, the wait for its turn and a new
    connection included, so a probe answers within that time whatever the database does. No
    statement is prepared (it may sit behind a transaction-mode pooler).

    Args:
        url: the `postgresql://` URL the pools use (`Database.url`; never logged).
        timeout_s: seconds one query may take in all.
    """

    def __init__(self, url: str, *, timeout_s: float) -> None:
        self._url = url
        self._timeout_s = timeout_s
        self._connection: asyncpg.Connection | None = None
        self._turn = asyncio.Lock()

    async def answers(self) -> bool:
        """Whether PostgreSQL answers `SELECT 1` within `timeout_s` (a failure is logged)."""
        try:
            await self._fetchval("SELECT 1")
        except Exception as exc:
            log.warning("probe: PostgreSQL did not answer: %s", _one_line(exc))
            return False
        return True

    async def pending_approvals(self) -> int:
        """How many approvals wait for a decision, over every replica (for `/metrics`).

        Raises:
            Exception: asyncpg's, or TimeoutError after `timeout_s`.
        """
        return int(await self._fetchval("SELECT count(*) FROM approvals WHERE status = 'pending'"))

    async def close(self) -> None:
        """Close the connection, if one is open (within `timeout_s`, else it is dropped)."""
        connection, self._connection = self._connection, None
        if connection is None:
            return
        try:
            await connection.close(timeout=self._timeout_s)
        except Exception:
            connection.terminate()

    async def _fetchval(self, query: str) -> Any:
        async with asyncio.timeout(self._timeout_s), self._turn:
            try:
                if self._connection is None or self._connection.is_closed():
                    self._connection = await asyncpg.connect(self._url, statement_cache_size=0)
                return await self._connection.fetchval(query)
            except BaseException:
                # Timed out or failed half way: the connection's state is unknown, start afresh.
                if self._connection is not None:
                    self._connection.terminate()
                    self._connection = None
                raise


def _one_line(exc: BaseException) -> str:
    detail = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__
