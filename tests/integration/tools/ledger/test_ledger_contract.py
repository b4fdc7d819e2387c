"""The tool-run ledger contract, run against PostgreSQL (a real server) and the in-memory ledger alike.

What both ledgers share (`bot.tools.ledger.store`): a call is claimed once and never run twice
(GRANTED, then FINISHED once its result is recorded, else ALREADY_STARTED), a call whose MCP
server asked is answered ASKED, and each round after the first is claimed once, what a round
asked kept in order (docs/decisions/0054-mcp-elicitation.md).

The approvals gate (NOT_APPROVED, DEFINITION_CHANGED, trust grants, STOPPED) is PostgreSQL's
alone: the in-memory ledger has no approvals to read (`InMemoryLedger`). Its cases are at the
end of this file, on PostgreSQL only.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass

import pytest

from bot.audit.entries import AuditEntry, AuditKind
from bot.audit.postgres import PostgresAuditStore
from bot.base.conversation import Actor
from bot.reviews.postgres import PostgresApprovalStore
from bot.reviews.records import NewAction
from bot.reviews.store import VoteKind
from bot.settings import DatabaseSettings
from bot.storage.database import open_database
from bot.tools.ledger.memory import InMemoryLedger
from bot.tools.ledger.postgres import PostgresLedger
from bot.tools.ledger.store import Claim, Round, ToolResult, ToolRunLedger
from tests.support import postgres

THREAD = "console:local:terminal"
ASKED = {"resultType": "input_required", "requestState": "s1", "inputRequests": {}}
REQUESTER = Actor(platform="console", workspace_id="local", user_id="U1", display_name="Requester")
APPROVER = Actor(platform="console", workspace_id="local", user_id="U2", display_name="Approver")


@pytest.fixture(params=["postgres", "memory"])
async def ledger(request: pytest.FixtureRequest, pg_server: postgres.TestServer) -> AsyncIterator[ToolRunLedger]:
    """The ledger under test, on PostgreSQL (a fresh database) or in memory."""
    if request.param == "memory":
        yield InMemoryLedger()
        return
    db_url = await pg_server.create_database()
    async with AsyncExitStack() as stack:
        stack.push_async_callback(pg_server.drop_database, db_url)
        database = await stack.enter_async_context(
            open_database(DatabaseSettings(url=db_url, pool_max_size=3), run_migrations=False)
        )
        audit = PostgresAuditStore(database.pool)
        yield PostgresLedger(database.pool, PostgresApprovalStore(database.pool, audit), audit=audit)


async def claim(ledger: ToolRunLedger, tool_call_id: str, **args: object) -> Claim:
    """Claim an unreviewed call of `notes__add` with `args`."""
    return await ledger.claim(
        thread_id=THREAD, tool_call_id=tool_call_id, tool_name="notes__add", args=args, reviewed=False
    )


async def test_a_call_is_granted_once_then_answered_already_started(ledger: ToolRunLedger):
    """The first claim runs the call; every later claim of it (a re-run after a crash) does not."""
    assert not await ledger.started(thread_id=THREAD, tool_call_id="c1")
    assert await claim(ledger, "c1", text="hi") == Claim.GRANTED
    assert await ledger.started(thread_id=THREAD, tool_call_id="c1")
    assert await claim(ledger, "c1", text="hi") == Claim.ALREADY_STARTED
    assert await claim(ledger, "c1", text="other arguments") == Claim.ALREADY_STARTED
    assert await ledger.recorded(thread_id=THREAD, tool_call_id="c1") is None
    assert not await ledger.started(thread_id="console:local:elsewhere", tool_call_id="c1")


async def test_of_two_claims_at_once_exactly_one_is_granted(ledger: ToolRunLedger):
    """Two runners claiming the same call together: one runs it, the other hears it started."""
    claims = await asyncio.gather(claim(ledger, "c1"), claim(ledger, "c1"))
    assert sorted(claims) == sorted([Claim.GRANTED, Claim.ALREADY_STARTED])


async def test_a_recorded_result_is_read_back_and_answers_finished(ledger: ToolRunLedger):
    """A call that ran to its end keeps its result (content blocks and an error status too)."""
    assert await claim(ledger, "c1") == Claim.GRANTED
    assert await claim(ledger, "c2") == Claim.GRANTED
    await ledger.record(thread_id=THREAD, tool_call_id="c1", result=ToolResult("added"))
    blocks: list[object] = [{"type": "text", "text": "no such note"}]
    await ledger.record(thread_id=THREAD, tool_call_id="c2", result=ToolResult(blocks, status="error"))
    assert await ledger.recorded(thread_id=THREAD, tool_call_id="c1") == ToolResult("added", status="success")
    assert await ledger.recorded(thread_id=THREAD, tool_call_id="c2") == ToolResult(blocks, status="error")
    assert await claim(ledger, "c1") == Claim.FINISHED
    assert await claim(ledger, "c2") == Claim.FINISHED
    assert await ledger.started(thread_id=THREAD, tool_call_id="c1")


async def test_a_call_never_claimed_has_nothing_recorded(ledger: ToolRunLedger):
    """Reads change nothing: a call neither claimed nor recorded stays unclaimed, and is granted later."""
    assert await ledger.recorded(thread_id=THREAD, tool_call_id="c1") is None
    assert not await ledger.started(thread_id=THREAD, tool_call_id="c1")
    assert await ledger.rounds(thread_id=THREAD, tool_call_id="c1") == []
    assert await claim(ledger, "c1") == Claim.GRANTED


async def test_a_result_of_a_call_never_claimed_is_not_kept(ledger: ToolRunLedger):
    """Only a claimed call's result is recorded (PostgreSQL updates its claim's row): nothing else is read back."""
    await ledger.record(thread_id=THREAD, tool_call_id="c1", result=ToolResult("never ran"))
    assert await ledger.recorded(thread_id=THREAD, tool_call_id="c1") is None
    assert not await ledger.started(thread_id=THREAD, tool_call_id="c1")
    assert await claim(ledger, "c1") == Claim.GRANTED
    assert await ledger.recorded(thread_id=THREAD, tool_call_id="c1") is None


async def test_a_call_without_questions_has_no_rounds(ledger: ToolRunLedger):
    """A call whose server never asked has no rounds recorded."""
    assert await ledger.rounds(thread_id=THREAD, tool_call_id="c1") == []


async def test_each_round_is_claimed_once_and_what_it_asked_is_kept_in_order(ledger: ToolRunLedger):
    """Round 0's question is recorded; round 1 is claimed once (also when two claim at once), then its question kept."""
    await ledger.record_round(thread_id=THREAD, tool_call_id="c1", number=0, asked=ASKED)
    claims = await asyncio.gather(
        ledger.claim_round(thread_id=THREAD, tool_call_id="c1", number=1),
        ledger.claim_round(thread_id=THREAD, tool_call_id="c1", number=1),
    )
    assert sorted(claims) == [False, True]
    assert await ledger.rounds(thread_id=THREAD, tool_call_id="c1") == [
        Round(number=0, asked=ASKED),
        Round(number=1, asked=None),
    ]
    asked_again = {**ASKED, "requestState": "s2"}
    await ledger.record_round(thread_id=THREAD, tool_call_id="c1", number=1, asked=asked_again)
    assert [r.asked for r in await ledger.rounds(thread_id=THREAD, tool_call_id="c1")] == [ASKED, asked_again]
    assert not await ledger.claim_round(thread_id=THREAD, tool_call_id="c1", number=1)
    assert await ledger.rounds(thread_id=THREAD, tool_call_id="c2") == []


