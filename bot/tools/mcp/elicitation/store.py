"""Where a server's questions wait for their requester: a small port, PostgreSQL and in memory.

A question is one key of a round's `input_requests` (`bot.tools.mcp.elicitation.rounds`), put
to the person who asked for the call. It leaves `open` exactly once, by one conditional update:
answered by its requester, expired (like a card), or closed by a Stop; the last two answer
`cancel`. Both implementations run the same contract suite
(`tests/contract/test_question_store.py`).
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, Protocol

import asyncpg
import mcp_types

from bot.tools.mcp.elicitation.forms import Action, Answer, Question, question_of


class QuestionStatus(StrEnum):
    """Where a question is."""

    OPEN = "open"
    ANSWERED = "answered"
    EXPIRED = "expired"
    STOPPED = "stopped"


@dataclass(frozen=True, slots=True, kw_only=True)
class NewQuestion:
    """A question to store when its pause is raised.

    Attributes:
        thread_id: the conversation.
        workspace_id: its workspace.
        interrupt_id: the pause that waits for the answer.
        tool_call_id: the call whose server asks.
        round: the round of the call that asked (0: the call itself).
        key: the server's key of the request in `input_requests`.
        tool_name: the registry name of the tool (`<server>__<tool>`).
        server: the server's key in the MCP servers file.
        requester_id / requester_name: who asked for the call; only they may answer.
        request: the server's `ElicitRequest` as MCP's JSON.
        expires_in_s: seconds until it expires unanswered; None: it waits until answered.
    """

    thread_id: str
    workspace_id: str
    interrupt_id: str
    tool_call_id: str
    round: int
    key: str
    tool_name: str
    server: str
    requester_id: str
    requester_name: str
    request: Mapping[str, Any] = field(repr=False)
    expires_in_s: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class QuestionRecord:
    """A stored question.

    Attributes:
        id: 32 hex digits, named by the adapters' prompts and buttons.
        status: open, answered, expired or stopped.
        answer: the answer sent to the server (expired and stopped: cancel); None while open.
        answered_by_id: who answered (None: an expiry, a Stop, or a platform that cannot ask).
        ref: the platform's reference of the shown question, once shown.
        created_at / answered_at / expires_at: when.
        (the rest as in `NewQuestion`)
    """

    id: str
    thread_id: str
    workspace_id: str
    interrupt_id: str
    tool_call_id: str
    round: int
    key: str
    tool_name: str
    server: str
    requester_id: str
    requester_name: str
    request: Mapping[str, Any] = field(repr=False)
    status: QuestionStatus = QuestionStatus.OPEN
    answer: Answer | None = None
    answered_by_id: str | None = None
    ref: str | None = None
    created_at: datetime | None = None
    answered_at: datetime | None = None
    expires_at: datetime | None = None

    @property
    def is_open(self) -> bool:
        """Whether it still waits for its answer."""
        return self.status is QuestionStatus.OPEN

    @property
    def question(self) -> Question:
        """The form or link it asks (`forms.question_of`; it was checked when the pause was raised).

        Raises:
            UnusableQuestionError: never for a stored question (checked before it was asked).
        """
        return question_of(mcp_types.ElicitRequest.model_validate(dict(self.request)))


class QuestionNotOpenError(Exception):
    """Internal: a conditional update found the question no longer open."""


class QuestionStore(Protocol):
    """The questions table."""

    async def open(self, question: NewQuestion) -> QuestionRecord:
        """Store a question, or return the one stored before for its pause and key (idempotent)."""
        ...

    async def get(self, question_id: str) -> QuestionRecord | None:
        """The question with this id, or None (any string: a forged id finds nothing)."""
        ...

    async def of_interrupts(self, thread_id: str, interrupt_ids: Collection[str]) -> list[QuestionRecord]:
        """The questions of these pauses of the conversation, oldest first."""
        ...

    async def open_in_thread(self, thread_id: str) -> list[QuestionRecord]:
        """The conversation's questions still open, oldest first."""
        ...

    async def answer(
        self, question_id: str, answer: Answer, *, status: QuestionStatus, by_id: str | None
    ) -> QuestionRecord | None:
        """Close an open question with `answer`; None when it was not open (nothing changed).

        An `answered` close is refused (None) once the question's `expires_at` has passed, even
        before the expiry sweep closed it: like a card's vote, an answer after the expiry does
        not count.

        Args:
            question_id: the question.
            answer: what is sent to the server.
            status: answered, expired or stopped.
            by_id: who answered (None for the system).
        """
        ...

    async def shown(self, question_id: str, ref: str) -> None:
        """Record where the question was shown (the platform's reference)."""
        ...

    async def due(self, now: datetime, *, platforms: Collection[str]) -> list[QuestionRecord]:
        """Open questions whose `expires_at` is at or before `now`, on these platforms' conversations."""
        ...

    async def next_expiry(self, *, platforms: Collection[str]) -> datetime | None:
        """When the next open question on these platforms' conversations expires, or None."""
        ...


