"""The review store in PostgreSQL (see `bot.reviews.store`): the reviews and approvals tables.

Recording a decision is one atomic state change. Every status change here is a transition of
`bot.reviews.lifecycle`, written as one conditional update that names the states the event may
leave, so a lost race changes nothing.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Collection, Coroutine, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, Concatenate, Literal, ParamSpec

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from bot import metrics
from bot.audit.entries import AuditEntry, AuditKind, approval_entry
from bot.audit.postgres import PostgresAuditStore
from bot.base.conversation import Actor
from bot.base.errors import (
    AlreadyDecidedError,
    AlreadyVotedError,
    ApprovalNotFoundError,
    StaleVoteError,
    TrustRefusedError,
)
from bot.reviews.digest import args_digest
from bot.reviews.escalation.rules import EscalationTarget, TargetKind
from bot.reviews.lifecycle import (
    ESCALATES_FROM,
    RUNS,
    ApprovalEvent,
    ApprovalStatus,
    EscalationEvent,
    EscalationStatus,
    ReviewEvent,
    ReviewStatus,
    approval_after,
    approval_sources,
    escalation_after,
    escalation_sources,
    grants_trust,
    review_after,
    review_sources,
    tally,
)
from bot.reviews.records import EXPIRED_REASON, ApprovalRecord, DecideResult, NewAction, ReviewRecord
from bot.reviews.store import Gate, VoteKind
from bot.reviews.trust.grants import NewGrant
from bot.reviews.trust.postgres import insert_grant
from bot.tools.canonical import canonical_values
from bot.tools.ledger.store import ToolResult
from bot.turns.conversations import Stopper

RESUME_WITHIN_S = 30.0
"""How long a decision's follow-up has to resume its review before the upkeep takes it over."""


P = ParamSpec("P")


def _counted(
    vote: Callable[Concatenate[PostgresApprovalStore, P], Coroutine[Any, Any, DecideResult]],
) -> Callable[Concatenate[PostgresApprovalStore, P], Coroutine[Any, Any, DecideResult]]:
    """Count a decided vote in `bot.metrics` after `vote` returned (its transaction committed)."""

    @functools.wraps(vote)
    async def counted(store: PostgresApprovalStore, /, *args: P.args, **kwargs: P.kwargs) -> DecideResult:
        result = await vote(store, *args, **kwargs)
        if result.decided:
            metrics.approval_closed(result.approval)
        return result

    return counted


