"""Running the graph for one conversation and delivering what comes out.

Callers hold the conversation's `ThreadLocks` lock around every method here. The checkpoint is
the source of truth: `settle` compares it with our approvals table and repairs what a crash
between the two left behind, before a new message may touch the thread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.errors import GraphRecursionError
from langgraph.types import Command, Interrupt

from bot.agents.history import unanswered_tool_calls
from bot.agents.pool import AgentPool
from bot.approvals.config import ApproverKind, CardRouting, WorkspaceConfig
from bot.approvals.decisions import validate_decisions
from bot.approvals.records import ApprovalRecord, NewAction, ReviewRecord, ReviewStatus
from bot.conversation import Actor, ConversationRef
from bot.errors import InvalidDecisionError, ModelError
from bot.ports import ApprovalCard, CardsElsewhere, CardTarget, ModelFailed, Notice, Platform, TurnFailed
from bot.storage.approval_store import ApprovalStore
from bot.storage.config_store import ConfigStore

log = logging.getLogger(__name__)

_MAX_SETTLE_ROUNDS = 4
_AUTHOR = "countersign_author"
"""`HumanMessage.additional_kwargs` key holding who wrote the message (the model never sees it)."""


@dataclass(frozen=True, slots=True)
class Settled:
    """What `TurnRunner.settle` found.

    Attributes:
        blocked: a review (or an interrupt whose review is not in place yet) blocks new input.
        approvals: the pending approvals to point the sender at (may be empty while blocked).
    """

    blocked: bool
    approvals: tuple[ApprovalRecord, ...]


class TurnRunner:
    """Invokes and resumes graphs, opens reviews, posts answers and cards.

    Args:
        agents: the compiled graphs.
        approvals: the approvals tables.
        platforms: adapters by `ConversationRef.platform`.
        tools: registered tools by name (to re-validate decisions before a resume).
        recursion_limit: LangGraph steps per invocation.
        config: the admin configuration (quorum, expiry and card routing of new reviews).
    """

    def __init__(
        self,
        *,
        agents: AgentPool,
        approvals: ApprovalStore,
        platforms: Mapping[str, Platform],
        tools: Mapping[str, BaseTool],
        recursion_limit: int,
        config: ConfigStore,
    ) -> None:
        self._config = config
        self.on_new_expiry: Callable[[], None] | None = None
        """Called when a review with an expiry opens (wakes the expiry sweeper)."""
        self._agents = agents
        self._approvals = approvals
        self._platforms = platforms
        self._tools = tools
        self._recursion_limit = recursion_limit

    def platform(self, conversation: ConversationRef) -> Platform:
        """The adapter serving `conversation`.

        Raises:
            KeyError: when no adapter for that platform is running.
        """
        return self._platforms[conversation.platform]

    def config(self, conversation: ConversationRef) -> RunnableConfig:
        """The run config: the thread id and the step limit."""
        return {
            "configurable": {"thread_id": conversation.thread_id},
            "recursion_limit": self._recursion_limit,
        }

    async def settle(self, conversation: ConversationRef, requester: Actor) -> Settled:
        """Bring the thread to rest before new input; say whether a review still blocks it.

        Repairs, in order: a pause with no stored review (crash before the cards) gets its
        review and cards, attributed to the author of the message that led to it; cards that
        could not be posted are posted again; a review claimed for resuming but not resumed
        (crash after the last click) is resumed, at most once per call; a tool round cut short
        (crash inside the tool node) is finished, the ledger keeping every started call from
        running twice. Whatever happens, a thread whose checkpoint still holds an interrupt is
        reported as blocked: new input on top of an interrupt would drop the reviewed calls.
        """
        graph = self._agents.for_thread(conversation.thread_id)
        resumed: set[str] = set()
        for _ in range(_MAX_SETTLE_ROUNDS):
            state = await graph.aget_state(self.config(conversation))
            messages: list[AnyMessage] = state.values.get("messages", [])
            if state.interrupts:
                interrupt = state.interrupts[0]
                review = await self._approvals.review_for_interrupt(conversation.thread_id, interrupt.id)
                if review is None:
                    # Only the message's own author may be the requester; if it was not stored
                    # (a checkpoint from before authors were kept), nobody is: admins decide.
                    asker = _author_of_last_request(messages, conversation) or _unknown_requester(conversation)
                    await self.open_review(conversation, interrupt, asker, messages)
                    continue
                if review.status is ReviewStatus.PENDING:
                    await self._post_missing_cards(conversation, review)
                    pending = await self._approvals.pending_in_thread(conversation.thread_id)
                    if pending:
                        return Settled(blocked=True, approvals=tuple(pending))
                    continue  # the last decision committed meanwhile: the review is resuming now
                if review.id in resumed:
                    return Settled(blocked=True, approvals=())  # its resume failed; do not loop
                resumed.add(review.id)
                await self.resume(conversation, review, anchor=None)
                continue
            if state.next and unanswered_tool_calls(messages):
                log.warning("finishing an interrupted tool round (thread_id=%s)", conversation.thread_id)
                await self.run(conversation, None, requester=requester, anchor=None)
                continue
            return Settled(blocked=False, approvals=())
        state = await graph.aget_state(self.config(conversation))
        pending = await self._approvals.pending_in_thread(conversation.thread_id)
        return Settled(blocked=bool(state.interrupts) or bool(pending), approvals=tuple(pending))

    async def run(
        self,
        conversation: ConversationRef,
        graph_input: dict[str, Any] | Command[Any] | None,
        *,
        requester: Actor,
        anchor: str | None,
    ) -> bool:
        """Invoke the graph and deliver the outcome; return whether the run reached its end.

        Model and graph failures become notices instead of exceptions: the thread stays usable.
        """
        platform = self.platform(conversation)
        graph = self._agents.for_thread(conversation.thread_id)
        try:
            async with platform.working(conversation, anchor):
                result = await graph.ainvoke(cast(Any, graph_input), self.config(conversation))
        except ModelError as exc:
            log.warning("model failed (thread_id=%s): %s", conversation.thread_id, exc)
            await self.notify(conversation, ModelFailed(kind=exc.kind), recipient=None)
            return False
        except GraphRecursionError:
            # The step guard should make this impossible; if it happens, it is a bug.
            log.exception("recursion limit hit despite the step guard (thread_id=%s)", conversation.thread_id)
            await self.notify(conversation, TurnFailed(thread_id=conversation.thread_id), recipient=None)
            return False
        except Exception:
            log.exception("turn failed (thread_id=%s)", conversation.thread_id)
            await self.notify(conversation, TurnFailed(thread_id=conversation.thread_id), recipient=None)
            return False
        try:
            await self._deliver(conversation, result, requester)
        except Exception:
            # e.g. the database refused to store a review: tell the conversation, do not lose
            # the message task; the next message retries through settle().
            log.exception("delivering the turn failed (thread_id=%s)", conversation.thread_id)
            await self.notify(conversation, TurnFailed(thread_id=conversation.thread_id), recipient=None)
            return False
        return True

    async def ask(self, conversation: ConversationRef, text: str, *, requester: Actor, anchor: str | None) -> None:
        """Run a turn for a new human message; its author is stored with it (see `settle`)."""
        author = {"user_id": requester.user_id, "name": requester.display_name}
        await self.run(
            conversation,
            {"messages": [HumanMessage(content=text, additional_kwargs={_AUTHOR: author})]},
            requester=requester,
            anchor=anchor,
        )

    async def resume(self, conversation: ConversationRef, review: ReviewRecord, *, anchor: str | None) -> None:
        """Resume a review whose approvals are all decided, exactly once.

        If the interrupt is no longer pending, the resume already happened (a crash or a
        shutdown came after it): a run that stopped before its end is finished. The review is
        marked done only when its run reached the end, so a failed resume is tried again by
        the next message (see `settle`).
        """
        graph = self._agents.for_thread(conversation.thread_id)
        requester = _requester(conversation, review)
        state = await graph.aget_state(self.config(conversation))
        pending = [i for i in state.interrupts if i.id == review.interrupt_id]
        if not pending:
            finished = True
            if state.next:
                finished = await self.run(conversation, None, requester=requester, anchor=anchor)
            if finished:
                await self._approvals.complete_review(review.id)
            return
        rows = await self._approvals.approvals_of(review.id)
        decisions = [row.resume_decision() for row in rows]
        try:
            validate_decisions(decisions, pending[0].value, self._tools)
        except InvalidDecisionError as exc:
            # Validated at click time; a tool changed since. The review node fails closed.
            log.error("decision no longer valid, it will count as rejected (thread_id=%s): %s", review.thread_id, exc)
        log.info("resuming review %s (thread_id=%s)", review.id, review.thread_id)
        command: Command[Any] = Command(resume={review.interrupt_id: {"decisions": decisions}})
        if await self.run(conversation, command, requester=requester, anchor=anchor):
            await self._approvals.complete_review(review.id)
            return
        after = await graph.aget_state(self.config(conversation))
        if not any(i.id == review.interrupt_id for i in after.interrupts):
            await self._approvals.complete_review(review.id)  # the decisions were applied; only later work failed

    async def open_review(
        self,
        conversation: ConversationRef,
        interrupt: Interrupt,
        requester: Actor,
        messages: Sequence[AnyMessage],
    ) -> list[ApprovalRecord]:
        """Store a pause's approvals and post each card where the workspace routes cards.

        Quorum and expiry are taken from the configuration at this moment and stored with
        each approval. With cards going to an approvals channel or to approvers' DMs, the
        conversation gets one line saying where they went.
        """
        config = await self._config.load(conversation.platform, conversation.workspace_id)
        request = interrupt.value if isinstance(interrupt.value, dict) else {}
        actions = list(request.get("action_requests", []))
        call_ids = _match_call_ids(messages, actions)
        _, rows = await self._approvals.open_review(
            thread_id=conversation.thread_id,
            workspace_id=conversation.workspace_id,
            interrupt_id=interrupt.id,
            requester=requester,
            actions=[
                NewAction(
                    tool_call_id=call_id,
                    tool_name=str(action.get("name")),
                    args=dict(action.get("args") or {}),
                    description=str(action.get("description") or ""),
                    quorum=config.quorum(str(action.get("name"))),
                    expires_in_s=config.expiry_s(str(action.get("name"))),
                )
                for action, call_id in zip(actions, call_ids, strict=True)
            ],
        )
        if any(row.expires_at is not None for row in rows) and self.on_new_expiry is not None:
            self.on_new_expiry()
        return await self._post_cards(conversation, config, rows)

    async def _post_missing_cards(self, conversation: ConversationRef, review: ReviewRecord) -> None:
        """Post the cards of a pending review that could not be posted before (a platform error)."""
        rows = await self._approvals.approvals_of(review.id)
        if any(row.is_pending and row.card_ref is None for row in rows):
            config = await self._config.load(conversation.platform, conversation.workspace_id)
            await self._post_cards(conversation, config, rows)

    async def _post_cards(
        self, conversation: ConversationRef, config: WorkspaceConfig, rows: Sequence[ApprovalRecord]
    ) -> list[ApprovalRecord]:
        platform = self.platform(conversation)
        posted_elsewhere = False
        for row in rows:
            if row.card_ref is not None or not row.is_pending:
                continue
            card = ApprovalCard(approval=row, position=row.position + 1, total=len(rows))
            targets = await _card_targets(platform, conversation, config, row)
            if targets[0].channel_id or targets[0].user_id:
                # When no routed copy can be posted (a channel the bot cannot write in, DMs
                # closed), the card falls back to the conversation: a card nobody can see
                # would leave the thread waiting for nothing.
                targets.append(CardTarget(conversation=conversation))
            posted = 0
            for target in targets:
                fallback = target.channel_id is None and target.user_id is None
                if fallback and posted and len(targets) > 1:
                    break
                try:
                    card_ref = await platform.post_card(target, card)
                except Exception:
                    log.exception("could not post the card for approval %s (thread_id=%s)", row.id, row.thread_id)
                    continue
                await self._approvals.add_card(row.id, card_ref, primary=posted == 0)
                posted += 1
                posted_elsewhere |= not fallback
            now = await self._approvals.get(row.id)
            if now is not None and not now.is_pending:
                await self.refresh_card(now)  # decided by a click that beat the stored card reference
        stored = await self._approvals.approvals_of(rows[0].review_id) if rows else []
        if posted_elsewhere:
            await self.notify(
                conversation,
                CardsElsewhere(approvals=tuple(stored), channel_id=config.cards().channel_id),
                recipient=None,
            )
        return stored

    async def refresh_card(self, approval: ApprovalRecord) -> None:
        """Redraw every copy of an approval's card from what is stored (after a decision)."""
        conversation = ConversationRef.from_thread_id(approval.thread_id)
        refs = await self._approvals.card_refs(approval.id) or ([approval.card_ref] if approval.card_ref else [])
        if not refs:
            return
        siblings = await self._approvals.approvals_of(approval.review_id)
        card = ApprovalCard(approval=approval, position=approval.position + 1, total=len(siblings))
        for card_ref in refs:
            try:
                await self.platform(conversation).update_card(conversation, card_ref, card)
            except Exception:
                log.exception("could not update a card of approval %s (thread_id=%s)", approval.id, approval.thread_id)

    async def notify(self, conversation: ConversationRef, notice: Notice, *, recipient: Actor | None) -> None:
        """Send a notice; a platform failure is logged, not raised."""
        try:
            await self.platform(conversation).notify(conversation, notice, recipient=recipient)
        except Exception:
            log.exception("could not send %s (thread_id=%s)", type(notice).__name__, conversation.thread_id)

    async def _deliver(self, conversation: ConversationRef, result: dict[str, Any], requester: Actor) -> None:
        messages: list[AnyMessage] = result.get("messages", [])
        interrupts: list[Interrupt] = result.get("__interrupt__", [])
        if interrupts:
            for interrupt in interrupts:
                await self.open_review(conversation, interrupt, requester, messages)
            return
        answer = messages[-1] if messages else None
        if not isinstance(answer, AIMessage) or not answer.text.strip():
            log.info("turn ended without text to post (thread_id=%s)", conversation.thread_id)
            return
        try:
            await self.platform(conversation).post_answer(conversation, answer.text)
        except Exception:
            log.exception("could not post the answer (thread_id=%s)", conversation.thread_id)


