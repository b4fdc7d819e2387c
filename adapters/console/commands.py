"""The terminal's own commands: `/countersign ...`, `/as [name]`, `/help`.

`/countersign` goes through the core's parser (with the terminal's `@name` and `#name`,
`people.TERMINAL_MENTIONS`) and `AdminService.execute`, as on Slack and Discord, for whoever
types now (`/as`). The loops handle `/quit` themselves.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from adapters.console import messages as msg
from adapters.console.people import CONSOLE_MARKUP, TERMINAL_MENTIONS, Session, person_name
from adapters.words.admin import error_text, render
from bot.admin.commands import SetCards, SetScope
from bot.admin.parse import parse_command
from bot.admin.service import AdminService
from bot.admin.views import Changed, HelpPage
from bot.base.errors import CountersignError

log = logging.getLogger(__name__)

Write = Callable[[str], None]

QUIT = frozenset({"/quit", "/exit"})
"""What leaves the chat, at the message prompt and at an approval prompt."""


def is_command(line: str) -> bool:
    """Whether a line typed at the message prompt is a command (a message may start with ` /`)."""
    return line.startswith("/")


def refusal(text: str) -> str:
    """`text` as a refusal: its first line starts with `!  `, the others are indented under it."""
    return "!  " + text.replace("\n", "\n   ")


def indented(text: str) -> str:
    """`text` indented by three spaces, line by line (a reply to a command)."""
    return "   " + text.replace("\n", "\n   ")


class ConsoleCommands:
    """Runs the lines that start with `/`.

    Args:
        session: who types now (`/as` changes it).
        admin: the `/countersign` use case (None: `/countersign` is refused).
        write: where text goes.
    """

    def __init__(self, session: Session, admin: AdminService | None, write: Write) -> None:
        self._session = session
        self._admin = admin
        self._write = write

    async def run(self, line: str) -> None:
        """Run one command line; every problem is a `!  ` line, never a traceback."""
        word, _, rest = line.strip().partition(" ")
        name = word.lower()
        if name == "/as":
            self._become(rest)
        elif name == "/help":
            self._write(msg.HELP)
        elif name == "/countersign":
            await self._countersign(rest)
        else:
            self._write(msg.NOT_A_COMMAND.format(command=word))

    def _become(self, text: str) -> None:
        if not text.strip():
            self._write(self._session.become(None))
            return
        name = person_name(text)
        if name is None:
            self._write(msg.NOT_A_NAME.format(text=text.strip()))
            return
        self._write(self._session.become(name))

    async def _countersign(self, text: str) -> None:
        """`/countersign <subcommand>` for the current person, through the core's parser and admin use case."""
        if self._admin is None:
            self._write(msg.NO_ADMIN)
            return
        conversation = self._session.conversation
        try:
            command = parse_command(text, mentions=TERMINAL_MENTIONS)
            reply = await self._admin.execute(
                self._session.actor(), command, here=conversation.channel_id, conversation=conversation
            )
        except CountersignError as exc:
            self._write(refusal(error_text(exc, CONSOLE_MARKUP)))
            return
        except Exception as exc:  # the terminal shows a sentence, never a traceback
            log.warning("/countersign failed: %s: %s", type(exc).__name__, exc)
            log.debug("/countersign failed", exc_info=True)
            self._write(msg.COMMAND_FAILED)
            return
        self._write(indented(render(reply, CONSOLE_MARKUP)))
        if isinstance(reply, HelpPage):
            self._write(indented(msg.TERMINAL_HELP))
        elif isinstance(reply, Changed) and reply.changed and isinstance(command, SetCards):
            self._write(msg.CARDS_NOTE)
        elif isinstance(reply, Changed) and reply.changed and isinstance(command, SetScope):
            self._write(msg.SCOPE_NOTE)
