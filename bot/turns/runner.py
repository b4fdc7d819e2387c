"""Running the graph for one conversation and delivering what comes out.

Callers hold the conversation's `ThreadLocks` lock around every method here. The checkpoint is
the source of truth: `settle` compares it with our reviews table and repairs what a crash
between the two left behind, before a new message may touch the thread.

A thread can hold several interrupts at once (two delegations of one supervisor turn that both
wait for a card), each with its own review. A review is resumed as soon as its own cards are
decided: that delegation continues at once, and the supervisor's turn goes on when the last
delegation of the turn has reported. Every resume names its interrupt ids (`Command(resume=
{interrupt_id: value})`), since LangGraph silently ignores a value for an id that is not
pending (langgraph #8836).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.errors import GraphRecursionError
from langgraph.graph import END
from langgraph.types import Command, Interrupt, StateSnapshot

from bot import metrics
from bot.agents.checkpointing import STEP_BUDGET_KEY, StepBudget
from bot.agents.delegation import DelegationEvent
from bot.agents.given_up import given_up_results
from bot.agents.history import unanswered_tool_calls
from bot.agents.llm_node import RefusedHere
from bot.agents.model_retry import ModelWait
from bot.agents.no_answer import no_answer_reason
from bot.agents.pool import AgentPool
from bot.agents.review_agent import ReviewAgent, should_continue
from bot.agents.state import AgentState
from bot.base.agent_kind import AgentKind
from bot.base.conversation import Actor, ConversationRef
from bot.base.errors import InvalidDecisionError, ModelError, ModelErrorKind, NoAnswerReason
from bot.base.events import ApprovalsExpiring, Subscribers
from bot.policy.config import WorkspaceConfig
from bot.policy.review import REQUESTER_KEY, Requester
from bot.policy.store import ConfigStore
from bot.ports import (
    ApprovalExpired,
    AskElsewhere,
    ModelFailed,
    Notice,
    Platform,
    Progress,
    ResumeGivenUp,
    TurnFailed,
    TurnStopped,
)
from bot.reviews.cards import REDRAW_WAIT_S, CardDesk
from bot.reviews.decisions import validate_decisions
from bot.reviews.lifecycle import ApprovalStatus, ReviewStatus
from bot.reviews.records import ApprovalRecord, NewAction, ReviewRecord
from bot.reviews.requests import action_requests
from bot.reviews.store import ApprovalStore
from bot.tools.mcp.elicitation.desk import QuestionDesk
from bot.tools.mcp.elicitation.rounds import is_question
from bot.tools.mcp.elicitation.store import QuestionRecord
from bot.turns.context.window import AUTHOR_KEY
from bot.turns.conversations import ConversationRow, ConversationStore, Stopper, TurnStart, UnfinishedRun
from bot.turns.progress import DelegationTracker, ProgressFeed
from bot.turns.stop.signal import STOP_KEY, StopSignal, stopped_by
from bot.turns.stop.watch import StopWatch
from bot.upkeep.unfinished_work import MAX_ATTEMPTS

log = logging.getLogger(__name__)

_MAX_SETTLE_ROUNDS = 5
RUN_WITHIN_S = 30.0
"""How long a run has to deliver its outcome before the upkeep may take it over (lock permitting)."""
_AUTHOR = AUTHOR_KEY

PAUSE_STORED_WAIT_S = 30.0
"""How long a pause seen in the stream may take to be stored before its cards wait for the run's end."""
PAUSE_STORED_SLOW_S = 1.0
"""A look for a pause's checkpoint that takes longer than this is logged (the cards wait for it)."""
_PAUSE_STORED_POLL_S = 0.02

_STATE_WRITER = "llm_call"
"""The node a given-up pause's results are written as: both agents' graphs have it, and from it
`should_continue` ends the graph after tool results, so nothing is left to run (as a context
reset, `bot.turns.context.keeper`)."""

OFFER_STOP_AFTER_S = 2.0
"""A run still going after this many seconds shows a progress indicator with a Stop button
(docs/decisions/0021): a quick answer gets none, so it costs no platform call."""


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """How a run ended.

    Attributes:
        finished: the graph reached its end or its pauses (False: it failed on the way).
        delivered: its outcome reached the conversation: the answer or the cards were posted,
            or the failure was told. When False, the conversation keeps its unfinished-run mark
            and the outcome is delivered later (`settle`, the upkeep).
        stopped_by: who stopped the run's turn, when it was stopped (docs/decisions/0021).
        paused: the run ended on a pause (its cards are out, or due).
    """

    finished: bool
    delivered: bool
    stopped_by: Stopper | None = None
    paused: bool = False


@dataclass(frozen=True, slots=True)
class Settled:
    """What `TurnRunner.settle` found.

    Attributes:
        blocked: a review (or an interrupt whose review is not in place yet) blocks new input.
        approvals: the pending approvals to point the sender at (may be empty while blocked).
        questions: the MCP servers' questions waiting for their requester (blocking too).
    """

    blocked: bool
    approvals: tuple[ApprovalRecord, ...]
    questions: tuple[QuestionRecord, ...] = ()