MAX_DM_CARDS = 20
"""At most this many approvers get a card in their DMs per call (a big user group is not spammed)."""


async def _card_targets(
    platform: Platform, conversation: ConversationRef, config: WorkspaceConfig, row: ApprovalRecord
) -> list[CardTarget]:
    """Where a card goes: the conversation, the approvals channel, or each approver's DMs.

    DM routing reaches the approvers listed as users plus the members of listed groups that
    the platform can list (`Platform.group_members`), without the requester when they may not
    approve their own call, at most `MAX_DM_CARDS` of them. When nobody is left (no list, or
    only Discord roles), the card stays in the conversation.
    """
    cards = config.cards()
    if cards.routing is CardRouting.CHANNEL and cards.channel_id:
        return [CardTarget(conversation=conversation, channel_id=cards.channel_id)]
    if cards.routing is CardRouting.DM:
        users: list[str] = []
        for approver in config.approvers_for(row.tool_name):
            if approver.kind is ApproverKind.USER:
                users.append(approver.subject_id)
                continue
            try:
                members = await platform.group_members(conversation.workspace_id, approver.subject_id)
            except Exception:
                log.exception("could not list the members of group %s", approver.subject_id)
                continue
            users.extend(sorted(members))
        if not config.self_approval(row.tool_name):
            users = [user for user in users if user != row.requester_id]
        unique = list(dict.fromkeys(users))
        if len(unique) > MAX_DM_CARDS:
            log.warning("%d approvers for %s; DM cards go to the first %d", len(unique), row.id, MAX_DM_CARDS)
        if unique:
            return [CardTarget(conversation=conversation, user_id=user) for user in unique[:MAX_DM_CARDS]]
    return [CardTarget(conversation=conversation)]


