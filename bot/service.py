"""The use cases: a message arrives; a decision arrives. Adapters call only this.

`Countersign` is platform-free: an adapter hands it an authenticated `Actor`, a
`ConversationRef` and text or a decision, and renders what comes back through its `Platform`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Coroutine, Mapping, Sequence
from typing import Any

from bot.admin.views import StopRequested
from bot.base.conversation import DM_WORKSPACE, Actor, ConversationRef, IncomingMessage
from bot.base.errors import ApprovalNotFoundError, CountersignError, NotPermittedError, StaleVoteError
from bot.base.log_context import about
from bot.base.tasks import TaskTracker
from bot.ports import ReviewPending, ToolOrigin, TurnFailed
from bot.reviews.batch import BatchOutcome, decide_each, is_review_id
from bot.reviews.decide import Decider, is_approval_id
from bot.reviews.decisions import Approve, Edit, Reject
from bot.reviews.escalation.sweep import EscalationSweeper
from bot.reviews.expiry import ExpirySweeper
from bot.reviews.records import ApprovalRecord, DecideResult, pause_version
from bot.reviews.shown import Arguments
from bot.reviews.store import ApprovalStore
from bot.storage.locks import LockLostError, ThreadLocks
from bot.tools.mcp.elicitation.desk import QuestionDesk, QuestionNotFoundError
from bot.tools.mcp.elicitation.expiry import QuestionExpiry
from bot.tools.mcp.elicitation.forms import Answer
from bot.tools.mcp.elicitation.store import QuestionRecord
from bot.turns.conversations import ConversationRow, ConversationStore
from bot.turns.inbox import Inbox, inbox_key
from bot.turns.runner import TurnRunner
from bot.turns.stop.stopper import TurnStopper
from bot.turns.stop.store import StopRecorded
from bot.upkeep import unfinished_work as upkeep
from bot.upkeep.retention import Housekeeping
from bot.upkeep.unfinished_store import UpkeepStore

log = logging.getLogger(__name__)


class ShuttingDownError(CountersignError):
    """The bot is stopping and takes no new work."""


class Countersign:
    """The core service.

    Args:
        runner: runs and resumes graphs.
        decider: records decisions.
        approvals: the approvals tables.
        conversations: the conversations table.
        inbox: accepted messages until they are handled.
        upkeep_store: finds unfinished work for the upkeep.
        locks: per-thread mutual exclusion.
        escalation: the escalation sweeper (started and stopped with the service).
        tasks: the background work shutdown drains (`tasks`); card redraws run there too
            (`bot.reviews.cards.CardDesk`).
        platforms: the platforms this process serves (`ConversationRef.platform` names, read
            when used; the adapters' `Platform`s by name will do). The upkeep, the expiry and
            recovery take only their work: another platform's is left to the processes that
            serve it (docs/decisions/0031).
        housekeeping: checkpoint pruning and retention, run by the upkeep (None: not run).
        also_start: more background work to start with the sweepers, once the platforms are
            registered (the MCP servers' supervisors, whose admins' messages need them).
        stopper: the Stop use case.
    """

    def __init__(
        self,
        *,
        runner: TurnRunner,
        decider: Decider,
        approvals: ApprovalStore,
        conversations: ConversationStore,
        inbox: Inbox,
        upkeep_store: UpkeepStore,
        locks: ThreadLocks,
        stopper: TurnStopper,
        escalation: EscalationSweeper,
        tasks: TaskTracker,
        platforms: Collection[str],
        housekeeping: Housekeeping | None = None,
        also_start: Sequence[Callable[[], None]] = (),
    ) -> None:
        self._runner = runner
        self._decider = decider
        self._approvals = approvals
        self._conversations = conversations
        self._inbox = inbox
        self._upkeep_store = upkeep_store
        self._locks = locks
        self.tasks = tasks
        self._platforms = platforms
        self.expiry = ExpirySweeper(approvals, self._after_expiry, platforms=platforms)
        self.escalation = escalation
        self.housekeeping = housekeeping
        self._also_start = tuple(also_start)
        self.upkeep = upkeep.Upkeep(
            upkeep_store, inbox, self.tend, self.tasks, platforms=platforms, housekeeping=housekeeping
        )
        runner.on_new_expiry = self.expiry.wake
        self.question_expiry = (
            QuestionExpiry(runner.questions, self._after_question, platforms=platforms)
            if runner.questions is not None
            else None
        )
        if runner.questions is not None and self.question_expiry is not None:
            runner.questions.on_new_expiry = self.question_expiry.wake
        self._stopper = stopper
        stopper.on_stopped = self._after_stop
        runner.on_new_escalation = escalation.wake
        if housekeeping is not None:
            # Retention expires idle conversations' cards through the usual expiry path.
            housekeeping.on_cards_expiring = self.expiry.wake

    async def knows_conversation(self, conversation: ConversationRef) -> bool:
        """Whether the bot already takes part in `conversation` (e.g. a Slack thread)."""
        return await self._conversations.exists(conversation.thread_id)

    def submit_message(self, message: IncomingMessage) -> None:
        """Handle `message` in the background (adapters acknowledge the platform first).

        Raises:
            ShuttingDownError: when the bot is stopping.
        """
        if self.tasks.closing:
            raise ShuttingDownError("shutting down")
        self.tasks.spawn(self.handle_message(message), name=f"message {message.conversation.thread_id}")

    async def handle_message(self, message: IncomingMessage) -> None:
        """Accept a message and handle it (`claim`, then `handle_accepted`)."""
        if await self.claim(message):
            await self.handle_accepted(message)

    async def claim(self, message: IncomingMessage) -> bool:
        """`accept`, telling the sender when the message cannot even be accepted; whether to handle it.

        When the database is down, the sender is told (`TurnFailed`) and nothing is claimed: a
        platform's retry of the message is handled as new.
        """
        try:
            return await self.accept(message)
        except Exception:
            with about(message.conversation.thread_id):
                log.exception("accepting a message failed")
                await self._runner.notify(
                    message.conversation,
                    TurnFailed(
                        thread_id=message.conversation.thread_id, message=message.text, message_id=message.message_id
                    ),
                    recipient=message.actor,
                )
            return False

    async def accept(self, message: IncomingMessage) -> bool:
        """Claim a message in the inbox; return whether it is new and is to be handled.

        A message with a platform id is claimed atomically, so a repeated delivery (a
        platform's retry, the same message seen as a mention and as a thread reply, another
        replica) never starts a second turn. Adapters whose platform delivers again what was
        not acknowledged (Slack) call this before acknowledging: the claim then stands for a
        message the platform will not send again, and a live replica handles it whatever
        happens to this process. A repeated delivery of a message still unhandled (its
        handler died) has it handled now, in the background.

        Raises:
            Exception: the database's, when the claim cannot be written (nothing is claimed).
        """
        key = inbox_key(message)
        if key is None:
            return True
        earlier = await self._inbox.accept(key, message)
        if earlier is None:
            return True
        log.info("repeated delivery of %s (%s) ignored (thread_id=%s)", key, earlier, message.conversation.thread_id)
        if earlier == "accepted" and not self.tasks.closing:
            self.tasks.spawn(self.tend(message.conversation.thread_id), name=f"tend {message.conversation.thread_id}")
        return False

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
        """Handle a message `accept` took: under the conversation's lock, unless handled meanwhile.

        A message in a conversation with a pending review is not fed to the graph (it would
        break the tool-call history); the sender is told, with the pending cards (DESIGN.md
        "Approvals"). The message counts as handled once its sender was answered, refused, or
        told of an error; one that is not (the process died, or even the error could not be
        told) is handled by the upkeep of a live replica.
        """
        conversation = message.conversation
        key = inbox_key(message)
        with about(conversation.thread_id, event_id=message.message_id):
            try:
                async with self._locks.hold(conversation.thread_id):
                    await self._handle(message, key)
            except LockLostError:
                # The run was stopped where it stood; the upkeep finishes it under a new lock.
                log.warning("the conversation's lock was lost while handling %s", key or "a message")

    async def _handle(self, message: IncomingMessage, key: str | None, *, older_first: bool = True) -> None:
        """Handle an accepted message; callers hold the conversation's lock.

        Older messages of the conversation still unhandled (a handler died, or their answer
        could not be posted) are handled first, in order: a handled-again message is recognised
        by its turn in the checkpoint (`TurnRunner.message_in_state`), which this message's
        turn could fold into the summary, and the message would then be asked again.

        A message past its last attempt (`upkeep.MAX_ATTEMPTS`), or one that arrived more than
        `upkeep.ANSWER_WITHIN_S` ago, is given up instead, and so is one whose handling fails
        here: its sender is told once, and nothing answers it afterwards (`_give_up`), unless its
        turn had its outcome before a fault kept it from being recorded handled.
        """
        conversation = message.conversation
        attempts = 1
        if key is not None:
            begun = await self._inbox.begin(key, first_retry_s=upkeep.FIRST_RETRY_S, max_retry_s=upkeep.MAX_DELAY_S)
            if begun is None:
                return  # handled meanwhile (the upkeep, or a replica that had the lock first)
            attempts = begun.attempts
            if begun.behind and older_first:
                for entry in await self._inbox.unhandled(conversation.thread_id):
                    if entry.key == key:
                        break  # the older ones are done; newer ones wait for their own handlers
                    await self._handle(entry.message, entry.key, older_first=False)
            if attempts > upkeep.MAX_ATTEMPTS:
                log.error("giving up on message %s after %d attempts", key, attempts - 1)
                await self._give_up(message, key)
                return
            if begun.waited_s > upkeep.ANSWER_WITHIN_S:
                log.error("giving up on message %s: it arrived %d minutes ago", key, begun.waited_s // 60)
                await self._give_up(message, key)
                return
        try:
            row = await self._conversations.touch(conversation)
            handled = await self._answer(message, key, again=attempts > 1, row=row)
        except asyncio.CancelledError:
            if key is not None:
                await self._cut_at_shutdown(self._inbox.uncount(key))
            raise
        except Exception:
            log.exception("handling a message failed")
            await self._give_up(message, key, retry_untold=True)
            return
        if key is not None and handled:
            try:
                await self._inbox.handled(key)
            except Exception:
                # Its outcome is out: an error now must not become a second one
                # (docs/decisions/0038-one-outcome-per-message.md).
                log.exception("could not record message %s as handled; its turn tells it later", key)

    async def _give_up(self, message: IncomingMessage, key: str | None, *, retry_untold: bool = False) -> None:
        """Give a message up: record it, with its turn's run, as given up; then tell its sender, once.

        One outcome per message (docs/decisions/0038-one-outcome-per-message.md): the record
        comes first (`Inbox.give_up`), so that no later attempt answers a message whose sender
        was told it could not be; when it cannot be written (the database is down), nobody is
        told now and the message stays for the upkeep, which tries it again silently. A message
        another handler finished meanwhile is left alone. A message whose turn already ran to
        its outcome (answered, its cards posted, or its failure told) before its handling could
        be recorded (the database dropped right after) is recorded as handled instead, and
        nobody is told (`_answered_before`). A message without a platform id has no record; its
        sender is told.

        Args:
            message: the message.
            key: its inbox key (None: it has no platform id).
            retry_untold: when the notice cannot be sent, take the give-up back so that the
                message is tried again (this attempt failed, it was not the last one).
        """
        conversation = message.conversation
        given = None
        if key is not None:
            try:
                if await self._answered_before(message, key):
                    log.warning("message %s had its outcome before it could be recorded; now recorded as handled", key)
                    await self._inbox.handled(key)
                    return
                given = await self._inbox.give_up(key)
            except Exception:
                log.exception("could not record message %s as given up or handled; it is tried again, nobody told", key)
                return
            if given is None:
                return  # finished meanwhile (another handler answered it or told its sender)
        failed = TurnFailed(thread_id=conversation.thread_id, message=message.text, message_id=message.message_id)
        told = await self._runner.notify(conversation, failed, recipient=message.actor)
        if not told and retry_untold and given is not None:
            try:
                await self._inbox.take_back(given)
            except Exception:
                log.exception("could not take back the give-up of message %s, whose sender was not told", key)

    async def _answered_before(self, message: IncomingMessage, key: str) -> bool:
        """Whether the message's turn already ran to its outcome, although the message is still `accepted`.

        Its outcome was out (its answer or cards posted, or its failure told), then the
        database dropped before `Inbox.handled` could record it, and stayed down: the message
        is handled again later, or given up once it is over `upkeep.ANSWER_WITHIN_S` old or
        past its attempts. Its turn is in the checkpoint (`TurnRunner.message_in_state`, the
        check a message handled again makes before asking the model) and the conversation's
        marked run is not that turn's (a run still marked for it has an outcome that may not
        be out: giving the message up gives that run up too). A checkpoint that cannot be read
        (the checkpointer failing while the rest of the database answers) counts as not
        answered: the message is given up, as before this check. Call it under the
        conversation's lock.

        Raises:
            Exception: the database's, when the conversation's row cannot be read.
        """
        if message.message_id is None or await self._conversations.run_message(message.conversation.thread_id) == key:
            return False
        try:
            return await self._runner.message_in_state(message.conversation, message.message_id)
        except Exception:
            log.warning("could not read the checkpoint for message %s; it is taken as unanswered", key, exc_info=True)
            return False

    async def _answer(self, message: IncomingMessage, key: str | None, *, again: bool, row: ConversationRow) -> bool:
        """Settle the conversation and run the message's turn; return whether its outcome is out.

        Args:
            message: the message.
            key: its inbox key, recorded with its turn (`TurnRunner.ask`).
            again: its handling began before (a fault interrupted it): if its turn already
                started, `settle` finished that turn (or cleared it, given up), and it is not
                asked again.
            row: the conversation's row as `touch` just returned it (under the lock).
        """
        conversation = message.conversation
        settled = await self._runner.settle(conversation, row)
        if again and message.message_id and await self._runner.message_in_state(conversation, message.message_id):
            return True
        if settled.blocked:
            return await self._runner.notify(
                conversation,
                ReviewPending(approvals=settled.approvals, questions=settled.questions),
                recipient=message.actor,
            )
        agent = await self._runner.choose_agent(conversation, row)
        outcome = await self._runner.ask(
            conversation,
            message.text,
            requester=message.actor,
            anchor=message.message_id,
            agent=agent,
            message_key=key,
        )
        return outcome.delivered

    async def tend(self, thread_id: str) -> bool:
        """Finish what a fault left unfinished in one conversation, unless someone is at work there.

        Under the conversation's lock (only if it is free now): gives up the messages that
        arrived more than `upkeep.ANSWER_WITHIN_S` ago (before `settle` could finish their
        turns; one whose turn had its outcome already is recorded handled instead, see
        `_give_up`), counts the attempt, then lets `settle` resume claimed reviews and deliver or
        finish an unfinished run, then handles the messages the inbox still holds, oldest first.
        After `upkeep.MAX_ATTEMPTS` the unfinished run is given up and no later message restarts
        it; who is told is told once: the sender of the message whose turn it was, else the
        conversation. Called by the upkeep (`bot.upkeep.unfinished_work.Upkeep`) of every replica.

        Returns:
            Whether it worked on the conversation (False: its lock was held).
        """
        conversation = ConversationRef.from_thread_id(thread_id)
        with about(thread_id):
            async with self._locks.try_hold(thread_id) as held:
                if not held:
                    return False
                waiting = await self._inbox.unhandled(thread_id)
                for entry in waiting:
                    if entry.waited_s > upkeep.ANSWER_WITHIN_S:
                        log.error("giving up on message %s: it arrived %d minutes ago", entry.key, entry.waited_s // 60)
                        await self._give_up(entry.message, entry.key)
                attempts = await self._upkeep_store.count_attempt(
                    thread_id, first_retry_s=upkeep.FIRST_RETRY_S, max_retry_s=upkeep.MAX_DELAY_S
                )
                try:
                    if attempts > upkeep.MAX_ATTEMPTS:
                        log.error("giving up on finishing interrupted work after %d attempts", attempts - 1)
                        owner = await self._conversations.run_message(thread_id)
                        for entry in waiting:
                            if entry.key == owner:  # the run is its turn: its sender is told, once
                                await self._give_up(entry.message, entry.key)
                        await self._runner.give_up(conversation)
                    elif attempts:
                        log.info("finishing interrupted work (attempt %d)", attempts)
                        await self._runner.settle(conversation)
                except asyncio.CancelledError:
                    if attempts:
                        await self._cut_at_shutdown(self._upkeep_store.uncount_attempt(thread_id))
                    raise
                for entry in await self._inbox.unhandled(thread_id):
                    await self._handle(entry.message, entry.key, older_first=False)  # oldest first already
        return True

    async def _cut_at_shutdown(self, uncount: Coroutine[Any, Any, None]) -> None:
        """Take back an attempt when shutdown cancelled the work it counted (see `UpkeepStore.uncount_attempt`).

        Only a drain cancels the service's work (`TaskTracker.drain`); the write is shielded
        from a second cancel, and its failure is logged (the attempt then stays counted).
        """
        if not self.tasks.closing:
            uncount.close()
            return
        try:
            await asyncio.shield(uncount)
        except Exception:
            log.exception("could not take back the attempt at work cut by the shutdown")

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
        self.tasks.spawn(self._after_question(record), name=f"answered {record.thread_id}")

    async def question(self, question_id: str) -> QuestionRecord:
        """The question with this id, as stored now.

        Raises:
            QuestionNotFoundError: no such question.
        """
        return await self._desk().get(question_id)

    async def open_questions(self, conversation: ConversationRef) -> list[QuestionRecord]:
        """The conversation's questions still waiting for their requester, oldest first."""
        desk = self._runner.questions
        return await desk.blocking(conversation.thread_id) if desk is not None else []

    def _desk(self) -> QuestionDesk:
        """The question desk.

        Raises:
            QuestionNotFoundError: none is wired (no question can exist).
        """
        if self._runner.questions is None:
            raise QuestionNotFoundError("(no questions here)")
        return self._runner.questions

    async def _after_question(self, record: QuestionRecord) -> None:
        """Show what became of a question, then resume its conversation (its pause, once all are answered)."""
        if self._runner.questions is not None:
            await self._runner.questions.redraw(record)
        await self._resume(record.thread_id)

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
        self.tasks.spawn(self._after_decision(result), name=f"decided {result.approval.thread_id}")
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
            self.tasks.spawn(self._after_decision(result), name=f"decided {result.approval.thread_id}")
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

    async def _after_expiry(self, result: DecideResult) -> None:
        approval = result.approval
        await self._runner.tell_expired(approval)
        self.tasks.spawn(self._after_decision(result), name=f"expired {approval.thread_id}")

    def _after_stop(self, recorded: StopRecorded) -> None:
        """Redraw the cards a stop closed and resume their pauses, in the background.

        While the bot is stopping, the resume is left to the upkeep (the reviews are claimed
        with a retry time, as after a decision).
        """
        if self.tasks.closing:
            return
        thread_id = recorded.turn.thread_id
        self.tasks.spawn(self._finish_stop(recorded), name=f"stopped {thread_id}")

    async def _finish_stop(self, recorded: StopRecorded) -> None:
        """Redraw the closed cards, then resume once they show it (`CardDesk.redraw`).

        A turn stopped while a decision of it waited for its resume is resumed too, now: the
        resume answers its calls as stopped, and a pause whose resume failed every attempt is
        given up instead (`TurnRunner.resume`), so a stop frees a conversation stuck on one.
        """
        desk = self._runner.questions
        questions = await desk.stop(recorded.turn.thread_id, None) if desk is not None else []
        if questions and desk is not None:  # a stopped turn's questions are answered `cancel`
            await desk.redraw(*questions)
        if recorded.claimed or recorded.turn.resuming or questions:
            await self._runner.redraw_cards(*recorded.closed)
            await self._resume(recorded.turn.thread_id)
        else:
            await self._runner.redraw_cards(*recorded.closed, wait_s=0)

    async def _after_decision(self, result: DecideResult) -> None:
        """Redraw the card; when the review is complete, resume the thread once it shows the decision.

        The resume waits for the redraw at most `bot.reviews.cards.REDRAW_WAIT_S` (`CardDesk.redraw`).
        """
        if result.review_complete:
            await self._runner.redraw_cards(result.approval)
            await self._resume(result.approval.thread_id, anchor=result.approval.card_ref)
        else:
            await self._runner.redraw_cards(result.approval, wait_s=0)

    async def _resume(self, thread_id: str, *, anchor: str | None = None) -> None:
        """Resume the thread's claimed reviews, unless someone else already did."""
        conversation = ConversationRef.from_thread_id(thread_id)
        with about(thread_id):
            async with self._locks.hold(thread_id):
                # A message handler or another replica may have resumed them meanwhile.
                await self._runner.resume(conversation, anchor=anchor)
