"""The `Inbox` contract, on PostgreSQL and in memory alike.

A message is claimed once; its handling is begun only while it is accepted; giving it up gives
up its turn's run too, and taking that back undoes both (docs/decisions/0038-one-outcome-per-message.md);
only finished entries go with age.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from bot.base.conversation import Actor, ConversationRef, IncomingMessage
from bot.turns.conversations import TurnStart, UnfinishedRun
from bot.turns.inbox import GivenUp, inbox_key
from tests.support.turn_stores import BACKENDS, TurnStores, open_turn_stores

HERE = ConversationRef(platform="slack", workspace_id="T1", channel_id="C1", thread="1.0")
ALICE = Actor(platform="slack", workspace_id="T1", user_id="U1", display_name="Alice", groups=frozenset({"ops"}))


@pytest.fixture(params=BACKENDS)
async def stores(request: pytest.FixtureRequest, pg_server) -> AsyncIterator[TurnStores]:
    """The stores under test, on PostgreSQL (a fresh database) or in memory."""
    async with open_turn_stores(request.param, pg_server) as opened:
        yield opened


def message(message_id: str, text: str = "hello") -> IncomingMessage:
    return IncomingMessage(actor=ALICE, conversation=HERE, text=text, message_id=message_id)


def key(message_id: str) -> str:
    found = inbox_key(message(message_id))
    assert found is not None
    return found


async def test_a_message_is_claimed_once(stores: TurnStores):
    """A new message is claimed; a second copy learns the first claim's status."""
    inbox = stores.inbox
    assert await inbox.accept(key("m1"), message("m1")) is None
    assert await inbox.accept(key("m1"), message("m1")) == "accepted"
    await inbox.handled(key("m1"))
    assert await inbox.accept(key("m1"), message("m1")) == "handled"


async def test_concurrent_copies_are_claimed_once(stores: TurnStores):
    """Two copies of one message at once: exactly one is new."""
    claims = await asyncio.gather(*(stores.inbox.accept(key("m1"), message("m1")) for _ in range(2)))
    assert sorted(claims, key=str) == [None, "accepted"]


async def test_handling_is_begun_while_accepted_and_counted(stores: TurnStores):
    """`begin` counts attempts and sees an older unhandled message; `uncount` keeps one attempt."""
    inbox = stores.inbox
    await inbox.accept(key("m1"), message("m1"))
    await inbox.accept(key("m2"), message("m2"))
    first = await inbox.begin(key("m1"), first_retry_s=30, max_retry_s=300)
    assert first is not None and first.attempts == 1 and not first.behind and first.waited_s >= 0
    second = await inbox.begin(key("m2"), first_retry_s=30, max_retry_s=300)
    assert second is not None and second.attempts == 1 and second.behind

    again = await inbox.begin(key("m1"), first_retry_s=30, max_retry_s=300)
    assert again is not None and again.attempts == 2
    await inbox.uncount(key("m1"))
    await inbox.uncount(key("m1"))
    again = await inbox.begin(key("m1"), first_retry_s=30, max_retry_s=300)
    assert again is not None and again.attempts == 2  # one attempt always stays counted

    await inbox.handled(key("m1"))
    assert await inbox.begin(key("m1"), first_retry_s=30, max_retry_s=300) is None
    third = await inbox.begin(key("m2"), first_retry_s=30, max_retry_s=300)
    assert third is not None and not third.behind
    assert await inbox.begin("slack:nobody:never", first_retry_s=30, max_retry_s=300) is None


async def test_unhandled_messages_come_back_oldest_first_as_accepted(stores: TurnStores):
    """`unhandled` lists the thread's accepted messages in order, each as it was accepted."""
    inbox = stores.inbox
    for n in range(3):
        await inbox.accept(key(f"m{n}"), message(f"m{n}", text=f"text {n}"))
    await inbox.handled(key("m1"))
    entries = await inbox.unhandled(HERE.thread_id)
    assert [e.key for e in entries] == [key("m0"), key("m2")]
    assert [e.message for e in entries] == [message("m0", "text 0"), message("m2", "text 2")]
    assert all(e.waited_s >= 0 for e in entries)
    assert await inbox.unhandled("slack:T1:C9") == []


async def test_giving_a_message_up_gives_up_its_turns_run_and_taking_back_undoes_both(stores: TurnStores):
    """The run whose turn the message started is given up with it, once; `take_back` restores both."""
    inbox, conversations = stores.inbox, stores.conversations
    await conversations.touch(HERE)
    await inbox.accept(key("m1"), message("m1"))
    await conversations.mark_running(
        HERE.thread_id,
        retry_in_s=60,
        turn=TurnStart(turn_id="t1", requester_id="U1", requester_name="Alice", message_key=key("m1")),
    )
    given = await asyncio.gather(inbox.give_up(key("m1")), inbox.give_up(key("m1")))
    assert sorted(given, key=repr) == [GivenUp(key=key("m1"), run=True), None]
    assert await conversations.unfinished_run(HERE.thread_id) == UnfinishedRun(from_checkpoint=None, given_up=True)
    assert await inbox.accept(key("m1"), message("m1")) == "abandoned"
    await inbox.handled(key("m1"))  # a message given up stays given up
    assert await inbox.accept(key("m1"), message("m1")) == "abandoned"

    await inbox.take_back(GivenUp(key=key("m1"), run=True))
    assert await inbox.accept(key("m1"), message("m1")) == "accepted"
    assert await conversations.unfinished_run(HERE.thread_id) == UnfinishedRun(from_checkpoint=None)
    assert await conversations.run_message(HERE.thread_id) == key("m1")


async def test_giving_up_a_message_leaves_another_turns_run_alone(stores: TurnStores):
    """A message whose turn is not the marked run's is given up alone."""
    inbox, conversations = stores.inbox, stores.conversations
    await conversations.touch(HERE)
    await inbox.accept(key("m1"), message("m1"))
    await conversations.mark_running(
        HERE.thread_id,
        retry_in_s=60,
        turn=TurnStart(turn_id="t2", requester_id="U1", requester_name="Alice", message_key=key("m2")),
    )
    assert await inbox.give_up(key("m1")) == GivenUp(key=key("m1"), run=False)
    assert await conversations.unfinished_run(HERE.thread_id) == UnfinishedRun(from_checkpoint=None)
    await inbox.handled(key("m1"))
    assert await inbox.give_up(key("m1")) is None


async def test_only_finished_entries_are_forgotten(stores: TurnStores):
    """`forget_older_than` deletes handled and abandoned entries past the age, never accepted ones."""
    inbox = stores.inbox
    for n in range(3):
        await inbox.accept(key(f"m{n}"), message(f"m{n}"))
    await inbox.handled(key("m0"))
    await inbox.give_up(key("m1"))
    assert await inbox.forget_older_than(1) == 0
    assert await inbox.forget_older_than(0) == 2
    assert await inbox.accept(key("m0"), message("m0")) is None  # forgotten: new again
    assert await inbox.accept(key("m2"), message("m2")) == "accepted"
