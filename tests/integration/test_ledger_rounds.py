"""The tool-run ledger's rounds (an MCP call asked again after a question), on PostgreSQL and in memory alike.

Each round after the first is claimed once and never again; what a round asked is recorded and
read back in order (docs/decisions/0054-mcp-elicitation.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack

import pytest

from bot.audit.postgres import PostgresAuditStore
from bot.reviews.store import ApprovalStore
from bot.settings import DatabaseSettings
from bot.storage.database import open_database
from bot.tools.ledger.memory import InMemoryLedger
from bot.tools.ledger.postgres import PostgresLedger
from bot.tools.ledger.store import Claim, Round, ToolRunLedger

THREAD = "console:local:terminal"
ASKED = {"resultType": "input_required", "requestState": "s1", "inputRequests": {}}


@pytest.fixture(params=["postgres", "memory"])
async def ledger(request: pytest.FixtureRequest, pg_server) -> AsyncIterator[ToolRunLedger]:
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
        yield PostgresLedger(database.pool, ApprovalStore(database.pool, audit), audit=audit)


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
