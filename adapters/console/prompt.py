"""The approval prompt: one waiting card, asked until it is decided, as its stored state says.

Each time a card is asked the prompt reads it (and its pause) from the core again, so a vote
below the quorum, a refusal, an escalation, a decision made elsewhere or an expiry all show as
they are: a card still waiting is asked again, one that is not is left. While the prompt waits
for an answer it also watches the card (`ConsolePlatform.changed`): a card that expires or is
decided meanwhile ends the wait. The answer may also be `/as <name>` or a `/countersign`
command, after which the same card is asked again.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from enum import Enum
from typing import Protocol

from adapters.console import messages as msg
from adapters.console.commands import QUIT, ConsoleCommands, is_command
from adapters.console.people import CONSOLE_MARKUP, Session
from adapters.console.platform import ConsolePlatform, where_it_went
from adapters.words.admin import target_words
from adapters.words.batch import batch_summary
from adapters.words.decisions import decision_error_text, edit_error_text, parse_edited_args
from adapters.words.display import duration_words, reveal_invisible
from adapters.words.mcp import origin_line
from bot.base.conversation import Actor
from bot.base.errors import ApprovalNotFoundError, CountersignError
from bot.ports import ApprovalCard
from bot.reviews.decisions import Approve, Edit, EditedAction, Reject
from bot.reviews.escalation.rules import TargetKind
from bot.reviews.records import ApprovalRecord, pause_version
from bot.service import Countersign

log = logging.getLogger(__name__)

Read = Callable[[str], Awaitable[str | None]]
"""Shows a prompt and returns the next line (None at the end of input).

The card prompt may cancel a read when its card is decided or expires meanwhile; a reader must
then keep the line it did not hand out for the next read (`chat.StdinLines` does)."""
Write = Callable[[str], None]


class TypedAhead(Protocol):
    """Lines typed before anything asked for them (`chat.StdinLines`), taken one at a time."""

    def has_typed_ahead(self) -> bool:
        """Whether a line typed and not yet read waits (without waiting)."""
        ...

    def next_typed_ahead(self) -> str | None:
        """The first line typed and not yet read, without waiting; None when none waits."""
        ...


class Asked(Enum):
    """How asking about one card ended."""

    DONE = "done"
    """It is decided (here, elsewhere, by a stop) or expired: do not ask again."""
    AGAIN = "again"
    """It still waits (a vote below its quorum): ask again after the other waiting cards."""
    QUIT = "quit"
    """The person left (`/quit`, end of input); the card waits until next time."""
    LATER = "later"
    """Lines typed before the card was shown wait: take them first, then ask this card."""


ONE_LINE_CHARS = 100
"""Arguments printed on the card's one `args:` line when they take at most this many characters."""

_SETTLED = object()
"""What `_answer` returns when the card stopped waiting before a line came."""


def when(moment: datetime) -> str:
    """A moment in a refusal ("already approved by @bob at 14:02")."""
    return f" at {moment.astimezone():%H:%M}"


