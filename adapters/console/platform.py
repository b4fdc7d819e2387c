"""The core's `Platform` port for a terminal: printing, and cards queued for prompting."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from adapters.display import duration_words, model_failed_text
from bot.approvals.lifecycle import ApprovalStatus
from bot.conversation import Actor, ConversationRef
from bot.errors import ModelErrorKind, NoAnswerReason
from bot.ports import (
    Activity,
    ApprovalCard,
    ApprovalExpired,
    CardsElsewhere,
    CardTarget,
    ModelFailed,
    Notice,
    ReviewPending,
    TurnStopped,
)

Write = Callable[[str], None]

STOPPED = "■  Stopped by {name}."
"""Printed in place of an answer when the turn was stopped (Ctrl-C or `/countersign stop`)."""
STOPPING = "   … stopping (asked by {name}); Ctrl-C again leaves"
"""Printed when the running turn was stopped; it ends at its next step."""

OUTCOME_UNKNOWN = "The bot stopped while this call ran. It was not run again; it may or may not have taken effect."

_NOTICES = {
    ModelErrorKind.BUSY: "The model is busy (rate limited). Your message is kept; try again soon.",
    ModelErrorKind.UNAVAILABLE: "The model is not reachable. Your message is kept; try again soon.",
    ModelErrorKind.REJECTED: "The model refused the request; see the log for details.",
    ModelErrorKind.AUTH: "The model service refused the API key; check GOOGLE_API_KEY.",
    ModelErrorKind.NOT_FOUND: "The model does not exist; check GEMINI_MODEL.",
    ModelErrorKind.TOOLS_REFUSED: "The model service refused the tool definitions; see the log for details.",
}
_RETRYING = {
    ModelErrorKind.BUSY: "the model is rate limited; trying again in {wait}",
    ModelErrorKind.UNAVAILABLE: "the model did not answer; trying again in {wait}",
}
_BUSY_FOR = "The model is rate limited; Google asks to wait about {wait}. Your message is kept."
_NO_ANSWER = {
    NoAnswerReason.BLOCKED: "The model gave no answer: Gemini blocked the request (safety filters). Try rephrasing.",
    NoAnswerReason.SAFETY: "The model gave no answer: Gemini withheld the reply (safety filters). Try rephrasing.",
    NoAnswerReason.RECITATION: "The model gave no answer: the reply resembled published text. Ask differently.",
    NoAnswerReason.MAX_TOKENS: "The model gave no answer: it hit its output limit. Ask for less at once.",
    NoAnswerReason.MALFORMED_CALL: "The model gave no answer: its tool call could not be read. Try again.",
    NoAnswerReason.EMPTY: "The model gave no answer: its reply was empty. Try again or rephrase.",
    NoAnswerReason.OTHER: "The model gave no answer, and Gemini did not say why. Try again.",
}


class ConsolePlatform:
    """Prints what the core says; remembers cards until the chat loop prompts for them.

    Args:
        write: where text goes (a line at a time).
    """

    name = "console"

    def __init__(self, write: Write) -> None:
        self.write = write
        self.pending: list[ApprovalCard] = []

    async def post_answer(self, conversation: ConversationRef, text: str) -> None:
        """Print the answer."""
        self.write(f"bot> {text}")

    async def post_card(self, target: CardTarget, card: ApprovalCard) -> str:
        """Queue the card for a prompt; the card ref is the approval id."""
        self.pending.append(card)
        return card.approval.id

    async def update_card(self, conversation: ConversationRef, card_ref: str, card: ApprovalCard) -> None:
        """Print the outcome of a decided card."""
        approval = card.approval
        if approval.status is ApprovalStatus.PENDING:
            return
        who = f"{approval.source}'s {approval.tool_name}" if approval.source else approval.tool_name
        line = f"   {who}: {approval.status.value}"
        if approval.trust_id is not None and approval.trust_s:
            line += f" and trusted for {duration_words(approval.trust_s)}"
        if approval.decided_by_name:
            line += f" by {approval.decided_by_name}"
        if approval.status is ApprovalStatus.EDITED:
            line += f" with {json.dumps(approval.final_args, ensure_ascii=False)}"
        if approval.reason:
            line += f" ({approval.reason})"
        if approval.outcome_unknown:
            line += " - " + OUTCOME_UNKNOWN
        self.write(line)

    async def notify(self, conversation: ConversationRef, notice: Notice, *, recipient: Actor | None) -> None:
        """Print a notice."""
        if isinstance(notice, CardsElsewhere | ApprovalExpired):
            self.write("!  " + _elsewhere_or_expired(notice))
            return
        if isinstance(notice, ReviewPending):
            tools = ", ".join(a.tool_name for a in notice.approvals) or "a call being worked on"
            self.write(f"!  A tool call is waiting for your decision first: {tools}")
        elif isinstance(notice, ModelFailed):
            self.write("!  " + model_failed_text(notice, by_kind=_NOTICES, no_answer=_NO_ANSWER, busy_for=_BUSY_FOR))
        elif isinstance(notice, TurnStopped):
            self.write(STOPPED.format(name=notice.stopped_by_name or notice.stopped_by_id))
        else:
            self.write(f"!  Something went wrong; see the log (conversation {notice.thread_id}).")

    @asynccontextmanager
    async def working(self, conversation: ConversationRef, anchor: str | None) -> AsyncIterator[_Progress]:
        """Print a short line when the agent starts, and one per delegation."""
        self.write("   …")
        yield _Progress(self.write)

    async def is_admin(self, actor: Actor) -> bool:
        """The person at the terminal runs the bot: they administer it."""
        return True

    async def member(self, workspace_id: str, user_id: str) -> Actor | None:
        """The person at the terminal: they administer it."""
        return Actor(
            platform=self.name, workspace_id=workspace_id, user_id=user_id, display_name=user_id, is_admin=True
        )

    async def member_of(self, actor: Actor, group_ids: frozenset[str]) -> frozenset[str]:
        """A terminal has no roles or groups."""
        return frozenset()

    async def group_members(self, workspace_id: str, group_id: str) -> frozenset[str]:
        """A terminal has no groups."""
        return frozenset()


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
            self._write(f"   … {activity.started} is working: {query}")
        elif activity.continued is not None:
            self._write(f"   … {activity.continued} continues after the decision")
        elif activity.stopping is not None and not self._stopping:
            self._stopping = True
            self._write(STOPPING.format(name=activity.stopping))
        elif activity.retrying is not None:
            why = _RETRYING.get(activity.retrying.kind, _RETRYING[ModelErrorKind.UNAVAILABLE])
            self._write("   … " + why.format(wait=duration_words(activity.retrying.wait_s)))


def _elsewhere_or_expired(notice: CardsElsewhere | ApprovalExpired) -> str:
    if isinstance(notice, ApprovalExpired):
        return f"The request to run {notice.approval.tool_name} expired without a decision."
    return "Approval cards were posted outside this terminal."
