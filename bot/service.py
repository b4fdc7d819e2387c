"""The use cases: a message arrives; a decision arrives. Adapters call only this.

`Countersign` is platform-free: an adapter hands it the platform's facts about where a
message is (`conversation_at` decides its `ConversationRef`), an authenticated `Actor` and text
or a decision, and renders what comes back through its `Platform`. It builds nothing; the
composition root (`countersign.wiring`) hands it its parts.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Mapping, Sequence

from bot.admin.views import StopRequested
from bot.base.conversation import DM_WORKSPACE, Actor, ConversationRef, IncomingMessage
from bot.base.errors import ApprovalNotFoundError, CountersignError, NotPermittedError, StaleVoteError
from bot.base.log_context import about
from bot.base.tasks import TaskTracker
from bot.policy.config import ConversationScope
from bot.policy.store import ConfigStore
from bot.ports import ToolOrigin
from bot.reviews.batch import BatchOutcome, decide_each, is_review_id
from bot.reviews.decide import Decider, is_approval_id
from bot.reviews.decisions import Approve, Edit, Reject
from bot.reviews.escalation.sweep import EscalationSweeper
from bot.reviews.expiry import ExpirySweeper
from bot.reviews.records import ApprovalRecord, pause_version
from bot.reviews.shown import Arguments
from bot.reviews.store import ApprovalStore
from bot.tools.mcp.elicitation.desk import QuestionDesk, QuestionNotFoundError
from bot.tools.mcp.elicitation.expiry import QuestionExpiry
from bot.tools.mcp.elicitation.forms import Answer
from bot.tools.mcp.elicitation.store import QuestionRecord
from bot.turns.conversations import ConversationStore
from bot.turns.messages import Messages
from bot.turns.resumes import Resumes
from bot.turns.runner import TurnRunner
from bot.turns.stop.stopper import TurnStopper
from bot.upkeep.retention import Housekeeping
from bot.upkeep.unfinished_work import Upkeep

log = logging.getLogger(__name__)


class ShuttingDownError(CountersignError):
    """The bot is stopping and takes no new work."""


class Countersign:
    """The core service: the entry points adapters (and the process's start and stop) call.

    It builds nothing: the composition root (`countersign.wiring.assemble_core`) hands it its
    parts (docs/decisions/0062-one-composition-root.md).

    Args:
        messages: accepts and handles messages, tends unfinished work (`bot.turns.messages`).
        resumes: redraws and resumes after decisions and answers (`bot.turns.resumes`).
        runner: redraws cards at a start (`recover`).
        decider: records decisions.
        approvals: the approvals tables.
        conversations: the conversations table.
        config: the admin configuration (each channel's conversation scope).
        stopper: the Stop use case.
        questions: the MCP servers' questions (None: none are asked here).
        expiry: expires pending approvals (started and stopped with the service).
        question_expiry: expires questions (None without `questions`).
        escalation: the escalation sweeper (started and stopped with the service).
        upkeep: finishes unfinished work and runs `housekeeping` (started and stopped with the
            service).
        tasks: the background work shutdown drains (`tasks`); card redraws run there too
            (`bot.reviews.cards.CardDesk`).
        platforms: the platforms this process serves (`ConversationRef.platform` names, read
            when used; the adapters' `Platform`s by name will do). Recovery takes only their
            work: another platform's is left to the processes that serve it (docs/decisions/0031).
        housekeeping: the checkpoint pruning and retention `upkeep` runs (the same object, kept
            here for whoever runs a pass at once; None when the upkeep has none).
        also_start: more background work to start with the sweepers, once the platforms are
            registered (the MCP servers' supervisors, whose admins' messages need them).
    """

    def __init__(
        self,
        *,
        messages: Messages,
        resumes: Resumes,
        runner: TurnRunner,
        decider: Decider,
        approvals: ApprovalStore,
        conversations: ConversationStore,
        config: ConfigStore,
        stopper: TurnStopper,
        questions: QuestionDesk | None,
        expiry: ExpirySweeper,
        question_expiry: QuestionExpiry | None,
        escalation: EscalationSweeper,
        upkeep: Upkeep,
        tasks: TaskTracker,
        platforms: Collection[str],
        housekeeping: Housekeeping | None = None,
        also_start: Sequence[Callable[[], None]] = (),
    ) -> None:
        self._messages = messages
        self._resumes = resumes
        self._runner = runner
        self._decider = decider
        self._approvals = approvals
        self._conversations = conversations
        self._config = config
        self._stopper = stopper
        self._questions = questions
        self.expiry = expiry
        self.question_expiry = question_expiry
        self.escalation = escalation
        self.upkeep = upkeep
        self.tasks = tasks
        self._platforms = platforms
        self.housekeeping = housekeeping
        self._also_start = tuple(also_start)

    async def knows_conversation(self, conversation: ConversationRef) -> bool:
        """Whether the bot already takes part in `conversation` (e.g. a Slack thread)."""
        return await self._conversations.exists(conversation.thread_id)

    async def conversation_at(
        self,
        platform: str,
        workspace_id: str,
        channel_id: str,
        thread: str | None,
        *,
        is_dm: bool,
        thread_required: bool = False,
    ) -> ConversationRef | None:
        """The conversation a message (or a command) at this place belongs to, under its channel's scope.

        Adapters hand over the platform's facts; the core decides the conversation. In a DM,
        the DM itself, or the DM thread `thread` names. In a channel set to
        `/countersign scope channel`, the whole channel (a thread shares its parent channel's
        conversation). Otherwise the thread, or the channel itself when `thread` is None.

        Args:
            platform: `ConversationRef.platform` (`slack`, `discord`, ...).
            workspace_id: the Slack team, the Discord guild (`bot.base.conversation.DM_WORKSPACE`
                for a Discord DM).
            channel_id: the channel (a thread's parent channel).
            thread: the thread, None for a message straight in the channel.
            is_dm: the place is a direct message with the bot.
            thread_required: a channel of this platform has no conversation of its own under
                the default scope (Slack: its conversations are threads).

        Returns:
            The conversation; None when `thread_required` and no thread was given in a channel
            that is not one conversation.

        Raises:
            Exception: the database's, when the channel's scope cannot be read.
        """
        if is_dm:
            return ConversationRef(platform=platform, workspace_id=workspace_id, channel_id=channel_id, thread=thread)
        if thread is None and not thread_required:  # the channel's conversation, whatever its scope
            return ConversationRef(platform=platform, workspace_id=workspace_id, channel_id=channel_id)
        config = await self._config.load(platform, workspace_id)
        if config.scope(channel_id) is ConversationScope.CHANNEL:
            return ConversationRef(platform=platform, workspace_id=workspace_id, channel_id=channel_id)
        if thread is None:
            return None
        return ConversationRef(platform=platform, workspace_id=workspace_id, channel_id=channel_id, thread=thread)

    def submit_message(self, message: IncomingMessage) -> None:
        """Handle `message` in the background (adapters acknowledge the platform first).

        Raises:
            ShuttingDownError: when the bot is stopping.
        """
        if self.tasks.closing:
            raise ShuttingDownError("shutting down")
        self.tasks.spawn(self.handle_message(message), name=f"message {message.conversation.thread_id}")

    async def handle_message(self, message: IncomingMessage) -> None:
        """Accept a message and handle it (`Messages.handle_message`)."""
        await self._messages.handle_message(message)

    async def claim(self, message: IncomingMessage) -> bool:
        """Claim a message, telling the sender when it cannot even be accepted (`Messages.claim`)."""
        return await self._messages.claim(message)

    async def accept(self, message: IncomingMessage) -> bool:
        """Claim a message in the inbox; whether it is new and is to be handled (`Messages.accept`).

        Raises:
            Exception: the database's, when the claim cannot be written (nothing is claimed).
        """
        return await self._messages.accept(message)

    def submit_accepted(self, message: IncomingMessage) -> None:
        """Handle an accepted message in the background (adapters acknowledge the platform first).

        While the bot is stopping, the message stays in the inbox for a live replica (or the
        next start) to handle.
        """
        if self.tasks.closing:
            log.info("stopping: message left for another replica (thread_id=%s)", message.conversation.thread_id)
            return
        self.tasks.spawn(self.handle_accepted(message), name=f"message {message.conversation.thread_id}")

    async def handle_accepted(self, message: IncomingMessage) -> None:
        """Handle a message `accept` took (`Messages.handle_accepted`)."""
        await self._messages.handle_accepted(message)

    async def answer_question(self, question_id: str, actor: Actor, answer: Answer) -> None:
        """Answer an MCP server's question; the call goes on with the answer once its pause has all of them.

        The one entry point for answers, for every adapter (docs/decisions/0054-mcp-elicitation.md).

        Args:
            question_id: the question the prompt or form named.
            actor: the authenticated person answering; only the call's requester may.
            answer: accept (with the form's content, in the schema's types: `forms.read_answer`
                reads typed text), decline or cancel.

        Raises:
            QuestionNotFoundError: no such question.
            NotPermittedError: `not_requester` (audited); nothing changed.
            AlreadyAnsweredError: answered, expired or closed by a stop before; nothing changed.
            AnswerError: the content does not fit the question; nothing changed, and the person
                may answer again.
        """
        desk = self._desk()
        record = await desk.answer(question_id, actor, answer)
        with about(record.thread_id):
            log.info("question %s answered %s", record.id, answer.action.value)
        self.tasks.spawn(self._resumes.after_question(record), name=f"answered {record.thread_id}")

    async def question(self, question_id: str) -> QuestionRecord:
        """The question with this id, as stored now.

        Raises:
            QuestionNotFoundError: no such question.
        """
        return await self._desk().get(question_id)

    async def open_questions(self, conversation: ConversationRef) -> list[QuestionRecord]:
        """The conversation's questions still waiting for their requester, oldest first."""
        desk = self._questions
        return await desk.blocking(conversation.thread_id) if desk is not None else []

    def _desk(self) -> QuestionDesk:
        """The question desk.

        Raises:
            QuestionNotFoundError: none is wired (no question can exist).
        """
        if self._questions is None:
            raise QuestionNotFoundError("(no questions here)")
        return self._questions

    async def pending_approvals(self, conversation: ConversationRef) -> list[ApprovalRecord]:
        """Undecided approvals of a conversation, oldest first."""
        return await self._approvals.pending_in_thread(conversation.thread_id)

    async def approval(self, approval_id: str, *, actor: Actor | None = None) -> ApprovalRecord:
        """The approval with this id (for an adapter prefilling an edit form).

        Args:
            approval_id: the id a button or form named (any payload value; see
                `Decider.approval`).
            actor: the person who named it, when a click or a form led here: an unknown id is
                then audited as a refusal of theirs.

        Raises:
            ApprovalNotFoundError: no such approval.
        """
        return await self._decider.approval(approval_id, actor=actor)

    async def shown_arguments(self, approval_id: str, actor: Actor) -> tuple[ApprovalRecord, Arguments]:
        """The approval and the whole arguments its card's full view shows ("All arguments").

        Pending: the arguments an Approve would approve; decided: those that ran (or would have).
        In the order cards list them (docs/decisions/0034-arguments-approvers-can-see.md). Only
        people who could see the card may open them: in a workspace (a Slack team, a Discord
        server), its people; in a Discord DM, which belongs to no server, only the requester,
        the one person in it besides the bot (docs/decisions/0035-dms-and-escalation-audiences.md).

        Args:
            approval_id: the id the button named (any payload value).
            actor: who clicked.

        Raises:
            ApprovalNotFoundError: no such approval (audited).
            NotPermittedError: `other_workspace` (another platform or workspace) or `other_dm`
                (someone else's DM), audited; nothing is shown.
        """
        approval = await self._decider.approval(approval_id, actor=actor)
        asked_in = ConversationRef.from_thread_id(approval.thread_id)
        if (actor.platform, actor.workspace_id) != (asked_in.platform, approval.workspace_id):
            await self._decider.refuse(
                approval.id, actor, outcome="not_permitted", reason="the arguments of another workspace's call"
            )
            raise NotPermittedError("other_workspace")
        if approval.workspace_id == DM_WORKSPACE and actor.user_id != approval.requester_id:
            # Every Discord DM has the workspace id `dm`: the same workspace says nothing here.
            await self._decider.refuse(
                approval.id, actor, outcome="not_permitted", reason="the arguments of a call asked in another DM"
            )
            raise NotPermittedError("other_dm")
        decided = not approval.is_pending and approval.final_args is not None
        shown = approval.final_args if decided and approval.final_args is not None else approval.args_under_vote
        return approval, self._decider.arranged(approval.tool_name, shown)

    def arranged(self, tool_name: str, args: Mapping[str, object]) -> Arguments:
        """A call's arguments in the order cards list them (the tool's own; `bot.reviews.shown.arrange`)."""
        return self._decider.arranged(tool_name, args)

    def tool_origin(self, tool_name: str) -> ToolOrigin | None:
        """The MCP server behind the tool, for its card (`ApprovalCard.origin`); None for the bot's own tools."""
        return self._decider.origin(tool_name)

    def key_order(self, tool_name: str) -> tuple[str, ...]:
        """The tool's argument names in its own order (`ApprovalCard.key_order`); empty for an unknown tool."""
        return self._decider.key_order(tool_name)

    async def refuse(self, approval_id: str, actor: Actor, *, outcome: str, reason: str) -> None:
        """Audit an attempt on an approval that the adapter refused itself (see `Decider.refuse`)."""
        await self._decider.refuse(approval_id, actor, outcome=outcome, reason=reason)

    async def check_decider(self, approval_id: str, actor: Actor, *, attempted: str) -> ApprovalRecord:
        """Check, without deciding, that `actor` may take an `attempted` decision.

        Adapters call this before opening an Edit (`attempted="edit"`) or Reject
        (`attempted="reject"`) form, so a refused clicker is told at once. Refusals are audited.

        Raises:
            ApprovalNotFoundError, AlreadyDecidedError, NotPermittedError.
        """
        return await self._decider.check(approval_id, actor, attempted=attempted)

    async def decide(
        self,
        approval_id: str,
        actor: Actor,
        decision: Approve | Edit | Reject,
        *,
        seen_version: str | None = None,
        trust: bool = False,
    ) -> ApprovalRecord:
        """Validate, authorise and record one decision; resume the graph once all are in.

        The one entry point for decisions, for every adapter.

        Args:
            approval_id: the approval the button or form named.
            actor: the authenticated clicker.
            decision: `Approve()`, `Edit(edited_action=EditedAction(name=<the approval's
                tool>, args=...))` or `Reject(message=...)` (`bot.reviews.decisions`).
            seen_version: the version tag on the clicked card (see `ApprovalRecord.version`).
            trust: "Approve and trust" (with `Approve`): the approval also makes a trust grant,
                in the same transaction (docs/decisions/0022; see `Decider.decide`).

        Returns:
            The approval as now stored; still pending when a quorum waits for more approvals.
            The card is redrawn in the background and, when this decision was the last of its
            pause, that pause resumes after it (the other pauses of the thread wait for theirs).

        Raises:
            ApprovalNotFoundError: unknown id (audited).
            AlreadyDecidedError: decided before (by someone else, the same person, or another
                replica); nothing changed.
            AlreadyVotedError: this person already approved these arguments (quorum).
            NotPermittedError: the actor may not decide it; nothing changed.
            InvalidDecisionError: the decision does not fit the action; nothing changed and
                the card stays usable.
            TrustRefusedError: trust cannot be granted on this card now; nothing changed and
                the card stays usable.
            UnshowableError: an approval where the card's platform cannot show the arguments
                in full (docs/decisions/0034-arguments-approvers-can-see.md); nothing changed.
        """
        with about(approval_id=approval_id if is_approval_id(approval_id) else None):
            return await self._decide(approval_id, actor, decision, seen_version, trust)

    async def _decide(
        self,
        approval_id: str,
        actor: Actor,
        decision: Approve | Edit | Reject,
        seen_version: str | None,
        trust: bool = False,
    ) -> ApprovalRecord:
        result = await self._decider.decide(approval_id, actor, decision, seen_version=seen_version, trust=trust)
        # The card and the resume happen after the caller has its answer: an adapter must
        # acknowledge the platform within seconds (Slack and Discord: 3 s).
        self.tasks.spawn(self._resumes.after_decision(result), name=f"decided {result.approval.thread_id}")
        return result.approval

    async def stop_turn(
        self, actor: Actor, *, conversation: ConversationRef | None = None, turn_id: str | None = None
    ) -> StopRequested:
        """Stop a running turn: the one a Stop button names, or the active one of `conversation`.

        The one entry point for Stop, for every adapter (`/countersign stop` goes through the
        admin use case to the same `TurnStopper`). The turn ends at its next step; its waiting
        cards are closed as stopped and redrawn, and their pauses resumed, in the background.

        Args:
            actor: the authenticated person who pressed Stop or typed it.
            conversation: where `stop` was typed (ignored when `turn_id` is given).
            turn_id: the turn a Stop button names.

        Raises:
            NothingToStopError, TurnEndedError, AlreadyStoppedError, NotPermittedError: see
                `TurnStopper.stop`; nothing changed.
        """
        with about(conversation.thread_id if conversation is not None else None):
            return await self._stopper.stop(actor, conversation=conversation, turn_id=turn_id)

    async def decide_all(
        self, review_id: str, actor: Actor, decision: Approve | Reject, *, seen_version: str | None = None
    ) -> BatchOutcome:
        """Approve all / Reject all: one decision per pending call of a pause, as single clicks take them.

        See `bot.reviews.batch`. Each decision recorded is followed up like a single click's (its card
        redrawn; the pause resumed by whichever decision was its last). Approve all leaves
        pending, and reports, every call whose arguments the platform cannot show in full, and
        every call whose own card has not been posted (nobody has seen it).

        Args:
            review_id: the pause the first card's batch button named (32 hex digits).
            actor: the authenticated clicker.
            decision: `Approve()` or `Reject(message=...)`, taken on every pending call.
            seen_version: for Approve all, the tag of the pause's arguments on the clicked card
                (`BatchOffer.version`).

        Returns:
            What happened to each call.

        Raises:
            ApprovalNotFoundError: no such pause (audited).
            StaleVoteError: Approve all from a card drawn before an edit of one of the pause's
                calls; nothing was decided (audited).
        """
        rows = await self._batch_rows(review_id, actor)
        if isinstance(decision, Approve) and seen_version and seen_version != pause_version(rows):
            first = next((row for row in rows if row.is_pending), rows[0])
            await self._decider.refuse(
                first.id, actor, outcome="stale_card", reason="a call's arguments changed after the card was drawn"
            )
            raise StaleVoteError(review_id)
        with about(rows[0].thread_id):
            outcome, results = await decide_each(self._decider, rows, actor, decision)
        for result in results:
            self.tasks.spawn(self._resumes.after_decision(result), name=f"decided {result.approval.thread_id}")
        return outcome

    async def check_batch(self, review_id: str, actor: Actor, *, attempted: str) -> list[ApprovalRecord]:
        """Check, without deciding, that `actor` may take an `attempted` decision on some call of a pause.

        Adapters call this before opening the Reject all form, so that someone who may decide
        none of its calls is told at once (audited, as for a single card).

        Returns:
            The pause's pending approvals.

        Raises:
            ApprovalNotFoundError: no such pause (audited).
            AlreadyDecidedError: nothing of the pause is pending any more.
            NotPermittedError: the actor may decide none of its pending calls.
        """
        rows = await self._batch_rows(review_id, actor)
        pending = [row for row in rows if row.is_pending]
        for row in pending:
            if await self._decider.permits(row, actor, attempted=attempted):
                return pending
        await self._decider.check((pending or rows)[0].id, actor, attempted=attempted)  # raises, audited
        return pending  # pragma: no cover - `check` raised: nothing was open to this actor

    async def pause(self, review_id: str) -> list[ApprovalRecord]:
        """The approvals of the pause a batch button names, in order (an adapter placing a DM click).

        Raises:
            ApprovalNotFoundError: no such pause.
        """
        rows = await self._approvals.approvals_of(review_id) if is_review_id(review_id) else []
        if not rows:
            raise ApprovalNotFoundError(review_id if is_review_id(review_id) else "a pause")
        return rows

    async def _batch_rows(self, review_id: str, actor: Actor) -> list[ApprovalRecord]:
        """The approvals of the pause a batch button names.

        Raises:
            ApprovalNotFoundError: no such pause (audited as a refusal of `actor`'s).
        """
        try:
            return await self.pause(review_id)
        except ApprovalNotFoundError:
            await self._decider.unknown_pause(review_id, actor)
            raise

    def start(self, *, upkeep_first_sweep: bool = False) -> None:
        """Start background work: the expiry and escalation sweepers, the upkeep, and `also_start`.

        Call once the platforms are registered.

        Args:
            upkeep_first_sweep: the upkeep's first look takes all unfinished work at once (as
                `recover` does); otherwise only what is due.
        """
        self.expiry.start()
        if self.question_expiry is not None:
            self.question_expiry.start()
        self.escalation.start()
        self.upkeep.start(everything_first=upkeep_first_sweep)
        for start in self._also_start:
            start()

    async def recover(self) -> list[str]:
        """After a start: redraw cards with votes, warn of cards that can no longer run, finish what was left.

        Only the work of the platforms this process serves (`platforms`).

        Cards that wait for a tool or subagent the configuration no longer has are logged as
        warnings: approving them records a rejection (see `Decider.can_still_run`). Every
        conversation with unfinished work (reviews claimed but not resumed, runs whose outcome
        was not delivered, messages not handled) is tended now, whether or not it is due; a
        live replica's work is protected by its conversation lock.

        Returns:
            The thread ids of the conversations whose left-over work is being finished now, in
            the service's tasks (`tasks.join` waits for it).
        """
        pending = await self._approvals.pending_everywhere(platforms=self._platforms)
        # A vote's redraw may have died with the process before it ("1 of 2").
        await self._runner.redraw_cards(*(approval for approval in pending if approval.votes))
        for approval in pending:
            if not self._decider.can_still_run(approval):
                where = f"subagent {approval.source}'s " if approval.source else ""
                log.warning(
                    "card %s waits for %stool %s, which is no longer configured; it cannot run "
                    "if approved (thread_id=%s)",
                    approval.id,
                    where,
                    approval.tool_name,
                    approval.thread_id,
                )
        tended = await self.upkeep.sweep(everything=True)
        for thread_id in tended:
            log.info("finishing work left over from before (thread_id=%s)", thread_id)
        return tended

    async def aclose(self, grace_s: float, *, cut_short: asyncio.Event | None = None) -> bool:
        """Stop taking work and let in-flight turns reach a checkpoint (up to `grace_s`).

        Work cut short here stays marked unfinished, for the upkeep of a live replica or of
        the next start. Calling it again (after the first call) waits for nothing.

        Args:
            grace_s: the longest wait for in-flight work.
            cut_short: when set, in-flight work is cancelled at once (see `TaskTracker.drain`).

        Returns:
            Whether in-flight work was cut short.
        """
        await self.upkeep.stop()
        await self.expiry.stop()
        if self.question_expiry is not None:
            await self.question_expiry.stop()
        await self.escalation.stop()
        cut = await self.tasks.drain(grace_s, cut_short=cut_short)
        await self._stopper.aclose()
        return cut
