"""The use cases: a message arrives; a decision arrives. Adapters call only this.

`Countersign` is platform-free: an adapter hands it an authenticated `Actor`, a
`ConversationRef` and text or a decision, and renders what comes back through its `Platform`.
"""

from __future__ import annotations

import logging

from bot.approvals.decisions import Approve, Edit, Reject
from bot.approvals.lifecycle import ReviewStatus
from bot.approvals.records import ApprovalRecord, DecideResult
from bot.conversation import Actor, ConversationRef, IncomingMessage
from bot.deciding import Decider
from bot.errors import CountersignError
from bot.expiry import ExpirySweeper
from bot.log_context import about
from bot.ports import ApprovalExpired, ReviewPending
from bot.storage.approval_store import ApprovalStore
from bot.storage.conversation_store import ConversationStore
from bot.storage.locks import ThreadLocks
from bot.tasks import TaskTracker
from bot.turns import TurnRunner

log = logging.getLogger(__name__)


class ShuttingDownError(CountersignError):
    """The bot is stopping and takes no new work."""


class Countersign:
    """The core service.

    Args:
        runner: runs and resumes graphs.
        decider: records decisions.
        approvals: the approvals tables.
        conversations: conversations and processed events.
        locks: per-thread mutual exclusion.
    """

    def __init__(
        self,
        *,
        runner: TurnRunner,
        decider: Decider,
        approvals: ApprovalStore,
        conversations: ConversationStore,
        locks: ThreadLocks,
    ) -> None:
        self._runner = runner
        self._decider = decider
        self._approvals = approvals
        self._conversations = conversations
        self._locks = locks
        self.tasks = TaskTracker()
        self.expiry = ExpirySweeper(approvals, decider.audit, self._after_expiry)
        runner.on_new_expiry = self.expiry.wake

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
        """Feed a message to the conversation's agent, unless a review is pending there.

        A repeated delivery of the same platform message (a retry, or the same message as a
        mention and as a thread reply) is dropped. A message in a conversation with a pending
        review is not fed to the graph (it would break the tool-call history); the sender is
        told, with the pending cards (DESIGN.md "Approvals").
        """
        conversation = message.conversation
        if message.message_id is not None:
            key = f"{conversation.thread_id}:{message.message_id}"
            if not await self._conversations.first_delivery(key):
                log.info("duplicate delivery of %s ignored (thread_id=%s)", key, conversation.thread_id)
                return
        with about(conversation.thread_id):
            await self._handle(message)

    async def _handle(self, message: IncomingMessage) -> None:
        conversation = message.conversation
        await self._conversations.touch(conversation)
        async with self._locks.hold(conversation.thread_id):
            settled = await self._runner.settle(conversation)
            if settled.blocked:
                await self._runner.notify(
                    conversation, ReviewPending(approvals=settled.approvals), recipient=message.actor
                )
                return
            await self._runner.choose_agent(conversation)
            await self._runner.ask(conversation, message.text, requester=message.actor, anchor=message.message_id)

    async def pending_approvals(self, conversation: ConversationRef) -> list[ApprovalRecord]:
        """Undecided approvals of a conversation, oldest first."""
        return await self._approvals.pending_in_thread(conversation.thread_id)

    async def approval(self, approval_id: str) -> ApprovalRecord:
        """The approval with this id (for an adapter prefilling an edit form).

        Raises:
            ApprovalNotFoundError: no such approval.
        """
        return await self._decider.approval(approval_id)

    async def check_decider(self, approval_id: str, actor: Actor, *, attempted: str) -> ApprovalRecord:
        """Check, without deciding, that `actor` may take an `attempted` decision.

        Adapters call this before opening an Edit (`attempted="edit"`) or Reject
        (`attempted="reject"`) form, so a refused clicker is told at once. Refusals are audited.

        Raises:
            ApprovalNotFoundError, AlreadyDecidedError, NotPermittedError.
        """
        return await self._decider.check(approval_id, actor, attempted=attempted)

    async def decide(
        self, approval_id: str, actor: Actor, decision: Approve | Edit | Reject, *, seen_version: str | None = None
    ) -> ApprovalRecord:
        """Validate, authorise and record one decision; resume the graph once all are in.

        The one entry point for decisions, for every adapter.

        Args:
            approval_id: the approval the button or form named.
            actor: the authenticated clicker.
            decision: `Approve()`, `Edit(edited_action=EditedAction(name=<the approval's
                tool>, args=...))` or `Reject(message=...)` (`bot.approvals.decisions`).
            seen_version: the version tag on the clicked card (see `ApprovalRecord.version`).

        Returns:
            The approval as now stored; still pending when a quorum waits for more approvals.
            The card is redrawn in the background and, when this decision was the last of its
            pause, that pause resumes after it (the other pauses of the thread wait for theirs).

        Raises:
            ApprovalNotFoundError: unknown id.
            AlreadyDecidedError: decided before (by someone else, the same person, or another
                replica); nothing changed.
            AlreadyVotedError: this person already approved these arguments (quorum).
            NotPermittedError: the actor may not decide it; nothing changed.
            InvalidDecisionError: the decision does not fit the action; nothing changed and
                the card stays usable.
        """
        result = await self._decider.decide(approval_id, actor, decision, seen_version=seen_version)
        # The card and the resume happen after the caller has its answer: an adapter must
        # acknowledge the platform within seconds (Slack and Discord: 3 s).
        self.tasks.spawn(self._after_decision(result), name=f"decided {result.approval.thread_id}")
        return result.approval

    def start(self) -> None:
        """Start background work: the expiry sweeper. Call once the platforms are registered."""
        self.expiry.start()

    async def recover(self) -> None:
        """After a start: resume reviews that were claimed but not finished before a stop.

        Cards that wait for a tool or subagent the configuration no longer has are logged as
        warnings: approving them records a rejection (see `Decider.can_still_run`).
        """
        for approval in await self._approvals.pending_everywhere():
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
        threads = dict.fromkeys(review.thread_id for review in await self._approvals.reviews_in(ReviewStatus.RESUMING))
        for thread_id in threads:
            log.info("resuming reviews left over from before (thread_id=%s)", thread_id)
            self.tasks.spawn(self._resume(thread_id), name=f"recover {thread_id}")

    async def aclose(self, grace_s: float) -> None:
        """Stop taking work and let in-flight turns reach a checkpoint (up to `grace_s`)."""
        await self.expiry.stop()
        await self.tasks.drain(grace_s)

    async def _after_expiry(self, result: DecideResult) -> None:
        approval = result.approval
        conversation = ConversationRef.from_thread_id(approval.thread_id)
        requester = Actor(
            platform=conversation.platform,
            workspace_id=conversation.workspace_id,
            user_id=approval.requester_id,
            display_name=approval.requester_name,
        )
        await self._runner.notify(conversation, ApprovalExpired(approval=approval), recipient=requester)
        self.tasks.spawn(self._after_decision(result), name=f"expired {approval.thread_id}")

    async def _after_decision(self, result: DecideResult) -> None:
        await self._runner.refresh_card(result.approval)
        if result.review_complete:
            await self._resume(result.approval.thread_id, anchor=result.approval.card_ref)

    async def _resume(self, thread_id: str, *, anchor: str | None = None) -> None:
        """Resume the thread's claimed reviews, unless someone else already did."""
        conversation = ConversationRef.from_thread_id(thread_id)
        with about(thread_id):
            async with self._locks.hold(thread_id):
                # A message handler or another replica may have resumed them meanwhile.
                await self._runner.resume(conversation, anchor=anchor)