class TurnRunner:
    """Invokes and resumes graphs, opens reviews, posts answers and cards.

    Args:
        agents: the compiled graphs of every agent.
        approvals: the reviews and approvals tables.
        conversations: which agent owns each conversation.
        cards: posts and redraws cards, sends notices.
        tools: registered tools by name (to re-validate decisions before a resume).
        recursion_limit: LangGraph steps per invocation.
        config: the admin configuration (quorum, expiry, card routing, each channel's agent).
        default_agent: the agent of channels without their own setting (`COUNTERSIGN_AGENT`).
        stops: hands each run its turn's stop signal (`bot.turns.stop.watch`).
        offer_stop_after_s: a run still going after this many seconds shows its indicator with
            a Stop button.
        questions: where an MCP server's questions go (`bot.tools.mcp.elicitation`); None: a
            question pause is never raised by the graphs run here.
        expiring: told when a review with an expiry opens (the expiry sweeper subscribes; an
            event because the sweeper is built after this runner,
            docs/decisions/0062-one-composition-root.md).
        on_new_escalation: called when a review with an escalation opens (wakes the escalation
            sweeper).
    """

    def __init__(
        self,
        *,
        agents: AgentPool,
        approvals: ApprovalStore,
        conversations: ConversationStore,
        cards: CardDesk,
        tools: Mapping[str, BaseTool],
        recursion_limit: int,
        config: ConfigStore,
        stops: StopWatch,
        default_agent: AgentKind = AgentKind.REACT,
        offer_stop_after_s: float = OFFER_STOP_AFTER_S,
        questions: QuestionDesk | None = None,
        expiring: Subscribers[ApprovalsExpiring] | None = None,
        on_new_escalation: Callable[[], None] | None = None,
    ) -> None:
        self._expiring = expiring
        self._on_new_escalation = on_new_escalation
        self._agents = agents
        self._approvals = approvals
        self._conversations = conversations
        self._cards = cards
        self._tools = tools
        self._recursion_limit = recursion_limit
        self._config = config
        self._default_agent = default_agent
        self._stops = stops
        self._offer_stop_after_s = offer_stop_after_s
        self.questions = questions
        self._closed_at_once: set[str] = set()
        """Conversations whose run raised a question pause that was closed as it opened."""

    def platform(self, conversation: ConversationRef) -> Platform:
        """The adapter serving `conversation`.

        Raises:
            KeyError: when no adapter for that platform is running.
        """
        return self._cards.platform(conversation)

    def config(self, conversation: ConversationRef, requester: str | None = None) -> RunnableConfig:
        """The run config: the thread id, the step limit, and whose calls the run makes.

        Args:
            conversation: the conversation.
            requester: the user id of the author of the message the run's calls come from
                (`PolicyContext.from_config` reads it at any depth); None or "" for a read of
                the state, or when nobody known asked (then no trust grant applies).
        """
        configurable: dict[str, Any] = {"thread_id": conversation.thread_id}
        if requester:
            configurable[REQUESTER_KEY] = Requester(requester)
        return {"configurable": configurable, "recursion_limit": self._recursion_limit}

    async def graph_for(self, conversation: ConversationRef) -> ReviewAgent:
        """The graph that owns the conversation's checkpoint.

        A conversation from before agents could be chosen belongs to the ReAct agent, which
        wrote its checkpoint.
        """
        return self._graph_of(conversation, await self._conversations.agent_of(conversation.thread_id))

    def _graph_of(self, conversation: ConversationRef, agent: AgentKind | None) -> ReviewAgent:
        """The graph of `agent` (None: a conversation from before agents could be chosen)."""
        kind = agent or AgentKind.REACT
        if kind not in self._agents.kinds:
            log.error("agent %s is not available; using react (thread_id=%s)", kind, conversation.thread_id)
            kind = AgentKind.REACT
        return self._agents.for_thread(conversation.thread_id, kind)

    async def choose_agent(self, conversation: ConversationRef, row: ConversationRow | None = None) -> AgentKind:
        """The agent a conversation at rest is to run on: its channel's setting, else the default.

        Only call this after `settle` reported the thread unblocked: a pending interrupt must be
        resumed by the graph that raised it. Pass the result to `ask`: the run records it as
        the owner of the checkpoint when it starts (`ConversationStore.mark_running`), in the
        write that marks the run. The history stays; the new agent reads it.

        Args:
            conversation: the conversation.
            row: its row as `ConversationStore.touch` returned it under the lock held now
                (to log a change of agent).
        """
        config = await self._config.load(conversation.platform, conversation.workspace_id)
        wanted = config.agent(conversation.channel_id) or self._default_agent
        if wanted not in self._agents.kinds:
            wanted = AgentKind.REACT
        if row is not None and row.agent not in (None, wanted):
            log.info("conversation now runs the %s agent (thread_id=%s)", wanted.value, conversation.thread_id)
        return wanted

    async def settle(self, conversation: ConversationRef, row: ConversationRow | None = None) -> Settled:
        """Bring the thread to rest before new input; say whether a review still blocks it.

        Repairs, in order: a pause with no stored review (crash before the cards) gets its
        review and cards, attributed to the author of the message that led to it; cards that
        could not be posted are posted again; reviews claimed for resuming but not resumed
        (crash after the last click) get their cards redrawn and are resumed, at most once per
        call; a run whose outcome
        was never delivered (a crash, a cancelled run, a post that failed) is finished, or its
        answer posted, at most once per call; a tool round cut short (crash inside a tool node
        or a delegation) is finished, the ledger keeping every started call from running twice.
        Whatever happens, a thread whose checkpoint still holds an interrupt is reported as
        blocked: new input on top of an interrupt would drop the reviewed calls.

        Args:
            conversation: the conversation.
            row: its row as `ConversationStore.touch` returned it under the lock held now
                (spares reading its agent and unfinished run once; a row `at_rest` has
                nothing to settle, so no state is read); None: read them.
        """
        if row is not None and row.at_rest:
            return Settled(blocked=False, approvals=())
        graph = self._graph_of(conversation, row.agent) if row is not None else await self.graph_for(conversation)
        resumed = False
        finished = False
        for round_number in range(_MAX_SETTLE_ROUNDS):
            state = await graph.aget_state(self.config(conversation))
            messages: list[AnyMessage] = state.values.get("messages", [])
            if state.interrupts:
                asking = [interrupt for interrupt in state.interrupts if is_question(interrupt.value)]
                if asking and await self._open_questions(conversation, asking, messages) and not resumed:
                    resumed = True  # every question of a pause is closed: its answers go to the server
                    self._closed_at_once.discard(conversation.thread_id)
                    await self.resume(conversation, anchor=None)
                    continue
                reviewing = [interrupt for interrupt in state.interrupts if not is_question(interrupt.value)]
                ids = [interrupt.id for interrupt in reviewing]
                live = await self._approvals.reviews_for_interrupts(conversation.thread_id, ids)
                missing = [interrupt for interrupt in reviewing if interrupt.id not in live]
                for interrupt in missing:
                    await self.open_review(conversation, interrupt, messages)
                if missing:
                    # A turn stopped while this pause waited to be stored (a crash in between)
                    # has its new cards closed at once; the next round resumes them.
                    stopper = await self._stops.stopper_of(conversation.thread_id)
                    if stopper is not None:
                        await self._close_stopped_pauses(stopper, conversation)
                    continue
                for review in live.values():
                    if review.status is ReviewStatus.PENDING:
                        await self._cards.post_missing(conversation, review)
                # Claimed, or (left so by an older version) done although still pending: resume.
                claimed = [review for review in live.values() if review.status is not ReviewStatus.PENDING]
                if claimed and not resumed:
                    resumed = True
                    await self._redraw(claimed)
                    await self.resume(conversation, anchor=None)
                    continue
                if await self._cards_out(conversation):
                    # The run that paused here is delivered: its cards are out.
                    await self._conversations.mark_delivered(conversation.thread_id, settled=not asking)
                pending = await self._approvals.pending_in_thread(conversation.thread_id)
                if pending or claimed or asking:
                    waiting = await self.questions.blocking(conversation.thread_id) if self.questions else []
                    return Settled(blocked=True, approvals=tuple(pending), questions=tuple(waiting))
                continue  # the last decision committed meanwhile: its review is resuming now
            if finished:
                unfinished = None
            elif round_number == 0 and row is not None:
                unfinished = row.unfinished  # read under this lock a moment ago
            else:
                unfinished = await self._conversations.unfinished_run(conversation.thread_id)
            if unfinished is not None:
                claimed = (
                    []
                    if resumed
                    else await self._approvals.reviews_in_thread(conversation.thread_id, [ReviewStatus.RESUMING])
                )
                resumed = True
                if claimed:
                    # Decisions applied, then the run was cut short: resuming finishes it and
                    # marks the reviews done.
                    await self._redraw(claimed)
                    await self.resume(conversation, anchor=None)
                else:
                    finished = True
                    await self._finish_unfinished(conversation, state, unfinished)
                continue
            if state.next and unanswered_tool_calls(messages):
                log.warning("finishing an interrupted tool round (thread_id=%s)", conversation.thread_id)
                await self.run(
                    conversation,
                    None,
                    anchor=None,
                    paused=state.interrupts,
                    requester=_requester_id(messages, conversation),
                )
                continue
            # At rest: the next message need not read the state (`ConversationRow.at_rest`).
            await self._conversations.mark_settled(conversation.thread_id)
            return Settled(blocked=False, approvals=())
        state = await graph.aget_state(self.config(conversation))
        pending = await self._approvals.pending_in_thread(conversation.thread_id)
        return Settled(blocked=bool(state.interrupts) or bool(pending), approvals=tuple(pending))

    async def _redraw(self, reviews: Sequence[ReviewRecord]) -> None:
        """Redraw the cards of reviews whose decision's own follow-up did not finish.

        An expiry's follow-up also tells the requester; that notice is sent again here (it may
        have gone out before the follow-up died: at least once).
        """
        for review in reviews:
            approvals = await self._approvals.approvals_of(review.id)
            await self._cards.redraw(*approvals)
            for approval in approvals:
                if approval.status is ApprovalStatus.EXPIRED:
                    await self.tell_expired(approval)

    async def tell_expired(self, approval: ApprovalRecord) -> bool:
        """Tell the requester, privately, that their call expired without a decision."""
        conversation = ConversationRef.from_thread_id(approval.thread_id)
        requester = Actor(
            platform=conversation.platform,
            workspace_id=conversation.workspace_id,
            user_id=approval.requester_id,
            display_name=approval.requester_name,
        )
        return await self.notify(conversation, ApprovalExpired(approval=approval), recipient=requester)

    async def give_up(self, conversation: ConversationRef) -> None:
        """Stop finishing work that failed every attempt: the decided pauses being resumed, then the run.

        Each is given up before anyone is told, and each outcome is told once
        (docs/decisions/0038-one-outcome-per-message.md): the pauses' requesters learn that
        their decided calls did not run, or may have (`give_up_reviews`); the conversation is
        told that the run failed only when nobody was told of it yet (not when it was a given-up
        pause's resume, nor a run given up with its message or after its failure was told).
        Call it under the conversation's lock.
        """
        told = await self.give_up_reviews(conversation)
        unfinished = await self._conversations.unfinished_run(conversation.thread_id)
        if unfinished is None:
            return
        await self._conversations.mark_delivered(conversation.thread_id)
        if not unfinished.given_up and not told:
            await self.notify(conversation, TurnFailed(thread_id=conversation.thread_id), recipient=None)

    async def give_up_spent(self, conversation: ConversationRef) -> bool:
        """Give up the conversation's pauses if a resume of theirs failed every attempt; whether they were.

        For a conversation stuck on such a pause (a context reset frees it so); see
        `give_up_reviews`. Call it under the conversation's lock.
        """
        claimed = await self._approvals.reviews_in_thread(conversation.thread_id, [ReviewStatus.RESUMING])
        return _spent(claimed) and await self.give_up_reviews(conversation)

    async def give_up_reviews(self, conversation: ConversationRef) -> bool:
        """Give up the conversation's decided pauses whose resume keeps failing; tell each requester once.

        A pause is given up as a whole, and only once none of the conversation's cards waits
        (a sibling delegation's card may: then the pause waits for its decision, which the next
        resume or give-up takes with it). In this order, each step safe to repeat after a crash:

        1. The checkpoint: the pause's tasks are dropped (a sibling delegation that reported
           keeps its result) and every call of the paused answer without a result gets one,
           without running, from what the ledger knows (`bot.agents.given_up`). Nothing can
           resume the pause any more, so no decided call can run after its requester was told
           it did not.
        2. The reviews, in one transaction (`ApprovalStore.give_up_reviews`): done, each decided
           call that never started `not_run`, one that started `outcome_unknown`, the resume's
           run given up; then its mark cleared.
        3. The cards are redrawn, and each requester is told once (`ResumeGivenUp`).

        Call it under the conversation's lock.

        Returns:
            Whether pauses were given up (their requesters told); False when none was being
            resumed, a card still waits, or another handler gave them up.

        Raises:
            Exception: the checkpointer's or the database's (what was done stays done; the rest
                is done by the next call).
        """
        thread_id = conversation.thread_id
        claimed = await self._approvals.reviews_in_thread(thread_id, [ReviewStatus.RESUMING])
        if not claimed:
            return False
        if await self._approvals.pending_in_thread(thread_id):
            log.warning("a resume failed for good; it is given up once the cards of its pause are decided")
            return False
        graph = await self.graph_for(conversation)
        config = self.config(conversation)
        state = await graph.aget_state(config)
        if state.interrupts or state.tasks:
            await graph.aupdate_state(config, None, as_node=END)  # drops the pause's tasks
            state = await graph.aget_state(config)
        unanswered = unanswered_tool_calls(state.values.get("messages", []))
        if unanswered:
            runs = await self._approvals.tool_runs(thread_id, [str(call["id"]) for call in unanswered])
            results = given_up_results(unanswered, runs, self._tools)
            await graph.aupdate_state(config, {"messages": results}, as_node=_STATE_WRITER)
        given_up = await self._approvals.give_up_reviews(thread_id, [review.id for review in claimed])
        if not given_up:
            return False
        await self._out(conversation, settled=True)
        log.error(
            "gave up resuming review(s) %s after their attempts; their decided calls did not run, or may have "
            "(thread_id=%s)",
            ", ".join(given_up),
            thread_id,
        )
        await self._cards.redraw(*(approval for approvals in given_up.values() for approval in approvals))
        for review in claimed:
            if review.id in given_up:
                notice = ResumeGivenUp(approvals=tuple(given_up[review.id]))
                await self.notify(conversation, notice, recipient=_requester_of(review, conversation))
        return True

    async def _finish_unfinished(
        self, conversation: ConversationRef, state: StateSnapshot, unfinished: UnfinishedRun
    ) -> None:
        """Finish a run whose outcome was never delivered.

        A run given up after a failure (`ConversationStore.give_up_run`) only has its mark
        cleared: its notice went out, or was about to. A run that wrote no checkpoint made no
        progress: there is nothing to finish (its message, still unhandled in the inbox, is
        asked again). A run with steps left goes on from its last checkpoint; a run that reached
        its end gets its answer posted.
        """
        checkpoint = state.config.get("configurable", {}).get("checkpoint_id")
        if unfinished.given_up:
            # Its failure was told (or was about to be when the process or the database went):
            # one outcome per run, so it is neither run again nor told again.
            log.warning("clearing a run given up after a failure (thread_id=%s)", conversation.thread_id)
            await self._conversations.mark_delivered(conversation.thread_id)
        elif checkpoint == unfinished.from_checkpoint:
            await self._conversations.mark_delivered(conversation.thread_id)
        elif state.next or state.tasks:
            # `next` alone misses a run cut short right after its input checkpoint: its start
            # task's writes are saved, so LangGraph lists it as a task but not as next.
            log.warning("finishing a run cut short (thread_id=%s)", conversation.thread_id)
            messages: list[AnyMessage] = state.values.get("messages", [])
            await self.run(conversation, None, anchor=None, requester=_requester_id(messages, conversation))
        else:
            log.warning("posting the undelivered outcome of a run (thread_id=%s)", conversation.thread_id)
            if await self._deliver(conversation, state.values, opened=set()):
                await self._out(conversation)

    async def run(
        self,
        conversation: ConversationRef,
        graph_input: dict[str, Any] | Command[Any] | None,
        *,
        anchor: str | None,
        paused: Sequence[Interrupt] = (),
        resumed: Sequence[Interrupt] = (),
        agent: AgentKind | None = None,
        turn: TurnStart | None = None,
        requester: str | None = None,
    ) -> RunOutcome:
        """Invoke the graph and deliver the outcome.

        Args:
            conversation: the conversation.
            graph_input: new input, a resume `Command`, or None to finish unfinished work.
            anchor: the message the work is about (see `Platform.working`).
            paused: interrupts pending before the run that it leaves paused.
            resumed: interrupts the run resumes.
            agent: the agent to run on, as `choose_agent` chose it for a conversation at
                rest; the run's mark records it as the checkpoint's owner. None: the agent
                that owns the checkpoint now (`graph_for`).
            turn: the turn a new human message starts (`ask`); None: the run goes on with the
                conversation's current turn.
            requester: the user id of whoever asked for the calls this run may make (the
                author of the conversation's last human message; see `config`).

        The conversation is marked as running until the outcome is out (the answer or the
        cards posted, or a failure told); a crash, a cancelled run or a post that failed leaves
        the mark, and `settle` (before the next message, or from the upkeep) delivers it.
        Model and graph failures become one notice instead of an exception, the run given up
        first so that nothing answers after it (`_failed`); a resume that failed before its
        decisions were applied tells nobody and is tried again. The thread stays usable.
        Counted in `bot.metrics` (runs under way, seconds by outcome).

        The run gets its turn's stop signal (`bot.turns.stop.watch`); a stopped turn ends at its next
        step (`bot.turns.stop.signal`). A pause the run raised in the moment between a stop
        recorded on another replica and this process learning of it is closed as stopped and
        answered at once, so no card of a stopped turn stays open.

        Raises:
            Exception: the database's, when a failure could not be recorded as given up
                (nobody was told; the run stays marked and is tried again).
        """
        started = time.monotonic()
        metrics.TURNS_RUNNING.inc()
        try:
            outcome = await self._run(conversation, graph_input, anchor, paused, resumed, agent, turn, requester)
        finally:
            metrics.TURNS_RUNNING.dec()
        label = "delivered" if outcome.delivered else "failed" if not outcome.finished else "undelivered"
        if outcome.stopped_by is not None and outcome.delivered:
            label = "stopped"
        metrics.TURN_SECONDS.labels(outcome=label).observe(time.monotonic() - started)
        if conversation.thread_id in self._closed_at_once:
            # A platform that cannot take answers closed its question at once ("cancel"): the
            # call goes on now, under this lock.
            self._closed_at_once.discard(conversation.thread_id)
            if outcome.finished:
                await self.resume(conversation, anchor=None)
        if outcome.stopped_by is not None and outcome.finished:
            try:
                await self._answer_late_pauses(conversation, outcome.stopped_by)
            except Exception:
                # The outcome is out: a failure here must not reach the message as a second one.
                # A card left open is closed by the next `settle` (the turn's stop is stored).
                log.exception("closing the cards of a stopped turn failed (thread_id=%s)", conversation.thread_id)
        return outcome

    async def _answer_late_pauses(self, conversation: ConversationRef, stopper: Stopper) -> None:
        """Close the cards a stopped turn posted after its stop, and answer their pauses."""
        if await self._close_stopped_pauses(stopper, conversation):
            await self.resume(conversation, anchor=None)

    async def _close_stopped_pauses(self, stopper: Stopper, conversation: ConversationRef) -> bool:
        """Close a stopped turn's pending approvals and redraw their cards; True when a review is to resume."""
        closed, claimed = await self._stops.close_late_pauses(conversation.thread_id, stopper)
        for approval in closed:
            log.info("approval %s closed: its turn was stopped (thread_id=%s)", approval.id, approval.thread_id)
        await self._cards.redraw(*closed)
        return claimed

    async def _run(
        self,
        conversation: ConversationRef,
        graph_input: dict[str, Any] | Command[Any] | None,
        anchor: str | None,
        paused: Sequence[Interrupt],
        resumed: Sequence[Interrupt],
        agent: AgentKind | None,
        turn: TurnStart | None,
        requester: str | None = None,
    ) -> RunOutcome:
        platform = self.platform(conversation)
        graph = (
            self._agents.for_thread(conversation.thread_id, agent)
            if agent is not None
            else await self.graph_for(conversation)
        )
        seen = {interrupt.id for interrupt in (*paused, *resumed)}
        running = await self._conversations.mark_running(
            conversation.thread_id, retry_in_s=RUN_WITHIN_S, agent=agent, turn=turn
        )
        tracker = DelegationTracker(paused=paused, resumed=resumed, turn_id=running.turn_id)
        with self._stops.watching(running) as signal:
            outcome = await self._run_watched(
                conversation, graph, graph_input, anchor, platform, tracker, seen, signal, requester, resumed
            )
            if outcome.paused and not signal.is_set and running.turn_id is not None:
                # A stop recorded on another replica before this run's pause was stored could
                # not close its cards; look once now, so that they are closed below.
                try:
                    await self._stops.look(running.turn_id)
                except Exception:
                    log.exception("looking for a stop failed (thread_id=%s)", conversation.thread_id)
        if signal.is_set:
            stopper = Stopper(user_id=signal.stopped_by_id, display_name=signal.stopped_by)
            return RunOutcome(
                finished=outcome.finished, delivered=outcome.delivered, stopped_by=stopper, paused=outcome.paused
            )
        return outcome

    async def _run_watched(
        self,
        conversation: ConversationRef,
        graph: ReviewAgent,
        graph_input: dict[str, Any] | Command[Any] | None,
        anchor: str | None,
        platform: Platform,
        tracker: DelegationTracker,
        seen: set[str],
        signal: StopSignal,
        requester: str | None = None,
        resumed: Sequence[Interrupt] = (),
    ) -> RunOutcome:
        result: dict[str, Any] | None = None
        try:
            async with platform.working(conversation, anchor) as progress:
                result = await self._stream(
                    conversation, graph, graph_input, progress, tracker, seen, signal, requester=requester
                )
        except ModelError as exc:
            log.warning("model failed (thread_id=%s): %s", conversation.thread_id, exc)
            return await self._failed(conversation, graph, ModelFailed.of(exc), resumed)
        except GraphRecursionError:
            # The step guard should make this impossible; if it happens, it is a bug.
            log.exception("recursion limit hit despite the step guard (thread_id=%s)", conversation.thread_id)
            return await self._failed(conversation, graph, TurnFailed(thread_id=conversation.thread_id), resumed)
        except Exception:
            if result is None:
                log.exception("turn failed (thread_id=%s)", conversation.thread_id)
                return await self._failed(conversation, graph, TurnFailed(thread_id=conversation.thread_id), resumed)
            # The run is complete; only the progress indicator failed on the way out.
            log.exception("clearing the progress indicator failed (thread_id=%s)", conversation.thread_id)
        try:
            delivered = await self._deliver(conversation, result, opened=seen)
        except Exception:
            # e.g. the database refused to store a review: tell the conversation, do not lose
            # the message task; the next message retries through settle().
            log.exception("delivering the turn failed (thread_id=%s)", conversation.thread_id)
            return await self._failed(conversation, graph, TurnFailed(thread_id=conversation.thread_id), resumed)
        if delivered:
            # A question pause is never at rest: its questions live outside the reviews that
            # `ConversationRow.at_rest` counts, so the next message must read the state and wait.
            asking = any(is_question(interrupt.value) for interrupt in result.get("__interrupt__") or ())
            await self._out(conversation, settled=not asking)
        else:
            log.error(
                "the outcome of the run could not be posted; it is posted again later (thread_id=%s)",
                conversation.thread_id,
            )
        return RunOutcome(finished=True, delivered=delivered, paused=bool(result.get("__interrupt__")))

    async def _failed(
        self, conversation: ConversationRef, graph: ReviewAgent, notice: Notice, resumed: Sequence[Interrupt]
    ) -> RunOutcome:
        """Tell the conversation once that its run failed, or leave the run to be tried again silently.

        One outcome (docs/decisions/0038-one-outcome-per-message.md): a resume that failed
        before its decisions were applied (a resumed interrupt is still pending) is tried again
        by the upkeep, so nobody is told now. Otherwise the run is given up before the notice
        goes out (`ConversationStore.give_up_run`): when that cannot be written, nobody is told
        and the exception propagates (the run is tried again); when the mark cannot be cleared
        after the notice (the database dropped), `settle` clears it later without running the
        rest or telling again. A notice the platform refused takes the give-up back: nobody
        heard, so the run may still be finished later.

        Raises:
            Exception: the database's, when the give-up cannot be recorded (nothing was told).
        """
        thread_id = conversation.thread_id
        if resumed:
            state = await graph.aget_state(self.config(conversation))
            still = {interrupt.id for interrupt in state.interrupts}
            if any(interrupt.id in still for interrupt in resumed):
                log.warning(
                    "the resume failed before its decisions were applied; it is tried again (thread_id=%s)", thread_id
                )
                return RunOutcome(finished=False, delivered=False)
        await self._conversations.give_up_run(thread_id)
        if not await self.notify(conversation, notice, recipient=None):
            try:
                await self._conversations.take_back_run(thread_id)
            except Exception:
                log.exception("could not take back the give-up of a run nobody was told of (thread_id=%s)", thread_id)
            return RunOutcome(finished=False, delivered=False)
        await self._out(conversation)
        return RunOutcome(finished=False, delivered=True)

    async def _out(self, conversation: ConversationRef, *, settled: bool = False) -> None:
        """Clear the run's mark now that its outcome is out; a failure here is logged, not raised.

        The outcome already reached the conversation: an error now must not turn into a second
        outcome (a failure notice after an answer). The mark stays; `settle` then posts an
        answer again (answers are delivered at least once) or clears a given-up run.
        """
        try:
            await self._conversations.mark_delivered(conversation.thread_id, settled=settled)
        except Exception:
            log.exception(
                "could not record that the run's outcome is out; settled later (thread_id=%s)", conversation.thread_id
            )

    async def ask(
        self,
        conversation: ConversationRef,
        text: str,
        *,
        requester: Actor,
        anchor: str | None,
        agent: AgentKind | None = None,
        message_key: str | None = None,
    ) -> RunOutcome:
        """Run a turn for a new human message; its author is stored with it (see `settle`).

        The message starts a new turn (a new id): its author, or an admin, may stop it until
        its outcome is out, cards and their resumes included (docs/decisions/0021).

        Args:
            conversation: the conversation.
            text: the message.
            requester: its author.
            anchor: the platform's id of the message; it also names the message in the
                checkpoint (`message_in_state`), so that a message handled again after a fault
                is not asked twice.
            agent: the agent `choose_agent` chose (None: the checkpoint's owner).
            message_key: the message's inbox key, recorded with the turn: giving the message
                up gives its run up too (`bot.turns.inbox.Inbox.give_up`).
        """
        author = {"user_id": requester.user_id, "name": requester.display_name}
        human = HumanMessage(content=text, additional_kwargs={_AUTHOR: author}, id=_human_id(anchor))
        turn = TurnStart(
            turn_id=uuid.uuid4().hex,
            requester_id=requester.user_id,
            requester_name=requester.display_name,
            message_key=message_key,
        )
        return await self.run(
            conversation, {"messages": [human]}, anchor=anchor, agent=agent, turn=turn, requester=requester.user_id
        )

    async def message_in_state(self, conversation: ConversationRef, anchor: str) -> bool:
        """Whether the message with this platform id is in the conversation's checkpoint."""
        graph = await self.graph_for(conversation)
        state = await graph.aget_state(self.config(conversation))
        wanted = _human_id(anchor)
        return any(message.id == wanted for message in state.values.get("messages", []))

    async def resume(self, conversation: ConversationRef, *, anchor: str | None) -> None:
        """Resume every review of the thread that is claimed for resuming, in one run.

        Each claimed review whose interrupt is pending gets its decisions, keyed by interrupt
        id; reviews of other interrupts stay paused (their delegations raise the same
        interrupts again). A claimed review whose interrupt is no longer pending was resumed
        before a crash or a stop: the run that stopped before its end is finished. A review is
        marked done only once its interrupt is no longer pending and its run reached its end
        (or, when later work failed, once its decisions were applied), so a failed resume is
        tried again by the next message (see `settle`) or the upkeep. Reviews past their
        attempts (`bot.upkeep.unfinished_work.MAX_ATTEMPTS`) are given up instead (`give_up_reviews`).
        """
        claimed = await self._approvals.reviews_in_thread(conversation.thread_id, [ReviewStatus.RESUMING])
        if _spent(claimed):
            # Its resume failed every attempt (the upkeep's give-up could not finish, or an older
            # version left it so): given up, never tried again, so the thread is not kept busy
            # (docs/decisions/0038-one-outcome-per-message.md).
            await self.give_up_reviews(conversation)
            return
        graph = await self.graph_for(conversation)
        state = await graph.aget_state(self.config(conversation))
        pending = {interrupt.id: interrupt for interrupt in state.interrupts}
        stuck = await self._stuck_reviews(conversation, pending)
        answered = await self._answered_questions(conversation, pending)
        if not claimed and not stuck and not answered:
            return
        ready = [review for review in claimed if review.interrupt_id in pending] + stuck
        finished = True
        outcome: RunOutcome | None = None
        if ready or answered:
            values = {r.interrupt_id: await self._resume_value(r, pending[r.interrupt_id]) for r in ready}
            values.update(answered)
            log.info(
                "resuming review(s) %s, question pause(s) %s (thread_id=%s)",
                ", ".join(r.id for r in ready) or "none",
                ", ".join(answered) or "none",
                conversation.thread_id,
            )
            resumed = [pending[review.interrupt_id] for review in ready] + [pending[i] for i in answered]
            paused = [interrupt for interrupt in state.interrupts if interrupt not in resumed]
            outcome = await self.run(
                conversation,
                Command(resume=values),
                anchor=anchor,
                paused=paused,
                resumed=resumed,
                requester=_requester_id(state.values.get("messages", []), conversation),
            )
        elif state.next or state.tasks:
            outcome = await self.run(
                conversation,
                None,
                anchor=anchor,
                paused=state.interrupts,
                requester=_requester_id(state.values.get("messages", []), conversation),
            )
        if outcome is not None:
            finished = outcome.finished
        after = await graph.aget_state(self.config(conversation))
        still = {interrupt.id for interrupt in after.interrupts}
        for review in claimed:
            applied = review.interrupt_id not in still
            if applied and (finished or review in ready):
                await self._approvals.complete_review(review.id)

    async def _answered_questions(
        self, conversation: ConversationRef, pending: Mapping[str, Interrupt]
    ) -> dict[str, dict[str, Any]]:
        """The resume values of pending question pauses whose questions are all closed, by interrupt id."""
        asking = [interrupt_id for interrupt_id, interrupt in pending.items() if is_question(interrupt.value)]
        if not asking or self.questions is None:
            return {}
        return await self.questions.ready(conversation.thread_id, asking)

    async def _open_questions(
        self, conversation: ConversationRef, interrupts: Sequence[Interrupt], messages: Sequence[AnyMessage]
    ) -> bool:
        """Store and show question pauses' questions (idempotent); whether one of them is ready to resume.

        The requester is the author of the conversation's last human message, as for a card.
        """
        if self.questions is None:
            log.error("a question pause without a question desk (thread_id=%s)", conversation.thread_id)
            return False
        requester = _author_of_last_request(messages, conversation) or _unknown_requester(conversation)
        ready = False
        for interrupt in interrupts:
            ready = await self.questions.open(conversation, interrupt.id, interrupt.value, requester) or ready
        if ready:
            self._closed_at_once.add(conversation.thread_id)
        return ready

    async def _stuck_reviews(
        self, conversation: ConversationRef, pending: Mapping[str, Interrupt]
    ) -> list[ReviewRecord]:
        """Reviews marked done whose interrupt is still pending: resumed, yet never applied.

        This version marks a review done only once its interrupt is gone, but an older version
        started on the same database (a rollback) may have left one so; without this the
        conversation would stay blocked for good. Their decisions are applied again.
        """
        if not pending:
            return []
        reviews = await self._approvals.reviews_for_interrupts(conversation.thread_id, list(pending))
        stuck = [review for review in reviews.values() if review.status is ReviewStatus.DONE]
        for review in stuck:
            log.warning("review %s is done but its pause is still pending; resuming it again", review.id)
        return stuck

    async def open_review(
        self, conversation: ConversationRef, interrupt: Interrupt, messages: Sequence[AnyMessage]
    ) -> list[ApprovalRecord]:
        """Store a pause's approvals (idempotent) and post each card where cards are routed.

        The approvals are keyed from the interrupt's action requests (`tool_call_id`,
        `source`). The requester is the author of the conversation's last human message, the
        one the calls came from, at whatever depth they were made; when it was not stored,
        nobody is the requester and admins decide. Quorum, expiry and escalation are taken from
        the configuration at this moment and stored with each approval: a later change of the
        settings does not rewrite cards already waiting.
        """
        config = await self._config.load(conversation.platform, conversation.workspace_id)
        actions = action_requests(interrupt.value)
        if not actions:
            log.error("interrupt %s has no action requests (thread_id=%s)", interrupt.id, conversation.thread_id)
        requester = _author_of_last_request(messages, conversation) or _unknown_requester(conversation)
        channel = conversation.channel_id
        _, rows = await self._approvals.open_review(
            thread_id=conversation.thread_id,
            workspace_id=conversation.workspace_id,
            interrupt_id=interrupt.id,
            requester=requester,
            source=next((action.source for action in actions if action.source), None),
            actions=[
                NewAction(
                    tool_call_id=action.tool_call_id,
                    tool_name=action.name,
                    args=action.args,
                    description=action.description,
                    definition=action.definition,
                    quorum=config.quorum(action.name),
                    expires_in_s=config.expiry_s(action.name),
                    trust_offer_s=_trust_offer(config, action.name, channel, requester),
                    trust_offer_matching=_trust_matching(config, action.name, channel),
                    **_escalation_of(config, action.name),
                )
                for action in actions
            ],
        )
        if any(row.expires_at is not None and row.is_pending for row in rows) and self._expiring is not None:
            self._expiring.publish(ApprovalsExpiring())
        if any(row.escalation is not None and row.is_pending for row in rows) and self._on_new_escalation is not None:
            self._on_new_escalation()
        return await self._cards.post(conversation, config, rows)

    async def redraw_cards(self, *approvals: ApprovalRecord, wait_s: float = REDRAW_WAIT_S) -> None:
        """Redraw every copy of these approvals' cards, waiting at most `wait_s` (`CardDesk.redraw`)."""
        await self._cards.redraw(*approvals, wait_s=wait_s)

    async def notify(self, conversation: ConversationRef, notice: Notice, *, recipient: Actor | None) -> bool:
        """Send a notice; return whether it went out (a platform failure is logged, not raised)."""
        return await self._cards.notify(conversation, notice, recipient=recipient)

    async def _resume_value(self, review: ReviewRecord, interrupt: Interrupt) -> dict[str, Any]:
        """The review's decisions, one per action request, matched by tool call id.

        An action without a stored approval gets a reject (a missing decision is a rejection,
        docs/DESIGN.md, Approvals). The decisions were validated when they were made; they are checked again
        here (a tool may have changed since), and an invalid one fails closed in the node.
        """
        rows = await self._approvals.approvals_of(review.id)
        by_call = {row.tool_call_id: row for row in rows if row.tool_call_id}
        actions = action_requests(interrupt.value)
        decisions: list[dict[str, Any]] = []
        for position, action in enumerate(actions):
            row = by_call.get(action.tool_call_id) if action.tool_call_id else None
            if row is None and not action.tool_call_id and position < len(rows):
                row = rows[position]  # a payload from before call ids were carried
            decisions.append(row.resume_decision() if row is not None else {"type": "reject", "message": None})
        try:
            validate_decisions(decisions, cast(Mapping[str, Any], interrupt.value), self._tools)
        except InvalidDecisionError as exc:
            log.error("decision no longer valid, it will count as rejected (thread_id=%s): %s", review.thread_id, exc)
        return {"decisions": decisions}

    async def _stream(
        self,
        conversation: ConversationRef,
        graph: ReviewAgent,
        graph_input: dict[str, Any] | Command[Any] | None,
        progress: Progress,
        tracker: DelegationTracker,
        seen: set[str],
        signal: StopSignal,
        *,
        requester: str | None = None,
    ) -> dict[str, Any]:
        """Run the graph to its next stop; post each new pause's cards the moment it happens.

        A delegation that pauses must not wait for its siblings of the same step to finish
        before its card shows (LangGraph ends the step, and the run, only when every task of it
        has): the stream carries each interrupt as it is raised, and its review opens at once.
        The cards can be decided before the run ends; the resume then waits for the thread lock.
        A pause is streamed before LangGraph has stored it (`durability="async"` writes
        checkpoints in the background), so its review opens only once the checkpoint holds it
        (`_pause_stored`): a card posted for a pause that a crash then lost would name an
        interrupt that never comes back (the run is re-run from an earlier checkpoint and
        pauses under a new id), and its Approve would run nothing (docs/decisions/0009).
        Progress goes through `ProgressFeed`, so a slow platform never holds up the run. The
        stream includes subgraphs, so that a subagent's model waits (`ModelWait`) are shown
        too; only the conversation's own state (namespace `()`) counts as the run's state. A
        call refused for want of a decider where it was asked (`RefusedHere`, a Discord DM) is
        told to its requester with where to ask instead, once per run.

        The graph's checkpointing (`bot.agents.checkpointing`) decides the rest: an agent whose
        runs store their pauses only at exit (the ReAct agent, `durability="exit"`) gets its
        cards from `_deliver` once the invocation is over (its pause ends the run anyway), and
        an agent that stops before some nodes to store its checkpoint there is invoked again at
        once, as the same run, with the steps the run has left (`StepBudget`).

        Args:
            conversation: the conversation.
            graph: its graph.
            graph_input: as for `run`.
            progress: the platform's indicator for this run.
            tracker: what the indicator shows.
            seen: ids of interrupts whose reviews exist; the ids of pauses opened here are added.
            signal: the run's stop, handed to every node in the run config (`STOP_KEY`); the
                indicator says so once it is set during the run. A run still going after
                `offer_stop_after_s` shows an indicator with a Stop button.
            requester: whose calls the run makes (see `config`).

        Returns:
            The final state values, with `__interrupt__` listing every interrupt raised (what
            `ainvoke` returns), new or raised again.
        """
        latest: dict[str, Any] = {}
        raised: dict[str, Interrupt] = {}
        unstored: set[str] = set()
        told: set[AskElsewhere] = set()
        feed = ProgressFeed(progress, conversation.thread_id)
        plan = self._agents.checkpointing_of(graph)
        budget = StepBudget(self._recursion_limit)
        config = self.config(conversation, requester)
        config["configurable"][STOP_KEY] = signal
        if plan.stored_before:
            config["configurable"][STEP_BUDGET_KEY] = budget
        offer = asyncio.get_running_loop().call_later(
            self._offer_stop_after_s, lambda: feed.show(tracker.on_long_run())
        )

        def show_stopping() -> None:
            feed.show(tracker.on_stop(signal.stopped_by))

        signal.add_listener(show_stopping)  # a stop during the run shows on the indicator
        try:
            for invocation in range(self._recursion_limit + 1):
                raised_here = len(raised)
                stream = graph.astream(
                    cast(Any, graph_input if invocation == 0 else None),
                    {**config, "recursion_limit": budget.next_limit()},
                    stream_mode=["values", "custom"],
                    version="v2",
                    subgraphs=True,
                    durability=plan.durability,
                    interrupt_before=list(plan.stored_before) or None,
                )
                async for part in stream:
                    chunk = cast(Mapping[str, Any], part)
                    if chunk["type"] == "values" and not chunk.get("ns"):
                        latest = dict(chunk["data"])
                        for interrupt in chunk.get("interrupts") or ():
                            raised.setdefault(interrupt.id, interrupt)
                            if interrupt.id in seen or interrupt.id in unstored:
                                continue  # paused before this run, and raised again
                            if plan.stores_pauses_at_exit or not await self._pause_stored(
                                conversation, graph, interrupt
                            ):
                                unstored.add(interrupt.id)  # `_deliver` opens it once the run is over
                                continue
                            seen.add(interrupt.id)
                            # A new pause: its cards (or questions) now, not when the step (and the run) ends.
                            if is_question(interrupt.value):
                                await self._open_questions(conversation, [interrupt], latest.get("messages", []))
                                continue
                            await self.open_review(conversation, interrupt, latest.get("messages", []))
                            feed.show(tracker.on_interrupt(interrupt))
                    elif chunk["type"] == "custom" and isinstance(chunk["data"], DelegationEvent):
                        feed.show(tracker.on_event(chunk["data"]))
                    elif chunk["type"] == "custom" and isinstance(chunk["data"], ModelWait):
                        feed.show(tracker.on_model_wait(chunk["data"]))
                    elif chunk["type"] == "custom" and isinstance(chunk["data"], RefusedHere):
                        await self._tell_refused(conversation, chunk["data"], requester, told)
                if not plan.stored_before or len(raised) > raised_here or not _calls_waiting(latest):
                    break
                # Stopped before `human_review`, the model's calls stored: go on at once.
            else:
                raise GraphRecursionError(f"more than {self._recursion_limit} invocations in one run")
        finally:
            offer.cancel()
            signal.remove_listener(show_stopping)
            await feed.close()
        return {**latest, "__interrupt__": list(raised.values())} if raised else latest

    async def _tell_refused(
        self, conversation: ConversationRef, refused: RefusedHere, requester: str | None, told: set[AskElsewhere]
    ) -> None:
        """Tell the requester where to ask for a call refused here for want of a decider, once per run.

        The model reads that the call was rejected by policy and may try it again in the same
        run; the requester is told once.
        """
        notice = AskElsewhere(
            tool_name=refused.tool_name,
            workspace_ids=refused.ruling.ask_in,
            unchecked=refused.ruling.unchecked and not refused.ruling.ask_in,
        )
        if notice in told:
            return
        told.add(notice)
        recipient = None
        if requester:
            recipient = Actor(
                platform=conversation.platform,
                workspace_id=conversation.workspace_id,
                user_id=requester,
                display_name=requester,
            )
        log.info(
            "%s refused here; telling the requester where to ask (%s) (thread_id=%s)",
            refused.tool_name,
            ", ".join(notice.workspace_ids) or "unchecked",
            conversation.thread_id,
        )
        await self.notify(conversation, notice, recipient=recipient)

    async def _pause_stored(self, conversation: ConversationRef, graph: ReviewAgent, interrupt: Interrupt) -> bool:
        """Wait until the conversation's checkpoint holds `interrupt`; False after `PAUSE_STORED_WAIT_S`.

        The checkpointer serialises its calls, so each look waits behind the write in flight
        rather than spinning while a slow write holds it; a look slower than
        `PAUSE_STORED_SLOW_S` is logged (the cards wait for the database). A pause not stored in
        time is opened by `_deliver` once the run is over: LangGraph has written every
        checkpoint by then.

        Raises:
            Exception: the checkpointer's, when the state cannot be read.
        """
        deadline = time.monotonic() + PAUSE_STORED_WAIT_S
        told = False
        while True:
            look = asyncio.ensure_future(graph.aget_state(self.config(conversation)))
            try:
                if not told:
                    await asyncio.wait({look}, timeout=PAUSE_STORED_SLOW_S)
                    if not look.done():
                        told = True
                        log.info(
                            "pause %s is not stored yet; its cards wait for it (thread_id=%s)",
                            interrupt.id,
                            conversation.thread_id,
                        )
                state = await look
            finally:
                look.cancel()  # a no-op once it is done; else this run was cancelled
            if any(stored.id == interrupt.id for stored in state.interrupts):
                return True
            if time.monotonic() >= deadline:
                log.warning(
                    "pause %s not stored after %gs; its cards wait for the run's end (thread_id=%s)",
                    interrupt.id,
                    PAUSE_STORED_WAIT_S,
                    conversation.thread_id,
                )
                return False
            await asyncio.sleep(_PAUSE_STORED_POLL_S)

    async def _deliver(self, conversation: ConversationRef, result: Mapping[str, Any], *, opened: set[str]) -> bool:
        """Post the answer, or the cards of the pauses the run stopped at; return whether all went out.

        Pauses whose ids are not in `opened` get their reviews opened first. A post that fails
        (after the platform client's own retries) is logged and reported as False: the run
        stays marked unfinished and `settle` posts it again later. Nothing empty is posted: a
        run that ended on an answer without text (stored by an older version; `llm_call` no
        longer stores one) is told as a `ModelFailed` notice saying why.
        """
        messages: list[AnyMessage] = result.get("messages", [])
        interrupts: list[Interrupt] = result.get("__interrupt__", [])
        if interrupts:
            for interrupt in interrupts:
                if interrupt.id in opened:
                    continue
                if is_question(interrupt.value):
                    await self._open_questions(conversation, [interrupt], messages)
                else:
                    await self.open_review(conversation, interrupt, messages)
            return await self._cards_out(conversation)
        answer = messages[-1] if messages else None
        stopper = stopped_by(answer)
        if stopper is not None:
            # A stopped turn: the conversation is told who stopped it, in place of an answer.
            stopped = TurnStopped(stopped_by_id=stopper["user_id"], stopped_by_name=stopper["name"])
            return await self.notify(conversation, stopped, recipient=None)
        text = answer.text if isinstance(answer, AIMessage) else ""
        if not text.strip():
            # Silence would leave the asker guessing whether anything was done (a delegation
            # may have run approved calls): say that there is no answer, and why.
            reason = no_answer_reason(answer) if isinstance(answer, AIMessage) else None
            log.warning("turn ended without text to post (thread_id=%s)", conversation.thread_id)
            notice = ModelFailed(kind=ModelErrorKind.NO_ANSWER, reason=reason or NoAnswerReason.EMPTY)
            return await self.notify(conversation, notice, recipient=None)
        try:
            await self.platform(conversation).post_answer(conversation, text)
        except Exception:
            log.exception("could not post the answer (thread_id=%s)", conversation.thread_id)
            return False
        return True

    async def _cards_out(self, conversation: ConversationRef) -> bool:
        """Whether every pending approval of the thread has a posted card."""
        pending = await self._approvals.pending_in_thread(conversation.thread_id)
        return all(approval.card_ref is not None for approval in pending)