async def test_a_claimed_call_whose_server_asked_is_answered_asked_and_never_granted_again(ledger: ToolRunLedger):
    """Once a call's server asked, claiming it again says ASKED (go on from the rounds), until and after it ends."""
    first = await ledger.claim(thread_id=THREAD, tool_call_id="c1", tool_name="notes__ask", args={}, reviewed=False)
    assert first == Claim.GRANTED
    await ledger.record_round(thread_id=THREAD, tool_call_id="c1", number=0, asked=ASKED)
    for _ in range(2):  # a re-run of the tool node after each answer claims again
        again = await ledger.claim(thread_id=THREAD, tool_call_id="c1", tool_name="notes__ask", args={}, reviewed=False)
        assert again == Claim.ASKED
    assert await ledger.rounds(thread_id=THREAD, tool_call_id="c1") == [Round(number=0, asked=ASKED)]
    assert await ledger.recorded(thread_id=THREAD, tool_call_id="c1") is None
    other = await ledger.claim(thread_id=THREAD, tool_call_id="c2", tool_name="notes__ask", args={}, reviewed=False)
    assert other == Claim.GRANTED


async def test_asked_wins_over_a_recorded_result(ledger: ToolRunLedger):
    """A call whose last round ended with its result is still answered ASKED: it goes on from its rounds."""
    assert await claim(ledger, "c1") == Claim.GRANTED
    await ledger.record_round(thread_id=THREAD, tool_call_id="c1", number=0, asked=ASKED)
    assert await ledger.claim_round(thread_id=THREAD, tool_call_id="c1", number=1)
    await ledger.record(thread_id=THREAD, tool_call_id="c1", result=ToolResult("done"))
    assert await claim(ledger, "c1") == Claim.ASKED
    assert await ledger.recorded(thread_id=THREAD, tool_call_id="c1") == ToolResult("done")