class PostgresApprovalStore:
    """Reviews (one per interrupt) and approvals (one per reviewed tool call), in PostgreSQL.

    The `ApprovalStore` port (`bot.reviews.store`, where each method's contract is written),
    plus what only a PostgreSQL caller can use: `lock_open_reviews` and `stop_pending` work in
    the caller's transaction (a stop, `bot.turns.stop.store`).

    Args:
        pool: the asyncpg pool.
        audit: where decisions, expiries, escalations and trust grants are recorded, each in the
            transaction that makes it.
    """

    def __init__(self, pool: asyncpg.Pool, audit: PostgresAuditStore) -> None:
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
        source: str | None = None,
    ) -> tuple[ReviewRecord, list[ApprovalRecord]]:
        """Store a pause and its approvals, or return the ones already stored for it.

        Idempotent on `(thread_id, interrupt_id)`, so reconciling after a crash is safe.

        Args:
            thread_id: the conversation.
            workspace_id: its workspace.
            interrupt_id: LangGraph's id of the interrupt (one review per interrupt).
            requester: the author of the message the calls came from.
            actions: the reviewed calls, in action-request order.
            source: the subagent whose gate paused, None for the top-level agent.
        """
        async with self._pool.acquire() as connection, connection.transaction():
            review_row = await connection.fetchrow(
                """
                INSERT INTO reviews (id, thread_id, interrupt_id, requester_id, requester_name, source)
                VALUES ($1, $2, $3, $4, $5, $6)
                ON CONFLICT (thread_id, interrupt_id) DO NOTHING
                RETURNING *
                """,
                uuid.uuid4(),
                thread_id,
                interrupt_id,
                requester.user_id,
                requester.display_name,
                source,
            )
            opened = review_row is not None
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
                        requester_name, current_args, current_digest, quorum, expires_at, source,
                        trust_offer_s, escalate_at, escalate_kind, escalate_to, escalation, trust_offer_matching,
                        definition_digest)
                    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $9, $12, $13,
                        CASE WHEN $14::int IS NULL THEN NULL ELSE now() + make_interval(secs => $14) END, $15, $16,
                        CASE WHEN $17::int IS NULL THEN NULL ELSE now() + make_interval(secs => $17) END, $18, $19,
                        CASE WHEN $17::int IS NULL THEN NULL ELSE $20 END,
                        CASE WHEN $16::int IS NULL THEN NULL ELSE $21::text[] END, $22)
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
                            args_digest(action.args),
                            action.quorum,
                            action.expires_in_s,
                            source,
                            action.trust_offer_s,
                            *_escalation_columns(action),
                            list(action.trust_offer_matching),
                            action.definition,
                        )
                        for position, action in enumerate(actions)
                    ],
                )
            rows = await connection.fetch(f"{_SELECT} WHERE a.review_id = $1 ORDER BY a.position", review_row["id"])
        if opened:
            metrics.approvals_opened(action.tool_name for action in actions)
        return _review(review_row), [_approval(row) for row in rows]

    async def get(self, approval_id: str) -> ApprovalRecord | None:
        """The approval with this id, or None."""
        row = await self._pool.fetchrow(f"{_SELECT} WHERE a.id = $1", approval_id)
        return _approval(row) if row else None

    async def review(self, review_id: str) -> ReviewRecord | None:
        """The review with this id, or None."""
        row = await self._pool.fetchrow("SELECT * FROM reviews WHERE id = $1", uuid.UUID(review_id))
        return _review(row) if row else None

    async def reviews_for_interrupts(self, thread_id: str, interrupt_ids: Sequence[str]) -> dict[str, ReviewRecord]:
        """The reviews stored for these interrupts of the thread, by interrupt id (missing: none stored)."""
        rows = await self._pool.fetch(
            "SELECT * FROM reviews WHERE thread_id = $1 AND interrupt_id = ANY($2::text[])",
            thread_id,
            list(interrupt_ids),
        )
        return {row["interrupt_id"]: _review(row) for row in rows}

    async def approvals_of(self, review_id: str) -> list[ApprovalRecord]:
        """The approvals of a review, in action-request order."""
        rows = await self._pool.fetch(f"{_SELECT} WHERE a.review_id = $1 ORDER BY a.position", uuid.UUID(review_id))
        return [_approval(row) for row in rows]

    async def pending_in_thread(self, thread_id: str) -> list[ApprovalRecord]:
        """Undecided approvals of a thread, oldest first."""
        rows = await self._pool.fetch(
            f"{_SELECT} WHERE a.thread_id = $1 AND a.status = 'pending' ORDER BY a.created_at, a.position",
            thread_id,
        )
        return [_approval(row) for row in rows]

    async def pending_everywhere(self, *, platforms: Collection[str], limit: int = 1000) -> list[ApprovalRecord]:
        """Undecided approvals of every thread on `platforms`, oldest first (at most `limit`).

        Args:
            platforms: `ConversationRef.platform` names: those this process serves.
            limit: at most this many.
        """
        rows = await self._pool.fetch(
            f"{_SELECT} WHERE a.status = 'pending' AND {_ON_PLATFORMS.format(n=2)} "
            "ORDER BY a.created_at, a.position LIMIT $1",
            limit,
            list(platforms),
        )
        return [_approval(row) for row in rows]

    async def reviews_in_thread(self, thread_id: str, statuses: Sequence[ReviewStatus]) -> list[ReviewRecord]:
        """The thread's reviews in any of `statuses`, oldest first."""
        rows = await self._pool.fetch(
            "SELECT * FROM reviews WHERE thread_id = $1 AND status = ANY($2::text[]) ORDER BY created_at, id",
            thread_id,
            [status.value for status in statuses],
        )
        return [_review(row) for row in rows]

    async def add_card(self, approval_id: str, card_ref: str, *, primary: bool) -> None:
        """Remember a posted copy of the approval's card; the primary one is linked to."""
        async with self._pool.acquire() as connection, connection.transaction():
            await connection.execute(
                "INSERT INTO approval_cards (approval_id, card_ref, conversation) VALUES ($1, $2, '') "
                "ON CONFLICT DO NOTHING",
                approval_id,
                card_ref,
            )
            if primary:
                await connection.execute("UPDATE approvals SET card_ref = $2 WHERE id = $1", approval_id, card_ref)

    async def card_refs(self, approval_id: str) -> list[str]:
        """Every posted copy of the approval's card."""
        rows = await self._pool.fetch("SELECT card_ref FROM approval_cards WHERE approval_id = $1", approval_id)
        return [row["card_ref"] for row in rows]

    async def expire_due(self, *, platforms: Collection[str]) -> list[DecideResult]:
        """Expire every pending approval on `platforms` whose time has come, each exactly once.

        Each expiry is its own transaction in the same lock order as `vote` (review row, then
        approval), so it never deadlocks with a click and of an expiry and a click on the
        same approval only one wins.

        Args:
            platforms: `ConversationRef.platform` names: those this process serves (its
                follow-up tells the requester and redraws the card there).
        """
        due = await self._pool.fetch(
            f"""
            SELECT id FROM approvals a WHERE status = 'pending' AND expires_at <= now()
               AND {_ON_PLATFORMS.format(n=1)}
             ORDER BY expires_at LIMIT 200
            """,  # noqa: S608 - built from a constant, no input
            list(platforms),
        )
        results = []
        for row in due:
            result = await self._expire_one(row["id"])
            if result is not None:
                results.append(result)
        return results

    async def _expire_one(self, approval_id: str) -> DecideResult | None:
        async with self._pool.acquire() as connection, connection.transaction():
            review_id = await connection.fetchval("SELECT review_id FROM approvals WHERE id = $1", approval_id)
            await connection.execute("SELECT 1 FROM reviews WHERE id = $1 FOR UPDATE", review_id)
            updated = await connection.fetchval(
                """
                UPDATE approvals SET status = $3, decided_at = now(), reason = $2
                WHERE id = $1 AND status = ANY($4::text[]) AND expires_at <= now()
                RETURNING true
                """,
                approval_id,
                EXPIRED_REASON,
                approval_after(ApprovalStatus.PENDING, ApprovalEvent.EXPIRE).value,
                approval_sources(ApprovalEvent.EXPIRE),
            )
            if not updated:
                return None  # decided (or expired by another replica) in the meantime
            row = _approval(_present(await connection.fetchrow(f"{_SELECT} WHERE a.id = $1", approval_id)))
            await self._audit.record(
                approval_entry(AuditKind.EXPIRY, row, "expired", reason=EXPIRED_REASON), connection=connection
            )
            claimed = await _claim_resume(connection, review_id)
        metrics.approval_closed(row)
        return DecideResult(approval=row, review_complete=claimed, decided=True)

    async def next_expiry(self, *, platforms: Collection[str]) -> datetime | None:
        """When the next pending approval on `platforms` expires, or None."""
        value: datetime | None = await self._pool.fetchval(
            f"""
            SELECT min(expires_at) FROM approvals a WHERE status = 'pending' AND expires_at IS NOT NULL
               AND {_ON_PLATFORMS.format(n=1)}
            """,  # noqa: S608 - built from a constant, no input
            list(platforms),
        )
        return value

    async def claim_due_escalations(
        self, *, lease_s: float, platforms: Collection[str], limit: int = 50
    ) -> list[ApprovalRecord]:
        """Claim the escalations that are due on approvals still pending; each is claimed once.

        One conditional update (`lifecycle.ESCALATION_TRANSITIONS`): a `waiting` escalation whose
        time has come, or a `claimed` one whose lease ran out (the sweeper that claimed it died
        before posting), on a pending approval not past its expiry time (`_CLAIMABLE`), becomes
        `claimed` with a new lease;
        `escalated_at` keeps the first claim's time. Rows another transaction holds (a vote in
        progress) are skipped and looked at in the next sweep, so of two replicas sweeping at
        once each escalation goes to exactly one, and a click is never kept waiting.

        Args:
            lease_s: seconds the claimer has to post the copies and `finish_escalation`.
            platforms: `ConversationRef.platform` names: those this process serves (it posts
                the copies there).
            limit: at most this many per call.

        Returns:
            The claimed approvals, as stored after the claim.
        """
        claimed = escalation_after(EscalationStatus.WAITING, EscalationEvent.CLAIM)
        ids = await self._pool.fetch(_CLAIM_ESCALATIONS, claimed.value, lease_s, limit, list(platforms))
        if not ids:
            return []
        rows = await self._pool.fetch(
            f"{_SELECT} WHERE a.id = ANY($1::text[]) ORDER BY a.escalate_at", [row["id"] for row in ids]
        )
        return [_approval(row) for row in rows]

    async def finish_escalation(self, approval_id: str, *, copies: int) -> ApprovalRecord | None:
        """Record that a claimed escalation's copies are out, with its audit row, atomically.

        Args:
            approval_id: the approval.
            copies: how many copies were posted (for the audit row).

        Returns:
            The approval as now stored, or None when it was not `claimed` (another sweeper
            finished it after this one's lease ran out).
        """
        async with self._pool.acquire() as connection, connection.transaction():
            updated = await connection.fetchval(
                "UPDATE approvals SET escalation = $2, escalation_lease = NULL "
                "WHERE id = $1 AND escalation = ANY($3::text[]) RETURNING true",
                approval_id,
                escalation_after(EscalationStatus.CLAIMED, EscalationEvent.POST).value,
                escalation_sources(EscalationEvent.POST),
            )
            if not updated:
                return None
            row = _approval(_present(await connection.fetchrow(f"{_SELECT} WHERE a.id = $1", approval_id)))
            target = row.escalate_to
            await self._audit.record(
                approval_entry(
                    AuditKind.ESCALATION,
                    row,
                    "escalated",
                    detail={
                        "to": {"kind": target.kind.value, "id": target.subject_id} if target else None,
                        "at": row.escalated_at.isoformat() if row.escalated_at else None,
                        "copies": copies,
                    },
                ),
                connection=connection,
            )
        return row

    async def next_escalation(self, *, platforms: Collection[str]) -> datetime | None:
        """When the next escalation on `platforms` falls due (or a claim's lease runs out), or None."""
        value: datetime | None = await self._pool.fetchval(
            f"""
            SELECT min(CASE WHEN a.escalation = $1 THEN a.escalation_lease ELSE a.escalate_at END) FROM approvals a
            WHERE {_CLAIMABLE} AND {_ON_PLATFORMS.format(n=2)}
            """,  # noqa: S608 - built from lifecycle constants, no input
            EscalationStatus.CLAIMED.value,
            list(platforms),
        )
        return value

    async def still_escalating(self, approval_id: str) -> ApprovalRecord | None:
        """The approval as stored now, if the escalation claimed on it may still go out; else None.

        A claim does not hold the approval: a decision, a stop or the expiry time may come after
        it (a vote locks the review, not the approval, until it writes), so the claimer reads it
        again right before posting the copies, with the claim's own conditions.
        """
        row = await self._pool.fetchrow(f"{_SELECT} WHERE a.id = $1 AND {_CLAIMABLE}", approval_id)
        return _approval(row) if row is not None else None

    @_counted
    async def vote(
        self,
        approval_id: str,
        *,
        actor: Actor,
        kind: VoteKind,
        quorum: int,
        audit: AuditEntry,
        args: dict[str, Any] | None = None,
        expected_digest: str | None = None,
        reason: str | None = None,
        trust: NewGrant | None = None,
    ) -> DecideResult:
        """Record one vote exactly once, with its audit row, atomically.

        - `reject` (also a call denied by policy) decides at once.
        - `approve` counts for the arguments under vote; the same person twice counts once.
        - `edit` replaces the arguments under vote (earlier approvals were for other arguments
          and no longer count) and is the editor's approval of the new ones.
        The approval is decided when `quorum` distinct people approved the same arguments; it
        is then `approved`, or `edited` when those arguments differ from the proposal.

        The review row is locked first, so of two decisions finishing the same review at
        once exactly one sees "no pending approvals left" and claims the resume. A vote that
        decides is counted in `bot.metrics` once its transaction committed.

        Args:
            approval_id: the approval.
            actor: the voter.
            kind: approve, edit or reject.
            quorum: approvals needed (the tool's current setting; stored for the card).
            audit: the audit row to write if the vote is recorded (its outcome is completed
                here: `approved`, `edited`, `rejected` or `vote`).
            args: the new arguments, for an edit.
            expected_digest: for an approve, the digest of the arguments the caller checked
                the policy for; a concurrent edit makes the vote stale.
            reason: for a reject.
            trust: for an approve, the trust grant to make with it ("Approve and trust",
                docs/decisions/0022): made in this transaction only when this vote decides the approval
                alone (`bot.reviews.lifecycle.grants_trust`), binding the arguments it
                approves, with its own audit row.

        Raises:
            ApprovalNotFoundError: no such approval.
            AlreadyDecidedError: decided before, or past its expiry time; nothing changed.
            AlreadyVotedError: this person already approved these arguments.
            StaleVoteError: the arguments changed since the caller read them; retry.
            TrustRefusedError: `trust` was asked, but this vote would not decide the approval
                alone (`quorum`); nothing changed.
        """
        async with self._pool.acquire() as connection, connection.transaction():
            review_id = await connection.fetchval("SELECT review_id FROM approvals WHERE id = $1", approval_id)
            if review_id is None:
                raise ApprovalNotFoundError(approval_id)
            await connection.execute("SELECT 1 FROM reviews WHERE id = $1 FOR UPDATE", review_id)
            row = await connection.fetchrow(f"{_SELECT} WHERE a.id = $1", approval_id)
            if row is None:  # pragma: no cover - approvals are never deleted
                raise ApprovalNotFoundError(approval_id)
            current = _approval(row)
            if not current.is_pending:
                raise AlreadyDecidedError(
                    outcome=current.status.value,
                    decided_by_id=current.decided_by_id,
                    decided_by_name=current.decided_by_name,
                    decided_at=current.decided_at,
                )
            if current.expires_at is not None and current.expires_at <= await connection.fetchval("SELECT now()"):
                # Past its time but not yet swept: it is expired already; the sweeper records it.
                raise AlreadyDecidedError(
                    outcome=ApprovalStatus.EXPIRED.value,
                    decided_by_id=None,
                    decided_by_name=None,
                    decided_at=current.expires_at,
                )
            under_vote = current.args_under_vote
            digest = args_digest(under_vote)
            if kind is VoteKind.REJECT:
                return await self._finish(
                    connection, current, actor, ApprovalEvent.REJECT, None, None, reason, quorum, audit
                )
            if kind is VoteKind.EDIT:
                if args is None:
                    raise ValueError("an edit vote needs the new arguments")
                under_vote, digest = dict(args), args_digest(args)
                if digest == args_digest(current.proposed_args):
                    # Back to the proposal, perhaps with keys in another order: approved, it
                    # runs as proposed (from the checkpoint), so that order is what is kept
                    # and shown (docs/decisions/0034-arguments-approvers-can-see.md).
                    under_vote = dict(current.proposed_args)
                await connection.execute(
                    "UPDATE approvals SET current_args = $2, current_digest = $3 WHERE id = $1",
                    approval_id,
                    under_vote,
                    digest,
                )
            elif expected_digest is not None and expected_digest != digest:
                raise StaleVoteError(approval_id)
            inserted = await connection.fetchval(
                """
                INSERT INTO approval_votes (approval_id, voter_id, voter_name, args_digest)
                VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING RETURNING true
                """,
                approval_id,
                actor.user_id,
                actor.display_name,
                digest,
            )
            if not inserted and kind is VoteKind.APPROVE:
                raise AlreadyVotedError(approval_id)
            # An edit back to arguments this person approved before keeps that approval.
            count = await connection.fetchval(
                "SELECT count(*) FROM approval_votes WHERE approval_id = $1 AND args_digest = $2",
                approval_id,
                digest,
            )
            event = tally(approvals=count, quorum=quorum, edited=digest != args_digest(current.proposed_args))
            if trust is not None and (kind is not VoteKind.APPROVE or not grants_trust(event, quorum)):
                raise TrustRefusedError("quorum")  # rolls the vote back: nothing changed
            if event is not ApprovalEvent.VOTE:
                return await self._finish(
                    connection, current, actor, event, under_vote, digest, None, quorum, audit, trust=trust
                )
            await connection.execute("UPDATE approvals SET quorum = $2 WHERE id = $1", approval_id, quorum)
            await self._audit.record(
                replace(audit, outcome="vote", final_args=under_vote, detail={**audit.detail, "votes": count}),
                connection=connection,
            )
            updated = await connection.fetchrow(f"{_SELECT} WHERE a.id = $1", approval_id)
            await _count_as_activity(connection, current.thread_id)
        return DecideResult(approval=_approval(_present(updated)), review_complete=False, decided=False)

    async def _finish(
        self,
        connection: PoolConnectionProxy,
        current: ApprovalRecord,
        actor: Actor,
        event: ApprovalEvent,
        final_args: dict[str, Any] | None,
        digest: str | None,
        reason: str | None,
        quorum: int,
        audit: AuditEntry,
        *,
        trust: NewGrant | None = None,
    ) -> DecideResult:
        status = approval_after(current.status, event)
        updated = await connection.fetchval(
            """
            UPDATE approvals
            SET status = $2, decided_by_id = $3, decided_by_name = $4, decided_at = now(),
                final_args = $5, approved_digest = $6, reason = $7, quorum = $8
            WHERE id = $1 AND status = ANY($9::text[])
            RETURNING true
            """,
            current.id,
            status.value,
            actor.user_id,
            actor.display_name,
            final_args,
            digest,
            reason,
            quorum,
            approval_sources(event),
        )
        if not updated:  # pragma: no cover - the review row lock makes `current` the latest
            raise RuntimeError(f"approval {current.id} left {current.status.value} under our lock")
        await self._audit.record(
            replace(audit, outcome=status.value, final_args=final_args, reason=reason), connection=connection
        )
        if trust is not None and final_args is not None:
            await insert_grant(connection, self._audit, current, trust, args=final_args, actor=actor)
        claimed = await _claim_resume(connection, uuid.UUID(current.review_id))
        row = await connection.fetchrow(f"{_SELECT} WHERE a.id = $1", current.id)
        await _count_as_activity(connection, current.thread_id)
        return DecideResult(approval=_approval(_present(row)), review_complete=claimed, decided=True)

    async def lock_open_reviews(self, connection: PoolConnectionProxy, thread_id: str) -> None:
        """Lock the thread's pending and resuming reviews, in id order, in the caller's transaction.

        A stop takes these locks first, as a vote and an expiry take their review's lock first,
        so a stop racing a decision on the same card waits for it (or it for the stop) instead of
        deadlocking, and of the two exactly one moves the approval.
        """
        await connection.execute(
            "SELECT 1 FROM reviews WHERE thread_id = $1 AND status = ANY($2::text[]) ORDER BY id FOR UPDATE",
            thread_id,
            [ReviewStatus.PENDING.value, ReviewStatus.RESUMING.value],
        )

    async def stop_pending(
        self, connection: PoolConnectionProxy, thread_id: str, *, stopper: Stopper
    ) -> tuple[list[ApprovalRecord], bool]:
        """Close every pending approval of the thread as stopped, in the caller's transaction.

        Call with the thread's open reviews locked (`lock_open_reviews`). Each approval moves
        with the `stop` transition's conditional update and gets a `decision` audit row with
        the outcome `stopped`; each review left without a pending approval is claimed for
        resuming, as by a last decision. Counted in `bot.metrics` by the caller, once the
        transaction committed (`metrics.approval_closed`).

        Args:
            connection: the caller's connection, inside its transaction.
            thread_id: the conversation whose turn stops.
            stopper: who stopped it (the approvals' decider).

        Returns:
            The approvals closed, as now stored, and whether a review was claimed for resuming
            (the resume then answers the stopped calls).
        """
        rows = await connection.fetch(
            f"{_SELECT} WHERE a.thread_id = $1 AND a.status = $2 ORDER BY a.created_at, a.position",
            thread_id,
            ApprovalStatus.PENDING.value,
        )
        closed: list[ApprovalRecord] = []
        reviews: dict[str, None] = {}
        for row in rows:
            current = _approval(row)
            updated = await connection.fetchval(
                """
                UPDATE approvals SET status = $2, decided_by_id = $3, decided_by_name = $4, decided_at = now()
                WHERE id = $1 AND status = ANY($5::text[])
                RETURNING true
                """,
                current.id,
                approval_after(current.status, ApprovalEvent.STOP).value,
                stopper.user_id,
                stopper.display_name,
                approval_sources(ApprovalEvent.STOP),
            )
            if not updated:  # pragma: no cover - the review lock makes `current` the latest
                continue
            now = _approval(_present(await connection.fetchrow(f"{_SELECT} WHERE a.id = $1", current.id)))
            entry = approval_entry(AuditKind.DECISION, now, now.status.value)
            await self._audit.record(
                replace(entry, actor_id=stopper.user_id, actor_name=stopper.display_name), connection=connection
            )
            closed.append(now)
            reviews[now.review_id] = None
        claimed = False
        for review_id in reviews:
            claimed = await _claim_resume(connection, uuid.UUID(review_id)) or claimed
        return closed, claimed

    async def gate(self, thread_id: str, tool_call_id: str) -> Gate | None:
        """The review state of a tool call, or None if never reviewed."""
        row = await self._pool.fetchrow(
            """
            SELECT status, approved_digest, definition_digest FROM approvals
            WHERE thread_id = $1 AND tool_call_id = $2 ORDER BY created_at DESC LIMIT 1
            """,
            thread_id,
            tool_call_id,
        )
        if row is None:
            return None
        return Gate(
            status=ApprovalStatus(row["status"]), approved=row["approved_digest"], definition=row["definition_digest"]
        )

    async def mark_definition_changed(self, thread_id: str, tool_call_id: str) -> ApprovalRecord | None:
        """Record that a decided call did not run because its MCP tool's definition changed; return the approval."""
        return await self._mark("definition_changed", thread_id, tool_call_id)

    async def mark_outcome_unknown(self, thread_id: str, tool_call_id: str) -> ApprovalRecord | None:
        """Record that a decided call started and was cut short; return the approval, if it had one."""
        return await self._mark("outcome_unknown", thread_id, tool_call_id)

    async def _mark(
        self, flag: Literal["definition_changed", "outcome_unknown"], thread_id: str, tool_call_id: str
    ) -> ApprovalRecord | None:
        """Set the boolean column `flag` on the call's latest approval; that approval, or None without one."""
        approval_id = await self._pool.fetchval(
            f"""
            UPDATE approvals SET {flag} = true
            WHERE id = (
                SELECT id FROM approvals WHERE thread_id = $1 AND tool_call_id = $2 ORDER BY created_at DESC LIMIT 1
            )
            RETURNING id
            """,  # noqa: S608 - `flag` is one of two column names, never input
            thread_id,
            tool_call_id,
        )
        return await self.get(approval_id) if approval_id is not None else None

    async def tool_runs(self, thread_id: str, tool_call_ids: Sequence[str]) -> dict[str, ToolResult | None]:
        """What the tool-run ledger knows of these calls: the result of each that finished, None for one that started.

        A call missing from the answer never started (`bot.tools.ledger.postgres.PostgresLedger`
        claims a call before it runs).
        """
        rows = await self._pool.fetch(
            "SELECT tool_call_id, result FROM tool_runs WHERE thread_id = $1 AND tool_call_id = ANY($2::text[])",
            thread_id,
            list(tool_call_ids),
        )
        return {
            row["tool_call_id"]: (
                ToolResult(content=row["result"]["content"], status=str(row["result"].get("status") or "success"))
                if isinstance(row["result"], dict)
                else None
            )
            for row in rows
        }

    async def give_up_reviews(self, thread_id: str, review_ids: Sequence[str]) -> dict[str, list[ApprovalRecord]]:
        """Give up resuming these reviews of the thread, in one transaction; return what was given up.

        The `give_up` transition (`bot.reviews.lifecycle`) as one conditional update: each
        review still resuming becomes done, so of two handlers giving one up, one does. Each
        decided call of theirs that would have run (`RUNS`) is marked from the tool-run ledger:
        `not_run` when it never started, `outcome_unknown` when it started and did not finish
        (a call that finished keeps its result and no mark). The conversation's run, the
        resume that kept failing, is given up too (`run_given_up`: cleared without a notice).
        Call it under the conversation's lock, once the checkpoint no longer holds the pauses.

        Args:
            thread_id: the conversation.
            review_ids: the reviews to give up.

        Returns:
            The approvals, as now stored, of each review this call gave up, by review id.
        """
        async with self._pool.acquire() as connection, connection.transaction():
            moved = await connection.fetch(
                """
                UPDATE reviews SET status = $3, completed_at = now()
                WHERE thread_id = $1 AND id = ANY($2::uuid[]) AND status = ANY($4::text[])
                RETURNING id
                """,
                thread_id,
                [uuid.UUID(review_id) for review_id in review_ids],
                review_after(ReviewStatus.RESUMING, ReviewEvent.GIVE_UP).value,
                review_sources(ReviewEvent.GIVE_UP),
            )
            ids = [row["id"] for row in moved]
            if not ids:
                return {}
            runs = sorted(status.value for status in RUNS)
            await connection.execute(
                """
                UPDATE approvals a SET outcome_unknown = true
                WHERE a.review_id = ANY($1::uuid[]) AND a.status = ANY($2::text[]) AND EXISTS (
                    SELECT 1 FROM tool_runs t
                    WHERE t.thread_id = a.thread_id AND t.tool_call_id = a.tool_call_id AND t.result IS NULL
                )
                """,
                ids,
                runs,
            )
            await connection.execute(
                """
                UPDATE approvals a SET not_run = true
                WHERE a.review_id = ANY($1::uuid[]) AND a.status = ANY($2::text[]) AND NOT EXISTS (
                    SELECT 1 FROM tool_runs t WHERE t.thread_id = a.thread_id AND t.tool_call_id = a.tool_call_id
                )
                """,
                ids,
                runs,
            )
            await connection.execute(
                "UPDATE conversations SET run_given_up = true WHERE thread_id = $1 AND running_since IS NOT NULL",
                thread_id,
            )
            rows = await connection.fetch(
                f"{_SELECT} WHERE a.review_id = ANY($1::uuid[]) ORDER BY a.created_at, a.position", ids
            )
        given_up: dict[str, list[ApprovalRecord]] = {str(review_id): [] for review_id in ids}
        for row in rows:
            approval = _approval(row)
            given_up[approval.review_id].append(approval)
        return given_up

    async def complete_review(self, review_id: str) -> bool:
        """Mark a claimed review done once its resume was applied; False if it was not claimed."""
        done = await self._pool.fetchval(
            "UPDATE reviews SET status = $2, completed_at = now() WHERE id = $1 AND status = ANY($3::text[]) "
            "RETURNING true",
            uuid.UUID(review_id),
            ReviewStatus.DONE.value,
            review_sources(ReviewEvent.FINISH),
        )
        return bool(done)


