"""What follows a decision, an expiry, a stop or an answer: the card redrawn, then the pause resumed.

The decision itself is recorded elsewhere (`bot.reviews.decide`, `bot.reviews.expiry`,
`bot.turns.stop.stopper`, `bot.tools.mcp.elicitation.desk`); this redraws what it changed and,
once a pause has every decision (or answer) it waits for, resumes the thread under its lock.
"""

from __future__ import annotations

from bot.base.conversation import ConversationRef
from bot.base.log_context import about
from bot.base.tasks import TaskTracker
from bot.reviews.records import DecideResult
from bot.storage.locks import ThreadLocks
from bot.tools.mcp.elicitation.desk import QuestionDesk
from bot.tools.mcp.elicitation.store import QuestionRecord
from bot.turns.runner import TurnRunner
from bot.turns.stop.store import StopRecorded


class Resumes:
    """Redraws and resumes after decisions, expiries, stops and answers.

    Args:
        runner: redraws cards, tells of expiries and resumes threads.
        locks: per-thread mutual exclusion (a resume runs under the conversation's lock).
        tasks: the background work shutdown drains (a stop's follow-up runs there).
        questions: the MCP servers' questions (None: none are asked here).
    """

    def __init__(
        self, *, runner: TurnRunner, locks: ThreadLocks, tasks: TaskTracker, questions: QuestionDesk | None
    ) -> None:
        self._runner = runner
        self._locks = locks
        self._tasks = tasks
        self._questions = questions

    async def after_question(self, record: QuestionRecord) -> None:
        """Show what became of a question, then resume its conversation (its pause, once all are answered)."""
        if self._questions is not None:
            await self._questions.redraw(record)
        await self.resume(record.thread_id)

    async def after_expiry(self, result: DecideResult) -> None:
        """Tell the conversation a card expired, then follow the expiry up as a decision (`after_decision`)."""
        approval = result.approval
        await self._runner.tell_expired(approval)
        self._tasks.spawn(self.after_decision(result), name=f"expired {approval.thread_id}")

    def after_stop(self, recorded: StopRecorded) -> None:
        """Redraw the cards a stop closed and resume their pauses, in the background.

        While the bot is stopping, the resume is left to the upkeep (the reviews are claimed
        with a retry time, as after a decision).
        """
        if self._tasks.closing:
            return
        thread_id = recorded.turn.thread_id
        self._tasks.spawn(self._finish_stop(recorded), name=f"stopped {thread_id}")

    async def _finish_stop(self, recorded: StopRecorded) -> None:
        """Redraw the closed cards, then resume once they show it (`CardDesk.redraw`).

        A turn stopped while a decision of it waited for its resume is resumed too, now: the
        resume answers its calls as stopped, and a pause whose resume failed every attempt is
        given up instead (`TurnRunner.resume`), so a stop frees a conversation stuck on one.
        """
        desk = self._questions
        questions = await desk.stop(recorded.turn.thread_id, None) if desk is not None else []
        if questions and desk is not None:  # a stopped turn's questions are answered `cancel`
            await desk.redraw(*questions)
        if recorded.claimed or recorded.turn.resuming or questions:
            await self._runner.redraw_cards(*recorded.closed)
            await self.resume(recorded.turn.thread_id)
        else:
            await self._runner.redraw_cards(*recorded.closed, wait_s=0)

    async def after_decision(self, result: DecideResult) -> None:
        """Redraw the card; when the review is complete, resume the thread once it shows the decision.

        The resume waits for the redraw at most `bot.reviews.cards.REDRAW_WAIT_S` (`CardDesk.redraw`).
        """
        if result.review_complete:
            await self._runner.redraw_cards(result.approval)
            await self.resume(result.approval.thread_id, anchor=result.approval.card_ref)
        else:
            await self._runner.redraw_cards(result.approval, wait_s=0)

    async def resume(self, thread_id: str, *, anchor: str | None = None) -> None:
        """Resume the thread's claimed reviews, unless someone else already did."""
        conversation = ConversationRef.from_thread_id(thread_id)
        with about(thread_id):
            async with self._locks.hold(thread_id):
                # A message handler or another replica may have resumed them meanwhile.
                await self._runner.resume(conversation, anchor=anchor)