def _platform_of(thread_id: str) -> str:
    return thread_id.split(":", 1)[0]


class InMemoryQuestionStore:
    """A process-local `QuestionStore`, for tests and tools that have no database."""

    def __init__(self) -> None:
        self._rows: dict[str, QuestionRecord] = {}

    async def open(self, question: NewQuestion) -> QuestionRecord:
        """See `QuestionStore.open`."""
        for row in self._rows.values():
            if (row.thread_id, row.interrupt_id, row.key) == (question.thread_id, question.interrupt_id, question.key):
                return row
        now = datetime.now(UTC)
        expires = now + timedelta(seconds=question.expires_in_s) if question.expires_in_s is not None else None
        record = QuestionRecord(
            id=uuid.uuid4().hex,
            thread_id=question.thread_id,
            workspace_id=question.workspace_id,
            interrupt_id=question.interrupt_id,
            tool_call_id=question.tool_call_id,
            round=question.round,
            key=question.key,
            tool_name=question.tool_name,
            server=question.server,
            requester_id=question.requester_id,
            requester_name=question.requester_name,
            request=dict(question.request),
            created_at=now,
            expires_at=expires,
        )
        self._rows[record.id] = record
        return record

    async def get(self, question_id: str) -> QuestionRecord | None:
        """See `QuestionStore.get`."""
        return self._rows.get(question_id)

    async def of_interrupts(self, thread_id: str, interrupt_ids: Collection[str]) -> list[QuestionRecord]:
        """See `QuestionStore.of_interrupts`."""
        wanted = set(interrupt_ids)
        return [r for r in self._rows.values() if r.thread_id == thread_id and r.interrupt_id in wanted]

    async def open_in_thread(self, thread_id: str) -> list[QuestionRecord]:
        """See `QuestionStore.open_in_thread`."""
        return [r for r in self._rows.values() if r.thread_id == thread_id and r.is_open]

    async def answer(
        self, question_id: str, answer: Answer, *, status: QuestionStatus, by_id: str | None
    ) -> QuestionRecord | None:
        """See `QuestionStore.answer`."""
        row = self._rows.get(question_id)
        if row is None or not row.is_open:
            return None
        now = datetime.now(UTC)
        if status is QuestionStatus.ANSWERED and row.expires_at is not None and row.expires_at <= now:
            return None
        row = replace(row, status=status, answer=answer, answered_by_id=by_id, answered_at=datetime.now(UTC))
        self._rows[question_id] = row
        return row

    async def shown(self, question_id: str, ref: str) -> None:
        """See `QuestionStore.shown`."""
        row = self._rows.get(question_id)
        if row is not None:
            self._rows[question_id] = replace(row, ref=ref)

    async def due(self, now: datetime, *, platforms: Collection[str]) -> list[QuestionRecord]:
        """See `QuestionStore.due`."""
        return [
            r
            for r in self._rows.values()
            if r.is_open and r.expires_at is not None and r.expires_at <= now and _platform_of(r.thread_id) in platforms
        ]

    async def next_expiry(self, *, platforms: Collection[str]) -> datetime | None:
        """See `QuestionStore.next_expiry`."""
        times = [
            r.expires_at
            for r in self._rows.values()
            if r.is_open and r.expires_at is not None and _platform_of(r.thread_id) in platforms
        ]
        return min(times, default=None)


_COLUMNS = """id, thread_id, workspace_id, interrupt_id, tool_call_id, round, key, tool_name, server, requester_id,
    requester_name, request, status, answer, answered_by_id, ref, created_at, answered_at, expires_at"""


