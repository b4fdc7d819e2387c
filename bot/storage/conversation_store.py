"""Conversations the bot takes part in, and platform events already handled."""

from __future__ import annotations

import asyncpg

from bot.agents.kind import AgentKind
from bot.conversation import ConversationRef


class ConversationStore:
    """The `conversations` and `processed_events` tables.

    Args:
        pool: the asyncpg pool.
    """

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def touch(self, conversation: ConversationRef) -> None:
        """Record that the conversation is active now (created on first use)."""
        await self._pool.execute(
            """
            INSERT INTO conversations (thread_id, platform, workspace_id, channel_id, thread)
            VALUES ($1, $2, $3, $4, $5)
            ON CONFLICT (thread_id) DO UPDATE SET last_active_at = now()
            """,
            conversation.thread_id,
            conversation.platform,
            conversation.workspace_id,
            conversation.channel_id,
            conversation.thread,
        )

    async def exists(self, thread_id: str) -> bool:
        """Whether the bot has taken part in this conversation (e.g. a Slack thread)."""
        return bool(await self._pool.fetchval("SELECT true FROM conversations WHERE thread_id = $1", thread_id))

    async def agent_of(self, thread_id: str) -> AgentKind | None:
        """The agent whose graph owns the conversation's checkpoint; None before its first turn."""
        value = await self._pool.fetchval("SELECT agent FROM conversations WHERE thread_id = $1", thread_id)
        return AgentKind(value) if value else None

    async def set_agent(self, thread_id: str, agent: AgentKind) -> bool:
        """Hand the conversation to `agent` (callers do this only while it is at rest).

        Returns:
            Whether it changed (False when `agent` already owned it, or there is no such row).
        """
        changed = await self._pool.fetchval(
            "UPDATE conversations SET agent = $2 WHERE thread_id = $1 AND agent IS DISTINCT FROM $2 RETURNING true",
            thread_id,
            agent.value,
        )
        return bool(changed)

    async def first_delivery(self, event_key: str) -> bool:
        """Claim a platform event; False when it was handled before (a retry or a replica).

        Args:
            event_key: platform-unique, e.g. `slack:<event_id>`.
        """
        claimed = await self._pool.fetchval(
            """
            INSERT INTO processed_events (event_key) VALUES ($1)
            ON CONFLICT (event_key) DO NOTHING RETURNING true
            """,
            event_key,
        )
        return bool(claimed)

    async def forget_events_older_than(self, hours: int) -> int:
        """Delete old event keys (platforms retry within minutes); return how many."""
        result: str = await self._pool.execute(
            "DELETE FROM processed_events WHERE received_at < now() - make_interval(hours => $1)",
            hours,
        )
        return int(result.split()[-1])
