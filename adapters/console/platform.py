"""The core's `Platform` port for a terminal: printing, and cards kept for the prompt.

Every card is asked at the terminal's prompt, wherever `/countersign cards` routes it: the
port remembers where each copy "went" (an approvals channel, approvers' DMs, an escalation's
audience) so that the prompt can say so. Copies of one approval share one card reference (its
id), so each redraw prints one line.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from adapters.console import messages as msg
from adapters.console.people import CONSOLE_MARKUP, operator_name
from adapters.words.admin import target_words
from adapters.words.conversation import RESUME_NOT_RUN
from adapters.words.display import duration_words, excerpt, given_up_calls, model_failed_text, reveal_invisible
from adapters.words.mcp import held_text
from bot.base.conversation import Actor, ConversationRef
from bot.base.errors import ModelErrorKind
from bot.ports import (
    Activity,
    ApprovalCard,
    ApprovalExpired,
    AskElsewhere,
    CardsElsewhere,
    CardTarget,
    ModelFailed,
    Notice,
    ResumeGivenUp,
    ReviewPending,
    ToolsHeld,
    TurnStopped,
)
from bot.reviews.escalation.rules import TargetKind
from bot.reviews.lifecycle import ApprovalStatus
from bot.reviews.records import ApprovalRecord
from bot.reviews.shown import Arguments, Unshowable
from bot.tools.mcp.elicitation.store import QuestionRecord

Write = Callable[[str], None]


class ConsolePlatform:
    """Prints what the core says; remembers cards until the chat's prompt has them decided.

    Args:
        write: where text goes (a line at a time).
        operator: the person at the terminal, its admin (default: the OS user).

    Attributes:
        waiting: approval id -> where its card's copies went, in the order the cards came; the
            chat asks them in that order and forgets each once it is decided.
        questions: MCP servers' questions waiting for their requester, by id, in the order
            they came; the chat asks them before cards and forgets each once it is closed.
        changed: set whenever a card is redrawn, posted again or expires, so that a prompt
            waiting for an answer can look at its card's state again.
    """

    name = "console"

    def __init__(self, write: Write, *, operator: str | None = None) -> None:
        self.write = write
        self.operator = operator or operator_name()
        self.waiting: dict[str, list[CardTarget]] = {}
        self.questions: dict[str, QuestionRecord] = {}
        self.changed = asyncio.Event()

    def requeue(self, approval_id: str) -> None:
        """Ask about this card again after the others (a vote left it waiting for more approvals)."""
        self.waiting[approval_id] = self.waiting.pop(approval_id, [])

    def forget(self, approval_id: str) -> None:
        """The card is decided (or gone): do not ask about it again."""
        self.waiting.pop(approval_id, None)

    async def post_answer(self, conversation: ConversationRef, text: str) -> None:
        """Print the answer."""
        self.write(msg.ANSWER.format(text=text))

    async def post_card(self, target: CardTarget, card: ApprovalCard) -> str:
        """Keep the card for the prompt, noting where it went; the card ref is the approval id."""
        approval = card.approval
        self.waiting.setdefault(approval.id, []).append(target)
        if target.escalated_to is not None:
            self.write(_escalated(card, target))
        self.changed.set()
        return approval.id

    async def update_card(self, conversation: ConversationRef, card_ref: str, card: ApprovalCard) -> None:
        """Print the outcome of a decided card (a card still waiting is asked again by the prompt)."""
        self.changed.set()
        approval = card.approval
        if approval.status is ApprovalStatus.PENDING:
            return
        line = msg.OUTCOME.format(call=_call(approval), status=approval.status.value)
        if approval.trust_id is not None and approval.trust_s:
            line += msg.OUTCOME_TRUSTED.format(duration=duration_words(approval.trust_s))
        if approval.decided_by_id:
            line += msg.OUTCOME_BY.format(name=CONSOLE_MARKUP.user(approval.decided_by_id))
        if approval.status is ApprovalStatus.EDITED:
            # In the tool's order, as the card printed them (docs/decisions/0034-arguments-approvers-can-see.md).
            edited = card.shown.as_dict()  # the arguments that ran
            line += msg.OUTCOME_WITH.format(args=reveal_invisible(json.dumps(edited, ensure_ascii=False, default=str)))
        if approval.reason:
            line += msg.OUTCOME_REASON.format(reason=reveal_invisible(approval.reason))
        if approval.outcome_unknown:
            line += msg.OUTCOME_UNKNOWN
        elif approval.not_run:
            line += msg.OUTCOME_NOT_RUN
        elif approval.definition_changed:
            line += msg.OUTCOME_DEFINITION_CHANGED
        self.write(line)

    async def post_question(self, conversation: ConversationRef, question: QuestionRecord) -> str:
        """Keep the question for the chat's prompt, which asks it right there; its ref is its id."""
        self.questions.setdefault(question.id, question)
        self.changed.set()
        return question.id

    async def update_question(self, conversation: ConversationRef, ref: str, question: QuestionRecord) -> None:
        """Print what became of a question; a prompt waiting for it stops waiting."""
        self.questions.pop(question.id, None)
        self.changed.set()
        if question.is_open:
            return
        action = question.answer.action.value if question.answer is not None else "cancel"
        line = msg.QUESTION_OUTCOME[question.status.value]
        self.write(line.format(server=question.server, tool=question.tool_name, action=action))

    def unshowable(self, arguments: Arguments) -> Unshowable | None:
        """None: the terminal prints every argument, however long (`adapters.console.prompt`)."""
        return None

    async def notify(self, conversation: ConversationRef, notice: Notice, *, recipient: Actor | None) -> None:
        """Print a notice."""
        if isinstance(notice, CardsElsewhere):
            places = CONSOLE_MARKUP.channel(notice.channel_id) if notice.channel_id else msg.APPROVERS_DMS
            tools = ", ".join(dict.fromkeys(a.tool_name for a in notice.approvals))
            self.write(msg.CARDS_ELSEWHERE.format(tools=tools, places=places))
        elif isinstance(notice, ApprovalExpired):
            self.changed.set()
            self.write(msg.EXPIRED.format(tool=notice.approval.tool_name))
        elif isinstance(notice, ReviewPending) and not notice.approvals and notice.questions:
            waiting = notice.questions[0]
            name = waiting.requester_name or waiting.requester_id
            self.write(msg.QUESTION_PENDING.format(name=name, server=waiting.server))
        elif isinstance(notice, ReviewPending):
            tools = ", ".join(a.tool_name for a in notice.approvals) or msg.REVIEW_BUSY
            self.write(msg.REVIEW_PENDING.format(tools=tools))
        elif isinstance(notice, ModelFailed):
            text = model_failed_text(notice, by_kind=msg.NOTICES, no_answer=msg.NO_ANSWER, busy_for=msg.BUSY_FOR)
            self.write(msg.MODEL_FAILED.format(text=text))
        elif isinstance(notice, TurnStopped):
            self.write(msg.STOPPED.format(name=CONSOLE_MARKUP.user(notice.stopped_by_id or notice.stopped_by_name)))
        elif isinstance(notice, AskElsewhere):  # the terminal is one workspace: never sent today
            self.write(msg.ASK_ELSEWHERE.format(tool=notice.tool_name))
        elif isinstance(notice, ResumeGivenUp):
            not_run, unknown = given_up_calls(notice)
            self.write(
                msg.RESUME_GIVEN_UP.format(
                    not_run=RESUME_NOT_RUN.format(tools=", ".join(not_run)) if not_run else "",
                    unknown=msg.RESUME_OUTCOME_UNKNOWN.format(tools=", ".join(unknown)) if unknown else "",
                )
            )
        elif isinstance(notice, ToolsHeld):
            self.write(held_text(notice, lambda text: text, lambda text: text))
        elif notice.message is not None:
            self.write(msg.MESSAGE_FAILED.format(excerpt=excerpt(notice.message), thread_id=notice.thread_id))
        else:
            self.write(msg.TURN_FAILED.format(thread_id=notice.thread_id))

    @asynccontextmanager
    async def working(self, conversation: ConversationRef, anchor: str | None) -> AsyncIterator[_Progress]:
        """Print a short line when the agent starts, and one per delegation."""
        self.write(msg.WORKING)
        yield _Progress(self.write)

    async def is_admin(self, actor: Actor) -> bool:
        """Only the person at the terminal administers it (pretend people through bot admins only)."""
        return actor.user_id == self.operator

    async def member(self, workspace_id: str, user_id: str) -> Actor | None:
        """Anyone named at the terminal is a member; only its operator is an admin."""
        return Actor(
            platform=self.name,
            workspace_id=workspace_id,
            user_id=user_id,
            display_name=user_id,
            is_admin=user_id == self.operator,
        )

    async def member_of(self, actor: Actor, group_ids: frozenset[str]) -> frozenset[str]:
        """A terminal has no roles or groups."""
        return frozenset()

    async def group_members(self, workspace_id: str, group_id: str) -> frozenset[str]:
        """A terminal has no groups."""
        return frozenset()


