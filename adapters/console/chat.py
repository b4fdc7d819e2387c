"""`countersign chat`: a conversation in the terminal, each approval asked as a prompt.

The terminal is a place to try policies before rolling them out: `/countersign` works as on
Slack and Discord (the person at the terminal is the admin), and `/as <name>` acts as a
pretend teammate, so quorum, self-approval, approver lists, trust, escalation and expiry can be
seen at work (`people`, `commands`, `prompt`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import sys
import threading
import uuid
from collections.abc import Coroutine
from typing import Any

from adapters.console import messages as msg
from adapters.console.commands import QUIT, ConsoleCommands, is_command, refusal
from adapters.console.people import CONSOLE_MARKUP, Session
from adapters.console.platform import ConsolePlatform
from adapters.console.prompt import Asked, CardPrompt, Read, TypedAhead
from adapters.console.question_prompt import QuestionPrompt
from adapters.words.admin import error_text
from adapters.words.display import duration_words
from bot.admin.service import AdminService
from bot.base.conversation import IncomingMessage
from bot.base.errors import CountersignError
from bot.service import Countersign

log = logging.getLogger(__name__)

__all__ = ["ConsoleChat", "Read", "StdinLines", "printable"]


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""C0 and C1 control characters but newline and tab (escape sequences start with ESC, 0x1b)."""


def printable(text: str) -> str:
    r"""`text` with control characters but newline and tab written as `\xNN` escapes.

    A terminal acts on them (ESC starts sequences that move the cursor, set the window title,
    or on some terminals write files); the text the bot prints comes partly from the model and
    the tools, so from outside the team.
    """
    return _CONTROL.sub(lambda match: f"\\x{ord(match.group()):02x}", text)


class StdinLines:
    """Lines from stdin, read by a daemon thread and handed to the event loop.

    `asyncio.to_thread(input)` would block in a pool thread that the interpreter waits for at
    exit, so Ctrl-C at a prompt would hang until Enter. A daemon thread never holds up the exit,
    and unlike watching the descriptor it works when stdin is a file or /dev/null. A read
    cancelled while it waits (its card expired) loses no line: the line stays queued.
    """

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._lines: asyncio.Queue[str | None] = asyncio.Queue()
        self._ended = False
        self._prompt_open = False
        threading.Thread(target=self._pump, name="stdin", daemon=True).start()

    def _pump(self) -> None:
        for line in sys.stdin:
            self._loop.call_soon_threadsafe(self._lines.put_nowait, line.rstrip("\n"))
        self._loop.call_soon_threadsafe(self._lines.put_nowait, None)

    async def read(self, prompt: str) -> str | None:
        """Show `prompt` and wait for the next line; None at (and after) the end of input."""
        print(prompt, end="", flush=True)
        self._prompt_open = True
        if self._ended:
            print(flush=True)  # the end of input came while the bot worked: end the prompt's line
            return None
        line = await self._lines.get()
        self._prompt_open = False
        self._ended = line is None
        if line is None:
            print(flush=True)  # Ctrl-D echoes no newline: what follows starts on a line of its own
        return line

    def has_typed_ahead(self) -> bool:
        """Whether a line typed and not yet read waits (see `ConsoleChat`)."""
        return not self._ended and not self._lines.empty()

    def next_typed_ahead(self) -> str | None:
        """The first line typed and not yet read, without waiting; None when none waits.

        The others stay queued (a stop answers them: "was not run"). The end of input is kept
        for the next `read`, which returns None.
        """
        if not self.has_typed_ahead():
            return None
        line = self._lines.get_nowait()
        if line is None:
            self._ended = True
        return line

    def write(self, text: str) -> None:
        """Print `text` on a line of its own (after a prompt still waiting for its answer, below it).

        Control characters are shown escaped (`printable`): what the bot prints includes the
        model's words and what tools fetched, which must not drive the terminal.
        """
        if self._prompt_open:
            print()
            self._prompt_open = False
        print(printable(text), flush=True)

    def close(self) -> None:
        """Nothing to release: the reader thread ends with stdin or with the process."""


