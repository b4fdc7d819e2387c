"""The `StopStore` contract, on PostgreSQL and in memory alike.

A stop applies to the active turn it names, is recorded once with its audit row, carries into
a resume of that turn and never into a later one. Pauses (pending approvals, MCP questions,
reviews being resumed) are not modelled by the twin; tests/integration/test_stop.py covers them
on PostgreSQL.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from bot.base.conversation import Actor, ConversationRef
from bot.base.errors import AlreadyStoppedError, NothingToStopError, TurnEndedError
from bot.turns.conversations import RunningTurn, Stopper, TurnStart
from tests.support.turn_stores import BACKENDS, TurnStores, open_turn_stores

HERE = ConversationRef(platform="slack", workspace_id="T1", channel_id="C1", thread="1.0")
BOB = Actor(platform="slack", workspace_id="T1", user_id="U2", display_name="Bob")
BOB_STOPPED = Stopper(user_id="U2", display_name="Bob")


@pytest.fixture(params=BACKENDS)
async def stores(request: pytest.FixtureRequest, pg_server) -> AsyncIterator[TurnStores]:
    """The stores under test, on PostgreSQL (a fresh database) or in memory."""
    async with open_turn_stores(request.param, pg_server) as opened:
        yield opened


def turn(turn_id: str) -> TurnStart:
    return TurnStart(turn_id=turn_id, requester_id="U1", requester_name="Alice")


async def running(stores: TurnStores, turn_id: str) -> None:
    await stores.conversations.touch(HERE)
    await stores.conversations.mark_running(HERE.thread_id, retry_in_s=60, turn=turn(turn_id))


async def test_nothing_to_stop_where_the_bot_never_ran(stores: TurnStores):
    """No conversation, or one with no turn under way: nothing to stop, and a button's turn is over."""
    stop = stores.stop
    assert await stop.turn_of(HERE.thread_id) is None
    with pytest.raises(NothingToStopError):
        await stop.request_stop(HERE.thread_id, stopper=BOB, expected_turn_id=None)
    with pytest.raises(TurnEndedError):
        await stop.request_stop(HERE.thread_id, stopper=BOB, expected_turn_id="t1")
    await stores.conversations.touch(HERE)
    state = await stop.turn_of(HERE.thread_id)
    assert state is not None and state.turn_id is None and not state.active
    with pytest.raises(NothingToStopError):
        await stop.request_stop(HERE.thread_id, stopper=BOB, expected_turn_id=None)


async def test_a_running_turn_is_stopped_once_and_audited(stores: TurnStores):
    """The stop is recorded with who made it; a second is refused, naming the first; one audit row."""
    stop = stores.stop
    await running(stores, "t1")
    state = await stop.turn("t1")
    assert state is not None and state.active and state.running and not state.stopped
    assert state.requester_id == "U1" and state.workspace_id == "T1"

    recorded = await stop.request_stop(HERE.thread_id, stopper=BOB, expected_turn_id="t1")
    assert recorded.turn.turn_id == "t1" and not recorded.turn.stopped
    assert recorded.closed == () and not recorded.claimed
    assert await stop.stop_requests(["t1", "t9"]) == {"t1": BOB_STOPPED}
    after = await stop.turn_of(HERE.thread_id)
    assert after is not None and after.stopped and after.stopped_by_id == "U2" and after.stopped_by_name == "Bob"

    with pytest.raises(AlreadyStoppedError):
        await stop.request_stop(HERE.thread_id, stopper=BOB, expected_turn_id=None)
    [(outcome, detail)] = await stores.audit_outcomes(HERE.thread_id)
    assert outcome == "stopped"
    assert detail["turn_id"] == "t1" and detail["while"] == "running" and detail["approvals_stopped"] == []


async def test_racing_stops_record_one(stores: TurnStores):
    """Two stops at once: one is recorded, the other is told the turn was stopped already."""
    await running(stores, "t1")
    results = await asyncio.gather(
        *(stores.stop.request_stop(HERE.thread_id, stopper=BOB, expected_turn_id="t1") for _ in range(2)),
        return_exceptions=True,
    )
    assert sorted(type(r).__name__ for r in results) == ["AlreadyStoppedError", "StopRecorded"]
    assert len(await stores.audit_outcomes(HERE.thread_id)) == 1


async def test_a_stop_carries_into_a_resume_and_never_into_a_later_turn(stores: TurnStores):
    """A resume of the stopped turn starts stopped; the next message's turn starts clean; the old button is over."""
    stop, conversations = stores.stop, stores.conversations
    await running(stores, "t1")
    await stop.request_stop(HERE.thread_id, stopper=BOB, expected_turn_id=None)
    resumed = await conversations.mark_running(HERE.thread_id, retry_in_s=60)
    assert resumed == RunningTurn(turn_id="t1", stopped_by=BOB_STOPPED)

    assert await conversations.mark_running(HERE.thread_id, retry_in_s=60, turn=turn("t2")) == RunningTurn(turn_id="t2")
    assert await stop.turn("t1") is None
    assert await stop.stop_requests(["t1", "t2"]) == {}
    with pytest.raises(TurnEndedError):
        await stop.request_stop(HERE.thread_id, stopper=BOB, expected_turn_id="t1")
    await stop.request_stop(HERE.thread_id, stopper=BOB, expected_turn_id="t2")


async def test_a_turn_whose_outcome_is_out_cannot_be_stopped(stores: TurnStores):
    """Once delivered (and nothing waits), the turn is over: typed stop finds nothing, the button is over."""
    await running(stores, "t1")
    await stores.conversations.mark_delivered(HERE.thread_id, settled=True)
    with pytest.raises(NothingToStopError):
        await stores.stop.request_stop(HERE.thread_id, stopper=BOB, expected_turn_id=None)
    with pytest.raises(TurnEndedError):
        await stores.stop.request_stop(HERE.thread_id, stopper=BOB, expected_turn_id="t1")
    assert await stores.stop.close_late_pauses(HERE.thread_id, stopper=BOB_STOPPED) == ([], False)
    assert await stores.audit_outcomes(HERE.thread_id) == []
