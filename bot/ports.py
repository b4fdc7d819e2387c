"""The core's outbound port: what a platform adapter must do for the core.

The core calls these with domain values; the adapter renders them (Block Kit, embeds, plain
text) and keeps all wording in its own messages module (docs/development.md, convention 15).
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from bot.base.conversation import Actor, ConversationRef
from bot.base.errors import ModelError, ModelErrorKind, NoAnswerError, NoAnswerReason
from bot.policy.outlook import ToolOutlook
from bot.reviews.escalation.rules import EscalationTarget
from bot.reviews.lifecycle import ApprovalStatus
from bot.reviews.records import ApprovalRecord
from bot.reviews.shown import Arguments, Unshowable, arrange, leaves_free

if TYPE_CHECKING:  # the tools import this module
    from bot.tools.mcp.elicitation.store import QuestionRecord
    from bot.tools.mcp.pins.diff import DefinitionChange


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchOffer:
    """*Approve all* / *Reject all*, on the first card of a pause with two or more pending calls.

    Attributes:
        review_id: the pause (its review id as 32 hex digits, which the buttons carry).
        pending: how many calls of the pause wait for a decision.
        version: the tag of the pause's arguments (`bot.reviews.records.pause_version`);
            Approve all carries it, so a click on a card drawn before an edit is refused.
    """

    review_id: str
    pending: int
    version: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolOrigin:
    """Where a card's tool comes from when it is not the bot's own: an MCP server's tool.

    Attributes:
        server: the server's key in the MCP servers file.
        tool: the tool's name on the server.
        hints: what the server says of the tool ("read-only", "destructive", "idempotent",
            "open world"): shown as the server's hints, never checked, never a policy on their own.
    """

    server: str
    tool: str
    hints: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalCard:
    """Everything a card shows: the approval (pending or decided) and its place in the pause.

    Attributes:
        approval: the stored approval; `status` says whether buttons are still shown, its
            escalation fields whether (and to whom) it escalated.
        position: 1-based index among the pause's approvals.
        total: how many approvals the pause has.
        batch: the pause's batch buttons, on its first card while two or more calls wait.
        key_order: the tool's argument names in its own order (`ToolRegistry.argument_order`),
            in which the card lists the arguments (`arranged`); empty when unknown.
        origin: the MCP server and tool behind the card's tool, with the server's hints
            (`ToolRegistry.origin`); None for the bot's own tools.
    """

    approval: ApprovalRecord
    position: int
    total: int
    batch: BatchOffer | None = None
    key_order: tuple[str, ...] = ()
    origin: ToolOrigin | None = None

    def arranged(self, args: Mapping[str, Any]) -> Arguments:
        """`args` in the order the card lists them (`bot.reviews.shown.arrange`)."""
        return arrange(args, self.key_order)

    @property
    def under_vote(self) -> Arguments:
        """The arguments an Approve on this card approves (`ApprovalRecord.args_under_vote`), arranged."""
        return self.arranged(self.approval.args_under_vote)

    @property
    def shown(self) -> Arguments:
        """The arguments the card's full view shows: those under vote, or once decided those that ran."""
        approval = self.approval
        if not approval.is_pending and approval.final_args is not None:
            return self.arranged(approval.final_args)
        return self.under_vote

    @property
    def trust_binds(self) -> tuple[str, ...]:
        """The arguments the card's trust grant binds, or would (empty: every argument, or no trust)."""
        approval = self.approval
        if approval.status is ApprovalStatus.PENDING:
            return (approval.trust_offer_matching or ()) if approval.trust_offer_s else ()
        return approval.trust_matching if approval.trust_id is not None else ()

    @property
    def trust_leaves_free(self) -> tuple[str, ...]:
        """The arguments the card's trust grant leaves free, which the card names (empty: none).

        While pending, those a grant made on it would leave free (`ApprovalRecord.
        trust_offer_matching`); once approved with trust, those its grant leaves free. The
        tool's arguments in order, with any others the call gave.
        """
        matching = self.trust_binds
        if not matching:
            return ()
        return leaves_free(matching, (*self.key_order, *self.under_vote.keys))


@dataclass(frozen=True, slots=True, kw_only=True)
class CardTarget:
    """Where to post a card (`/countersign cards`): the conversation, another channel, or a DM.

    Attributes:
        conversation: the conversation the call belongs to.
        channel_id: post in this channel (an approvals channel) instead.
        user_id: post in this user's DMs instead.
        escalated_to: set for a copy posted because the card escalated: the audience it was
            escalated to, which a post in a channel mentions (on Discord a role is pinged, the
            only way to reach its members without the privileged Server Members intent).
    """

    conversation: ConversationRef
    channel_id: str | None = None
    user_id: str | None = None
    escalated_to: EscalationTarget | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CardsElsewhere:
    """The cards of this pause were posted outside the conversation; say where.

    Attributes:
        approvals: the approvals, with `card_ref` pointing at (the first copy of) each card.
        channel_id: the approvals channel, or None when the cards went to approvers' DMs.
    """

    approvals: tuple[ApprovalRecord, ...]
    channel_id: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalExpired:
    """A card expired without a decision; the requester is told."""

    approval: ApprovalRecord