async def _count_as_activity(connection: PoolConnectionProxy, thread_id: str) -> None:
    """A decision (or a quorum vote) is activity: retention counts idle days from it.

    Last in the vote's transaction, and written at most once a minute, so that many clicks in
    one conversation at once do not queue behind each other's lock on its row.
    """
    await connection.execute(
        "UPDATE conversations SET last_active_at = now() "
        "WHERE thread_id = $1 AND last_active_at < now() - interval '1 minute'",
        thread_id,
    )


async def _claim_resume(connection: PoolConnectionProxy, review_id: uuid.UUID) -> bool:
    """Claim the review for resuming if none of its approvals is pending any more.

    Called in the transaction that decided (or expired) one of its approvals, with the review
    row locked: of two decisions finishing one review at once, exactly one claims it.
    """
    claimed = await connection.fetchval(
        """
        UPDATE reviews SET status = $2, retry_at = now() + make_interval(secs => $5)
        WHERE id = $1 AND status = ANY($3::text[])
          AND NOT EXISTS (SELECT 1 FROM approvals WHERE review_id = $1 AND status = $4)
        RETURNING true
        """,
        review_id,
        ReviewStatus.RESUMING.value,
        review_sources(ReviewEvent.CLAIM),
        ApprovalStatus.PENDING.value,
        RESUME_WITHIN_S,
    )
    return bool(claimed)