# The approvals gate: PostgreSQL only (the in-memory ledger has no approvals to read).


@dataclass
class Gated:
    """A PostgreSQL ledger and the approvals store whose gate it reads."""

    ledger: PostgresLedger
    approvals: PostgresApprovalStore
    audit: PostgresAuditStore


@pytest.fixture
async def gated(db_url: str) -> AsyncIterator[Gated]:
    """A ledger behind the approvals gate, on a fresh database."""
    async with open_database(DatabaseSettings(url=db_url, pool_max_size=3), run_migrations=False) as database:
        await database.pool.execute(
            "INSERT INTO conversations (thread_id, platform, workspace_id, channel_id) "
            "VALUES ($1, 'console', 'local', 'terminal')",
            THREAD,
        )
        audit = PostgresAuditStore(database.pool)
        approvals = PostgresApprovalStore(database.pool, audit)
        yield Gated(PostgresLedger(database.pool, approvals, audit=audit), approvals, audit)


async def review(gated: Gated, tool_call_id: str, args: dict[str, object], definition: str | None = None) -> str:
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


async def decide(gated: Gated, approval_id: str, kind: VoteKind) -> None:
    """Record `kind` by the approver."""
    await gated.approvals.vote(
        approval_id,
        actor=APPROVER,
        kind=kind,
        quorum=1,
        audit=AuditEntry(kind=AuditKind.DECISION, workspace_id="local", outcome="", actor_id=APPROVER.user_id),
    )


async def test_postgres_refuses_a_reviewed_call_without_a_stored_decision(gated: Gated):
    """A call its policy reviewed runs only once a decision for exactly its arguments is stored."""
    ledger = gated.ledger
    refused = await ledger.claim(thread_id=THREAD, tool_call_id="c1", tool_name="notes__add", args={}, reviewed=True)
    assert refused == Claim.NOT_APPROVED
    assert not await ledger.started(thread_id=THREAD, tool_call_id="c1")
    approval_id = await review(gated, "c1", {"text": "hi"})
    args = {"text": "hi"}
    pending = await ledger.claim(thread_id=THREAD, tool_call_id="c1", tool_name="notes__add", args=args, reviewed=True)
    assert pending == Claim.NOT_APPROVED
    await decide(gated, approval_id, VoteKind.APPROVE)
    other = {"text": "bye"}
    assert (
        await ledger.claim(thread_id=THREAD, tool_call_id="c1", tool_name="notes__add", args=other, reviewed=True)
        == Claim.NOT_APPROVED
    )
    assert (
        await ledger.claim(thread_id=THREAD, tool_call_id="c1", tool_name="notes__add", args=args, reviewed=True)
        == Claim.GRANTED
    )


async def test_postgres_does_not_send_an_approved_call_whose_definition_changed(gated: Gated):
    """An approved MCP call runs only under the definition its card was made under; its approval is marked."""
    approval_id = await review(gated, "c1", {}, definition="d1")
    await decide(gated, approval_id, VoteKind.APPROVE)
    answer = await gated.ledger.claim(
        thread_id=THREAD, tool_call_id="c1", tool_name="notes__add", args={}, reviewed=True, definition="d2"
    )
    assert answer == Claim.DEFINITION_CHANGED
    approval = await gated.approvals.get(approval_id)
    assert approval is not None and approval.definition_changed
    assert not await gated.ledger.started(thread_id=THREAD, tool_call_id="c1")
