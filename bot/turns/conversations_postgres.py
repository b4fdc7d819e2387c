"""`PostgresConversationStore`: the `ConversationStore` in PostgreSQL (the `conversations` table)."""

from __future__ import annotations

import asyncpg

from bot.base.agent_kind import AgentKind
from bot.base.conversation import ConversationRef
from bot.turns.conversations import (
    PRUNE_EVERY_RUNS,
    ConversationRow,
    RunningTurn,
    Stopper,
    TurnStart,
    UnfinishedRun,
)


class PostgresConversationStore:
    """A `ConversationStore` on the `conversations` table (and LangGraph's `checkpoints`, read by `mark_running`).

    Args:
        pool: the asyncpg pool.
        prune_every_runs: a conversation is due for pruning once this many runs started since
            it was last pruned (`PRUNE_EVERY_RUNS`; 1: after every run).

    Raises:
        ValueError: when `prune_every_runs` is below 1.
    """

    def __init__(self, pool: asyncpg.Pool, *, prune_every_runs: int = PRUNE_EVERY_RUNS) -> None:
        if prune_every_runs < 1:
            raise ValueError(f"prune_every_runs must be at least 1, not {prune_every_runs}")
        self._pool = pool
        self._prune_every_runs = prune_every_runs

    async def touch(self, conversation: ConversationRef) -> ConversationRow:
        """See `ConversationStore.touch`."""
        row = await self._pool.fetchrow(
            """
            INSERT INTO conversations (thread_id, platform, workspace_id, channel_id, thread)
            VALUES ($1, $2, $3, $4, $5)
            ON CONFLICT (thread_id) DO UPDATE SET last_active_at = now()
            RETURNING agent, running_since IS NOT NULL AS running, run_from, run_given_up, xmax = 0 AS created, settled,
                EXISTS (SELECT 1 FROM reviews r WHERE r.thread_id = $1 AND r.status <> 'done') AS reviews_open
            """,
            conversation.thread_id,
            conversation.platform,
            conversation.workspace_id,
            conversation.channel_id,
            conversation.thread,
        )
        if row is None:  # INSERT ... ON CONFLICT DO UPDATE always returns the row
            raise RuntimeError("the conversation row was not returned")
        return ConversationRow(
            agent=AgentKind(row["agent"]) if row["agent"] else None,
            unfinished=UnfinishedRun(from_checkpoint=row["run_from"], given_up=row["run_given_up"])
            if row["running"]
            else None,
            created=bool(row["created"]),
            reviews_open=bool(row["reviews_open"]),
            settled=bool(row["settled"]),
        )

    async def prune_soon(self, thread_id: str) -> None:
        """See `ConversationStore.prune_soon`."""
        await self._pool.execute("UPDATE conversations SET prune_due = true WHERE thread_id = $1", thread_id)

    async def exists(self, thread_id: str) -> bool:
        """See `ConversationStore.exists`."""
        return bool(await self._pool.fetchval("SELECT true FROM conversations WHERE thread_id = $1", thread_id))

    async def agent_of(self, thread_id: str) -> AgentKind | None:
        """See `ConversationStore.agent_of`."""
        value = await self._pool.fetchval("SELECT agent FROM conversations WHERE thread_id = $1", thread_id)
        return AgentKind(value) if value else None

    async def mark_running(
        self,
        thread_id: str,
        *,
        retry_in_s: float,
        agent: AgentKind | None = None,
        turn: TurnStart | None = None,
    ) -> RunningTurn:
        """See `ConversationStore.mark_running`."""
        row = await self._pool.fetchrow(
            """
            UPDATE conversations SET
                run_from = CASE WHEN running_since IS NULL THEN (
                    SELECT checkpoint_id FROM checkpoints WHERE thread_id = $1 AND checkpoint_ns = ''
                    ORDER BY checkpoint_id DESC LIMIT 1
                ) ELSE run_from END,
                running_since = coalesce(running_since, now()),
                settled = false,
                prune_due = prune_due OR runs_since_prune + 1 >= $7,
                runs_since_prune = runs_since_prune + 1,
                retry_at = greatest(retry_at, now() + make_interval(secs => $2)),
                agent = coalesce($3, agent),
                turn_id = coalesce($4::text, turn_id),
                turn_requester_id = CASE WHEN $4::text IS NULL THEN turn_requester_id ELSE $5 END,
                turn_requester_name = CASE WHEN $4::text IS NULL THEN turn_requester_name ELSE $6 END,
                stop_requested_at = CASE WHEN $4::text IS NULL THEN stop_requested_at END,
                stopped_by_id = CASE WHEN $4::text IS NULL THEN stopped_by_id END,
                stopped_by_name = CASE WHEN $4::text IS NULL THEN stopped_by_name END,
                turn_message = CASE WHEN $4::text IS NULL THEN turn_message ELSE $8 END,
                run_given_up = false
            WHERE thread_id = $1
            RETURNING turn_id, stop_requested_at IS NOT NULL AS stopped, stopped_by_id, stopped_by_name
            """,
            thread_id,
            retry_in_s,
            agent.value if agent is not None else None,
            turn.turn_id if turn is not None else None,
            turn.requester_id if turn is not None else None,
            turn.requester_name if turn is not None else None,
            self._prune_every_runs,
            turn.message_key if turn is not None else None,
        )
        if row is None:
            return RunningTurn(turn_id=None)
        stopper = (
            Stopper(user_id=row["stopped_by_id"] or "", display_name=row["stopped_by_name"] or "")
            if row["stopped"]
            else None
        )
        return RunningTurn(turn_id=row["turn_id"], stopped_by=stopper)

    async def mark_delivered(self, thread_id: str, *, settled: bool = False) -> None:
        """See `ConversationStore.mark_delivered`."""
        await self._pool.execute(
            "UPDATE conversations SET running_since = NULL, run_from = NULL, attempts = 0, retry_at = NULL, "
            "run_given_up = false, settled = $2 WHERE thread_id = $1 AND running_since IS NOT NULL",
            thread_id,
            settled,
        )

    async def give_up_run(self, thread_id: str) -> None:
        """See `ConversationStore.give_up_run`."""
        await self._pool.execute(
            "UPDATE conversations SET run_given_up = true WHERE thread_id = $1 AND running_since IS NOT NULL",
            thread_id,
        )

    async def take_back_run(self, thread_id: str) -> None:
        """See `ConversationStore.take_back_run`."""
        await self._pool.execute("UPDATE conversations SET run_given_up = false WHERE thread_id = $1", thread_id)

    async def run_message(self, thread_id: str) -> str | None:
        """See `ConversationStore.run_message`."""
        value: str | None = await self._pool.fetchval(
            "SELECT turn_message FROM conversations "
            "WHERE thread_id = $1 AND running_since IS NOT NULL AND NOT run_given_up",
            thread_id,
        )
        return value

    async def mark_settled(self, thread_id: str) -> None:
        """See `ConversationStore.mark_settled`."""
        await self._pool.execute(
            "UPDATE conversations SET settled = true WHERE thread_id = $1 AND running_since IS NULL", thread_id
        )

    async def unfinished_run(self, thread_id: str) -> UnfinishedRun | None:
        """See `ConversationStore.unfinished_run`."""
        row = await self._pool.fetchrow(
            "SELECT run_from, run_given_up FROM conversations WHERE thread_id = $1 AND running_since IS NOT NULL",
            thread_id,
        )
        return UnfinishedRun(from_checkpoint=row["run_from"], given_up=row["run_given_up"]) if row is not None else None