def _literals(values: Sequence[str]) -> str:
    """SQL literals of lifecycle state names (fixed enum values, never input)."""
    return ", ".join(f"'{value}'" for value in values)


_ON_PLATFORMS = "split_part(a.thread_id, ':', 1) = ANY(${n}::text[])"
"""The approval's conversation is on one of the platforms in parameter `n` (`ConversationRef.platform`
is a thread id's first part). A process sweeps only the approvals of the platforms it serves: a
`countersign chat` on the database of a Slack deployment must not expire, escalate or redraw
Slack's cards, which it cannot show (docs/decisions/0031)."""

_CLAIMABLE = (
    f"a.status IN ({_literals(sorted(status.value for status in ESCALATES_FROM))}) "
    f"AND a.escalation IN ({_literals(escalation_sources(EscalationEvent.CLAIM))}) "
    "AND (a.expires_at IS NULL OR a.expires_at > now())"
)
"""The approvals an escalation may be claimed on, written as literals so that the partial index
`approvals_escalating` serves the sweeper's query (a parameter would hide it from the planner).
A pending approval past its expiry time is expired already (a vote on it is refused; the expiry
sweep, here or on another replica, records it any moment): it is not claimable either."""

_CLAIM_ESCALATIONS = f"""
WITH due AS (
    SELECT a.id FROM approvals a
    WHERE {_CLAIMABLE} AND a.escalate_at <= now() AND (a.escalation <> $1 OR a.escalation_lease <= now())
        AND {_ON_PLATFORMS.format(n=4)}
    ORDER BY a.escalate_at LIMIT $3
    FOR UPDATE SKIP LOCKED
)
UPDATE approvals a SET escalation = $1, escalation_lease = now() + make_interval(secs => $2),
    escalated_at = coalesce(a.escalated_at, now())
FROM due
WHERE a.id = due.id AND {_CLAIMABLE}
RETURNING a.id
"""  # noqa: S608 - built from lifecycle constants, no input
"""Claim due escalations: `$1` the claimed state, `$2` the lease in seconds, `$3` at most how many,
`$4` the platforms served."""