class CardPrompt:
    """Asks about waiting cards at the terminal.

    Args:
        service: the core.
        platform: the console port (where cards went; card changes while waiting).
        session: who answers (`/as` changes it).
        commands: runs `/as` and `/countersign` typed at the prompt.
        read: the line reader.
        write: where text goes.
        typed_ahead: lines typed before they were asked for (None: every line read answers
            what is asked, as with input piped in).
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
        typed_ahead: TypedAhead | None = None,
    ) -> None:
        self._typed_ahead = typed_ahead
        self._service = service
        self._platform = platform
        self._session = session
        self._commands = commands
        self._read = read
        self._write = write

    async def ask(self, approval_id: str) -> Asked:
        """Ask about one card until it is decided or waits for more approvals, or the person leaves."""
        shown: tuple[str, tuple[tuple[str, str], ...]] | None = None
        decided = False
        while True:
            pause = await self._pause(approval_id)
            approval = next((row for row in pause if row.id == approval_id), None)
            if approval is None or not approval.is_pending:
                return Asked.DONE
            if decided:
                return Asked.AGAIN  # a vote: it waits for others; the other cards come first
            if shown is None and self._typed_ahead is not None and self._typed_ahead.has_typed_ahead():
                # Typed while the card was fetched, before it was shown: not its answer. No
                # await from here to the read, so nothing typed later is taken for one either.
                return Asked.LATER
            pending = [row for row in pause if row.is_pending]
            # Approve all decides the other waiting calls too: an edit of any of them, or one
            # decided meanwhile, shows them again before it is offered.
            now_shown = (approval.version, tuple((row.id, row.version) for row in pending))
            if shown != now_shown:
                self._show(approval, pause)
                if len(pending) >= 2:
                    self._show_others(approval, pending, len(pause))
                shown = now_shown
            try:
                answer = await self._answer(self._question(approval, len(pending)), approval_id)
            except asyncio.CancelledError:  # Ctrl-C or SIGTERM at the prompt: the bot stops
                self._write(msg.LEFT_WAITING)
                raise
            if answer is _SETTLED:
                return Asked.DONE
            if not isinstance(answer, str) or answer.strip().lower() in QUIT:
                self._write(msg.LEFT_WAITING)
                return Asked.QUIT
            text = answer.strip()
            if text.startswith("/"):
                await self._commands.run(text)
                continue
            decided = await self._decide(text, approval, pause, batch=len(pending) >= 2)

    async def _pause(self, approval_id: str) -> list[ApprovalRecord]:
        """The card's pause as stored now (empty when the approval is gone)."""
        try:
            approval = await self._service.approval(approval_id)
            return await self._service.pause(uuid.UUID(approval.review_id).hex)
        except ApprovalNotFoundError:
            return []

    def _show(self, approval: ApprovalRecord, pause: list[ApprovalRecord]) -> None:
        """Print the card: who wants what, why, the arguments under vote, votes, where it went."""
        where = {
            "tool": approval.tool_name,
            "position": approval.position + 1,
            "total": len(pause),
            "requester": CONSOLE_MARKUP.user(approval.requester_id),
        }
        if approval.source:
            self._write(msg.CARD_SUBAGENT.format(subagent=approval.source, **where))
        else:
            self._write(msg.CARD_TOOL.format(**where))
        origin = self._service.tool_origin(approval.tool_name)
        if origin is not None:
            self._write(msg.CARD_ORIGIN.format(origin=reveal_invisible(origin_line(origin))))
        if approval.description:
            self._write(msg.CARD_WHY.format(why=reveal_invisible(approval.description)))
        self._write_arguments(approval, pause)
        if approval.quorum > 1:
            names = ", ".join(CONSOLE_MARKUP.user(name) for name in approval.votes)
            tally = {"count": len(approval.votes), "quorum": approval.quorum, "names": f" ({names})" if names else ""}
            self._write(msg.CARD_TALLY.format(**tally))
        places = where_it_went(self._platform.waiting.get(approval.id, []))
        if places:
            self._write(msg.CARD_WENT.format(places=", ".join(places)))
        audience = approval.escalated_audience
        if audience is not None:
            self._write(msg.CARD_ESCALATED.format(target=target_words(audience, CONSOLE_MARKUP)))
        if approval.expires_at is not None:
            left = (approval.expires_at - datetime.now(UTC)).total_seconds()
            if left > 0:
                self._write(msg.CARD_EXPIRES.format(duration=duration_words(left)))

    def _show_others(self, approval: ApprovalRecord, pending: list[ApprovalRecord], total: int) -> None:
        """The other calls that wait in the pause, each with every argument: what Approve all also decides."""
        self._write(msg.OTHERS_WAITING.format(count=len(pending)))
        for other in pending:
            if other.id == approval.id:
                continue
            self._write(msg.OTHER_CALL.format(tool=other.tool_name, position=other.position + 1, total=total))
            self._write_arguments(other, pending, total=total)

    def _write_arguments(
        self, approval: ApprovalRecord, pause: list[ApprovalRecord], *, total: int | None = None
    ) -> None:
        """Every argument under vote, in the tool's order, invisible characters shown.

        On the `args:` line when short, else as indented JSON, a line at a time.

        And, on a card whose trust binds some arguments only, which ones it leaves free.
        """
        card = ApprovalCard(
            approval=approval,
            position=approval.position + 1,
            total=total if total is not None else len(pause),
            key_order=self._service.key_order(approval.tool_name),
        )
        arguments = card.under_vote
        line = reveal_invisible(json.dumps(arguments.as_dict(), ensure_ascii=False, default=str))
        if len(line) <= ONE_LINE_CHARS:
            self._write(msg.CARD_ARGS.format(args=line))
        else:
            self._write(msg.CARD_ARGS_BLOCK)
            for text in arguments.text().splitlines():
                self._write(msg.CARD_ARGS_LINE.format(line=text))
        if approval.trust_offer_s and card.trust_leaves_free:
            bound, free = ", ".join(card.trust_binds), ", ".join(card.trust_leaves_free)
            self._write(msg.CARD_TRUST_FREE.format(bound=bound, free=free))

    def _question(self, approval: ApprovalRecord, pending: int) -> str:
        """`   [a]pprove / [e]dit / [r]eject? `, with trust and the batch where they apply."""
        choices = [msg.CHOICE_APPROVE]
        if approval.trust_offer_s:
            choices.append(msg.CHOICE_TRUST.format(duration=duration_words(approval.trust_offer_s)))
        choices += [msg.CHOICE_EDIT, msg.CHOICE_REJECT]
        if pending >= 2:
            choices += [msg.CHOICE_APPROVE_ALL.format(count=pending), msg.CHOICE_REJECT_ALL.format(count=pending)]
        who = msg.QUESTION_AS.format(name=self._session.name) if self._session.pretending else ""
        return msg.QUESTION.format(who=who, choices=" / ".join(choices))

    async def _answer(self, question: str, approval_id: str) -> str | object | None:
        """The next line, or `_SETTLED` when the card is decided or expires before it comes.

        A line that comes while the change is looked at is still the answer: dropping it would
        lose what the person typed (a late decision gets the core's "already decided").
        """
        self._platform.changed.clear()
        reading: asyncio.Future[str | None] = asyncio.ensure_future(self._read(question))
        changed: asyncio.Task[bool] | None = None
        try:
            while True:
                changed = asyncio.ensure_future(self._platform.changed.wait())
                done, _ = await asyncio.wait((reading, changed), return_when=asyncio.FIRST_COMPLETED)
                if reading in done:
                    return reading.result()
                self._platform.changed.clear()
                if not await self._still_waiting(approval_id):
                    return reading.result() if reading.done() and not reading.cancelled() else _SETTLED
        finally:
            reading.cancel()
            if changed is not None:
                changed.cancel()

    async def _still_waiting(self, approval_id: str) -> bool:
        try:
            return (await self._service.approval(approval_id)).is_pending
        except ApprovalNotFoundError:
            return False

    async def _reason(self) -> str | None:
        """Ask for a rejection's reason: the text ('' for none), or None when the line is no reason.

        The end of input, or a line that is a command (`/quit`, `/as bob`, `/countersign stop`),
        rejects nothing: the card is asked again, where a command works and the end of input
        leaves (the call waits), so a reflex `/quit` is never sent to the model as a reason.
        """
        line = await self._read(msg.ASK_REASON)
        if line is None:
            return None
        if is_command(line):
            self._write(msg.REASON_IS_A_COMMAND.format(line=line.strip()))
            return None
        return line.strip()

    async def _decide(self, text: str, approval: ApprovalRecord, pause: list[ApprovalRecord], *, batch: bool) -> bool:
        """Take the decision `text` names; True when one was recorded (False: ask again)."""
        if batch and (text == "A" or text.lower() == "approve all"):
            return await self._decide_all(approval, pause, Approve())
        if batch and (text == "R" or text.lower() == "reject all"):
            reason = await self._reason()
            if reason is None:
                return False
            return await self._decide_all(approval, pause, Reject(message=reason or None))
        choice = text.lower()[:1]
        decision: Approve | Edit | Reject
        if choice == "a" or (choice == "t" and approval.trust_offer_s):
            decision = Approve()
        elif choice == "r":
            reason = await self._reason()
            if reason is None:
                return False
            decision = Reject(message=reason or None)
        elif choice == "e":
            args, problem = parse_edited_args(await self._read(msg.ASK_ARGS) or "", msg)
            if args is None:
                self._write(problem or msg.EDIT_NOT_OBJECT)
                return False
            decision = Edit(edited_action=EditedAction(name=approval.tool_name, args=args))
        else:
            self._write(msg.ANSWER_WITH.format(choices=_letters(approval, batch=batch)))
            return False
        try:
            stored = await self._service.decide(
                approval.id,
                self._actor(approval),
                decision,
                seen_version=approval.version if isinstance(decision, Approve) else None,
                trust=choice == "t",
            )
        except Exception as exc:
            self._refused(exc, edit=isinstance(decision, Edit))
            return False
        if stored.is_pending:
            self._write(msg.VOTE_RECORDED.format(count=len(stored.votes), quorum=stored.quorum))
        return True

    async def _decide_all(
        self, approval: ApprovalRecord, pause: list[ApprovalRecord], decision: Approve | Reject
    ) -> bool:
        """Approve all / Reject all: `Countersign.decide_all` on the card's pause, as seen at the prompt."""
        version = pause_version(pause) if isinstance(decision, Approve) else None
        try:
            outcome = await self._service.decide_all(
                uuid.UUID(approval.review_id).hex, self._actor(approval), decision, seen_version=version
            )
        except Exception as exc:
            self._refused(exc)
            return False
        self._write(batch_summary(outcome, msg, when))
        return True

    def _actor(self, approval: ApprovalRecord) -> Actor:
        """Who answers, clicking where the card is: in a channel it was posted in or escalated to, else here."""
        channel = None
        audience = approval.escalated_audience
        if audience is not None and audience.kind is TargetKind.CHANNEL:
            channel = audience.subject_id
        else:
            routed = [t.channel_id for t in self._platform.waiting.get(approval.id, []) if t.channel_id]
            channel = routed[0] if routed else None
        return self._session.actor(channel_id=channel)

    def _refused(self, error: Exception, *, edit: bool = False) -> None:
        """A refused decision as one `!  ` line (never a traceback); a refused edit in words about the edit."""
        if not isinstance(error, CountersignError):
            log.warning("a decision at the terminal failed: %s: %s", type(error).__name__, error)
            log.debug("a decision at the terminal failed", exc_info=error)
        said = edit_error_text if edit else decision_error_text
        self._write("!  " + said(error, msg, when))


def _letters(approval: ApprovalRecord, *, batch: bool) -> str:
    """The answers the prompt takes, in words: `a, e or r`, `a, t, e, r, A or R`."""
    letters = ["a", "t", "e", "r"] if approval.trust_offer_s else ["a", "e", "r"]
    if batch:
        letters += ["A", "R"]
    return ", ".join(letters[:-1]) + " or " + letters[-1]
