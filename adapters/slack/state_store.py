"""Bolt's OAuth `state` in PostgreSQL: slack_sdk's `AsyncOAuthStateStore` over our asyncpg pool.

`/slack/install` issues a state (also set as a browser cookie by Bolt); `/slack/oauth_redirect`
consumes it: valid once, and only before it expires (Slack's "Installing with OAuth": the
`state` parameter protects the redirect against forgery). Kept in PostgreSQL so the redirect
may reach any worker or replica, and an install started before a restart still finishes.
"""

from __future__ import annotations

import logging
import secrets
from datetime import timedelta
from typing import Any

import asyncpg
from slack_sdk.oauth.state_store.async_state_store import AsyncOAuthStateStore

log = logging.getLogger(__name__)

DEFAULT_EXPIRATION_S = 600
"""Seconds a state stays valid: slack_sdk's stores use ten minutes too."""


class PostgresOAuthStateStore(AsyncOAuthStateStore):
    """The `slack_oauth_states` table (migrations/0006).

    Args:
        pool: the asyncpg pool.
        expiration_seconds: how long an issued state may be consumed.
    """

    def __init__(self, pool: asyncpg.Pool, *, expiration_seconds: int = DEFAULT_EXPIRATION_S) -> None:
        self._pool = pool
        self.expiration_seconds = expiration_seconds

    @property
    def logger(self) -> logging.Logger:
        """The module's logger (slack_sdk's interface asks for one)."""
        return log

    async def async_issue(self, *args: Any, **kwargs: Any) -> str:
        """A new random state, stored with its expiry; expired states are swept on the way."""
        state = secrets.token_urlsafe(32)
        async with self._pool.acquire() as connection, connection.transaction():
            await connection.execute("DELETE FROM slack_oauth_states WHERE expires_at < now()")
            await connection.execute(
                "INSERT INTO slack_oauth_states (state, expires_at) VALUES ($1, now() + $2)",
                state,
                timedelta(seconds=self.expiration_seconds),
            )
        return state

    async def async_consume(self, state: str) -> bool:
        """Whether `state` was issued here and has not expired; it cannot be consumed twice."""
        valid = await self._pool.fetchval(
            "DELETE FROM slack_oauth_states WHERE state = $1 RETURNING expires_at >= now()", state
        )
        if not valid:
            log.info("refused an OAuth redirect: its state is unknown, used or expired")
        return bool(valid)