_SELECT = """
SELECT a.*, (
    SELECT array_agg(v.voter_name ORDER BY v.voted_at) FROM approval_votes v
    WHERE v.approval_id = a.id AND v.args_digest = a.current_digest
) AS votes, g.id AS trust_id, g.granted_at AS trust_granted_at, g.expires_at AS trusted_until,
    g.matching AS trust_matching
FROM approvals a LEFT JOIN trust_grants g ON g.approval_id = a.id
"""
"""Approvals with the names of those who approved the current arguments, and the trust grant
their approval made, if any (at most one: `trust_grants.approval_id` is unique)."""


def _present(row: asyncpg.Record | None) -> asyncpg.Record:
    if row is None:  # pragma: no cover - read back inside the transaction that wrote it
        raise RuntimeError("approval row vanished inside its own transaction")
    return row


def _review(row: asyncpg.Record) -> ReviewRecord:
    return ReviewRecord(
        id=str(row["id"]),
        thread_id=row["thread_id"],
        interrupt_id=row["interrupt_id"],
        requester_id=row["requester_id"],
        requester_name=row["requester_name"],
        status=ReviewStatus(row["status"]),
        created_at=row["created_at"],
        source=row["source"],
        attempts=row["attempts"],
    )


def _args(stored: dict[str, Any] | None) -> dict[str, Any] | None:
    """Arguments read from the database, in canonical form (`bot.tools.canonical.canonical_values`).

    The columns are `json` (migration 0016): the text as written, so an object's keys keep the
    order the call runs in (docs/decisions/0034-arguments-approvers-can-see.md). Rows written
    before were `jsonb`, which gives a float beyond 64 bits back as an integer, which the
    checkpoint cannot hold and an edit would refuse (docs/decisions/0010-canonical-arguments.md).
    """
    return None if stored is None else canonical_values(stored)


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
        proposed_args=canonical_values(row["proposed_args"]),
        requester_id=row["requester_id"],
        requester_name=row["requester_name"],
        card_ref=row["card_ref"],
        status=ApprovalStatus(row["status"]),
        decided_by_id=row["decided_by_id"],
        decided_by_name=row["decided_by_name"],
        decided_at=row["decided_at"],
        final_args=_args(row["final_args"]),
        reason=row["reason"],
        created_at=row["created_at"],
        quorum=row["quorum"],
        current_args=_args(row["current_args"]),
        votes=tuple(row["votes"] or ()),
        expires_at=row["expires_at"],
        source=row["source"],
        outcome_unknown=row["outcome_unknown"],
        not_run=row["not_run"],
        definition=row["definition_digest"],
        definition_changed=row["definition_changed"],
        trust_offer_s=row["trust_offer_s"],
        trust_offer_matching=(tuple(row["trust_offer_matching"]) if row["trust_offer_matching"] is not None else None),
        trust_id=row["trust_id"],
        trust_matching=tuple(row["trust_matching"] or ()),
        trust_s=(
            round((row["trusted_until"] - row["trust_granted_at"]).total_seconds())
            if row["trust_id"] is not None
            else None
        ),
        trusted_until=row["trusted_until"],
        escalation=EscalationStatus(row["escalation"]) if row["escalation"] else None,
        escalate_at=row["escalate_at"],
        escalate_to=(
            EscalationTarget(kind=TargetKind(row["escalate_kind"]), subject_id=row["escalate_to"])
            if row["escalate_kind"]
            else None
        ),
        escalated_at=row["escalated_at"],
    )


def _escalation_columns(action: NewAction) -> tuple[int | None, str | None, str | None, str]:
    """`escalate_at`'s seconds, `escalate_kind`, `escalate_to` and the initial state of a new approval."""
    if action.escalates_in_s is None or action.escalate_to is None:
        return None, None, None, EscalationStatus.WAITING.value
    target = action.escalate_to
    return action.escalates_in_s, target.kind.value, target.subject_id, EscalationStatus.WAITING.value
