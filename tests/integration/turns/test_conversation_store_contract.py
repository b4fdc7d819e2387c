"""The `ConversationStore` contract, on PostgreSQL and in memory alike.

A conversation's row is created once; a run's mark holds its agent, turn and whether it was
given up until its outcome is delivered; only a conversation at rest is settled. What only
PostgreSQL holds (the checkpoint a run started from, open reviews) is tested on PostgreSQL alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from bot.base.agent_kind import AgentKind
from bot.base.conversation import ConversationRef
from bot.turns.conversations import RunningTurn, TurnStart, UnfinishedRun
from bot.turns.conversations_memory import InMemoryConversationStore
from bot.turns.conversations_postgres import PostgresConversationStore
from tests.support.turn_stores import BACKENDS, TurnStores, open_turn_stores

HERE = ConversationRef(platform="slack", workspace_id="T1", channel_id="C1", thread="1.0")
THERE = ConversationRef(platform="slack", workspace_id="T1", channel_id="C2")


@pytest.fixture(params=BACKENDS)
async def stores(request: pytest.FixtureRequest, pg_server) -> AsyncIterator[TurnStores]:
    """The stores under test, on PostgreSQL (a fresh database) or in memory."""
    async with open_turn_stores(request.param, pg_server) as opened:
        yield opened


@pytest.fixture
async def postgres(pg_server) -> AsyncIterator[TurnStores]:
    """The PostgreSQL stores alone, for what the in-memory twin does not model."""
    async with open_turn_stores("postgres", pg_server) as opened:
        yield opened


def turn(turn_id: str, key: str | None = None) -> TurnStart:
    return TurnStart(turn_id=turn_id, requester_id="U1", requester_name="Alice", message_key=key)


async def test_a_conversation_is_created_once_and_then_only_touched(stores: TurnStores):
    """The first touch creates the row (at rest: no checkpoint yet); later ones find it."""
    conversations = stores.conversations
    assert not await conversations.exists(HERE.thread_id)
    first = await conversations.touch(HERE)
    assert first.created and first.at_rest and first.agent is None and first.unfinished is None
    second = await conversations.touch(HERE)
    assert not second.created and not second.settled and not second.at_rest
    assert await conversations.exists(HERE.thread_id)
    assert not await conversations.exists(THERE.thread_id)
    assert await conversations.agent_of(HERE.thread_id) is None


async def test_concurrent_first_touches_create_the_row_once(stores: TurnStores):
    """Of two first messages at once, exactly one creates the conversation."""
    rows = await asyncio.gather(stores.conversations.touch(HERE), stores.conversations.touch(HERE))
    assert sorted(row.created for row in rows) == [False, True]


async def test_a_run_is_marked_until_its_outcome_is_delivered(stores: TurnStores):
    """`mark_running` records the agent and the turn; `mark_delivered` clears the mark and settles."""
    conversations = stores.conversations
    await conversations.touch(HERE)
    running = await conversations.mark_running(
        HERE.thread_id, retry_in_s=60, agent=AgentKind.SUBAGENTS, turn=turn("t1", "k1")
    )
    assert running == RunningTurn(turn_id="t1")
    assert await conversations.agent_of(HERE.thread_id) is AgentKind.SUBAGENTS
    assert await conversations.unfinished_run(HERE.thread_id) == UnfinishedRun(from_checkpoint=None)
    assert await conversations.run_message(HERE.thread_id) == "k1"
    row = await conversations.touch(HERE)
    assert row.unfinished is not None and not row.settled and not row.at_rest

    await conversations.mark_settled(HERE.thread_id)  # a run is due: not settled
    assert not (await conversations.touch(HERE)).settled

    # A resume goes on with the current turn and keeps the agent when none is named.
    assert await conversations.mark_running(HERE.thread_id, retry_in_s=60) == RunningTurn(turn_id="t1")
    assert await conversations.agent_of(HERE.thread_id) is AgentKind.SUBAGENTS

    await conversations.mark_delivered(HERE.thread_id, settled=True)
    assert await conversations.unfinished_run(HERE.thread_id) is None
    assert await conversations.run_message(HERE.thread_id) is None
    row = await conversations.touch(HERE)
    assert row.settled and row.at_rest


async def test_a_failed_delivery_leaves_it_unsettled_until_settle_finds_it_at_rest(stores: TurnStores):
    """A failure told (not settled) leaves the conversation to be read; `mark_settled` then settles it."""
    conversations = stores.conversations
    await conversations.touch(HERE)
    await conversations.mark_running(HERE.thread_id, retry_in_s=60, turn=turn("t1"))
    await conversations.mark_delivered(HERE.thread_id)
    assert not (await conversations.touch(HERE)).at_rest
    await conversations.mark_settled(HERE.thread_id)
    assert (await conversations.touch(HERE)).at_rest


async def test_a_run_given_up_is_never_run_again_unless_taken_back(stores: TurnStores):
    """`give_up_run` marks the run given up (its message is no longer its turn's); `take_back_run` undoes it."""
    conversations = stores.conversations
    await conversations.touch(HERE)
    await conversations.give_up_run(HERE.thread_id)  # no run marked: nothing to give up
    assert await conversations.unfinished_run(HERE.thread_id) is None

    await conversations.mark_running(HERE.thread_id, retry_in_s=60, turn=turn("t1", "k1"))
    await conversations.give_up_run(HERE.thread_id)
    assert await conversations.unfinished_run(HERE.thread_id) == UnfinishedRun(from_checkpoint=None, given_up=True)
    assert await conversations.run_message(HERE.thread_id) is None
    assert (await conversations.touch(HERE)).unfinished == UnfinishedRun(from_checkpoint=None, given_up=True)

    await conversations.take_back_run(HERE.thread_id)
    assert await conversations.unfinished_run(HERE.thread_id) == UnfinishedRun(from_checkpoint=None)
    assert await conversations.run_message(HERE.thread_id) == "k1"

    await conversations.give_up_run(HERE.thread_id)
    await conversations.mark_running(HERE.thread_id, retry_in_s=60)  # a new run starts not given up
    assert await conversations.unfinished_run(HERE.thread_id) == UnfinishedRun(from_checkpoint=None)


async def test_an_unknown_conversation_has_nothing(stores: TurnStores):
    """Marks on a conversation the bot never took part in change nothing and find no turn."""
    conversations = stores.conversations
    assert await conversations.mark_running(THERE.thread_id, retry_in_s=60, turn=turn("t1")) == RunningTurn(
        turn_id=None
    )
    await conversations.mark_delivered(THERE.thread_id, settled=True)
    await conversations.give_up_run(THERE.thread_id)
    await conversations.take_back_run(THERE.thread_id)
    await conversations.mark_settled(THERE.thread_id)
    await conversations.prune_soon(THERE.thread_id)
    assert not await conversations.exists(THERE.thread_id)
    assert await conversations.unfinished_run(THERE.thread_id) is None
    assert await conversations.run_message(THERE.thread_id) is None
    assert await conversations.agent_of(THERE.thread_id) is None


def test_prune_every_runs_below_one_is_refused():
    """Both implementations refuse a pruning period below one run (before touching the pool)."""
    with pytest.raises(ValueError, match="prune_every_runs"):
        InMemoryConversationStore(prune_every_runs=0)
    with pytest.raises(ValueError, match="prune_every_runs"):
        PostgresConversationStore(None, prune_every_runs=0)  # type: ignore[arg-type]


# PostgreSQL only: LangGraph's checkpoints and our reviews are not modelled by the twin.


async def test_postgres_a_run_records_the_checkpoint_it_started_from(postgres: TurnStores):
    """The newest top-level checkpoint when a run starts is its `from_checkpoint`, kept by a resume."""
    assert postgres.pool is not None
    conversations = postgres.conversations
    await conversations.touch(HERE)
    insert = (
        "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, checkpoint, metadata) "
        "VALUES ($1, $2, $3, '{}'::jsonb, '{}'::jsonb)"
    )
    await postgres.pool.execute(insert, HERE.thread_id, "", "c1")
    await postgres.pool.execute(insert, HERE.thread_id, "sub:1", "c9")  # a subagent's: not top-level
    await conversations.mark_running(HERE.thread_id, retry_in_s=60, turn=turn("t1"))
    await postgres.pool.execute(insert, HERE.thread_id, "", "c2")
    await conversations.mark_running(HERE.thread_id, retry_in_s=60)
    assert await conversations.unfinished_run(HERE.thread_id) == UnfinishedRun(from_checkpoint="c1")
