"""The `UpkeepStore` contract, on PostgreSQL and in memory alike.

Unfinished work is listed once due (or at start, whatever its time), per served platform, until
attempted too often; an attempt counted is taken back when shutdown cut it. Reviews left
resuming are not modelled by the twin; tests/integration/test_unfinished_work.py covers them on
PostgreSQL.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from bot.base.conversation import Actor, ConversationRef, IncomingMessage
from bot.turns.conversations import TurnStart
from tests.support.turn_stores import BACKENDS, TurnStores, open_turn_stores

SLACK = ConversationRef(platform="slack", workspace_id="T1", channel_id="C1", thread="1.0")
DISCORD = ConversationRef(platform="discord", workspace_id="G1", channel_id="C2")
ALICE = Actor(platform="slack", workspace_id="T1", user_id="U1", display_name="Alice")
BOTH = ("slack", "discord")


@pytest.fixture(params=BACKENDS)
async def stores(request: pytest.FixtureRequest, pg_server) -> AsyncIterator[TurnStores]:
    """The stores under test, on PostgreSQL (a fresh database) or in memory."""
    async with open_turn_stores(request.param, pg_server) as opened:
        yield opened


async def accept(stores: TurnStores, where: ConversationRef, message_id: str) -> str:
    key = f"{where.thread_id}:{message_id}"
    incoming = IncomingMessage(actor=ALICE, conversation=where, text="hi", message_id=message_id)
    assert await stores.inbox.accept(key, incoming) is None
    return key


async def run(stores: TurnStores, where: ConversationRef, *, retry_in_s: float) -> None:
    await stores.conversations.touch(where)
    await stores.conversations.mark_running(
        where.thread_id,
        retry_in_s=retry_in_s,
        turn=TurnStart(turn_id=f"t-{where.channel_id}", requester_id="U1", requester_name="Alice"),
    )


async def test_nothing_unfinished_lists_nothing(stores: TurnStores):
    """No messages and no runs: no conversation is due, even at start."""
    assert await stores.upkeep.due_threads(platforms=BOTH, max_attempts=3, everything=True) == []
    assert await stores.upkeep.count_attempt(SLACK.thread_id, first_retry_s=1, max_retry_s=10) == 0


async def test_an_accepted_message_is_due_after_its_retry_time_or_at_start(stores: TurnStores):
    """A fresh message is its handler's; at start it is listed; once its retry time passed, always."""
    upkeep = stores.upkeep
    key = await accept(stores, SLACK, "m1")
    assert await upkeep.due_threads(platforms=BOTH, max_attempts=3) == []
    assert await upkeep.due_threads(platforms=BOTH, max_attempts=3, everything=True) == [SLACK.thread_id]
    assert await upkeep.due_threads(platforms=["discord"], max_attempts=3, everything=True) == []

    begun = await stores.inbox.begin(key, first_retry_s=0, max_retry_s=0)  # due again at once
    assert begun is not None
    assert await upkeep.due_threads(platforms=BOTH, max_attempts=3) == [SLACK.thread_id]
    assert await upkeep.due_threads(platforms=BOTH, max_attempts=1) == []  # attempted often enough
    await stores.inbox.handled(key)
    assert await upkeep.due_threads(platforms=BOTH, max_attempts=3, everything=True) == []


async def test_a_marked_run_is_due_and_its_attempts_are_counted_and_taken_back(stores: TurnStores):
    """A run's attempts back off; shutdown takes one back and makes it due at once."""
    upkeep = stores.upkeep
    await run(stores, SLACK, retry_in_s=0)
    await run(stores, DISCORD, retry_in_s=600)
    assert await upkeep.due_threads(platforms=BOTH, max_attempts=3) == [SLACK.thread_id]
    assert sorted(await upkeep.due_threads(platforms=BOTH, max_attempts=3, everything=True)) == sorted(
        [SLACK.thread_id, DISCORD.thread_id]
    )
    assert len(await upkeep.due_threads(platforms=BOTH, max_attempts=3, everything=True, limit=1)) == 1

    assert await upkeep.count_attempt(SLACK.thread_id, first_retry_s=60, max_retry_s=600) == 1
    assert await upkeep.due_threads(platforms=["slack"], max_attempts=3) == []  # backed off
    assert await upkeep.count_attempt(SLACK.thread_id, first_retry_s=60, max_retry_s=600) == 2
    await upkeep.uncount_attempt(SLACK.thread_id)
    assert await upkeep.due_threads(platforms=["slack"], max_attempts=3) == [SLACK.thread_id]
    assert await upkeep.due_threads(platforms=["slack"], max_attempts=1) == []
    assert await upkeep.count_attempt(SLACK.thread_id, first_retry_s=60, max_retry_s=600) == 2

    await stores.conversations.mark_delivered(SLACK.thread_id, settled=True)
    assert await upkeep.due_threads(platforms=["slack"], max_attempts=3, everything=True) == []
    assert await upkeep.count_attempt(SLACK.thread_id, first_retry_s=60, max_retry_s=600) == 0


async def test_the_server_start_is_stable_between_looks(stores: TurnStores):
    """Two looks without a restart in between see the same start time."""
    first = await stores.upkeep.server_started_at()
    assert first.tzinfo is not None
    assert await stores.upkeep.server_started_at() == first
