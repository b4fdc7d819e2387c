"""What the model sees of a conversation, for `/countersign context [reset]`: describe and reset.

`describe` reads the conversation's checkpoint: the running summary, the messages kept
verbatim, and the estimate `bot.turns.context.window` holds against the budget. `reset`
empties the model's view: every message and the summary leave the graph state, written as an
update by `llm_call` (`RemoveMessage(REMOVE_ALL_MESSAGES)`), so the graph stands at its end
with nothing pending and the next message starts a fresh turn (`should_continue` ends on an
empty history). Older checkpoints, the audit log, approvals and the tool-run ledger are kept.

A reset happens only under the conversation's lock, taken without waiting (a running turn is
not queued behind), and only at rest: never while a card waits (its calls must stay in the
history the graph resumes), a turn runs, a decision waits for its resume, a message waits in
the inbox, or a run cut short by a fault is still unfinished (`bot.turns.runner.TurnRunner.settle`
finishes it first). A decided pause whose resume failed every attempt does not keep it busy:
the reset gives it up first (`TurnRunner.give_up_spent`; its requester is told).
"""

from __future__ import annotations

import logging
from typing import Any

from langchain_core.messages import RemoveMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.types import StateSnapshot

from bot.admin.views import ContextReset, ContextView
from bot.agents.history import unanswered_tool_calls
from bot.base.agent_kind import AgentKind
from bot.base.conversation import ConversationRef
from bot.base.errors import BusyReason, ConversationBusyError
from bot.reviews.store import ApprovalStore
from bot.storage.locks import ThreadLocks
from bot.turns.context.window import view_tokens
from bot.turns.conversations import ConversationStore
from bot.turns.inbox import Inbox
from bot.turns.runner import TurnRunner

log = logging.getLogger(__name__)

RESET_AS_NODE = "llm_call"
"""The node a reset is written as: both agents' graphs have it, and from it `should_continue`
ends the graph when the history is empty, so nothing is left to run."""


class ContextKeeper:
    """Describes and resets conversations' graph state (`bot.admin.service.ContextPort`).

    Args:
        runner: finds each conversation's graph and run config.
        approvals: pending approvals (a reset waits for them).
        conversations: the agent of each conversation, and runs whose outcome is still due.
        inbox: messages accepted and not yet answered.
        locks: the conversations' locks, the same instance the service holds.
        budget_tokens: the context window (`COUNTERSIGN_CONTEXT_TOKENS`).
    """

    def __init__(
        self,
        *,
        runner: TurnRunner,
        approvals: ApprovalStore,
        conversations: ConversationStore,
        inbox: Inbox,
        locks: ThreadLocks,
        budget_tokens: int,
    ) -> None:
        self._runner = runner
        self._approvals = approvals
        self._conversations = conversations
        self._inbox = inbox
        self._locks = locks
        self._budget_tokens = budget_tokens

    async def describe(self, conversation: ConversationRef) -> ContextView:
        """What the model sees of `conversation` now.

        Read without the conversation's lock: a running turn may change it the next moment.
        """
        state = await self._state(conversation)
        return await self._view(conversation, state)

    async def reset(self, conversation: ConversationRef) -> ContextReset:
        """Remove every message and the summary from the conversation's graph state.

        The older checkpoints that still hold them are pruned by the upkeep's next pass
        (`bot.upkeep.retention`, within about 10 s).

        Args:
            conversation: the conversation.

        Returns:
            The view before the reset, and whether anything was removed (not when the
            conversation has no state, or an empty one: nothing is written then).

        Raises:
            ConversationBusyError: `REVIEW_PENDING` while a card waits, `TURN_RUNNING` while
                the conversation's lock is held, a decision waits for its resume, a message
                waits to be answered, a run's outcome is still due, or a tool round was cut
                short; nothing was changed. (A model step left pending by a failed model call
                does not block a reset, nor does a pause whose resume failed every attempt:
                it is given up first.)
        """
        thread_id = conversation.thread_id
        async with self._locks.try_hold(thread_id) as held:
            if not held:
                raise ConversationBusyError(BusyReason.TURN_RUNNING)
            await self._runner.give_up_spent(conversation)
            state = await self._state(conversation)
            before = await self._view(conversation, state)
            if not before.exists or before.is_empty:
                return ContextReset(before=before, changed=False)
            if await self._approvals.pending_in_thread(thread_id):
                raise ConversationBusyError(BusyReason.REVIEW_PENDING)
            if state.interrupts:  # every card is decided: the resume is due
                raise ConversationBusyError(BusyReason.TURN_RUNNING)
            # A model step left pending by a failed model call is not work under way (the
            # message waits for the next one); a tool round cut short is, until settle ends it.
            if (
                (state.next and unanswered_tool_calls(state.values.get("messages", [])))
                or await self._conversations.unfinished_run(thread_id)
                or await self._inbox.unhandled(thread_id)
            ):
                raise ConversationBusyError(BusyReason.TURN_RUNNING)
            graph = await self._runner.graph_for(conversation)
            await graph.aupdate_state(
                self._runner.config(conversation),
                {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES)], "summary": "", "review_plan": {}},
                as_node=RESET_AS_NODE,
            )
            # The earlier messages stay in older checkpoints until the upkeep prunes them.
            await self._conversations.prune_soon(thread_id)
            log.info(
                "context reset: %d messages and a summary of %d characters removed (thread_id=%s)",
                before.messages,
                len(before.summary),
                thread_id,
            )
            return ContextReset(before=before)

    async def _state(self, conversation: ConversationRef) -> StateSnapshot:
        graph = await self._runner.graph_for(conversation)
        return await graph.aget_state(self._runner.config(conversation))

    async def _view(self, conversation: ConversationRef, state: StateSnapshot) -> ContextView:
        thread_id = conversation.thread_id
        if state.created_at is None:  # no checkpoint: the graph never ran here
            return ContextView(thread_id=thread_id, exists=False, budget_tokens=self._budget_tokens)
        values: dict[str, Any] = dict(state.values or {})
        messages = list(values.get("messages") or [])
        summary = str(values.get("summary") or "")
        return ContextView(
            thread_id=thread_id,
            exists=True,
            # A conversation from before agents could be chosen is the ReAct agent's (`graph_for`).
            agent=await self._conversations.agent_of(thread_id) or AgentKind.REACT,
            summary=summary,
            messages=len(messages),
            tokens=view_tokens(messages, summary=summary, scale=float(values.get("token_scale") or 1.0)),
            budget_tokens=self._budget_tokens,
        )
