"""Incoming messages from their acceptance to their outcome, and the work a fault left unfinished.

A message is claimed in the inbox (`accept`), then handled under its conversation's lock: its
conversation settled, its turn run, its outcome recorded, or the message given up with its
sender told once (docs/decisions/0038-one-outcome-per-message.md). `tend` finishes what a fault
interrupted; the upkeep (`bot.upkeep.unfinished_work.Upkeep`) calls it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from bot.base.conversation import ConversationRef, IncomingMessage
from bot.base.log_context import about
from bot.base.tasks import TaskTracker
from bot.ports import ReviewPending, TurnFailed
from bot.storage.locks import LockLostError, ThreadLocks
from bot.turns.conversations import ConversationRow, ConversationStore
from bot.turns.inbox import Inbox, inbox_key
from bot.turns.runner import TurnRunner
from bot.upkeep import unfinished_work as upkeep
from bot.upkeep.unfinished_store import UpkeepStore

log = logging.getLogger(__name__)


class Messages:
    """Handles accepted messages and tends unfinished work, one conversation at a time.

    Args:
        runner: settles conversations and runs turns.
        conversations: the conversations table.
        inbox: accepted messages until they are handled.
        upkeep_store: counts the attempts at unfinished work.
        locks: per-thread mutual exclusion.
        tasks: the background work shutdown drains (a repeated delivery's `tend` runs there).
    """

    def __init__(
        self,
        *,
        runner: TurnRunner,
        conversations: ConversationStore,
        inbox: Inbox,
        upkeep_store: UpkeepStore,
        locks: ThreadLocks,
        tasks: TaskTracker,
    ) -> None:
        self._runner = runner
        self._conversations = conversations
        self._inbox = inbox
        self._upkeep_store = upkeep_store
        self._locks = locks
        self._tasks = tasks

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
        if earlier == "accepted" and not self._tasks.closing:
            self._tasks.spawn(self.tend(message.conversation.thread_id), name=f"tend {message.conversation.thread_id}")
        return False

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
        if not self._tasks.closing:
            uncount.close()
            return
        try:
            await asyncio.shield(uncount)
        except Exception:
            log.exception("could not take back the attempt at work cut by the shutdown")
