"""Expiry while two delegations of one turn wait for cards (two interrupts pending in one thread).

The core service on a real PostgreSQL; one scripted model plays the supervisor and both
subagents (tests/integration/agents/test_subagents_service.py's `team`). The cards' expiry is brought
forward in the database and the sweeper woken, as the passing of time would.
"""

from __future__ import annotations

import pytest

from bot.admin.commands import SetExpiry
from bot.audit.entries import AuditKind
from bot.base.agent_kind import AgentKind
from bot.base.errors import AlreadyDecidedError
from bot.ports import ApprovalExpired, ReviewPending
from bot.reviews.decisions import Approve
from bot.reviews.lifecycle import ApprovalStatus, ReviewStatus
from bot.reviews.records import EXPIRED_REASON
from tests.integration.agents.test_subagents_service import ADMIN, SPECS, admin, pending, team, to_both, until
from tests.support.recording_platform import RecordingPlatform
from tests.support.service import WORKSPACE, actor, conversation, message, open_service

EXPIRED = f"Rejected: {EXPIRED_REASON}."
"""What a subagent reads (and so reports) for its expired call."""


def x_then_nothing(text: str) -> list[tuple[str, str]]:
    """The supervisor delegates "x" to both subagents, and answers anything else itself ("ok")."""
    return to_both(text) if text == "x" else []


async def expire(h, *approval_ids: str) -> None:
    """Make these approvals due now (as if their time had passed)."""
    await h.database.pool.execute("UPDATE approvals SET expires_at = now() WHERE id = ANY($1::text[])", approval_ids)


def expiry_notices(*platforms: RecordingPlatform) -> list[str]:
    return [n.approval.id for p in platforms for _, n, _ in p.notices if isinstance(n, ApprovalExpired)]


async def test_both_paused_delegations_expire_once_across_two_replicas(db_url, registry, tool_log):
    """Two cards expire while two replicas sweep: each expiry once, nothing runs, one answer, the thread is free."""
    platform_a, platform_b = RecordingPlatform(admins={ADMIN}), RecordingPlatform(admins={ADMIN})
    kw = {"subagents": SPECS, "default_agent": AgentKind.SUBAGENTS}
    async with (
        open_service(db_url, team(x_then_nothing), registry, platform_a, **kw) as a,
        open_service(db_url, team(x_then_nothing), registry, platform_b, **kw) as b,
    ):
        await admin(a, registry).execute(actor(ADMIN), SetExpiry(seconds=3600), here="C1")
        await a.service.handle_message(message("x", user="alice"))
        cards = {c.source: c for c in pending(a)}
        assert set(cards) == {"alpha", "beta"} and cards["alpha"].review_id != cards["beta"].review_id
        assert all(c.expires_at is not None for c in cards.values())

        await expire(a, *(c.id for c in cards.values()))
        a.service.expiry.wake()
        b.service.expiry.wake()
        await until(lambda: bool(platform_a.answers or platform_b.answers))
        await a.service.tasks.join()
        await b.service.tasks.join()
        # Both sweepers look again: nothing is left to expire.
        assert await a.service.expiry.sweep() == 0 and await b.service.expiry.sweep() == 0

        stored = [await a.approvals.get(c.id) for c in cards.values()]
        reviews = await a.approvals.reviews_in_thread(conversation().thread_id, list(ReviewStatus))
        with pytest.raises(AlreadyDecidedError):  # a late click on an expired card changes nothing
            await b.service.decide(cards["alpha"].id, actor("alice"), Approve())
        await b.service.handle_message(message("next"))
        await a.service.tasks.join()
        await b.service.tasks.join()
        audit = await a.audit.recent(WORKSPACE, limit=100)

    assert tool_log.calls == []
    assert all(s is not None and s.status is ApprovalStatus.EXPIRED for s in stored)
    assert [r.status for r in reviews] == [ReviewStatus.DONE, ReviewStatus.DONE]
    assert sorted(expiry_notices(platform_a, platform_b)) == sorted(c.id for c in cards.values())
    answers = [text for _, text in platform_a.answers + platform_b.answers]
    assert answers == [f"answer: alpha reports: {EXPIRED} | beta reports: {EXPIRED}", "ok"]
    expiries = [e.approval_id for e in audit if e.kind is AuditKind.EXPIRY]
    assert sorted(expiries) == sorted(c.id for c in cards.values())  # one row per approval
    assert not [e for e in audit if e.kind is AuditKind.DECISION]


async def test_one_delegation_expires_while_the_other_is_approved(db_url, registry, tool_log):
    """alpha's card expires (its call never runs), beta's is approved (runs once); one answer; the thread is free."""
    platform = RecordingPlatform(admins={ADMIN})
    kw = {"subagents": SPECS, "default_agent": AgentKind.SUBAGENTS}
    async with open_service(db_url, team(x_then_nothing), registry, platform, **kw) as h:
        await admin(h, registry).execute(actor(ADMIN), SetExpiry(seconds=3600), here="C1")
        await h.service.handle_message(message("x", user="alice"))
        cards = {c.source: c for c in pending(h)}

        await expire(h, cards["alpha"].id)
        h.service.expiry.wake()
        await until(lambda: expiry_notices(platform) == [cards["alpha"].id])
        await h.service.tasks.join()
        assert h.platform.answers == [] and tool_log.calls == []  # the supervisor waits for beta
        await h.service.handle_message(message("still there?", user="bob"))
        notice = h.platform.notices[-1][1]
        assert isinstance(notice, ReviewPending) and [a.id for a in notice.approvals] == [cards["beta"].id]

        await h.service.decide(cards["beta"].id, actor("alice"), Approve())
        await h.service.tasks.join()
        assert await h.service.expiry.sweep() == 0
        with pytest.raises(AlreadyDecidedError):
            await h.service.decide(cards["alpha"].id, actor("alice"), Approve())
        await h.service.handle_message(message("next"))
        alpha, beta = await h.approvals.get(cards["alpha"].id), await h.approvals.get(cards["beta"].id)
        audit = await h.audit.recent(WORKSPACE, limit=100)

    assert tool_log.calls == [("send", {"to": "x-b", "body": "beta", "urgent": False})]
    assert alpha is not None and alpha.status is ApprovalStatus.EXPIRED
    assert beta is not None and beta.status is ApprovalStatus.APPROVED
    assert expiry_notices(platform) == [cards["alpha"].id]
    assert [text for _, text in h.platform.answers] == [
        f"answer: alpha reports: {EXPIRED} | beta reports: sent to x-b",
        "ok",
    ]
    assert [e.approval_id for e in audit if e.kind is AuditKind.EXPIRY] == [cards["alpha"].id]
    assert [(e.approval_id, e.outcome) for e in audit if e.kind is AuditKind.DECISION] == [
        (cards["beta"].id, "approved")
    ]
