"""`countersign chat`: a conversation in the terminal, each approval asked as a prompt."""

from __future__ import annotations

import asyncio
import getpass
import json
import sys
import threading
from collections.abc import Awaitable, Callable

from adapters.admin_text import Markup, error_text, render
from adapters.console.platform import ConsolePlatform
from adapters.display import duration_words
from bot.admin.parse import parse_command
from bot.admin.service import AdminService
from bot.approvals.decisions import Approve, Edit, EditedAction, Reject
from bot.conversation import Actor, ConversationRef, IncomingMessage
from bot.errors import CountersignError, TrustRefusedError
from bot.ports import ApprovalCard
from bot.service import Countersign

Read = Callable[[str], Awaitable[str | None]]

_QUIT = frozenset({"/quit", "/exit"})

HELP = (
    "Type a message. Commands: /quit to leave; /countersign context [reset] shows (or clears) what "
    "the model sees of this conversation; /countersign trust ... lets approvals trust a tool for a while. "
    "Approvals: a = approve, t = approve and trust (when offered), e = edit, r = reject. "
    "Ctrl-C while the bot works stops its turn (Ctrl-C again leaves); so does /countersign stop at an "
    "approval prompt."
)
NO_COMMANDS = (
    "!  The terminal knows only /quit, /countersign context [reset], /countersign trust and /countersign "
    "stop. Other admin settings (/countersign) are made in Slack or Discord; the terminal runs the "
    "defaults. To send a message starting with /, put a space before it."
)
TRUST_REFUSED = {
    "not_offered": "Trust is not enabled for this tool any more; answer a to approve it once.",
    "quorum": "This call now needs more than one approval, so it cannot be trusted; answer a to approve it once.",
    "not_approve": "Trust goes only with an approval.",
}
"""By `bot.errors.TrustRefusedError.reason`; nothing was changed and the call is asked again."""
_COMMANDS = frozenset({("/countersign", "context"), ("/countersign", "trust"), ("/countersign", "stop")})
"""The `/countersign` subcommands the terminal takes (the person at the terminal is its admin)."""
_STOP_COMMAND = ("/countersign", "stop")

CONSOLE_MARKUP = Markup(
    bold=lambda text: text,
    user=lambda user_id: user_id,
    channel=lambda channel_id: f"#{channel_id}",
    role=lambda role_id: f"role {role_id}",
    group=lambda group_id: f"group {group_id}",
    when=lambda moment: moment.strftime("%Y-%m-%d %H:%M"),
    escape=lambda text: text,
    admins_are="the person at the terminal",
)
"""`/countersign` replies in the terminal: plain text."""


class StdinLines:
    """Lines from stdin, read by a daemon thread and handed to the event loop.

    `asyncio.to_thread(input)` would block in a pool thread that the interpreter waits for at
    exit, so Ctrl-C at a prompt would hang until Enter. A daemon thread never holds up the exit,
    and unlike watching the descriptor it works when stdin is a file or /dev/null.
    """

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._lines: asyncio.Queue[str | None] = asyncio.Queue()
        self._ended = False
        threading.Thread(target=self._pump, name="stdin", daemon=True).start()

    def _pump(self) -> None:
        for line in sys.stdin:
            self._loop.call_soon_threadsafe(self._lines.put_nowait, line.rstrip("\n"))
        self._loop.call_soon_threadsafe(self._lines.put_nowait, None)

    async def read(self, prompt: str) -> str | None:
        """Show `prompt` and wait for the next line; None at (and after) the end of input."""
        print(prompt, end="", flush=True)
        if self._ended:
            return None
        line = await self._lines.get()
        self._ended = line is None
        return line

    def close(self) -> None:
        """Nothing to release: the reader thread ends with stdin or with the process."""