def _calls_waiting(values: Mapping[str, Any]) -> bool:
    """Whether the graph would go on to `human_review` from `values` (its last message has calls)."""
    return should_continue(cast(AgentState, {"messages": values.get("messages", [])})) != END


def _escalation_of(config: WorkspaceConfig, tool_name: str) -> dict[str, Any]:
    """`NewAction`'s escalation fields for a call of `tool_name` (none without an escalation)."""
    rule = config.escalation(tool_name)
    if rule is None:
        return {}
    return {"escalates_in_s": rule.after_s, "escalate_to": rule.target}


def _human_id(anchor: str | None) -> str | None:
    """The checkpoint id of a human message with this platform id (None: LangGraph assigns one)."""
    return f"human:{anchor}" if anchor is not None else None


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


def _requester_id(messages: Sequence[AnyMessage], conversation: ConversationRef) -> str | None:
    """The user id of the author of the last human message, for a run that goes on from the state."""
    author = _author_of_last_request(messages, conversation)
    return author.user_id if author is not None else None


def _trust_offer(config: WorkspaceConfig, tool_name: str, channel_id: str, requester: Actor) -> int | None:
    """The trust a new card offers, in seconds (docs/decisions/0022), or None.

    Only where a trust setting covers the tool in the channel and one click could approve the
    call (quorum 1), for a known requester (a grant is theirs alone).
    """
    setting = config.trust_for(tool_name, channel_id)
    if setting is None or config.quorum(tool_name) != 1 or not requester.user_id:
        return None
    return setting.max_s


def _trust_matching(config: WorkspaceConfig, tool_name: str, channel_id: str) -> tuple[str, ...]:
    """The arguments a grant made on a new card binds (empty: every argument), which its card names.

    Stored with the card (`ApprovalRecord.trust_offer_matching`) and kept only with an offer.
    """
    setting = config.trust_for(tool_name, channel_id)
    return setting.matching if setting is not None else ()


def _spent(reviews: Sequence[ReviewRecord]) -> bool:
    """Whether a review among these has used up its attempts at resuming (`bot.upkeep.unfinished_work.MAX_ATTEMPTS`)."""
    return any(review.attempts > MAX_ATTEMPTS for review in reviews)


def _requester_of(review: ReviewRecord, conversation: ConversationRef) -> Actor | None:
    """Who asked for a review's calls, to be told privately; None when nobody known did (the conversation is told)."""
    if not review.requester_id:
        return None
    return Actor(
        platform=conversation.platform,
        workspace_id=conversation.workspace_id,
        user_id=review.requester_id,
        display_name=review.requester_name,
    )


def _unknown_requester(conversation: ConversationRef) -> Actor:
    return Actor(
        platform=conversation.platform, workspace_id=conversation.workspace_id, user_id="", display_name="unknown"
    )
