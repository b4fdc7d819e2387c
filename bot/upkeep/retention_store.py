"""Bounded storage: pruning old checkpoints, deleting idle conversations and old audit rows.

What is deleted and why it is safe is docs/decisions/0012. In short:

- **Pruning** keeps, per conversation and checkpoint namespace, the newest checkpoint with its
  pending writes and the blobs it references (LangGraph's `aprune(strategy="keep_latest")`),
  and deletes a subagent's namespace once the supervisor checkpoint its call started from is
  gone. That is everything `aget_state`, a resume (also of a paused subagent) and `settle`
  read. Callers hold the conversation's lock, so no run writes meanwhile.
- **Retention** deletes a conversation idle for the set number of days from LangGraph's tables
  and ours in one transaction, never one with a pending card, a review not done, an
  unfinished run, an unhandled message or a pause in its checkpoint; callers hold its lock and
  the conditions are checked again in that transaction.
- **Audit retention** deletes the oldest audit rows in batches; the append-only trigger allows
  a delete only in a transaction that says it is retention's (migration 0005).

`RetentionStore` is the port: `PostgresRetentionStore` (`bot.upkeep.retention_postgres`) in
production, `InMemoryRetentionStore` (`bot.upkeep.retention_memory`) in tests. Both pass one
contract suite (tests/integration/upkeep/test_retention_store_contract.py), except what only
PostgreSQL holds (LangGraph's checkpoints, approvals, reviews), tested on PostgreSQL alone.
"""

from __future__ import annotations

from typing import Protocol


class RetentionStore(Protocol):
    """Pruning and retention (see the module docstring)."""

    async def due_for_pruning(self, *, limit: int) -> list[str]:
        """Conversations that ran since they were last pruned and are at rest or wait for a card.

        A conversation with an unfinished run or a review being resumed is left for later: the
        upkeep or a decision's follow-up is about to work on it.

        Args:
            limit: at most this many thread ids.
        """
        ...

    async def prune(self, thread_id: str) -> bool:
        """Delete the conversation's checkpoints that nothing reads any more; call under its lock.

        Keeps the newest checkpoint of each namespace (the conversation's and each paused or
        unfinished subagent call's) with its pending writes and the blobs it references; a
        finished subagent call's namespace goes once the supervisor moved past the checkpoint
        it started from. See docs/decisions/0012.

        Args:
            thread_id: the conversation.

        Returns:
            Whether it is done with until its next run: pruned, or refused because its graph
            uses LangGraph's DeltaChannel, which keep_latest cannot prune. False when there
            was nothing to do (not due, or not at rest: an unfinished run, a review being
            resumed) or a concurrent change made PostgreSQL refuse the prune's snapshot; a due
            conversation stays due.

        Raises:
            Exception: the database's, when it cannot be reached.
        """
        ...

    async def expire_idle_cards(self, *, idle_days: int, limit: int) -> list[str]:
        """Make the pending cards of conversations idle for `idle_days` days due for expiry now.

        The expiry sweeper then expires them the usual way (card redrawn, requester told, the
        graph resumed with the rejection), after which retention may delete the conversation.

        Args:
            idle_days: days without a message or a decision.
            limit: at most this many approvals.

        Returns:
            The ids of the approvals made due.
        """
        ...

    async def idle_conversations(self, *, idle_days: int, limit: int) -> list[str]:
        """Conversations retention may delete, idle the longest first.

        Idle: nobody wrote or decided there for `idle_days` days, and nothing waits there: no
        pending card, no review not done, no run whose outcome is due, no accepted message, and
        no pause (LangGraph's `__interrupt__` write) on its newest top-level checkpoint.

        Args:
            idle_days: days without a message or a decision.
            limit: at most this many thread ids.
        """
        ...

    async def delete_if_idle(self, thread_id: str, *, idle_days: int) -> bool:
        """Delete everything stored about a conversation but its audit rows, if it is still idle.

        Call under the conversation's lock. The conditions are checked again with the
        conversation's row locked, in the transaction that deletes, so a message or decision
        that arrived since keeps it.

        Args:
            thread_id: the conversation.
            idle_days: days without a message or a decision.

        Returns:
            Whether it was deleted.
        """
        ...

    async def forget_audit_older_than(self, *, days: int, limit: int) -> int:
        """Delete at most `limit` audit rows older than `days` days, oldest first; return how many.

        Args:
            days: rows written more than this many days ago go.
            limit: at most this many rows in this one transaction.
        """
        ...