def _author_of_last_request(messages: Sequence[AnyMessage], conversation: ConversationRef) -> Actor | None:
    """Who wrote the last human message, as stored with it by `TurnRunner.ask`."""
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            author = message.additional_kwargs.get(_AUTHOR)
            if isinstance(author, dict) and author.get("user_id"):
                return Actor(
                    platform=conversation.platform,
                    workspace_id=conversation.workspace_id,
                    user_id=str(author["user_id"]),
                    display_name=str(author.get("name") or author["user_id"]),
                )
            return None
    return None


def _unknown_requester(conversation: ConversationRef) -> Actor:
    return Actor(
        platform=conversation.platform, workspace_id=conversation.workspace_id, user_id="", display_name="unknown"
    )


def _requester(conversation: ConversationRef, review: ReviewRecord) -> Actor:
    return Actor(
        platform=conversation.platform,
        workspace_id=conversation.workspace_id,
        user_id=review.requester_id,
        display_name=review.requester_name,
    )


def _match_call_ids(messages: Sequence[AnyMessage], actions: Sequence[dict[str, Any]]) -> list[str | None]:
    """Find each action request's tool call id in the last tool-calling AI message.

    Action requests are built from that message's calls in order, with identical name and
    args, so an in-order greedy match is exact (two identical calls get the same mode).
    """
    calls: list[Any] = []
    for message in reversed(messages):
        if isinstance(message, AIMessage) and message.tool_calls:
            calls = list(message.tool_calls)
            break
    ids: list[str | None] = []
    start = 0
    for action in actions:
        found: str | None = None
        for index in range(start, len(calls)):
            if calls[index]["name"] == action.get("name") and calls[index]["args"] == action.get("args"):
                found, start = str(calls[index]["id"]), index + 1
                break
        ids.append(found)
    return ids
