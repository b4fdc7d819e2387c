"""The question store's contract, run against PostgreSQL and the in-memory store alike.

A question is stored once per pause and key, answered exactly once (a conditional update),
and found again by its pause, its conversation and its expiry
(`bot.tools.mcp.elicitation.store`, docs/decisions/0054-mcp-elicitation.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from datetime import UTC, datetime, timedelta

import pytest

from bot.settings import DatabaseSettings
from bot.storage.database import open_database
from bot.tools.mcp.elicitation.forms import Action, Answer
from bot.tools.mcp.elicitation.store import (
    InMemoryQuestionStore,
    NewQuestion,
    PostgresQuestionStore,
    QuestionStatus,
    QuestionStore,
)

THREAD = "console:local:terminal"
REQUEST = {
    "method": "elicitation/create",
    "params": {"mode": "form", "message": "Pay?", "requestedSchema": {"type": "object", "properties": {}}},
}


@pytest.fixture(params=["postgres", "memory"])
async def store(request: pytest.FixtureRequest, pg_server) -> AsyncIterator[QuestionStore]:
    """The store under test, on PostgreSQL (a fresh database) or in memory."""
    if request.param == "memory":
        yield InMemoryQuestionStore()
        return
    db_url = await pg_server.create_database()
    async with AsyncExitStack() as stack:
        stack.push_async_callback(pg_server.drop_database, db_url)
        database = await stack.enter_async_context(
            open_database(DatabaseSettings(url=db_url, pool_max_size=3), run_migrations=False)
        )
        yield PostgresQuestionStore(database.pool)


def question(key: str = "confirm", *, thread: str = THREAD, interrupt: str = "i1", expires_in_s: int | None = None):
    return NewQuestion(
        thread_id=thread,
        workspace_id=thread.split(":")[1],
        interrupt_id=interrupt,
        tool_call_id="call-1",
        round=0,
        key=key,
        tool_name="bank__pay",
        server="bank",
        requester_id="olga",
        requester_name="Olga",
        request=REQUEST,
        expires_in_s=expires_in_s,
    )


async def test_a_question_is_stored_once_per_pause_and_key(store: QuestionStore):
    """Opening the same pause's question again returns the one stored; another key is another question."""
    first = await store.open(question())
    again = await store.open(question())
    other = await store.open(question("amount"))
    assert again.id == first.id and other.id != first.id
    assert first.is_open and first.answer is None and first.requester_id == "olga"
    assert dict(first.request) == REQUEST
    assert [q.key for q in await store.of_interrupts(THREAD, ["i1"])] == ["confirm", "amount"]
    assert await store.of_interrupts(THREAD, ["i2"]) == []
    assert (await store.get(first.id)) == first
    assert await store.get("no-such-question") is None


async def test_a_question_is_answered_exactly_once(store: QuestionStore):
    """The first answer is kept; a later one (or an expiry) changes nothing."""
    asked = await store.open(question())
    answer = Answer(action=Action.ACCEPT, content={"ok": True})
    answered = await store.answer(asked.id, answer, status=QuestionStatus.ANSWERED, by_id="olga")
    assert answered is not None and answered.status is QuestionStatus.ANSWERED
    assert answered.answer == answer and answered.answered_by_id == "olga" and answered.answered_at is not None
    late = await store.answer(asked.id, Answer(action=Action.CANCEL), status=QuestionStatus.EXPIRED, by_id=None)
    assert late is None
    assert (await store.get(asked.id)) == answered
    assert await store.open_in_thread(THREAD) == []


async def test_two_answers_at_once_record_one(store: QuestionStore):
    """Two answers racing: exactly one is recorded."""
    asked = await store.open(question())
    results = await asyncio.gather(
        store.answer(asked.id, Answer(action=Action.DECLINE), status=QuestionStatus.ANSWERED, by_id="olga"),
        store.answer(asked.id, Answer(action=Action.CANCEL), status=QuestionStatus.STOPPED, by_id=None),
    )
    assert sum(result is not None for result in results) == 1


async def test_due_questions_are_found_by_expiry_and_platform(store: QuestionStore):
    """Only open questions with an expiry, on the platforms asked about, fall due."""
    soon = await store.open(question(expires_in_s=60))
    await store.open(question("never", expires_in_s=None))
    await store.open(question(thread="slack:T1:C1:1.0", expires_in_s=60))
    later = datetime.now(UTC) + timedelta(hours=1)
    assert [q.id for q in await store.due(later, platforms=["console"])] == [soon.id]
    assert await store.due(datetime.now(UTC) - timedelta(seconds=1), platforms=["console"]) == []
    next_due = await store.next_expiry(platforms=["console"])
    assert (
        next_due is not None and soon.expires_at is not None and abs((next_due - soon.expires_at).total_seconds()) < 1
    )
    await store.answer(soon.id, Answer(action=Action.CANCEL), status=QuestionStatus.EXPIRED, by_id=None)
    assert await store.due(later, platforms=["console"]) == []
    assert await store.next_expiry(platforms=["console"]) is None


async def test_where_a_question_was_shown_is_kept(store: QuestionStore):
    """`shown` records the platform's reference; the open questions of the conversation list it."""
    asked = await store.open(question())
    await store.shown(asked.id, "ref-1")
    [listed] = await store.open_in_thread(THREAD)
    assert listed.id == asked.id and listed.ref == "ref-1"


async def test_an_answer_after_the_expiry_is_refused_before_the_sweep(store: QuestionStore):
    """Past `expires_at` an answer changes nothing, though the question is still open; the sweep's expiry closes it."""
    asked = await store.open(question(expires_in_s=0))
    answer = Answer(action=Action.ACCEPT, content={"ok": True})
    assert await store.answer(asked.id, answer, status=QuestionStatus.ANSWERED, by_id="olga") is None
    assert (await store.get(asked.id)) == asked
    expired = await store.answer(asked.id, Answer(action=Action.CANCEL), status=QuestionStatus.EXPIRED, by_id=None)
    assert expired is not None and expired.status is QuestionStatus.EXPIRED