class PostgresQuestionStore:
    """The `mcp_questions` table (migration 0020).

    Args:
        pool: the asyncpg pool (with the JSON codecs of `bot.storage.database`).
    """

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def open(self, question: NewQuestion) -> QuestionRecord:
        """See `QuestionStore.open`."""
        row = await self._pool.fetchrow(
            f"""
            INSERT INTO mcp_questions (id, thread_id, workspace_id, interrupt_id, tool_call_id, round, key, tool_name,
                server, requester_id, requester_name, request, expires_at)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12,
                CASE WHEN $13::integer IS NULL THEN NULL ELSE now() + make_interval(secs => $13::integer) END)
            ON CONFLICT (thread_id, interrupt_id, key) DO NOTHING
            RETURNING {_COLUMNS}
            """,  # noqa: S608 - built from a constant, no input
            uuid.uuid4().hex,
            question.thread_id,
            question.workspace_id,
            question.interrupt_id,
            question.tool_call_id,
            question.round,
            question.key,
            question.tool_name,
            question.server,
            question.requester_id,
            question.requester_name,
            dict(question.request),
            question.expires_in_s,
        )
        if row is None:
            row = await self._pool.fetchrow(
                f"SELECT {_COLUMNS} FROM mcp_questions WHERE thread_id = $1 AND interrupt_id = $2 AND key = $3",  # noqa: S608
                question.thread_id,
                question.interrupt_id,
                question.key,
            )
        return _record(row)

    async def get(self, question_id: str) -> QuestionRecord | None:
        """See `QuestionStore.get`."""
        query = f"SELECT {_COLUMNS} FROM mcp_questions WHERE id = $1"  # noqa: S608 - built from a constant
        row = await self._pool.fetchrow(query, question_id)
        return _record(row) if row is not None else None

    async def of_interrupts(self, thread_id: str, interrupt_ids: Collection[str]) -> list[QuestionRecord]:
        """See `QuestionStore.of_interrupts`."""
        rows = await self._pool.fetch(
            f"""SELECT {_COLUMNS} FROM mcp_questions WHERE thread_id = $1 AND interrupt_id = ANY($2::text[])
                ORDER BY created_at, id""",  # noqa: S608 - built from a constant, no input
            thread_id,
            list(interrupt_ids),
        )
        return [_record(row) for row in rows]

    async def open_in_thread(self, thread_id: str) -> list[QuestionRecord]:
        """See `QuestionStore.open_in_thread`."""
        rows = await self._pool.fetch(
            f"SELECT {_COLUMNS} FROM mcp_questions WHERE thread_id = $1 AND status = 'open' ORDER BY created_at, id",  # noqa: S608
            thread_id,
        )
        return [_record(row) for row in rows]

    async def answer(
        self, question_id: str, answer: Answer, *, status: QuestionStatus, by_id: str | None
    ) -> QuestionRecord | None:
        """See `QuestionStore.answer`: one conditional update, so a question is answered once."""
        row = await self._pool.fetchrow(
            f"""
            UPDATE mcp_questions SET status = $2, answer = $3, answered_by_id = $4, answered_at = now()
            WHERE id = $1 AND status = 'open'
              AND ($2 <> 'answered' OR expires_at IS NULL OR expires_at > now())
            RETURNING {_COLUMNS}
            """,  # noqa: S608 - built from a constant, no input
            question_id,
            status.value,
            _answer_json(answer),
            by_id,
        )
        return _record(row) if row is not None else None

    async def shown(self, question_id: str, ref: str) -> None:
        """See `QuestionStore.shown`."""
        await self._pool.execute("UPDATE mcp_questions SET ref = $2 WHERE id = $1", question_id, ref)

    async def due(self, now: datetime, *, platforms: Collection[str]) -> list[QuestionRecord]:
        """See `QuestionStore.due`."""
        rows = await self._pool.fetch(
            f"""SELECT {_COLUMNS} FROM mcp_questions
                WHERE status = 'open' AND expires_at <= $1 AND split_part(thread_id, ':', 1) = ANY($2::text[])
                ORDER BY expires_at, id""",  # noqa: S608 - built from a constant, no input
            now,
            list(platforms),
        )
        return [_record(row) for row in rows]

    async def next_expiry(self, *, platforms: Collection[str]) -> datetime | None:
        """See `QuestionStore.next_expiry`."""
        value = await self._pool.fetchval(
            """SELECT min(expires_at) FROM mcp_questions
               WHERE status = 'open' AND expires_at IS NOT NULL AND split_part(thread_id, ':', 1) = ANY($1::text[])""",
            list(platforms),
        )
        return value if isinstance(value, datetime) else None


def _answer_json(answer: Answer) -> dict[str, Any]:
    content = dict(answer.content) if answer.content is not None else None
    return {"action": answer.action.value, "content": content}


def answer_of(value: object) -> Answer | None:
    """The `Answer` stored (or carried in a resume value) as `{"action", "content"}`; None when it is not one."""
    if not isinstance(value, Mapping):
        return None
    try:
        action = Action(str(value.get("action")))
    except ValueError:
        return None
    content = value.get("content")
    return Answer(action=action, content=dict(content) if isinstance(content, Mapping) else None)


def answer_json(answer: Answer) -> dict[str, Any]:
    """`answer` as `{"action": ..., "content": ...}` (stored, and carried in a resume value)."""
    return _answer_json(answer)


def _record(row: asyncpg.Record | None) -> QuestionRecord:
    if row is None:  # pragma: no cover - the insert or the select found it
        raise QuestionNotOpenError("no such question")
    data = dict(row.items())
    return QuestionRecord(
        id=data["id"],
        thread_id=data["thread_id"],
        workspace_id=data["workspace_id"],
        interrupt_id=data["interrupt_id"],
        tool_call_id=data["tool_call_id"],
        round=data["round"],
        key=data["key"],
        tool_name=data["tool_name"],
        server=data["server"],
        requester_id=data["requester_id"],
        requester_name=data["requester_name"],
        request=data["request"],
        status=QuestionStatus(data["status"]),
        answer=answer_of(data["answer"]),
        answered_by_id=data["answered_by_id"],
        ref=data["ref"],
        created_at=data["created_at"],
        answered_at=data["answered_at"],
        expires_at=data["expires_at"],
    )