def where_it_went(targets: list[CardTarget]) -> list[str]:
    """Where a card's routed copies went, in words (`#approvals`, `@bob's DMs`); none for the conversation.

    Escalated copies are left out: the prompt names the escalation on its own line.
    """
    places = []
    for target in targets:
        if target.escalated_to is not None:
            continue
        if target.channel_id:
            places.append(CONSOLE_MARKUP.channel(target.channel_id))
        elif target.user_id:
            places.append(msg.CARD_DMS.format(user=CONSOLE_MARKUP.user(target.user_id)))
    return list(dict.fromkeys(places))


def _call(approval: ApprovalRecord) -> str:
    if approval.source:
        return msg.SUBAGENT_CALL.format(subagent=approval.source, tool=approval.tool_name)
    return approval.tool_name


def _escalated(card: ApprovalCard, target: CardTarget) -> str:
    audience = target.escalated_to
    where = {"call": _call(card.approval), "position": card.position, "total": card.total}
    if audience is None:  # not an escalated copy (the caller checks)
        return ""
    if audience.kind is TargetKind.USER:
        return msg.ESCALATED_TO_USER.format(name=audience.subject_id, **where)
    if audience.kind is TargetKind.CHANNEL:
        return msg.ESCALATED_TO_CHANNEL.format(name=audience.subject_id, **where)
    return msg.ESCALATED_TO_OTHER.format(target=target_words(audience, CONSOLE_MARKUP), **where)


class _Progress:
    """One line per delegation that starts, one when it continues after a decision, one for a stop."""

    def __init__(self, write: Write) -> None:
        self._write = write
        self._stopping = False

    async def show(self, activity: Activity) -> None:
        """Print a delegation that starts or continues after a decision, a model retry, a stop; nothing else."""
        if activity.started is not None:
            query = " ".join(activity.query.split())
            query = query if len(query) <= 100 else query[:99] + "…"
            self._write(msg.DELEGATION_STARTED.format(name=activity.started, query=query))
        elif activity.continued is not None:
            self._write(msg.DELEGATION_CONTINUES.format(name=activity.continued))
        elif activity.stopping is not None and not self._stopping:
            self._stopping = True
            self._write(msg.STOPPING.format(name=activity.stopping))
        elif activity.retrying is not None:
            why = msg.RETRYING.get(activity.retrying.kind, msg.RETRYING[ModelErrorKind.UNAVAILABLE])
            self._write(msg.RETRY.format(why=why.format(wait=duration_words(activity.retrying.wait_s))))
