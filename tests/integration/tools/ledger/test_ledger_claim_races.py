"""The PostgreSQL ledger's one-statement claim against decisions and claims that race it.

`PostgresLedger.claim` first tries to claim a call in one statement that reads the approvals
gate and inserts the claim together; only when that claims nothing does it read the gate again
and work out why. These cases check that the split never lets a call run twice, with other
arguments than approved, under another definition, or without a decision.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from bot.audit.entries import AuditEntry, AuditKind
from bot.audit.postgres import PostgresAuditStore
from bot.base.conversation import Actor
from bot.reviews.postgres import PostgresApprovalStore
from bot.reviews.records import NewAction
from bot.reviews.store import Gate, VoteKind
from bot.settings import DatabaseSettings
from bot.storage.database import open_database
from bot.tools.ledger.postgres import PostgresLedger
from bot.tools.ledger.store import Claim, ToolResult

THREAD = "console:local:terminal"
REQUESTER = Actor(platform="console", workspace_id="local", user_id="U1", display_name="Requester")
APPROVER = Actor(platform="console", workspace_id="local", user_id="U2", display_name="Approver")


@dataclass
class Gated:
    """A PostgreSQL ledger and the approvals store whose gate it reads."""

    ledger: PostgresLedger
    approvals: PostgresApprovalStore


@pytest.fixture
async def gated(db_url: str) -> AsyncIterator[Gated]:
    """A ledger behind the approvals gate, on a fresh database."""
    async with open_database(DatabaseSettings(url=db_url, pool_max_size=8), run_migrations=False) as database:
        await database.pool.execute(
            "INSERT INTO conversations (thread_id, platform, workspace_id, channel_id) "
            "VALUES ($1, 'console', 'local', 'terminal')",
            THREAD,
        )
        audit = PostgresAuditStore(database.pool)
        approvals = PostgresApprovalStore(database.pool, audit)
        yield Gated(PostgresLedger(database.pool, approvals, audit=audit), approvals)


async def review(gated: Gated, tool_call_id: str, args: dict[str, Any], definition: str | None = None) -> str:
    """Open a review of one call of `notes__add`; the approval's id."""
    _, (approval,) = await gated.approvals.open_review(
        thread_id=THREAD,
        workspace_id="local",
        interrupt_id=f"i-{tool_call_id}",
        requester=REQUESTER,
        actions=[
            NewAction(
                tool_call_id=tool_call_id, tool_name="notes__add", args=args, description="", definition=definition
            )
        ],
    )
    return approval.id


async def decide(gated: Gated, approval_id: str, kind: VoteKind, args: dict[str, Any] | None = None) -> None:
    """Record `kind` by the approver (`args` for an edit)."""
    await gated.approvals.vote(
        approval_id,
        actor=APPROVER,
        kind=kind,
        quorum=1,
        args=args,
        audit=AuditEntry(kind=AuditKind.DECISION, workspace_id="local", outcome="", actor_id=APPROVER.user_id),
    )


async def claim(gated: Gated, call: str, args: dict[str, Any], *, reviewed: bool = True, definition: str | None = None):
    return await gated.ledger.claim(
        thread_id=THREAD, tool_call_id=call, tool_name="notes__add", args=args, reviewed=reviewed, definition=definition
    )


async def test_a_decision_landing_between_the_two_statements_grants_the_call_once(gated: Gated):
    """The one-statement claim sees the card pending; the approval lands before the gate is read again."""
    approval_id = await review(gated, "c1", {"text": "hi"})
    real_gate = gated.approvals.gate

    async def gate_after_the_click(thread_id: str, tool_call_id: str) -> Gate | None:
        await decide(gated, approval_id, VoteKind.APPROVE)
        return await real_gate(thread_id, tool_call_id)

    gated.approvals.gate = gate_after_the_click  # type: ignore[method-assign]
    assert await claim(gated, "c1", {"text": "hi"}) == Claim.GRANTED
    gated.approvals.gate = real_gate  # type: ignore[method-assign]
    assert await claim(gated, "c1", {"text": "hi"}) == Claim.ALREADY_STARTED
    approval = await gated.approvals.get(approval_id)
    assert approval is not None and not approval.definition_changed


