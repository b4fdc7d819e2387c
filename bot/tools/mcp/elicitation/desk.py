"""The questions' use cases: store a question pause's questions, show them, answer them, expire them.

The run raises a question pause (`bot.tools.mcp.elicitation.rounds`); the runner hands it here
(`open`), which stores one question per request key, addressed to the requester (the author of
the message the call came from), and shows each through the platform (`Platform.post_question`).
A platform that cannot take answers (it returns None) has told the requester so, and the
question is answered `cancel` at once. A question leaves `open` once (the store's conditional
update): answered by its requester (`answer`), expired (`expire_due`, like a card), or closed by
a Stop (`stop`); the pause resumes once all its questions are closed (`ready`). Each step is
audited: `asked`, then `answered` with the action and the names of the fields filled in, never
their values (a form's answers may be personal), or `expired` / `stopped`.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from bot.audit.entries import AuditEntry, AuditKind
from bot.audit.store import AuditStore
from bot.base.conversation import Actor, ConversationRef
from bot.base.errors import CountersignError, NotPermittedError
from bot.base.events import QuestionsExpiring, Subscribers
from bot.policy.store import ConfigStore
from bot.ports import Platform
from bot.tools.mcp.elicitation.forms import Action, Answer, check_answer
from bot.tools.mcp.elicitation.rounds import QuestionPause, resume_value
from bot.tools.mcp.elicitation.store import NewQuestion, QuestionRecord, QuestionStatus, QuestionStore

log = logging.getLogger(__name__)


class QuestionNotFoundError(CountersignError):
    """No question has this id (a forged or stale prompt)."""

    def __init__(self, question_id: str) -> None:
        super().__init__(f"no question {question_id!r}")
        self.question_id = question_id


class AlreadyAnsweredError(CountersignError):
    """The question was answered (or expired, or closed by a stop) before; nothing changed.

    Args:
        status: answered, expired or stopped.
    """

    def __init__(self, status: QuestionStatus) -> None:
        super().__init__(f"the question is {status.value} already")
        self.status = status


class QuestionDesk:
    """Questions from their pause to their answer.

    Args:
        store: the questions table.
        audit: the audit log.
        config: the admin configuration (a question expires after its tool's card expiry).
        platforms: adapters by `ConversationRef.platform` (read when used).
        expiring: told when a question with an expiry opens, or one is found past it (the
            question expiry subscribes; an event because that sweeper is built after this desk,
            docs/decisions/0062-one-composition-root.md).
    """

    def __init__(
        self,
        store: QuestionStore,
        audit: AuditStore,
        config: ConfigStore,
        platforms: Mapping[str, Platform],
        *,
        expiring: Subscribers[QuestionsExpiring] | None = None,
    ) -> None:
        self.store = store
        self._expiring = expiring
        self._audit = audit
        self._config = config
        self._platforms = platforms

    async def open(self, conversation: ConversationRef, interrupt_id: str, value: object, requester: Actor) -> bool:
        """Store a question pause's questions (idempotent) and show those not shown yet.

        Args:
            conversation: the conversation.
            interrupt_id: the pause's interrupt.
            value: its payload (`QuestionPause`).
            requester: who asked for the call (only they may answer).

        Returns:
            Whether every question of the pause is closed now (a platform that cannot ask
            answered `cancel`): the pause is then ready to resume.
        """
        pause = QuestionPause.of(value)
        if pause is None:
            log.error("interrupt %s is not a question pause (thread_id=%s)", interrupt_id, conversation.thread_id)
            return False
        config = await self._config.load(conversation.platform, conversation.workspace_id)
        before = {record.key for record in await self.store.of_interrupts(conversation.thread_id, [interrupt_id])}
        records = []
        for key, request in pause.requests.items():
            record = await self.store.open(
                NewQuestion(
                    thread_id=conversation.thread_id,
                    workspace_id=conversation.workspace_id,
                    interrupt_id=interrupt_id,
                    tool_call_id=pause.tool_call_id,
                    round=pause.round,
                    key=key,
                    tool_name=pause.tool_name,
                    server=pause.server,
                    requester_id=requester.user_id,
                    requester_name=requester.display_name,
                    request=request,
                    expires_in_s=config.expiry_s(pause.tool_name),
                )
            )
            if key not in before:
                await self._audited(record, "asked", actor=None)
                if record.expires_at is not None and self._expiring is not None:
                    self._expiring.publish(QuestionsExpiring())
            records.append(record)
        for record in records:
            if record.is_open and record.ref is None:
                await self._show(conversation, record)
        return all(
            not record.is_open for record in await self.store.of_interrupts(conversation.thread_id, [interrupt_id])
        )

    async def show_again(self, conversation: ConversationRef, interrupt_ids: Collection[str]) -> None:
        """Show the open questions of these pauses again (after a start: the platform forgot them)."""
        for record in await self.store.of_interrupts(conversation.thread_id, interrupt_ids):
            if record.is_open:
                await self._show(conversation, record)

    async def _show(self, conversation: ConversationRef, record: QuestionRecord) -> None:
        """Show a question to its requester; a platform that cannot take answers has it answered `cancel`.

        A question nobody known asked for (the message's author was not stored) is answered
        `cancel` without being shown: nobody may answer it.
        """
        if not record.requester_id:
            closed = await self.store.answer(
                record.id, Answer(action=Action.CANCEL), status=QuestionStatus.ANSWERED, by_id=None
            )
            if closed is not None:
                await self._audited(closed, "answered", actor=None, detail={"action": "cancel", "why": "no requester"})
            return
        try:
            ref = await self._platforms[conversation.platform].post_question(conversation, record)
        except Exception:
            log.exception("could not show question %s (thread_id=%s)", record.id, record.thread_id)
            return
        if ref is None:
            log.info("question %s cannot be answered on %s; answered cancel", record.id, conversation.platform)
            closed = await self.store.answer(
                record.id, Answer(action=Action.CANCEL), status=QuestionStatus.ANSWERED, by_id=None
            )
            if closed is not None:
                await self._audited(closed, "answered", actor=None, detail={"action": "cancel", "why": "platform"})
            return
        await self.store.shown(record.id, ref)

    async def ready(self, thread_id: str, interrupt_ids: Collection[str]) -> dict[str, dict[str, Any]]:
        """The resume values of these pending question pauses whose questions are all closed, by interrupt id."""
        by_interrupt: dict[str, list[QuestionRecord]] = {}
        for record in await self.store.of_interrupts(thread_id, interrupt_ids):
            by_interrupt.setdefault(record.interrupt_id, []).append(record)
        values: dict[str, dict[str, Any]] = {}
        for interrupt_id, records in by_interrupt.items():
            if all(not record.is_open for record in records):
                values[interrupt_id] = resume_value({r.key: r.answer or Answer(action=Action.CANCEL) for r in records})
        return values

    async def blocking(self, thread_id: str) -> list[QuestionRecord]:
        """The conversation's open questions (a new message waits for them, as for a card)."""
        return await self.store.open_in_thread(thread_id)

    async def get(self, question_id: str) -> QuestionRecord:
        """The question with this id.

        Raises:
            QuestionNotFoundError: no such question.
        """
        record = await self.store.get(question_id)
        if record is None:
            raise QuestionNotFoundError(question_id)
        return record

    async def answer(self, question_id: str, actor: Actor, answer: Answer) -> QuestionRecord:
        """Record the requester's answer, once.

        Raises:
            QuestionNotFoundError: no such question.
            NotPermittedError: `not_requester`: only the person who asked for the call answers
                (audited); nothing changed.
            AlreadyAnsweredError: it was answered, expired (its `expires_at` passed, swept or
                not: the sweeper is woken) or closed before; nothing changed.
            AnswerError: the content does not fit the question; nothing changed, and the
                person may answer again.
        """
        record = await self.get(question_id)
        asked_in = ConversationRef.from_thread_id(record.thread_id)
        if (actor.platform, actor.workspace_id, actor.user_id) != (
            asked_in.platform,
            record.workspace_id,
            record.requester_id,
        ):
            await self._audited(record, "not_permitted", actor=actor)
            raise NotPermittedError("not_requester")
        if not record.is_open:
            raise AlreadyAnsweredError(record.status)
        checked = check_answer(record.question, answer)
        closed = await self.store.answer(record.id, checked, status=QuestionStatus.ANSWERED, by_id=actor.user_id)
        if closed is None:
            again = await self.get(question_id)
            if again.is_open:  # past its expiry, not swept yet: it expires now, the server gets `cancel`
                if self._expiring is not None:
                    self._expiring.publish(QuestionsExpiring())
                raise AlreadyAnsweredError(QuestionStatus.EXPIRED)
            raise AlreadyAnsweredError(again.status)
        fields = sorted(checked.content) if checked.content is not None else []
        await self._audited(closed, "answered", actor=actor, detail={"action": checked.action.value, "fields": fields})
        return closed

    async def expire_due(self, *, platforms: Collection[str]) -> list[QuestionRecord]:
        """Close every open question past its `expires_at` on these platforms, answered `cancel`."""
        expired = []
        for record in await self.store.due(datetime.now(UTC), platforms=platforms):
            closed = await self.store.answer(
                record.id, Answer(action=Action.CANCEL), status=QuestionStatus.EXPIRED, by_id=None
            )
            if closed is not None:
                await self._audited(closed, "expired", actor=None)
                expired.append(closed)
        return expired

    async def stop(self, thread_id: str, stopper_id: str | None) -> list[QuestionRecord]:
        """Close the conversation's open questions, answered `cancel`: its turn was stopped."""
        closed_all = []
        for record in await self.store.open_in_thread(thread_id):
            closed = await self.store.answer(
                record.id, Answer(action=Action.CANCEL), status=QuestionStatus.STOPPED, by_id=stopper_id
            )
            if closed is not None:
                await self._audited(closed, "stopped", actor=None, detail={"stopped_by": stopper_id})
                closed_all.append(closed)
        return closed_all

    async def redraw(self, *records: QuestionRecord) -> None:
        """Show each closed question's outcome where it was shown; a failure is logged."""
        for record in records:
            if record.ref is None:
                continue
            conversation = ConversationRef.from_thread_id(record.thread_id)
            try:
                await self._platforms[conversation.platform].update_question(conversation, record.ref, record)
            except Exception:
                log.exception("could not redraw question %s (thread_id=%s)", record.id, record.thread_id)

    async def next_expiry(self, *, platforms: Collection[str]) -> datetime | None:
        """When the next open question on these platforms expires, or None."""
        return await self.store.next_expiry(platforms=platforms)

    async def _audited(
        self, record: QuestionRecord, outcome: str, *, actor: Actor | None, detail: Mapping[str, Any] | None = None
    ) -> None:
        """One `question` audit row: never the answer's values."""
        await self._audit.record(
            AuditEntry(
                kind=AuditKind.QUESTION,
                workspace_id=record.workspace_id,
                thread_id=record.thread_id,
                tool_name=record.tool_name,
                actor_id=actor.user_id if actor is not None else None,
                actor_name=actor.display_name if actor is not None else None,
                outcome=outcome,
                detail={
                    "question_id": record.id,
                    "server": record.server,
                    "tool_call_id": record.tool_call_id,
                    "round": record.round,
                    "key": record.key,
                    **(detail or {}),
                },
            )
        )


def requester_of(records: Sequence[QuestionRecord]) -> str | None:
    """The requester of these questions (they share one), or None."""
    return records[0].requester_id if records else None
