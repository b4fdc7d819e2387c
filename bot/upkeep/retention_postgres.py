"""`PostgresRetentionStore`: the `RetentionStore` in PostgreSQL (see `bot.upkeep.retention_store`)."""

from __future__ import annotations

import logging

import asyncpg
import psycopg
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

log = logging.getLogger(__name__)

_IDLE = """
    c.last_active_at < now() - make_interval(days => $1)
    AND c.running_since IS NULL
    AND NOT EXISTS (SELECT 1 FROM approvals a WHERE a.thread_id = c.thread_id AND a.status = 'pending')
    AND NOT EXISTS (SELECT 1 FROM reviews r WHERE r.thread_id = c.thread_id AND r.status <> 'done')
    AND NOT EXISTS (SELECT 1 FROM inbox i WHERE i.thread_id = c.thread_id AND i.status = 'accepted')
    AND NOT EXISTS (
        SELECT 1 FROM checkpoint_writes w
        WHERE w.thread_id = c.thread_id AND w.checkpoint_ns = '' AND w.channel = '__interrupt__'
          AND w.checkpoint_id = (
              SELECT max(k.checkpoint_id) FROM checkpoints k
              WHERE k.thread_id = c.thread_id AND k.checkpoint_ns = ''
          )
    )
"""
"""A conversation that retention may delete (`$1`: idle days): nobody wrote or decided there
for that long, and nothing waits there: no pending card, no review being resumed, no run whose
outcome is due, no accepted message, and no pause (LangGraph's `__interrupt__` write) on its
newest top-level checkpoint, which covers a pause whose review a crash kept from being stored.
A subagent's pause is also written at the top level, as its delegation's interrupt."""

_DELETE_CONVERSATION = (
    # LangGraph's tables, every namespace (the subagents' too); the same statements as
    # `AsyncPostgresSaver.adelete_thread`, here in our transaction.
    "DELETE FROM checkpoint_writes WHERE thread_id = $1",
    "DELETE FROM checkpoint_blobs WHERE thread_id = $1",
    "DELETE FROM checkpoints WHERE thread_id = $1",
    # Ours, children first (foreign keys).
    "DELETE FROM approval_votes WHERE approval_id IN (SELECT id FROM approvals WHERE thread_id = $1)",
    "DELETE FROM approval_cards WHERE approval_id IN (SELECT id FROM approvals WHERE thread_id = $1)",
    "DELETE FROM trust_grants WHERE thread_id = $1",
    "DELETE FROM approvals WHERE thread_id = $1",
    "DELETE FROM reviews WHERE thread_id = $1",
    "DELETE FROM tool_runs WHERE thread_id = $1",
    "DELETE FROM tool_run_rounds WHERE thread_id = $1",
    "DELETE FROM mcp_questions WHERE thread_id = $1",
    "DELETE FROM conversations WHERE thread_id = $1",
)
"""Everything stored about one conversation except its audit rows. Inbox entries are not
listed: each finished one is deleted a day after it arrived (`Inbox.forget_older_than`), and an
accepted one keeps the conversation."""


class PostgresRetentionStore:
    """A `RetentionStore`: pruning and retention queries on our tables and LangGraph's.

    Args:
        pool: the asyncpg pool (our tables, and LangGraph's for reading and deleting whole
            conversations).
        saver: a checkpointer used only for pruning: one instance runs one call at a time, so
            sharing a graph's would hold up turns while a long conversation is pruned.
    """

    def __init__(self, pool: asyncpg.Pool, saver: AsyncPostgresSaver) -> None:
        self._pool = pool
        self._saver = saver

    async def due_for_pruning(self, *, limit: int) -> list[str]:
        """See `RetentionStore.due_for_pruning`."""
        rows = await self._pool.fetch(
            """
            SELECT c.thread_id FROM conversations c
            WHERE c.prune_due AND c.running_since IS NULL
              AND NOT EXISTS (SELECT 1 FROM reviews r WHERE r.thread_id = c.thread_id AND r.status = 'resuming')
            LIMIT $1
            """,
            limit,
        )
        return [row["thread_id"] for row in rows]

    async def prune(self, thread_id: str) -> bool:
        """See `RetentionStore.prune`."""
        at_rest = await self._pool.fetchval(
            """
            SELECT c.prune_due AND c.running_since IS NULL
               AND NOT EXISTS (SELECT 1 FROM reviews r WHERE r.thread_id = c.thread_id AND r.status = 'resuming')
            FROM conversations c WHERE c.thread_id = $1
            """,
            thread_id,
        )
        if not at_rest:
            return False
        try:
            await self._saver.aprune([thread_id], strategy="keep_latest")
        except NotImplementedError as exc:
            # A graph using LangGraph's DeltaChannel rebuilds values from older checkpoints;
            # keep_latest refuses such a thread, and so do we (no naive prune of a delta channel).
            log.warning("checkpoints not pruned: %s (thread_id=%s)", exc, thread_id)
        except (psycopg.errors.SerializationFailure, psycopg.errors.DeadlockDetected) as exc:
            log.info("pruning met a concurrent change; tried again later (thread_id=%s): %s", thread_id, exc)
            return False
        await self._pool.execute(
            "UPDATE conversations SET prune_due = false, runs_since_prune = 0 WHERE thread_id = $1", thread_id
        )
        return True

    async def expire_idle_cards(self, *, idle_days: int, limit: int) -> list[str]:
        """See `RetentionStore.expire_idle_cards`."""
        rows = await self._pool.fetch(
            """
            UPDATE approvals SET expires_at = now()
            WHERE id IN (
                SELECT a.id FROM approvals a JOIN conversations c ON c.thread_id = a.thread_id
                WHERE a.status = 'pending' AND (a.expires_at IS NULL OR a.expires_at > now())
                  AND c.last_active_at < now() - make_interval(days => $1)
                ORDER BY a.created_at LIMIT $2
            )
            RETURNING id
            """,
            idle_days,
            limit,
        )
        return [row["id"] for row in rows]

    async def idle_conversations(self, *, idle_days: int, limit: int) -> list[str]:
        """See `RetentionStore.idle_conversations`."""
        rows = await self._pool.fetch(
            f"SELECT c.thread_id FROM conversations c WHERE {_IDLE} ORDER BY c.last_active_at LIMIT $2",  # noqa: S608 - a constant
            idle_days,
            limit,
        )
        return [row["thread_id"] for row in rows]

    async def delete_if_idle(self, thread_id: str, *, idle_days: int) -> bool:
        """See `RetentionStore.delete_if_idle`."""
        async with self._pool.acquire() as connection, connection.transaction():
            idle = await connection.fetchval(
                f"SELECT true FROM conversations c WHERE c.thread_id = $2 AND {_IDLE} FOR UPDATE OF c",  # noqa: S608 - a constant
                idle_days,
                thread_id,
            )
            if not idle:
                return False
            for statement in _DELETE_CONVERSATION:
                await connection.execute(statement, thread_id)
        return True

    async def forget_audit_older_than(self, *, days: int, limit: int) -> int:
        """See `RetentionStore.forget_audit_older_than`."""
        async with self._pool.acquire() as connection, connection.transaction():
            # The append-only trigger lets this transaction (only) delete (migration 0005).
            await connection.execute("SELECT set_config('countersign.audit_retention', 'on', true)")
            result: str = await connection.execute(
                """
                DELETE FROM audit_log WHERE id IN (
                    SELECT id FROM audit_log WHERE at < now() - make_interval(days => $1) ORDER BY at LIMIT $2
                )
                """,
                days,
                limit,
            )
        return int(result.split()[-1])