class ConsoleChat:
    """The terminal loop.

    Stop (docs/decisions/0021): the person at the terminal is its admin, so they may stop any turn. While
    the bot works the chat reads no line (its output would mix with the prompt; lines typed
    meanwhile are read after the work), so the terminal's way is Ctrl-C (`interrupt`, wired by
    `countersign chat`): the first one during a turn stops the turn, a second one (or one at a
    prompt) leaves, as before. At an approval prompt, `/countersign stop` stops the waiting turn
    (its cards close as stopped). A turn left over from an earlier run (`run(recover=True)`) is
    such work too.

    Lines typed while the bot works are taken, in order, once it is done, as if typed at the
    message prompt (`typed_ahead`), before any card is asked: an answer to a card counts only
    once the card is shown, so a message typed ahead that starts with "a" approves nothing (a
    message sent while a card waits is told so by the core, as on Slack and Discord). The bot is
    at work from the line it takes until the chat is back at a prompt, lines typed ahead and
    their turns included: the first Ctrl-C meanwhile stops the turn at work, and each line typed
    ahead until then that did not start yet is told it was not run (a line already being claimed
    is answered: a claimed message always is); another Ctrl-C before the prompt leaves.

    Each message carries an id, so the core keeps it in its inbox from the moment it is
    accepted: a message whose turn is cut (SIGTERM after the grace, a crash) is handled on the
    next start, never dropped. Leaving (`shut_down`) lets the turn in progress reach a
    checkpoint within the shutdown grace, as `countersign run` does.

    Args:
        service: the core.
        platform: the console port (registered with the core under `console`); its operator
            is the person at the terminal.
        read: line reader (tests pass their own; see `prompt.Read`).
        conversation_id: the channel id of the terminal conversation; the same id continues
            the same LangGraph thread across runs.
        admin: the `/countersign` use case (None: `/countersign` is refused).
        typed_ahead: lines typed before they were asked for (`StdinLines`; None: every line read
            answers what is asked, as with input piped in).
    """

    def __init__(
        self,
        service: Countersign,
        platform: ConsolePlatform,
        *,
        read: Read,
        conversation_id: str = "terminal",
        admin: AdminService | None = None,
        typed_ahead: TypedAhead | None = None,
    ) -> None:
        self._service = service
        self._platform = platform
        self._read = read
        self._typed_ahead = typed_ahead
        self._write = platform.write
        self._session = Session(platform.operator, conversation_id)
        self._commands = ConsoleCommands(self._session, admin, self._write)
        self._prompt = CardPrompt(
            service, platform, self._session, self._commands, read=read, write=self._write, typed_ahead=typed_ahead
        )
        self._questions = QuestionPrompt(service, platform, self._session, self._commands, read=read, write=self._write)
        self._busy = False
        self._interrupted = False
        self._cut_short: asyncio.Event | None = None

    @property
    def stopping(self) -> bool:
        """True while `shut_down` waits for the turn in progress."""
        return self._cut_short is not None

    def interrupt(self) -> bool:
        """Ctrl-C: stop the running turn, if the bot is at work and this is the first Ctrl-C since the last prompt.

        During `shut_down` it ends the wait for the turn in progress instead (the bot leaves
        at once; the turn is finished on the next start).

        Between two pieces of work (no turn running, nothing typed ahead to drop: a line typed
        ahead being claimed) it only says so, and is not counted as the one stop.

        Returns:
            True when it stops the bot's work (the chat goes on; lines typed ahead are not run),
            says nothing runs, or cuts the shutdown short; False when the caller should leave
            (the chat is at a prompt, or a counted Ctrl-C came since it last was).
        """
        if self._cut_short is not None:
            self._cut_short.set()  # leaving already: end the wait for the turn at once
            return True
        if not self._busy or self._interrupted:
            return False
        dropped = self._drop_typed_ahead()
        if self._service.tasks.running:
            self._interrupted = True
            self._service.tasks.spawn(self._stop(), name="stop from the terminal")
        elif dropped:
            self._interrupted = True
        else:  # between two pieces of work (a line typed ahead being claimed): not counted
            self._write(msg.NOTHING_RUNNING)
        return True

    def _drop_typed_ahead(self) -> int:
        """Ctrl-C stopped the bot's work: the lines typed ahead until now are not run, each told so.

        Lines typed after it are taken as usual. The end of input is kept (`next_typed_ahead`).

        Returns:
            How many lines (not blank) were dropped.
        """
        dropped = 0
        while self._typed_ahead is not None and (line := self._typed_ahead.next_typed_ahead()) is not None:
            if line.strip():
                self._write(msg.NOT_RUN_AFTER_CTRL_C.format(line=line.strip()))
                dropped += 1
        return dropped

    async def _stop(self) -> None:
        """Stop the terminal conversation's turn for whoever types now; say so only when refused.

        A stop recorded while a run is under way is shown by the run itself ("… stopping").
        """
        try:
            await self._service.stop_turn(self._session.actor(), conversation=self._session.conversation)
        except CountersignError as exc:
            self._write(refusal(error_text(exc, CONSOLE_MARKUP)))

    async def _working(self, work: Coroutine[Any, Any, object]) -> None:
        """Run `work` as one of the service's tasks and wait for every task (the turn, its resume).

        Ctrl-C meanwhile stops the turn. The work is the service's, not this loop's: when the
        loop is cancelled (SIGTERM), the turn goes on, and `shut_down` gives it the grace. The
        bot stays at work (`_busy`) until the chat is back at a prompt.
        """
        self._busy = True
        self._service.tasks.spawn(work, name="terminal turn")
        await self._service.tasks.join()

    async def _claim(self, message: IncomingMessage) -> bool:
        """Claim `message` in the core's inbox (`Countersign.claim`); whether to handle it now.

        A signal while the claim is written lets it be written: a message once claimed is
        answered, within the shutdown grace (it is handed to the service's tasks, which
        `shut_down` drains) or on the next start, so "finished on the next start" holds for it.
        """
        claiming = asyncio.ensure_future(self._service.claim(message))
        try:
            return await asyncio.shield(claiming)
        except asyncio.CancelledError:
            if await claiming:
                self._service.submit_accepted(message)
            raise

    async def shut_down(self, grace_s: float) -> None:
        """Leave: stop taking work, give the turn in progress up to `grace_s` to reach a checkpoint.

        Says so in one line when a turn is in progress (and in another when it had to be cut:
        it is finished on the next start, or when it stopped at a card: it is asked next time).
        A line typed meanwhile is answered that the bot is stopping; Ctrl-C (`interrupt`) ends
        the wait at once.
        """
        shown = set(self._platform.waiting)
        self._cut_short = asyncio.Event()
        if self._service.tasks.running:
            self._write(msg.STOPPING_BOT.format(grace=duration_words(grace_s)))
        refusing = asyncio.ensure_future(self._refuse_lines())
        try:
            if await self._service.aclose(grace_s, cut_short=self._cut_short):
                self._write(msg.TURN_CUT)
            if new := len(set(self._platform.waiting) - shown):
                self._write(msg.NEW_CARDS_LEFT_WAITING.format(calls="1 call" if new == 1 else f"{new} calls"))
        finally:
            refusing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await refusing

    async def _refuse_lines(self) -> None:
        """Answer each line typed while the bot stops: nothing typed now is run."""
        while (line := await self._read("")) is not None:
            if line.strip():
                self._write(msg.NOT_TAKEN.format(line=line.strip()))

    async def _recover(self) -> None:
        """Start finishing what earlier runs left unfinished; say so when this conversation has some.

        When that fails (the database refused), the person is told and the chat goes on: the
        upkeep looks for the left-over work again in the background.
        """
        try:
            tended = await self._service.recover()
        except Exception:
            log.exception("looking for work left over from the last run failed")
            self._write(msg.LEFT_OVER_FAILED)
            return
        if self._session.conversation.thread_id in tended:
            self._write(msg.LEFT_OVER)

    async def run(self, *, recover: bool = False) -> None:
        """Chat until /quit or end of input; cards left waiting by an earlier run come first.

        Args:
            recover: first finish the work earlier runs left unfinished (`Countersign.recover`),
                as a turn: Ctrl-C stops it, and lines typed meanwhile are read after it.
        """
        self._write(msg.HELP)
        if recover:
            await self._working(self._recover())
        for approval in await self._service.pending_approvals(self._session.conversation):
            self._platform.waiting.setdefault(approval.id, [])
        for question in await self._service.open_questions(self._session.conversation):
            self._platform.questions.setdefault(question.id, question)  # asked again after a restart
        while True:
            line = self._typed_ahead.next_typed_ahead() if self._typed_ahead is not None else None
            if line is not None:  # one at a time: a stop meanwhile answers the rest "not run"
                if line.strip():
                    self._write(msg.TYPED_AHEAD.format(line=line))
                if not await self._take(line):
                    return
                continue  # what was typed during its turn comes before any card too
            if self._platform.questions:
                if not await self._answer_next():
                    return
                continue
            if self._platform.waiting:
                if not await self._decide_next():
                    return
                continue
            self._busy, self._interrupted = False, False
            if not await self._take(await self._read(self._session.prompt)):
                return

    async def _take(self, line: str | None) -> bool:
        """Act on a line typed at the message prompt; False when the person leaves (/quit or end of input)."""
        if line is None or line.strip().lower() in QUIT:
            return False
        if not line.strip():
            return True
        if is_command(line):
            # `/countersign show` typed here would otherwise go to the model as a message.
            await self._commands.run(line)
            return True
        self._busy = True  # at work from the claim until back at a prompt: Ctrl-C stops, not leaves
        # The id puts the message in the core's inbox: kept until handled, whatever happens.
        message = IncomingMessage(
            actor=self._session.actor(),
            conversation=self._session.conversation,
            text=line.strip(),
            message_id=uuid.uuid4().hex,
        )
        if await self._claim(message):
            await self._working(self._service.handle_accepted(message))
        return True

    async def _answer_next(self) -> bool:
        """Ask the first waiting MCP question; False when the person left (/quit or end of input)."""
        question_id = next(iter(self._platform.questions))
        self._busy, self._interrupted = False, False
        asked = await self._questions.ask(question_id)
        if asked is Asked.QUIT:
            return False
        self._platform.questions.pop(question_id, None)
        await self._working(asyncio.sleep(0))  # the call goes on with the answer
        return True

    async def _decide_next(self) -> bool:
        """Ask about the first waiting card; False when the person left (/quit or end of input).

        A card decided meanwhile (elsewhere, by a stop, by an Approve all, by expiry) is not
        asked about; one that waits for more approvals is asked again after the others.
        """
        approval_id = next(iter(self._platform.waiting))
        self._busy, self._interrupted = False, False
        asked = await self._prompt.ask(approval_id)
        if asked is Asked.QUIT:
            return False
        if asked is Asked.LATER:
            return True  # the lines typed ahead first; the card stays first in line
        if asked is Asked.AGAIN:
            self._platform.requeue(approval_id)
        else:
            self._platform.forget(approval_id)
        await self._working(asyncio.sleep(0))
        return True
