"""The question prompt: an MCP server's question, asked of its requester at the terminal.

A server may ask the person who asked for a call a question in the middle of it (MCP
elicitation, docs/decisions/0054-mcp-elicitation.md). The terminal shows the server, the tool
and the server's message, then asks accept / decline / cancel; on accept it asks each field of
a form (its label, description, default and options), reads the typed text in the field's type
and checks it against the server's schema (`bot.tools.mcp.elicitation.forms`), asking a field
again, with the reason, when its value does not fit. A URL-mode question prints its link (the
terminal is its requester's) and asks whether they opened it. While the prompt waits it watches
the question (`ConsolePlatform.changed`): one that expires or is closed by a stop ends the wait.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import Any

from adapters.console import messages as msg
from adapters.console.commands import QUIT, ConsoleCommands
from adapters.console.people import CONSOLE_MARKUP, Session
from adapters.console.platform import ConsolePlatform
from adapters.console.prompt import Asked, Read, Write
from adapters.words.display import duration_words, reveal_invisible
from bot.base.errors import CountersignError, NotPermittedError
from bot.service import Countersign
from bot.tools.mcp.elicitation.desk import QuestionNotFoundError
from bot.tools.mcp.elicitation.forms import (
    Action,
    Answer,
    AnswerError,
    Form,
    FormField,
    LinkRequest,
    read_answer,
)
from bot.tools.mcp.elicitation.store import QuestionRecord

log = logging.getLogger(__name__)

_SETTLED = object()
"""What `_line` returns when the question was closed (expired, stopped) before a line came."""


class QuestionPrompt:
    """Asks waiting MCP questions at the terminal.

    Args:
        service: the core.
        platform: the console port (questions kept for the prompt; changes while waiting).
        session: who answers (`/as` changes it); only the call's requester may.
        commands: runs `/as` and `/countersign` typed at the prompt.
        read: the line reader.
        write: where text goes.
    """

    def __init__(
        self,
        service: Countersign,
        platform: ConsolePlatform,
        session: Session,
        commands: ConsoleCommands,
        *,
        read: Read,
        write: Write,
    ) -> None:
        self._service = service
        self._platform = platform
        self._session = session
        self._commands = commands
        self._read = read
        self._write = write

    async def ask(self, question_id: str) -> Asked:
        """Ask one question until it is answered or closed, or the person leaves (QUIT)."""
        record = await self._current(question_id)
        if record is None:
            return Asked.DONE
        self._show(record)
        asked = record.question
        while True:
            choices = msg.QUESTION_LINK_CHOICES if isinstance(asked, LinkRequest) else msg.QUESTION_CHOICES
            if self._session.pretending:  # whose answer this would be, as a card's prompt says
                choices = "   " + msg.QUESTION_AS.format(name=self._session.name) + choices.lstrip()
            try:
                line = await self._line(choices, question_id)
            except asyncio.CancelledError:  # Ctrl-C or SIGTERM at the prompt: the bot stops
                self._write(msg.QUESTION_LEFT)
                raise
            if line is _SETTLED:
                return Asked.DONE
            if not isinstance(line, str) or line.strip().lower() in QUIT:
                self._write(msg.QUESTION_LEFT)
                return Asked.QUIT
            text = line.strip()
            if text.startswith("/"):
                await self._commands.run(text)
                continue
            choice = text.lower()[:1]
            if choice == "d":
                answer = Answer(action=Action.DECLINE)
            elif choice == "c":
                answer = Answer(action=Action.CANCEL)
            elif choice == "a" and isinstance(asked, LinkRequest):
                answer = Answer(action=Action.ACCEPT)
            elif choice == "a" and isinstance(asked, Form):
                if self._session.actor().user_id != record.requester_id:  # refused before the form, not after it
                    self._write(msg.QUESTION_NOT_YOURS.format(requester=record.requester_id))
                    continue
                content = await self._fill(asked, question_id)
                if content is _SETTLED:
                    return Asked.DONE
                if not isinstance(content, dict):
                    self._write(msg.QUESTION_LEFT)
                    return Asked.QUIT
                answer = Answer(action=Action.ACCEPT, content=content)
            else:
                self._write(msg.QUESTION_ANSWER_WITH)
                continue
            if await self._answered(record, answer):
                return Asked.DONE

    async def _current(self, question_id: str) -> QuestionRecord | None:
        """The question as stored now; None when it is gone or no longer open."""
        try:
            record = await self._service.question(question_id)
        except QuestionNotFoundError:
            return None
        return record if record.is_open else None

    def _show(self, record: QuestionRecord) -> None:
        """Print who asks what: the server, the tool, its message, then the link or the form's fields."""
        self._write(
            msg.QUESTION_FROM.format(
                server=record.server, tool=record.tool_name, requester=CONSOLE_MARKUP.user(record.requester_id)
            )
        )
        asked = record.question
        for line in asked.message.splitlines() or [""]:
            self._write(msg.QUESTION_MESSAGE.format(message=reveal_invisible(line)))
        if isinstance(asked, LinkRequest):
            self._write(msg.QUESTION_LINK.format(url=reveal_invisible(asked.url)))
        else:
            for spec in asked.fields:
                description = f" ({reveal_invisible(spec.description)})" if spec.description else ""
                self._write(
                    msg.QUESTION_FIELD.format(
                        label=reveal_invisible(spec.label),
                        required=msg.QUESTION_REQUIRED if spec.required else "",
                        kind=msg.QUESTION_KINDS.get(spec.kind.value, spec.kind.value),
                        description=description,
                    )
                )
                if spec.options:
                    options = ", ".join(
                        f"{o.label} ({o.value})" if o.label != o.value else o.value for o in spec.options
                    )
                    self._write(msg.QUESTION_OPTIONS.format(options=reveal_invisible(options)))
        if record.expires_at is not None:
            left = (record.expires_at - datetime.now(UTC)).total_seconds()
            if left > 0:
                self._write(msg.QUESTION_EXPIRES.format(duration=duration_words(left)))

    async def _fill(self, form: Form, question_id: str) -> dict[str, Any] | object | None:
        """The form's content, field by field; a field whose value does not fit is asked again, with why.

        Returns:
            The content (`read_answer`), `_SETTLED` when the question closed meanwhile, or None
            when the input ended or the person typed `/quit` (the question waits).
        """
        raw: dict[str, object] = {}
        fields = list(form.fields)
        while True:
            for spec in fields:
                line = await self._line(self._field_prompt(spec), question_id)
                if line is _SETTLED or line is None:
                    return line
                if str(line).strip().lower() in QUIT:  # leaves, as at the question's own prompt
                    return None
                raw[spec.name] = line if str(line).strip() or spec.default is None else spec.default
            try:
                return read_answer(form, raw)
            except AnswerError as exc:
                self._write(msg.QUESTION_BAD_VALUE.format(problem=exc.message))
                wrong = [spec for spec in form.fields if spec.name == exc.field]
                fields = wrong or list(form.fields)

    @staticmethod
    def _field_prompt(spec: FormField) -> str:
        default = spec.default
        if isinstance(default, tuple):
            default = ", ".join(default)
        shown = msg.QUESTION_DEFAULT.format(default=default) if default is not None else ""
        return msg.QUESTION_ASK_FIELD.format(label=reveal_invisible(spec.label), default=shown)

    async def _answered(self, record: QuestionRecord, answer: Answer) -> bool:
        """Send the answer through the core; True when the question is done with (answered, or closed)."""
        try:
            await self._service.answer_question(record.id, self._session.actor(), answer)
        except AnswerError as exc:
            self._write(msg.QUESTION_BAD_VALUE.format(problem=exc.message))
            return False
        except NotPermittedError:
            self._write(msg.QUESTION_NOT_YOURS.format(requester=record.requester_id))
            return False
        except CountersignError as exc:
            self._write("!  " + str(exc))
            return True
        return True

    async def _line(self, prompt: str, question_id: str) -> str | object | None:
        """The next line, or `_SETTLED` when the question is closed (expired, stopped) before it comes."""
        self._platform.changed.clear()
        reading: asyncio.Future[str | None] = asyncio.ensure_future(self._read(prompt))
        changed: asyncio.Task[bool] | None = None
        try:
            while True:
                changed = asyncio.ensure_future(self._platform.changed.wait())
                done, _ = await asyncio.wait((reading, changed), return_when=asyncio.FIRST_COMPLETED)
                if reading in done:
                    return reading.result()
                self._platform.changed.clear()
                if await self._current(question_id) is None:
                    return reading.result() if reading.done() and not reading.cancelled() else _SETTLED
        finally:
            reading.cancel()
            if changed is not None:
                changed.cancel()