async def test_a_rejection_landing_between_the_two_statements_runs_nothing(gated: Gated):
    """The card is rejected after the one-statement claim looked: refused, nothing claimed."""
    approval_id = await review(gated, "c1", {"text": "hi"})
    real_gate = gated.approvals.gate

    async def gate_after_the_click(thread_id: str, tool_call_id: str) -> Gate | None:
        await decide(gated, approval_id, VoteKind.REJECT)
        return await real_gate(thread_id, tool_call_id)

    gated.approvals.gate = gate_after_the_click  # type: ignore[method-assign]
    assert await claim(gated, "c1", {"text": "hi"}) == Claim.NOT_APPROVED
    assert not await gated.ledger.started(thread_id=THREAD, tool_call_id="c1")


async def test_an_edited_approval_runs_only_the_edited_arguments(gated: Gated):
    """After an edit, the proposal is refused and the edited arguments run once."""
    approval_id = await review(gated, "c1", {"text": "hi"})
    await decide(gated, approval_id, VoteKind.EDIT, {"text": "edited"})
    assert await claim(gated, "c1", {"text": "hi"}) == Claim.NOT_APPROVED
    assert await claim(gated, "c1", {"text": "hi"}, reviewed=False) == Claim.NOT_APPROVED
    assert not await gated.ledger.started(thread_id=THREAD, tool_call_id="c1")
    assert await claim(gated, "c1", {"text": "edited"}) == Claim.GRANTED
    assert await claim(gated, "c1", {"text": "edited"}) == Claim.ALREADY_STARTED


async def test_an_unreviewed_call_with_a_stored_rejection_is_refused(gated: Gated):
    """A decision binds whatever the policy says now: a rejected call does not run as unreviewed."""
    approval_id = await review(gated, "c1", {"text": "hi"})
    await decide(gated, approval_id, VoteKind.REJECT)
    assert await claim(gated, "c1", {"text": "hi"}, reviewed=False) == Claim.NOT_APPROVED
    assert not await gated.ledger.started(thread_id=THREAD, tool_call_id="c1")


async def test_a_call_claimed_before_its_definition_changed_is_never_run_again(gated: Gated):
    """A re-run under a new definition of a call claimed before: its earlier answer, not a second run."""
    approval_id = await review(gated, "c1", {}, definition="d1")
    await decide(gated, approval_id, VoteKind.APPROVE)
    assert await claim(gated, "c1", {}, definition="d1") == Claim.GRANTED
    assert await claim(gated, "c1", {}, definition="d2") == Claim.ALREADY_STARTED
    approval = await gated.approvals.get(approval_id)
    assert approval is not None and not approval.definition_changed and approval.outcome_unknown
    await gated.ledger.record(thread_id=THREAD, tool_call_id="c1", result=ToolResult(content="done"))
    assert await claim(gated, "c1", {}, definition="d2") == Claim.FINISHED


async def test_a_definition_none_on_the_card_refuses_an_mcp_definition_now(gated: Gated):
    """A card made without a definition does not cover a call that now has one."""
    approval_id = await review(gated, "c1", {})
    await decide(gated, approval_id, VoteKind.APPROVE)
    assert await claim(gated, "c1", {}, definition="d1") == Claim.DEFINITION_CHANGED
    assert not await gated.ledger.started(thread_id=THREAD, tool_call_id="c1")


async def test_of_claims_racing_a_decision_only_an_approved_one_runs_and_only_once(gated: Gated):
    """Claims sent while the approval lands: at most one GRANTED, and never before the approval."""
    for n in range(8):
        call = f"c{n}"
        approval_id = await review(gated, call, {"n": n})
        results = await asyncio.gather(
            *(claim(gated, call, {"n": n}) for _ in range(3)),
            decide(gated, approval_id, VoteKind.APPROVE),
            *(claim(gated, call, {"n": n}) for _ in range(3)),
        )
        claims = [r for r in results if r is not None]
        assert claims.count(Claim.GRANTED) <= 1
        assert set(claims) <= {Claim.GRANTED, Claim.NOT_APPROVED, Claim.ALREADY_STARTED}
        granted = Claim.GRANTED in claims
        assert await claim(gated, call, {"n": n}) == (Claim.ALREADY_STARTED if granted else Claim.GRANTED)
