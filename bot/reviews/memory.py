"""`InMemoryApprovalStore`: the `ApprovalStore` in a process's memory, for tests.

It keeps its data in a `ReviewTables` value that several instances may share: instances over
one `ReviewTables` behave like replicas over one database. Every method that changes something
holds the tables' `asyncio.Lock` for its whole work, where PostgreSQL serialises on the review
row (a vote, an expiry) or on the approval row (an escalation claim): of two racing events
exactly one moves an approval, and of two decisions finishing one review exactly one claims its
resume. A change is applied only once every check passed, so an error changes nothing, as a
rolled-back transaction does.

What it does not model: the `conversations` table (a review needs no conversation row here; a
decision does not count as the conversation's activity; `give_up_reviews` cannot mark the
conversation's run given up: `bot.turns.conversations` does that in PostgreSQL), a review's
`retry_at` (the upkeep's resume deadline, read by SQL of its own) and `attempts` (always 0), the
trust grants table (a grant made by a vote is kept in `ReviewTables.grants` and shown on its
approval, but `bot.reviews.trust.store` does not read it), and the stop's transaction
(`PostgresApprovalStore.stop_pending` works in a caller's PostgreSQL transaction). The tool-run
ledger it reads (`tool_runs`, `give_up_reviews`) is the one given to it, through its port.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import uuid
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from bot import metrics
from bot.audit.entries import AuditEntry, AuditKind, approval_entry
from bot.base.conversation import Actor, ConversationRef
from bot.base.errors import (
    AlreadyDecidedError,
    AlreadyVotedError,
    ApprovalNotFoundError,
    StaleVoteError,
    TrustRefusedError,
)
from bot.reviews.digest import args_digest
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
from bot.reviews.trust.audit import grant_detail
from bot.reviews.trust.grants import GRANT_ID_HEX, NewGrant, TrustGrant, key_digest, trust_key
from bot.tools.canonical import canonical_values
from bot.tools.ledger.memory import InMemoryLedger
from bot.tools.ledger.store import ToolResult, ToolRunLedger

Clock = Callable[[], datetime]

_TICK = timedelta(microseconds=1)


@dataclass(frozen=True, slots=True)
class _Vote:
    voter_id: str
    voter_name: str
    digest: str
    at: datetime


@dataclass(slots=True)
class ReviewTables:
    """The in-memory store's data, shareable between instances.

    Attributes:
        reviews: review id -> review.
        approvals: approval id -> approval, as stored (its `votes` and trust fields are filled
            in on reading, as PostgreSQL's join does).
        approved: approval id -> `args_digest` of the arguments its decision approved (None
            until approved).
        votes: approval id -> its votes, oldest first.
        cards: approval id -> its posted copies, in the order they were added.
        leases: approval id -> when its claimed escalation's lease runs out.
        grants: approval id -> the trust grant its approval made.
        audit: the audit rows written, oldest first.
        lock: held by every change, as PostgreSQL's row locks order them.
    """

    reviews: dict[str, ReviewRecord] = field(default_factory=dict)
    approvals: dict[str, ApprovalRecord] = field(default_factory=dict)
    approved: dict[str, str | None] = field(default_factory=dict)
    votes: dict[str, list[_Vote]] = field(default_factory=dict)
    cards: dict[str, list[str]] = field(default_factory=dict)
    leases: dict[str, datetime | None] = field(default_factory=dict)
    grants: dict[str, TrustGrant] = field(default_factory=dict)
    audit: list[AuditEntry] = field(default_factory=list)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


def _now() -> datetime:
    return datetime.now(UTC)


def _json(value: Any) -> Any:
    """`value` as a JSON column gives it back, in canonical form (as `PostgresApprovalStore` reads it)."""
    return canonical_values(json.loads(json.dumps(value)))


def _platform(thread_id: str) -> str:
    """A thread id's first part: its `ConversationRef.platform`."""
    return thread_id.split(":", 1)[0]


class InMemoryApprovalStore:
    """Reviews and approvals in a process's memory (see the module's docstring for what it leaves out).

    Args:
        tables: the data; instances over the same tables see each other's changes.
        ledger: the tool-run ledger `tool_runs` and `give_up_reviews` read (by default a new
            `InMemoryLedger`: no call started).
        clock: the time now (timezone-aware); expiry and escalation times are reckoned from it.
    """

    def __init__(
        self, tables: ReviewTables | None = None, *, ledger: ToolRunLedger | None = None, clock: Clock = _now
    ) -> None:
        self.tables = tables if tables is not None else ReviewTables()
        self._ledger: ToolRunLedger = ledger if ledger is not None else InMemoryLedger()
        self._clock = clock

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
        """See `ApprovalStore.open_review`."""
        async with self.tables.lock:
            for stored in self.tables.reviews.values():
                if stored.thread_id == thread_id and stored.interrupt_id == interrupt_id:
                    return stored, self._approvals_of(stored.id)
            now = self._clock()
            # Reviews are ordered by when they opened; PostgreSQL's transaction times never tie in practice.
            now = max(now, max((r.created_at for r in self.tables.reviews.values()), default=now) + _TICK)
            review = ReviewRecord(
                id=str(uuid.uuid4()),
                thread_id=thread_id,
                interrupt_id=interrupt_id,
                requester_id=requester.user_id,
                requester_name=requester.display_name,
                status=ReviewStatus.PENDING,
                created_at=now,
                source=source,
            )
            self.tables.reviews[review.id] = review
            for position, action in enumerate(actions):
                approval = _new_approval(review, workspace_id, position, action, now)
                self.tables.approvals[approval.id] = approval
                self.tables.approved[approval.id] = None
                self.tables.votes[approval.id] = []
            approvals = self._approvals_of(review.id)
        metrics.approvals_opened(action.tool_name for action in actions)
        return review, approvals

    async def get(self, approval_id: str) -> ApprovalRecord | None:
        """See `ApprovalStore.get`."""
        return self._read(approval_id) if approval_id in self.tables.approvals else None

    async def review(self, review_id: str) -> ReviewRecord | None:
        """See `ApprovalStore.review` (ValueError for an id that is not a UUID, as PostgreSQL's)."""
        return self.tables.reviews.get(str(uuid.UUID(review_id)))

    async def reviews_for_interrupts(self, thread_id: str, interrupt_ids: Sequence[str]) -> dict[str, ReviewRecord]:
        """See `ApprovalStore.reviews_for_interrupts`."""
        wanted = set(interrupt_ids)
        return {
            review.interrupt_id: review
            for review in self.tables.reviews.values()
            if review.thread_id == thread_id and review.interrupt_id in wanted
        }

    async def approvals_of(self, review_id: str) -> list[ApprovalRecord]:
        """See `ApprovalStore.approvals_of`."""
        return self._approvals_of(str(uuid.UUID(review_id)))

    async def pending_in_thread(self, thread_id: str) -> list[ApprovalRecord]:
        """See `ApprovalStore.pending_in_thread`."""
        return self._select(lambda a: a.thread_id == thread_id and a.is_pending)

    async def pending_everywhere(self, *, platforms: Collection[str], limit: int = 1000) -> list[ApprovalRecord]:
        """See `ApprovalStore.pending_everywhere`."""
        served = set(platforms)
        return self._select(lambda a: a.is_pending and _platform(a.thread_id) in served)[:limit]

    async def reviews_in_thread(self, thread_id: str, statuses: Sequence[ReviewStatus]) -> list[ReviewRecord]:
        """See `ApprovalStore.reviews_in_thread`."""
        wanted = set(statuses)
        found = [r for r in self.tables.reviews.values() if r.thread_id == thread_id and r.status in wanted]
        return sorted(found, key=lambda r: (r.created_at, r.id))

    async def add_card(self, approval_id: str, card_ref: str, *, primary: bool) -> None:
        """See `ApprovalStore.add_card` (KeyError for an approval never stored, as PostgreSQL's key refuses it)."""
        async with self.tables.lock:
            approval = self.tables.approvals[approval_id]
            cards = self.tables.cards.setdefault(approval_id, [])
            if card_ref not in cards:
                cards.append(card_ref)
            if primary:
                self.tables.approvals[approval_id] = replace(approval, card_ref=card_ref)

    async def card_refs(self, approval_id: str) -> list[str]:
        """See `ApprovalStore.card_refs`."""
        return list(self.tables.cards.get(approval_id, ()))

    async def expire_due(self, *, platforms: Collection[str]) -> list[DecideResult]:
        """See `ApprovalStore.expire_due`; the audit rows go to `ReviewTables.audit`."""
        served = set(platforms)
        now = self._clock()
        due = sorted(
            (
                a
                for a in self.tables.approvals.values()
                if a.is_pending
                and a.expires_at is not None
                and a.expires_at <= now
                and _platform(a.thread_id) in served
            ),
            key=lambda a: a.expires_at or now,
        )[:200]
        results = []
        for candidate in due:
            result = await self._expire_one(candidate.id)
            if result is not None:
                results.append(result)
        return results

    async def _expire_one(self, approval_id: str) -> DecideResult | None:
        async with self.tables.lock:
            current = self.tables.approvals[approval_id]
            now = self._clock()
            if current.status.value not in approval_sources(ApprovalEvent.EXPIRE) or not (
                current.expires_at is not None and current.expires_at <= now
            ):
                return None  # decided (or expired by another replica) in the meantime
            self.tables.approvals[approval_id] = replace(
                current,
                status=approval_after(ApprovalStatus.PENDING, ApprovalEvent.EXPIRE),
                decided_at=now,
                reason=EXPIRED_REASON,
            )
            row = self._read(approval_id)
            self.tables.audit.append(approval_entry(AuditKind.EXPIRY, row, "expired", reason=EXPIRED_REASON))
            claimed = self._claim_resume(row.review_id)
        metrics.approval_closed(row)
        return DecideResult(approval=row, review_complete=claimed, decided=True)

    async def next_expiry(self, *, platforms: Collection[str]) -> datetime | None:
        """See `ApprovalStore.next_expiry`."""
        served = set(platforms)
        times = [
            a.expires_at
            for a in self.tables.approvals.values()
            if a.is_pending and a.expires_at is not None and _platform(a.thread_id) in served
        ]
        return min(times, default=None)

    async def claim_due_escalations(
        self, *, lease_s: float, platforms: Collection[str], limit: int = 50
    ) -> list[ApprovalRecord]:
        """See `ApprovalStore.claim_due_escalations`."""
        served = set(platforms)
        claimed_state = escalation_after(EscalationStatus.WAITING, EscalationEvent.CLAIM)
        async with self.tables.lock:
            now = self._clock()
            due = sorted(
                (
                    a
                    for a in self.tables.approvals.values()
                    if self._claimable(a, now)
                    and a.escalate_at is not None
                    and a.escalate_at <= now
                    and (a.escalation is not claimed_state or self._lease_over(a.id, now))
                    and _platform(a.thread_id) in served
                ),
                key=lambda a: a.escalate_at or now,
            )[:limit]
            for approval in due:
                self.tables.approvals[approval.id] = replace(
                    approval, escalation=claimed_state, escalated_at=approval.escalated_at or now
                )
                self.tables.leases[approval.id] = now + timedelta(seconds=lease_s)
            return [self._read(approval.id) for approval in due]

    async def finish_escalation(self, approval_id: str, *, copies: int) -> ApprovalRecord | None:
        """See `ApprovalStore.finish_escalation`; the audit row goes to `ReviewTables.audit`."""
        async with self.tables.lock:
            current = self.tables.approvals.get(approval_id)
            if current is None or current.escalation is None:
                return None
            if current.escalation.value not in escalation_sources(EscalationEvent.POST):
                return None
            self.tables.approvals[approval_id] = replace(
                current, escalation=escalation_after(EscalationStatus.CLAIMED, EscalationEvent.POST)
            )
            self.tables.leases[approval_id] = None
            row = self._read(approval_id)
            target = row.escalate_to
            self.tables.audit.append(
                approval_entry(
                    AuditKind.ESCALATION,
                    row,
                    "escalated",
                    detail={
                        "to": {"kind": target.kind.value, "id": target.subject_id} if target else None,
                        "at": row.escalated_at.isoformat() if row.escalated_at else None,
                        "copies": copies,
                    },
                )
            )
        return row

    async def next_escalation(self, *, platforms: Collection[str]) -> datetime | None:
        """See `ApprovalStore.next_escalation`."""
        served = set(platforms)
        now = self._clock()
        times = []
        for approval in self.tables.approvals.values():
            if not self._claimable(approval, now) or _platform(approval.thread_id) not in served:
                continue
            if approval.escalation is EscalationStatus.CLAIMED:
                times.append(self.tables.leases.get(approval.id))
            else:
                times.append(approval.escalate_at)
        return min((time for time in times if time is not None), default=None)

    async def still_escalating(self, approval_id: str) -> ApprovalRecord | None:
        """See `ApprovalStore.still_escalating`."""
        approval = self.tables.approvals.get(approval_id)
        if approval is None or not self._claimable(approval, self._clock()):
            return None
        return self._read(approval_id)

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
        """See `ApprovalStore.vote`; the audit rows go to `ReviewTables.audit`."""
        async with self.tables.lock:
            result = self._vote(approval_id, actor, kind, quorum, audit, args, expected_digest, reason, trust)
        if result.decided:
            metrics.approval_closed(result.approval)
        return result

    def _vote(
        self,
        approval_id: str,
        actor: Actor,
        kind: VoteKind,
        quorum: int,
        audit: AuditEntry,
        args: dict[str, Any] | None,
        expected_digest: str | None,
        reason: str | None,
        trust: NewGrant | None,
    ) -> DecideResult:
        """`vote` under the tables' lock: every check first, then every change."""
        if approval_id not in self.tables.approvals:
            raise ApprovalNotFoundError(approval_id)
        current = self._read(approval_id)
        if not current.is_pending:
            raise AlreadyDecidedError(
                outcome=current.status.value,
                decided_by_id=current.decided_by_id,
                decided_by_name=current.decided_by_name,
                decided_at=current.decided_at,
            )
        now = self._clock()
        if current.expires_at is not None and current.expires_at <= now:
            raise AlreadyDecidedError(
                outcome=ApprovalStatus.EXPIRED.value,
                decided_by_id=None,
                decided_by_name=None,
                decided_at=current.expires_at,
            )
        under_vote = current.args_under_vote
        digest = args_digest(under_vote)
        if kind is VoteKind.REJECT:
            return self._finish(current, actor, ApprovalEvent.REJECT, None, None, reason, quorum, audit, now)
        edited_args: dict[str, Any] | None = None
        if kind is VoteKind.EDIT:
            if args is None:
                raise ValueError("an edit vote needs the new arguments")
            under_vote, digest = _json(args), args_digest(args)
            if digest == args_digest(current.proposed_args):
                under_vote = dict(current.proposed_args)  # back to the proposal: its key order is kept
            edited_args = under_vote
        elif expected_digest is not None and expected_digest != digest:
            raise StaleVoteError(approval_id)
        votes = self.tables.votes[approval_id]
        inserted = not any(v.voter_id == actor.user_id and v.digest == digest for v in votes)
        if not inserted and kind is VoteKind.APPROVE:
            raise AlreadyVotedError(approval_id)
        count = sum(1 for v in votes if v.digest == digest) + (1 if inserted else 0)
        event = tally(approvals=count, quorum=quorum, edited=digest != args_digest(current.proposed_args))
        if trust is not None and (kind is not VoteKind.APPROVE or not grants_trust(event, quorum)):
            raise TrustRefusedError("quorum")
        # Every check passed: the changes.
        if edited_args is not None:
            self.tables.approvals[approval_id] = replace(self.tables.approvals[approval_id], current_args=edited_args)
        if inserted:
            votes.append(_Vote(actor.user_id, actor.display_name, digest, now))
        current = self._read(approval_id)
        if event is not ApprovalEvent.VOTE:
            return self._finish(current, actor, event, under_vote, digest, None, quorum, audit, now, trust=trust)
        self.tables.approvals[approval_id] = replace(self.tables.approvals[approval_id], quorum=quorum)
        self.tables.audit.append(
            replace(audit, outcome="vote", final_args=under_vote, detail={**audit.detail, "votes": count})
        )
        return DecideResult(approval=self._read(approval_id), review_complete=False, decided=False)

    def _finish(
        self,
        current: ApprovalRecord,
        actor: Actor,
        event: ApprovalEvent,
        final_args: dict[str, Any] | None,
        digest: str | None,
        reason: str | None,
        quorum: int,
        audit: AuditEntry,
        now: datetime,
        *,
        trust: NewGrant | None = None,
    ) -> DecideResult:
        status = approval_after(current.status, event)
        self.tables.approvals[current.id] = replace(
            self.tables.approvals[current.id],
            status=status,
            decided_by_id=actor.user_id,
            decided_by_name=actor.display_name,
            decided_at=now,
            final_args=final_args,
            reason=reason,
            quorum=quorum,
        )
        self.tables.approved[current.id] = digest
        self.tables.audit.append(replace(audit, outcome=status.value, final_args=final_args, reason=reason))
        if trust is not None and final_args is not None:
            self._insert_grant(current, trust, final_args, actor, now)
        claimed = self._claim_resume(current.review_id)
        return DecideResult(approval=self._read(current.id), review_complete=claimed, decided=True)

    def _insert_grant(
        self, approval: ApprovalRecord, new: NewGrant, args: dict[str, Any], actor: Actor, now: datetime
    ) -> None:
        """The grant an approval made, with its audit row (as `bot.reviews.trust.store.insert_grant`)."""
        conversation = ConversationRef.from_thread_id(approval.thread_id)
        grant = TrustGrant(
            id=secrets.token_hex(GRANT_ID_HEX // 2),
            approval_id=approval.id,
            platform=conversation.platform,
            workspace_id=approval.workspace_id,
            channel_id=conversation.channel_id,
            thread_id=approval.thread_id,
            tool_name=approval.tool_name,
            requester_id=approval.requester_id,
            requester_name=approval.requester_name,
            matched=_json(trust_key(args, new.matching)),
            matched_digest=key_digest(args, new.matching, approval.definition),
            granted_by_id=actor.user_id,
            granted_by_name=actor.display_name,
            granted_at=now,
            expires_at=now + timedelta(seconds=new.duration_s),
            matching=tuple(new.matching),
            source=approval.source,
        )
        self.tables.grants[approval.id] = grant
        self.tables.audit.append(
            approval_entry(
                AuditKind.DECISION, approval, "trust_granted", actor=actor, final_args=args, detail=grant_detail(grant)
            )
        )

    async def gate(self, thread_id: str, tool_call_id: str) -> Gate | None:
        """See `ApprovalStore.gate`."""
        latest = self._latest(thread_id, tool_call_id)
        if latest is None:
            return None
        return Gate(status=latest.status, approved=self.tables.approved[latest.id], definition=latest.definition)

    async def mark_definition_changed(self, thread_id: str, tool_call_id: str) -> ApprovalRecord | None:
        """See `ApprovalStore.mark_definition_changed`."""
        return await self._mark("definition_changed", thread_id, tool_call_id)

    async def mark_outcome_unknown(self, thread_id: str, tool_call_id: str) -> ApprovalRecord | None:
        """See `ApprovalStore.mark_outcome_unknown`."""
        return await self._mark("outcome_unknown", thread_id, tool_call_id)

    async def _mark(
        self, flag: Literal["definition_changed", "outcome_unknown"], thread_id: str, tool_call_id: str
    ) -> ApprovalRecord | None:
        async with self.tables.lock:
            latest = self._latest(thread_id, tool_call_id)
            if latest is None:
                return None
            if flag == "definition_changed":
                self.tables.approvals[latest.id] = replace(latest, definition_changed=True)
            else:
                self.tables.approvals[latest.id] = replace(latest, outcome_unknown=True)
            return self._read(latest.id)

    async def tool_runs(self, thread_id: str, tool_call_ids: Sequence[str]) -> dict[str, ToolResult | None]:
        """See `ApprovalStore.tool_runs`: read from the ledger given to this store."""
        runs: dict[str, ToolResult | None] = {}
        for tool_call_id in dict.fromkeys(tool_call_ids):
            if await self._ledger.started(thread_id=thread_id, tool_call_id=tool_call_id):
                runs[tool_call_id] = await self._ledger.recorded(thread_id=thread_id, tool_call_id=tool_call_id)
        return runs

    async def give_up_reviews(self, thread_id: str, review_ids: Sequence[str]) -> dict[str, list[ApprovalRecord]]:
        """See `ApprovalStore.give_up_reviews` (the conversation's run is not marked here: no conversations table)."""
        async with self.tables.lock:
            given_up: list[str] = []
            for review_id in dict.fromkeys(str(uuid.UUID(review_id)) for review_id in review_ids):
                review = self.tables.reviews.get(review_id)
                if review is None or review.thread_id != thread_id:
                    continue
                if review.status.value not in review_sources(ReviewEvent.GIVE_UP):
                    continue
                after = review_after(ReviewStatus.RESUMING, ReviewEvent.GIVE_UP)
                self.tables.reviews[review_id] = replace(review, status=after)
                given_up.append(review_id)
            for review_id in given_up:
                for approval in self._approvals_of(review_id):
                    if approval.status not in RUNS:
                        continue
                    call = approval.tool_call_id
                    # A call without an id has no ledger row PostgreSQL could match: it never started.
                    if call is None or not await self._ledger.started(thread_id=thread_id, tool_call_id=call):
                        self.tables.approvals[approval.id] = replace(self.tables.approvals[approval.id], not_run=True)
                    elif await self._ledger.recorded(thread_id=thread_id, tool_call_id=call) is None:
                        self.tables.approvals[approval.id] = replace(
                            self.tables.approvals[approval.id], outcome_unknown=True
                        )
            return {review_id: self._approvals_of(review_id) for review_id in given_up}

    async def complete_review(self, review_id: str) -> bool:
        """See `ApprovalStore.complete_review`."""
        async with self.tables.lock:
            review = self.tables.reviews.get(str(uuid.UUID(review_id)))
            if review is None or review.status.value not in review_sources(ReviewEvent.FINISH):
                return False
            self.tables.reviews[review.id] = replace(review, status=ReviewStatus.DONE)
            return True

    def _claim_resume(self, review_id: str) -> bool:
        """Claim the review for resuming if none of its approvals is pending any more (under the lock)."""
        review = self.tables.reviews[review_id]
        if review.status.value not in review_sources(ReviewEvent.CLAIM):
            return False
        if any(a.review_id == review_id and a.is_pending for a in self.tables.approvals.values()):
            return False
        self.tables.reviews[review_id] = replace(review, status=ReviewStatus.RESUMING)
        return True

    def _claimable(self, approval: ApprovalRecord, now: datetime) -> bool:
        """Whether an escalation may be claimed on `approval` (`PostgresApprovalStore`'s `_CLAIMABLE`)."""
        return (
            approval.status in ESCALATES_FROM
            and approval.escalation is not None
            and approval.escalation.value in escalation_sources(EscalationEvent.CLAIM)
            and (approval.expires_at is None or approval.expires_at > now)
        )

    def _lease_over(self, approval_id: str, now: datetime) -> bool:
        lease = self.tables.leases.get(approval_id)
        return lease is not None and lease <= now

    def _latest(self, thread_id: str, tool_call_id: str) -> ApprovalRecord | None:
        """The call's latest approval (its gate), or None."""
        found = [
            a for a in self.tables.approvals.values() if a.thread_id == thread_id and a.tool_call_id == tool_call_id
        ]
        return max(found, key=lambda a: a.created_at, default=None)

    def _approvals_of(self, review_id: str) -> list[ApprovalRecord]:
        return self._select(lambda a: a.review_id == review_id)

    def _select(self, keep: Callable[[ApprovalRecord], bool]) -> list[ApprovalRecord]:
        """The approvals `keep` keeps, as read, oldest first (then in action-request order)."""
        kept = sorted((a for a in self.tables.approvals.values() if keep(a)), key=lambda a: (a.created_at, a.position))
        return [self._read(a.id) for a in kept]

    def _read(self, approval_id: str) -> ApprovalRecord:
        """An approval as PostgreSQL's `_SELECT` reads it: with who approved its current arguments, and its grant."""
        approval = self.tables.approvals[approval_id]
        current = args_digest(approval.args_under_vote)
        voters = tuple(
            v.voter_name for v in sorted(self.tables.votes[approval_id], key=lambda v: v.at) if v.digest == current
        )
        grant = self.tables.grants.get(approval_id)
        if grant is None:
            return replace(approval, votes=voters)
        return replace(
            approval,
            votes=voters,
            trust_id=grant.id,
            trust_matching=grant.matching,
            trust_s=round((grant.expires_at - grant.granted_at).total_seconds()),
            trusted_until=grant.expires_at,
        )


def _new_approval(
    review: ReviewRecord, workspace_id: str, position: int, action: NewAction, now: datetime
) -> ApprovalRecord:
    """A pending approval of `action`, as `PostgresApprovalStore.open_review` stores it."""

    def after(seconds: int | None) -> datetime | None:
        return None if seconds is None else now + timedelta(seconds=seconds)

    escalates = action.escalates_in_s is not None and action.escalate_to is not None
    proposed = _json(action.args)
    return ApprovalRecord(
        id=uuid.uuid4().hex,
        review_id=review.id,
        position=position,
        thread_id=review.thread_id,
        workspace_id=workspace_id,
        tool_call_id=action.tool_call_id,
        tool_name=action.tool_name,
        description=action.description,
        proposed_args=proposed,
        requester_id=review.requester_id,
        requester_name=review.requester_name,
        card_ref=None,
        status=ApprovalStatus.PENDING,
        decided_by_id=None,
        decided_by_name=None,
        decided_at=None,
        final_args=None,
        reason=None,
        created_at=now,
        quorum=action.quorum,
        current_args=proposed,
        expires_at=after(action.expires_in_s),
        source=review.source,
        definition=action.definition,
        trust_offer_s=action.trust_offer_s,
        trust_offer_matching=tuple(action.trust_offer_matching) if action.trust_offer_s is not None else None,
        escalation=EscalationStatus.WAITING if escalates else None,
        escalate_at=after(action.escalates_in_s) if escalates else None,
        escalate_to=action.escalate_to if escalates else None,
    )
