"""The `RetentionStore` contract, on PostgreSQL and in memory alike.

A conversation is due for pruning every few runs (or when asked) and only at rest; an idle
conversation is deleted only while nothing waits there; old audit rows go in batches. What only
PostgreSQL holds (checkpoints, approvals, reviews) is covered on PostgreSQL by
tests/integration/test_pruning_and_retention.py; the case here marked PostgreSQL only checks
what the twin says it does not model.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from bot.base.conversation import Actor, ConversationRef, IncomingMessage
from bot.turns.conversations import TurnStart
from tests.support.turn_stores import BACKENDS, TurnStores, open_turn_stores

HERE = ConversationRef(platform="slack", workspace_id="T1", channel_id="C1", thread="1.0")
THERE = ConversationRef(platform="slack", workspace_id="T1", channel_id="C2")
ALICE = Actor(platform="slack", workspace_id="T1", user_id="U1", display_name="Alice")
BOB = Actor(platform="slack", workspace_id="T1", user_id="U2", display_name="Bob")


@pytest.fixture(params=BACKENDS)
async def stores(request: pytest.FixtureRequest, pg_server) -> AsyncIterator[TurnStores]:
    """The stores under test (due for pruning every 2 runs), on PostgreSQL or in memory."""
    async with open_turn_stores(request.param, pg_server, prune_every_runs=2) as opened:
        yield opened


@pytest.fixture
async def postgres(pg_server) -> AsyncIterator[TurnStores]:
    """The PostgreSQL stores alone, for what the in-memory twin does not model."""
    async with open_turn_stores("postgres", pg_server) as opened:
        yield opened


async def one_run(stores: TurnStores, where: ConversationRef = HERE) -> None:
    await stores.conversations.mark_running(
        where.thread_id,
        retry_in_s=60,
        turn=TurnStart(turn_id="t1", requester_id="U1", requester_name="Alice"),
    )
    await stores.conversations.mark_delivered(where.thread_id, settled=True)


async def test_a_conversation_is_due_for_pruning_every_few_runs_and_only_at_rest(stores: TurnStores):
    """Due after `prune_every_runs` runs, not while a run is marked; pruned once, then not due."""
    retention, conversations = stores.retention, stores.conversations
    await conversations.touch(HERE)
    await one_run(stores)
    assert await retention.due_for_pruning(limit=10) == []
    assert not await retention.prune(HERE.thread_id)
    await conversations.mark_running(HERE.thread_id, retry_in_s=60)
    assert await retention.due_for_pruning(limit=10) == []  # due, but a run is marked
    assert not await retention.prune(HERE.thread_id)
    await conversations.mark_delivered(HERE.thread_id, settled=True)
    assert await retention.due_for_pruning(limit=10) == [HERE.thread_id]
    assert await retention.prune(HERE.thread_id)
    assert await retention.due_for_pruning(limit=10) == []
    assert not await retention.prune(HERE.thread_id)
    await one_run(stores)  # the count started again
    assert await retention.due_for_pruning(limit=10) == []


async def test_prune_soon_makes_it_due_at_once(stores: TurnStores):
    """`prune_soon` (a long conversation folded) makes it due without more runs."""
    await stores.conversations.touch(HERE)
    await stores.conversations.touch(THERE)
    await stores.conversations.prune_soon(HERE.thread_id)
    await stores.conversations.prune_soon(THERE.thread_id)
    assert sorted(await stores.retention.due_for_pruning(limit=10)) == sorted([HERE.thread_id, THERE.thread_id])
    assert len(await stores.retention.due_for_pruning(limit=1)) == 1
    assert not await stores.retention.prune("slack:T1:C9")


async def test_idle_conversations_are_listed_longest_idle_first_unless_something_waits(stores: TurnStores):
    """Idle: no message for the days given, no run marked, no accepted message; oldest activity first."""
    retention, conversations = stores.retention, stores.conversations
    await conversations.touch(HERE)
    await conversations.touch(THERE)
    assert await retention.idle_conversations(idle_days=1, limit=10) == []
    assert await retention.idle_conversations(idle_days=0, limit=10) == [HERE.thread_id, THERE.thread_id]
    await conversations.touch(HERE)
    assert await retention.idle_conversations(idle_days=0, limit=10) == [THERE.thread_id, HERE.thread_id]
    assert await retention.idle_conversations(idle_days=0, limit=1) == [THERE.thread_id]

    await conversations.mark_running(THERE.thread_id, retry_in_s=60)
    key = f"{HERE.thread_id}:m1"
    await stores.inbox.accept(key, IncomingMessage(actor=ALICE, conversation=HERE, text="hi", message_id="m1"))
    assert await retention.idle_conversations(idle_days=0, limit=10) == []
    assert not await retention.delete_if_idle(HERE.thread_id, idle_days=0)
    assert not await retention.delete_if_idle(THERE.thread_id, idle_days=0)

    await stores.inbox.handled(key)
    await conversations.mark_delivered(THERE.thread_id, settled=True)
    assert not await retention.delete_if_idle(HERE.thread_id, idle_days=1)
    assert await retention.delete_if_idle(HERE.thread_id, idle_days=0)
    assert not await conversations.exists(HERE.thread_id)
    assert not await retention.delete_if_idle(HERE.thread_id, idle_days=0)  # gone already
    assert await retention.idle_conversations(idle_days=0, limit=10) == [THERE.thread_id]
    assert await retention.expire_idle_cards(idle_days=0, limit=10) == []  # no card anywhere


async def test_old_audit_rows_go_oldest_first_in_batches(stores: TurnStores):
    """`forget_audit_older_than` deletes at most `limit` rows past the age."""
    await stores.conversations.touch(HERE)
    for turn_id in ("t1", "t2", "t3"):
        await stores.conversations.mark_running(
            HERE.thread_id,
            retry_in_s=60,
            turn=TurnStart(turn_id=turn_id, requester_id="U1", requester_name="Alice"),
        )
        await stores.stop.request_stop(HERE.thread_id, stopper=BOB, expected_turn_id=turn_id)
    assert await stores.retention.forget_audit_older_than(days=1, limit=10) == 0
    assert await stores.retention.forget_audit_older_than(days=0, limit=2) == 2
    [(_, detail)] = await stores.audit_outcomes(HERE.thread_id)
    assert detail["turn_id"] == "t3"
    assert await stores.retention.forget_audit_older_than(days=0, limit=2) == 1


# PostgreSQL only: a pause in the checkpoint keeps an idle conversation (the twin has no checkpoints).


async def test_postgres_a_pause_in_the_newest_checkpoint_keeps_an_idle_conversation(postgres: TurnStores):
    """An `__interrupt__` write on the newest top-level checkpoint is a pause: not idle, not deleted."""
    assert postgres.pool is not None
    await postgres.conversations.touch(HERE)
    await postgres.pool.execute(
        "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, checkpoint, metadata) "
        "VALUES ($1, '', 'c1', '{}'::jsonb, '{}'::jsonb)",
        HERE.thread_id,
    )
    await postgres.pool.execute(
        "INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob) "
        "VALUES ($1, '', 'c1', 'task', 0, '__interrupt__', 'msgpack', '')",
        HERE.thread_id,
    )
    assert await postgres.retention.idle_conversations(idle_days=0, limit=10) == []
    assert not await postgres.retention.delete_if_idle(HERE.thread_id, idle_days=0)
    assert await postgres.conversations.exists(HERE.thread_id)