class ConsoleChat:
    """The terminal loop.

    Stop (issue 12): the person at the terminal is its admin, so they may stop any turn. While
    the bot works the chat reads no line (its output would mix with the prompt), so the
    terminal's way is Ctrl-C (`interrupt`, wired by `countersign chat`): the first one during a
    turn stops the turn, a second one (or one at a prompt) leaves, as before. At an approval
    prompt, `/countersign stop` stops the waiting turn (its cards close as stopped).

    Args:
        service: the core.
        platform: the console port (registered with the core under `console`).
        read: line reader (tests pass their own).
        conversation_id: the channel id of the terminal conversation; the same id continues
            the same LangGraph thread across runs.
        admin: the `/countersign` use case, for `context [reset]` (None: not offered).
    """

    def __init__(
        self,
        service: Countersign,
        platform: ConsolePlatform,
        *,
        read: Read,
        conversation_id: str = "terminal",
        admin: AdminService | None = None,
    ) -> None:
        self._service = service
        self._admin = admin
        self._platform = platform
        self._read = read
        self._write = platform.write
        user = getpass.getuser() or "operator"
        self._actor = Actor(platform="console", workspace_id="local", user_id=user, display_name=user, is_admin=True)
        self._conversation = ConversationRef(platform="console", workspace_id="local", channel_id=conversation_id)
        self._busy = False
        self._interrupted = False

    def interrupt(self) -> bool:
        """Ctrl-C: stop the running turn, if the bot is at work and this is the turn's first Ctrl-C.

        Returns:
            True when it stops the turn (the chat goes on); False when the caller should leave
            (nothing runs, or the turn was already being stopped).
        """
        if not self._busy or self._interrupted:
            return False
        self._interrupted = True
        self._service.tasks.spawn(self._stop(quiet=True), name="stop from the terminal")
        return True

    async def _stop(self, *, quiet: bool = False) -> None:
        """Stop the terminal conversation's turn; say how it went (`quiet`: only when refused).

        A stop recorded while a run is under way is shown by the run itself ("… stopping").
        """
        try:
            reply = await self._service.stop_turn(self._actor, conversation=self._conversation)
        except CountersignError as exc:
            self._write("!  " + error_text(exc, CONSOLE_MARKUP))
            return
        if not quiet:
            self._write("   " + render(reply, CONSOLE_MARKUP))

    async def _working(self, work: Awaitable[object]) -> None:
        """Await `work` and every task it started (the turn, its resume); Ctrl-C then stops the turn."""
        self._busy, self._interrupted = True, False
        try:
            await work
            await self._service.tasks.join()
        finally:
            self._busy = False

    async def run(self) -> None:
        """Chat until /quit or end of input; cards left waiting by an earlier run come first."""
        self._write(HELP)
        waiting = await self._service.pending_approvals(self._conversation)
        for approval in waiting:
            self._platform.pending.append(
                ApprovalCard(approval=approval, position=approval.position + 1, total=len(waiting))
            )
        if not await self._decide_pending():
            return
        while True:
            line = await self._read("you> ")
            if line is None or line.strip() in _QUIT:
                return
            if not line.strip():
                continue
            if line.strip().startswith("/"):
                # `/countersign show` typed here would otherwise go to the model as a message.
                if not await self._admin_command(line.strip()):
                    self._write(NO_COMMANDS)
                continue
            await self._working(
                self._service.handle_message(
                    IncomingMessage(actor=self._actor, conversation=self._conversation, text=line.strip())
                )
            )
            if not await self._decide_pending():
                return

    async def _admin_command(self, line: str) -> bool:
        """Run `/countersign context [reset]`, `trust ...` or `stop` here; False for other commands.

        The person at the terminal runs the bot, so they count as its admin (`reset` and the
        trust settings included).
        """
        if self._admin is None or tuple(line.split()[:2]) not in _COMMANDS:
            return False
        try:
            command = parse_command(line.split(maxsplit=1)[1])
            reply = await self._admin.execute(
                self._actor, command, here=self._conversation.channel_id, conversation=self._conversation
            )
            text = render(reply, CONSOLE_MARKUP)
        except CountersignError as exc:
            text = "!  " + error_text(exc, CONSOLE_MARKUP)
        self._write(text)
        return True

    async def _decide_pending(self) -> bool:
        """Ask about each waiting card; False when the person left (/quit or end of input).

        A card decided meanwhile (its turn was stopped, it expired) is not asked about.
        """
        while self._platform.pending:
            card = self._platform.pending.pop(0)
            if not (await self._service.approval(card.approval.id)).is_pending:
                continue
            self._busy, self._interrupted = False, False
            if not await self._prompt(card):
                return False
            await self._working(asyncio.sleep(0))
        return True

    async def _prompt(self, card: ApprovalCard) -> bool:
        approval = card.approval
        who = (
            f"{approval.source} wants to call {approval.tool_name}"
            if approval.source
            else f"{approval.tool_name} wants to run"
        )
        self._write(f"?  {who} ({card.position} of {card.total}), asked by {approval.requester_name}")
        if approval.description:
            self._write(f"   why: {approval.description}")
        self._write("   args: " + json.dumps(approval.proposed_args, ensure_ascii=False))
        offer = approval.trust_offer_s
        question = (
            f"   [a]pprove / [t]rust for {duration_words(offer)} / [e]dit / [r]eject? "
            if offer
            else "   [a]pprove / [e]dit / [r]eject? "
        )
        while True:
            answer = await self._read(question)
            if answer is None or answer.strip() in _QUIT:
                self._write("   The call waits; you are asked again next time.")
                return False
            if tuple(answer.split()[:2]) == _STOP_COMMAND:
                await self._stop()
                return True
            choice = answer.strip().lower()[:1]
            decision: Approve | Edit | Reject
            if choice in ("a", "t") and (choice == "a" or offer):
                decision = Approve()
            elif choice == "r":
                reason = await self._read("   reason (optional): ")
                decision = Reject(message=(reason or "").strip() or None)
            elif choice == "e":
                raw = await self._read("   new args as JSON: ")
                try:
                    args = json.loads(raw or "")
                except json.JSONDecodeError as exc:
                    self._write(f"!  Not valid JSON: {exc.msg}. Try again.")
                    continue
                if not isinstance(args, dict):
                    self._write('!  The arguments must be a JSON object, like {"name": "value"}. Try again.')
                    continue
                decision = Edit(edited_action=EditedAction(name=approval.tool_name, args=args))
            else:
                choices = "a, t, e or r" if offer else "a, e or r"
                self._write(f"!  Answer {choices} (or /quit to leave; the call waits until next time).")
                continue
            try:
                await self._service.decide(approval.id, self._actor, decision, trust=choice == "t")
            except TrustRefusedError as exc:
                self._write("!  " + TRUST_REFUSED.get(exc.reason, TRUST_REFUSED["not_offered"]))
                continue
            except CountersignError as exc:
                self._write(f"!  {exc}")
                continue
            return True