@dataclass(frozen=True, slots=True, kw_only=True)
class ReviewPending:
    """A message arrived while a review waits; it was not given to the agent.

    Attributes:
        approvals: the pending approvals, with card references to link to.
        questions: the MCP servers' questions still waiting for their requester's answer
            (docs/decisions/0054-mcp-elicitation.md); the message waits for them, not "a moment".
    """

    approvals: tuple[ApprovalRecord, ...]
    questions: tuple[QuestionRecord, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelFailed:
    """The model failed after its retries, or gave no answer; the message is kept and the thread stays usable.

    Attributes:
        kind: the class of failure.
        reason: for `ModelErrorKind.NO_ANSWER`, why Gemini gave none.
        retry_after_s: for `ModelErrorKind.BUSY`, how long Google asked to wait, when known.
    """

    kind: ModelErrorKind
    reason: NoAnswerReason | None = None
    retry_after_s: float | None = None

    @classmethod
    def of(cls, error: ModelError) -> ModelFailed:
        """The notice for a model error."""
        reason = error.reason if isinstance(error, NoAnswerError) else None
        return cls(kind=error.kind, reason=reason, retry_after_s=error.retry_after_s)


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnFailed:
    """Something unexpected failed; the details are in the log, under `thread_id`.

    Attributes:
        thread_id: the conversation, as the log names it.
        message: the text of the message that could not be answered, when one message failed
            (its handling failed, or it was given up after `bot.upkeep.unfinished_work.MAX_ATTEMPTS` or
            `bot.upkeep.unfinished_work.ANSWER_WITHIN_S`), so that its sender knows which one to send again;
            None when a run failed.
        message_id: that message's platform id (`IncomingMessage.message_id`), so that an
            adapter posting the notice where others read it can first check that its author
            has not deleted it; None when a run failed or the message had no id.
    """

    thread_id: str
    message: str | None = None
    message_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ResumeGivenUp:
    """The bot gave up carrying out a decided pause after its attempts; its requester is told once.

    Attributes:
        approvals: the pause's approvals as now stored, in order: a decided call that did not
            run has `not_run`, one that may have run has `outcome_unknown`; the others ran, or
            were rejected, expired or stopped (their cards say so).
    """

    approvals: tuple[ApprovalRecord, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnStopped:
    """The turn was stopped (docs/decisions/0021): said in the conversation in place of an answer.

    Attributes:
        stopped_by_id: the platform user id of whoever stopped it.
        stopped_by_name: their display name.
    """

    stopped_by_id: str
    stopped_by_name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class AskElsewhere:
    """A call was refused in a Discord DM: a server the requester shares with the bot would have someone else decide it.

    Told to the requester before any card (none is posted); the model reads that the call was
    rejected by policy (docs/decisions/0035-dms-and-escalation-audiences.md).

    Attributes:
        tool_name: the refused call's tool.
        workspace_ids: the servers where it needs someone other than the requester to decide
            (where to ask instead); empty when only `unchecked` is set.
        unchecked: some server could not be checked (a lookup failed, or too many could be
            stricter), so the call was refused to be safe.
    """

    tool_name: str
    workspace_ids: tuple[str, ...] = ()
    unchecked: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolsHeld:
    """An MCP server changed or added tools: they are held until an admin accepts them; told to the admins.

    Posted once per change in each admins' channel (`bot.admin.notices.AdminChannels`),
    docs/decisions/0043-pinned-mcp-definitions.md.

    Attributes:
        server: the server's key.
        changes: each newly held tool and what changed in it, bounded (new tools included).
        accept_command: how an admin accepts them: `/countersign mcp accept <server>`.
        after: how each tool's calls will be decided once accepted, in this channel's workspace
            (`bot.admin.outlook`), in the order of `changes`; empty when its configuration could
            not be read.
    """

    server: str
    changes: tuple[DefinitionChange, ...]
    accept_command: str
    after: tuple[ToolOutlook, ...] = ()


Notice = (
    ReviewPending
    | ModelFailed
    | TurnFailed
    | CardsElsewhere
    | ApprovalExpired
    | TurnStopped
    | AskElsewhere
    | ResumeGivenUp
    | ToolsHeld
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelRetry:
    """A model call failed and the bot tries again after a wait long enough to say so.

    Attributes:
        kind: `BUSY` (rate limited) or `UNAVAILABLE` (a server error, a timeout).
        wait_s: seconds until the next attempt.
    """

    kind: ModelErrorKind
    wait_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Activity:
    """What the agent is busy with, for the progress indicator.

    Attributes:
        subagents: the subagents working right now, in the order they started (a name twice
            when two delegations to it run at once); empty when the agent itself is at work.
        waiting: the subagents whose delegations wait for a card (their cards are posted).
        started: the subagent whose delegation just started, if that is the news (the
            terminal prints one line per delegation).
        continued: the subagent whose delegation goes on after its cards were decided, if
            that is the news.
        query: the started delegation's task.
        retrying: set when that is the news: a model call (the agent's or a subagent's) failed
            and is tried again after a wait of several seconds.
        delegated: whether the run has delegated work to subagents (the supervisor then puts
            the answer together when none works any more).
        turn_id: the turn the run belongs to, which a Stop button on the indicator names
            (docs/decisions/0021); None: it cannot be stopped (a run older than turns).
        long_running: the run has gone on for a while (`bot.turns.runner.OFFER_STOP_AFTER_S`): worth
            an indicator of its own, so that its Stop button shows; a quick answer gets none.
        stopping: the name of whoever stopped the turn, once they did: the indicator says so
            and offers no Stop button any more (it never appears for this alone).
    """

    subagents: tuple[str, ...] = ()
    waiting: tuple[str, ...] = ()
    started: str | None = None
    continued: str | None = None
    query: str = ""
    retrying: ModelRetry | None = None
    delegated: bool = False
    turn_id: str | None = None
    long_running: bool = False
    stopping: str | None = None


class Progress(Protocol):
    """The progress indicator of one run, yielded by `Platform.working`."""

    async def show(self, activity: Activity) -> None:
        """Show `activity` in place of what was shown before; never raises (failures are logged)."""
        ...


class Platform(Protocol):
    """One chat platform, as the core sees it.

    Every method may raise the platform's own errors; the core logs them with the thread id
    and carries on, so one failed post never wedges a conversation.
    """

    name: str
    """The `ConversationRef.platform` value this adapter serves."""

    async def post_answer(self, conversation: ConversationRef, text: str) -> None:
        """Post the agent's answer (split and escaped as the platform needs)."""
        ...

    async def post_card(self, target: CardTarget, card: ApprovalCard) -> str:
        """Post an approval card; return a reference the adapter can later update and link."""
        ...

    async def update_card(self, conversation: ConversationRef, card_ref: str, card: ApprovalCard) -> None:
        """Show the card's new state in place (outcome, who, when; no buttons once decided)."""
        ...

    def unshowable(self, arguments: Arguments) -> Unshowable | None:
        """Why this platform's cards cannot show `arguments` in full, else None.

        Every key on the card, the whole arguments in its full view
        (docs/decisions/0034-arguments-approvers-can-see.md). A card whose arguments under vote
        are unshowable offers no Approve, and the core refuses an approval of it from this
        platform (`bot.reviews.decide.Decider.decide`), so the answer must come from the layout the
        adapter draws. See `bot.reviews.shown.ArgumentsViewer`.
        """
        ...

    async def notify(self, conversation: ConversationRef, notice: Notice, *, recipient: Actor | None) -> None:
        """Tell `recipient` (privately where the platform can) or the conversation."""
        ...

    async def post_question(self, conversation: ConversationRef, question: QuestionRecord) -> str | None:
        """Show an MCP server's question to its requester only (`question.requester_id`).

        The form or link is `question.question`; a link is shown to the requester alone. The
        answer comes back through `Countersign.answer_question`.

        Returns:
            A reference the adapter can later update (`update_question`); None when this
            platform cannot take answers: it told the requester what the server asked, and the
            core answers `cancel` (docs/decisions/0054-mcp-elicitation.md).
        """
        ...

    async def update_question(self, conversation: ConversationRef, ref: str, question: QuestionRecord) -> None:
        """Show what became of a question shown before (answered, expired, closed by a stop)."""
        ...

    def working(self, conversation: ConversationRef, anchor: str | None) -> AbstractAsyncContextManager[Progress]:
        """Show progress for the duration of the block, and clear it at the end.

        Args:
            conversation: where the agent works.
            anchor: the message the work is about: a message id received from the platform or
                a card reference returned by `post_card`; None when there is none.

        Yields:
            The run's indicator; the core reports which subagents are working through it.
        """
        ...

    async def is_admin(self, actor: Actor) -> bool:
        """Whether the platform says `actor` administers their workspace."""
        ...

    async def member_of(self, actor: Actor, group_ids: frozenset[str]) -> frozenset[str]:
        """Which of `group_ids` (Discord roles, Slack user groups) `actor` belongs to."""
        ...

    async def member(self, workspace_id: str, user_id: str) -> Actor | None:
        """A person as a member of the workspace now, without an interaction of theirs.

        For judging whether the approver of a trust grant could still approve a call (issue
        12): the admin flag and groups where the platform gives them (Discord: Manage Server
        and roles, fetched; Slack: the admin flag; user groups are asked with `member_of`).
        None when the person is not (or no longer) a member.
        """
        ...

    async def group_members(self, workspace_id: str, group_id: str) -> frozenset[str]:
        """The user ids in a group (a Slack user group, a Discord role), for routing cards to DMs.

        Empty when the platform does not let the bot list them (Discord lists a role's members
        only with the privileged Server Members intent, which Countersign does not ask for).
        """
        ...
