"""The reviews and approvals tables; recording a decision is one atomic state change."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import asyncpg

from bot.approvals.records import (
    ApprovalRecord,
    ApprovalStatus,
    DecideResult,
    NewAction,
    ReviewRecord,
    ReviewStatus,
)
from bot.audit import AuditEntry
from bot.conversation import Actor
from bot.errors import AlreadyDecidedError, ApprovalNotFoundError
from bot.storage.audit_store import AuditStore


class ApprovalStore:
    """Reviews (one per interrupt) and approvals (one per reviewed tool call).

    Args:
        pool: the asyncpg pool.
        audit: where decisions are recorded, in the same transaction as the decision.
    """

    def __init__(self, pool: asyncpg.Pool, audit: AuditStore) -> None:
        self._pool = pool
        self._audit = audit

    async def open_review(
        self,
        *,
        thread_id: str,
        workspace_id: str,
        interrupt_id: str,
        requester: Actor,
        actions: Sequence[NewAction],
    ) -> tuple[ReviewRecord, list[ApprovalRecord]]:
        """Store a pause and its approvals, or return the ones already stored for it.

        Idempotent on `(thread_id, interrupt_id)`, so reconciling after a crash is safe.
        """
        async with self._pool.acquire() as connection, connection.transaction():
            review_row = await connection.fetchrow(
                """
                INSERT INTO reviews (id, thread_id, interrupt_id, requester_id, requester_name)
                VALUES ($1, $2, $3, $4, $5)
                ON CONFLICT (thread_id, interrupt_id) DO NOTHING
                RETURNING *
                """,
                uuid.uuid4(),
                thread_id,
                interrupt_id,
                requester.user_id,
                requester.display_name,
            )
            if review_row is None:
                review_row = await connection.fetchrow(
                    "SELECT * FROM reviews WHERE thread_id = $1 AND interrupt_id = $2",
                    thread_id,
                    interrupt_id,
                )
                if review_row is None:  # pragma: no cover - the conflicting row exists
                    raise RuntimeError(f"review for interrupt {interrupt_id} vanished")
            else:
                await connection.executemany(
                    """
                    INSERT INTO approvals (id, review_id, position, thread_id, workspace_id,
                        tool_call_id, tool_name, description, proposed_args, requester_id,
                        requester_name)
                    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
                    """,
                    [
                        (
                            uuid.uuid4().hex,
                            review_row["id"],
                            position,
                            thread_id,
                            workspace_id,
                            action.tool_call_id,
                            action.tool_name,
                            action.description,
                            action.args,
                            requester.user_id,
                            requester.display_name,
                        )
                        for position, action in enumerate(actions)
                    ],
                )
            rows = await connection.fetch(
                "SELECT * FROM approvals WHERE review_id = $1 ORDER BY position", review_row["id"]
            )
        return _review(review_row), [_approval(row) for row in rows]

    async def get(self, approval_id: str) -> ApprovalRecord | None:
        """The approval with this id, or None."""
        row = await self._pool.fetchrow("SELECT * FROM approvals WHERE id = $1", approval_id)
        return _approval(row) if row else None

    async def review(self, review_id: str) -> ReviewRecord | None:
        """The review with this id, or None."""
        row = await self._pool.fetchrow("SELECT * FROM reviews WHERE id = $1", uuid.UUID(review_id))
        return _review(row) if row else None

    async def review_for_interrupt(self, thread_id: str, interrupt_id: str) -> ReviewRecord | None:
        """The review stored for an interrupt, or None."""
        row = await self._pool.fetchrow(
            "SELECT * FROM reviews WHERE thread_id = $1 AND interrupt_id = $2",
            thread_id,
            interrupt_id,
        )
        return _review(row) if row else None

    async def approvals_of(self, review_id: str) -> list[ApprovalRecord]:
        """The approvals of a review, in action-request order."""
        rows = await self._pool.fetch(
            "SELECT * FROM approvals WHERE review_id = $1 ORDER BY position", uuid.UUID(review_id)
        )
        return [_approval(row) for row in rows]

    async def pending_in_thread(self, thread_id: str) -> list[ApprovalRecord]:
        """Undecided approvals of a thread, oldest first."""
        rows = await self._pool.fetch(
            """
            SELECT * FROM approvals WHERE thread_id = $1 AND status = 'pending'
            ORDER BY created_at, position
            """,
            thread_id,
        )
        return [_approval(row) for row in rows]

    async def set_card_ref(self, approval_id: str, card_ref: str) -> None:
        """Remember where the approval's card was posted."""
        await self._pool.execute(
            "UPDATE approvals SET card_ref = $2 WHERE id = $1", approval_id, card_ref
        )

    async def decide(
        self,
        approval_id: str,
        *,
        actor: Actor,
        status: ApprovalStatus,
        final_args: dict[str, Any] | None,
        reason: str | None,
        audit: AuditEntry,
    ) -> DecideResult:
        """Record a decision exactly once, with its audit row, atomically.

        The review row is locked first, so of two decisions finishing the same review at
        once exactly one sees "no pending approvals left" and claims the resume.

        Raises:
            ApprovalNotFoundError: no such approval.
            AlreadyDecidedError: someone (or an expiry) decided it first; nothing changed.
        """
        if status is ApprovalStatus.PENDING:
            raise ValueError("a decision cannot set the status back to pending")
        async with self._pool.acquire() as connection, connection.transaction():
            current = await connection.fetchrow(
                "SELECT review_id FROM approvals WHERE id = $1", approval_id
            )
            if current is None:
                raise ApprovalNotFoundError(approval_id)
            await connection.execute(
                "SELECT 1 FROM reviews WHERE id = $1 FOR UPDATE", current["review_id"]
            )
            row = await connection.fetchrow(
                """
                UPDATE approvals
                SET status = $2, decided_by_id = $3, decided_by_name = $4, decided_at = now(),
                    final_args = $5, reason = $6
                WHERE id = $1 AND status = 'pending'
                RETURNING *
                """,
                approval_id,
                status.value,
                actor.user_id,
                actor.display_name,
                final_args,
                reason,
            )
            if row is None:
                existing = await connection.fetchrow(
                    "SELECT * FROM approvals WHERE id = $1", approval_id
                )
                if existing is None:  # pragma: no cover - approvals are never deleted
                    raise ApprovalNotFoundError(approval_id)
                raise AlreadyDecidedError(
                    outcome=existing["status"],
                    decided_by_id=existing["decided_by_id"],
                    decided_by_name=existing["decided_by_name"],
                    decided_at=existing["decided_at"],
                )
            await self._audit.record(audit, connection=connection)
            claimed = await connection.fetchval(
                """
                UPDATE reviews SET status = 'resuming'
                WHERE id = $1 AND status = 'pending'
                  AND NOT EXISTS (
                      SELECT 1 FROM approvals WHERE review_id = $1 AND status = 'pending')
                RETURNING true
                """,
                current["review_id"],
            )
        return DecideResult(approval=_approval(row), review_complete=bool(claimed))

    async def reviews_in(self, status: ReviewStatus) -> list[ReviewRecord]:
        """Every review with this status, oldest first (used to resume after a restart)."""
        rows = await self._pool.fetch(
            "SELECT * FROM reviews WHERE status = $1 ORDER BY created_at", status.value
        )
        return [_review(row) for row in rows]

    async def complete_review(self, review_id: str) -> None:
        """Mark a review done once its resume has reached a checkpoint."""
        await self._pool.execute(
            "UPDATE reviews SET status = 'done', completed_at = now() WHERE id = $1",
            uuid.UUID(review_id),
        )


def _review(row: asyncpg.Record) -> ReviewRecord:
    return ReviewRecord(
        id=str(row["id"]),
        thread_id=row["thread_id"],
        interrupt_id=row["interrupt_id"],
        requester_id=row["requester_id"],
        requester_name=row["requester_name"],
        status=ReviewStatus(row["status"]),
        created_at=row["created_at"],
    )


def _approval(row: asyncpg.Record) -> ApprovalRecord:
    return ApprovalRecord(
        id=row["id"],
        review_id=str(row["review_id"]),
        position=row["position"],
        thread_id=row["thread_id"],
        workspace_id=row["workspace_id"],
        tool_call_id=row["tool_call_id"],
        tool_name=row["tool_name"],
        description=row["description"],
        proposed_args=row["proposed_args"],
        requester_id=row["requester_id"],
        requester_name=row["requester_name"],
        card_ref=row["card_ref"],
        status=ApprovalStatus(row["status"]),
        decided_by_id=row["decided_by_id"],
        decided_by_name=row["decided_by_name"],
        decided_at=row["decided_at"],
        final_args=row["final_args"],
        reason=row["reason"],
        created_at=row["created_at"],
    )
