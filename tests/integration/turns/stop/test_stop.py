"""Stop (docs/decisions/0021) in the core, on a real PostgreSQL: who may stop, what stops, and when.

A turn is stopped while its model call is under way, while a tool runs (one that finishes,
one that is cancelled), while a card waits, from another replica, twice, by someone who may
not, and racing an Approve. Each time the history stays valid (one result per call) and the
next message is answered normally.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from bot.admin.commands import StopTurn
from bot.admin.views import StopRequested
from bot.agents import prompts
from bot.audit.entries import AuditKind
from bot.base.agent_kind import AgentKind
from bot.base.errors import (
    AlreadyDecidedError,
    AlreadyStoppedError,
    NothingToStopError,
    StopNotPermittedError,
    TurnEndedError,
)
from bot.base.mode import Mode
from bot.ports import TurnStopped
from bot.reviews.decisions import Approve
from bot.reviews.lifecycle import ApprovalStatus, ReviewStatus
from bot.tools.registry import ToolRegistry, ToolSpec
from tests.integration.agents.test_subagents_service import SPECS, role, team, to_both
from tests.support.barriers import wait_until
from tests.support.gate import Gate
from tests.support.recording_platform import RecordingPlatform
from tests.support.scripted_model import ScriptedChatModel, calls, tool_call
from tests.support.service import actor, conversation, message, open_service
from tests.support.tools import make_test_registry


class Tools:
    """`send` (review), `report` (auto, finishes when released) and `fetch` (auto, cancellable)."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.running = asyncio.Event()
        self.release = asyncio.Event()

    def registry(self) -> ToolRegistry:
        @tool
        async def send(to: str, body: str) -> str:
            """Send a message to someone."""
            self.events.append(f"send {to}")
            return f"sent to {to}"

        @tool
        async def report(topic: str) -> str:
            """Write a report (slow; cannot be cut short)."""
            self.events.append(f"report {topic} started")
            self.running.set()
            await self.release.wait()
            self.events.append(f"report {topic} finished")
            return f"report on {topic}"

        @tool
        async def fetch(url: str) -> str:
            """Fetch a page (slow; a stop may cancel it)."""
            self.events.append(f"fetch {url} started")
            self.running.set()
            try:
                await self.release.wait()
            except asyncio.CancelledError:
                self.events.append(f"fetch {url} cancelled")
                raise
            return f"page {url}"

        return ToolRegistry(
            [
                ToolSpec(tool=send, default_mode=Mode.REVIEW),
                ToolSpec(tool=report, default_mode=Mode.AUTO),
                ToolSpec(tool=fetch, default_mode=Mode.AUTO, cancellable=True),
            ]
        )


def agent(messages: Sequence[BaseMessage]) -> AIMessage:
    """`send <who>`, `report <topic>`, `fetch <url>` call those tools; results are echoed; else an echo."""
    last = messages[-1]
    if isinstance(last, ToolMessage):
        return AIMessage(f"done: {last.text}")
    said = next((m.text for m in reversed(messages) if isinstance(m, HumanMessage)), "")
    words = said.split()
    if words[:1] == ["send"]:
        return calls(*(tool_call("send", {"to": who, "body": "hi"}) for who in words[1:]))
    if words[:1] == ["report"]:
        return calls(tool_call("report", {"topic": words[1]}))
    if words[:1] == ["fetch"]:
        return calls(tool_call("fetch", {"url": words[1]}))
    return AIMessage(f"you said: {said}")


def stopped(platform: RecordingPlatform) -> list[TurnStopped]:
    return [notice for _, notice, _ in platform.notices if isinstance(notice, TurnStopped)]


async def history(h) -> list[BaseMessage]:
    state = await h.graph(conversation()).aget_state({"configurable": {"thread_id": conversation().thread_id}})
    return list(state.values["messages"])


def paired(messages: Sequence[BaseMessage]) -> bool:
    """Every tool call is followed by exactly its results, in call order (what Gemini needs)."""
    for index, message_ in enumerate(messages):
        if isinstance(message_, AIMessage) and message_.tool_calls:
            ids = [call["id"] for call in message_.tool_calls]
            answers = messages[index + 1 : index + 1 + len(ids)]
            if [m.tool_call_id for m in answers if isinstance(m, ToolMessage)] != ids:
                return False
    return True


async def test_stop_during_a_model_call_abandons_it_and_makes_no_new_call(db_url):
    """The model call under way is abandoned at once; no tool, no card, no further model call; the next message is answered."""
    tools, gate = Tools(), Gate()
    model = ScriptedChatModel(script=agent, gate=gate)
    async with open_service(db_url, model, tools.registry()) as h:
        gate.arm()
        h.service.submit_message(message("send bob"))
        await gate.wait_arrived()
        reply = await h.service.stop_turn(actor("alice"), conversation=conversation())
        assert not reply.paused and reply.requester_id == "alice"
        # Stopped while the model still holds its answer: nobody waits for it.
        await wait_until(lambda: bool(stopped(h.platform)), "the stopped notice")
        assert model.prompts == []
        gate.release()
        await h.service.tasks.join()
        assert [(n.stopped_by_id, n.stopped_by_name) for n in stopped(h.platform)] == [("alice", "alice")]
        assert h.platform.cards == {} and tools.events == [] and h.platform.answers == []
        last = (await history(h))[-1]
        assert isinstance(last, AIMessage) and last.text == prompts.STOPPED_ANSWER.format(name="alice")
        await h.service.handle_message(message("hello"))
        # The model reads that the user stopped the turn, and answers the next message normally.
        assert "Stopped by alice." in [m.text for m in model.prompts[-1]]
        assert h.platform.answers[-1][1] == "you said: hello"
        audit = await h.audit.recent("W1")
        assert [(r.kind, r.outcome, r.actor_id) for r in audit] == [(AuditKind.DECISION, "stopped", "alice")]
        assert audit[0].detail["while"] == "running" and audit[0].thread_id == conversation().thread_id


async def test_a_tool_that_cannot_be_cancelled_finishes_and_nothing_follows(db_url):
    """Stopped while `report` runs: it finishes and its result is kept; the model is not asked again."""
    tools = Tools()
    model = ScriptedChatModel(script=agent)
    async with open_service(db_url, model, tools.registry()) as h:
        h.service.submit_message(message("report q3"))
        await asyncio.wait_for(tools.running.wait(), 60)
        await h.service.stop_turn(actor("alice"), conversation=conversation())
        await asyncio.sleep(0)  # the stop is in; the tool still runs
        assert not stopped(h.platform)
        tools.release.set()
        await h.service.tasks.join()
        assert tools.events == ["report q3 started", "report q3 finished"]
        assert len(model.prompts) == 1 and len(stopped(h.platform)) == 1
        messages = await history(h)
        result = next(m for m in messages if isinstance(m, ToolMessage))
        assert result.text == "report on q3" and paired(messages)
        assert messages[-1].text == "Stopped by alice."


async def test_a_cancellable_tool_is_cancelled_by_the_stop(db_url):
    """Stopped while `fetch` runs: it is cancelled at once, the model reads that its outcome is unknown."""
    tools = Tools()
    model = ScriptedChatModel(script=agent)
    async with open_service(db_url, model, tools.registry()) as h:
        h.service.submit_message(message("fetch https://example.test/a"))
        await asyncio.wait_for(tools.running.wait(), 60)
        await h.service.stop_turn(actor("alice"), conversation=conversation())
        await h.service.tasks.join()  # nothing released the tool: the stop cut it short
        assert tools.events == ["fetch https://example.test/a started", "fetch https://example.test/a cancelled"]
        assert len(model.prompts) == 1 and len(stopped(h.platform)) == 1
        messages = await history(h)
        result = next(m for m in messages if isinstance(m, ToolMessage))
        assert result.status == "error" and result.text == prompts.CANCELLED_CALL.format(name="alice")
        assert paired(messages)
        # The ledger keeps the cancelled result: a re-run after a crash would not call it "unknown".
        stored = await h.ledger.recorded(thread_id=conversation().thread_id, tool_call_id=result.tool_call_id)
        assert stored is not None and stored.content == result.content


async def test_stop_with_a_card_pending_closes_it_and_the_conversation_goes_on(db_url):
    """Both cards of a pause close as stopped; a later Approve is told so; the model reads one result per call."""
    tools = Tools()
    model = ScriptedChatModel(script=agent)
    async with open_service(db_url, model, tools.registry()) as h:
        await h.service.handle_message(message("send bob eve"))
        first, second = sorted(h.platform.cards.values(), key=lambda card: card.position)
        reply = await h.service.stop_turn(actor("alice"), conversation=conversation())
        assert reply.paused and reply.cards_closed == 2
        await h.service.tasks.join()
        for card in (first, second):
            stored = await h.approvals.get(card.approval.id)
            assert stored is not None and stored.status is ApprovalStatus.STOPPED
            assert (stored.decided_by_id, stored.decided_at is not None) == ("alice", True)
        redrawn = [u.approval for u in h.platform.updates]
        assert {a.id for a in redrawn if a.status is ApprovalStatus.STOPPED} == {first.approval.id, second.approval.id}
        with pytest.raises(AlreadyDecidedError) as late:
            await h.service.decide(first.approval.id, actor("alice"), Approve())
        assert (late.value.outcome, late.value.decided_by_id) == ("stopped", "alice")
        assert tools.events == [] and len(stopped(h.platform)) == 1
        assert len(model.prompts) == 1  # the stop made no model call
        reviews = await h.approvals.reviews_in_thread(conversation().thread_id, list(ReviewStatus))
        assert [r.status for r in reviews] == [ReviewStatus.DONE]
        messages = await history(h)
        results = [m for m in messages if isinstance(m, ToolMessage)]
        assert [r.text for r in results] == [prompts.STOPPED_CALL.format(name="alice")] * 2 and paired(messages)
        await h.service.handle_message(message("and now?"))
        assert h.platform.answers[-1][1] == "you said: and now?"
        assert await h.service.pending_approvals(conversation()) == []
        audit = await h.audit.recent("W1")
        assert sorted((r.kind, r.outcome, str(r.approval_id)) for r in audit) == sorted(
            [
                (AuditKind.DECISION, "stopped", "None"),  # the turn
                (AuditKind.DECISION, "stopped", first.approval.id),
                (AuditKind.DECISION, "stopped", second.approval.id),
                (AuditKind.REFUSED, "already_decided", first.approval.id),  # the late Approve
            ]
        )
        turn_row = next(r for r in audit if r.approval_id is None)
        assert turn_row.detail["while"] == "paused"
        assert sorted(turn_row.detail["approvals_stopped"]) == sorted([first.approval.id, second.approval.id])


async def test_who_may_stop_and_what_everyone_else_is_told(db_url):
    """Bob (not the requester, not an admin) is refused and audited, the turn goes on; an admin may stop it."""
    tools = Tools()
    model = ScriptedChatModel(script=agent)
    platform = RecordingPlatform(admins={"carol"})
    async with open_service(db_url, model, tools.registry(), platform) as h:
        with pytest.raises(NothingToStopError):
            await h.service.stop_turn(actor("alice"), conversation=conversation())
        h.service.submit_message(message("report q3"))
        await asyncio.wait_for(tools.running.wait(), 60)
        with pytest.raises(StopNotPermittedError) as refused:
            await h.service.stop_turn(actor("bob"), conversation=conversation())
        assert (refused.value.reason, refused.value.requester_id) == ("not_requester_or_admin", "alice")
        tools.release.set()
        await h.service.tasks.join()
        assert h.platform.answers[-1][1] == "done: report on q3" and not stopped(h.platform)
        # The turn is over: the button of that turn now names an ended turn.
        turn_id = await h.database.pool.fetchval("SELECT turn_id FROM conversations")
        with pytest.raises(TurnEndedError):
            await h.service.stop_turn(actor("alice"), turn_id=turn_id)
        with pytest.raises(TurnEndedError):
            await h.service.stop_turn(actor("alice"), turn_id="not a turn id")
        # A workspace admin may stop someone else's turn.
        tools.running.clear()
        tools.release.clear()
        h.service.submit_message(message("report q4"))
        await asyncio.wait_for(tools.running.wait(), 60)
        await h.service.stop_turn(actor("carol"), conversation=conversation())
        tools.release.set()
        await h.service.tasks.join()
        assert [n.stopped_by_id for n in stopped(h.platform)] == ["carol"]
        audit = await h.audit.recent("W1")
    assert [(r.kind, r.outcome, r.actor_id) for r in audit] == [
        (AuditKind.DECISION, "stopped", "carol"),
        (AuditKind.REFUSED, "not_permitted", "bob"),
    ]
    assert audit[1].detail["attempted"] == "stop" and audit[1].reason == "not_requester_or_admin"


async def test_stop_clicked_twice_stops_once(db_url):
    """A second Stop (the same person or another) is told who stopped the turn; one stop is recorded."""
    tools = Tools()
    model = ScriptedChatModel(script=agent)
    platform = RecordingPlatform(admins={"carol"})
    async with open_service(db_url, model, tools.registry(), platform) as h:
        h.service.submit_message(message("report q3"))
        await asyncio.wait_for(tools.running.wait(), 60)
        turn_id = await h.database.pool.fetchval("SELECT turn_id FROM conversations")
        outcomes = await asyncio.gather(
            h.service.stop_turn(actor("alice"), turn_id=turn_id),
            h.service.stop_turn(actor("alice"), turn_id=turn_id),
            h.service.stop_turn(actor("carol"), conversation=conversation()),
            return_exceptions=True,
        )
        tools.release.set()
        await h.service.tasks.join()
        audit = await h.audit.recent("W1")
    refused = [o for o in outcomes if isinstance(o, AlreadyStoppedError)]
    assert len(refused) == 2 and len(outcomes) - len(refused) == 1
    winner = next(r.actor_id for r in audit if r.outcome == "stopped")
    assert all(r.stopped_by_id == winner for r in refused)
    assert sorted(r.outcome for r in audit) == ["already_stopped", "already_stopped", "stopped"]
    assert len(stopped(h.platform)) == 1


async def test_a_stop_and_an_approve_racing_on_one_card_decide_it_once(db_url):
    """Exactly one of them moves the card, with one audit row; the history stays valid, nothing stays pending."""
    tools = Tools()
    model = ScriptedChatModel(script=agent)
    winners = set()
    async with open_service(db_url, model, tools.registry()) as h:
        for round_ in range(4):  # the race goes either way; each way must hold
            where = conversation(channel=f"C{round_}")
            await h.service.handle_message(message("send bob", conv=where))
            [approval] = await h.service.pending_approvals(where)
            approve, stop = await asyncio.gather(
                h.service.decide(approval.id, actor("alice"), Approve()),
                h.service.stop_turn(actor("alice"), conversation=where),
                return_exceptions=True,
            )
            await h.service.tasks.join()
            stored = await h.approvals.get(approval.id)
            assert stored is not None
            winners.add(stored.status)
            decisions = [
                r
                for r in await h.audit.recent("W1", limit=100)
                if r.approval_id == approval.id and r.kind is AuditKind.DECISION
            ]
            assert [r.outcome for r in decisions] == [stored.status.value]
            if stored.status is ApprovalStatus.STOPPED:
                assert isinstance(approve, AlreadyDecidedError) and approve.outcome == "stopped"
                assert not isinstance(stop, Exception)
            else:
                assert stored.status is ApprovalStatus.APPROVED and not isinstance(approve, BaseException)
                # The stop came second: the turn was still at work (resuming), or had just ended.
                assert not isinstance(stop, Exception) or isinstance(stop, NothingToStopError)
            assert tools.events.count("send bob") <= 1
            state = await h.graph(where).aget_state({"configurable": {"thread_id": where.thread_id}})
            assert paired(state.values["messages"]) and await h.service.pending_approvals(where) == []
    assert winners <= {ApprovalStatus.STOPPED, ApprovalStatus.APPROVED}


async def test_a_stop_recorded_on_another_replica_reaches_the_running_turn(db_url):
    """Replica B records the stop; the turn on replica A ends at its next step (A finds it within a poll)."""
    tools = Tools()
    model = ScriptedChatModel(script=agent)
    platform_b = RecordingPlatform()
    async with (
        open_service(db_url, model, tools.registry()) as a,
        open_service(db_url, ScriptedChatModel(script=agent), Tools().registry(), platform_b) as b,
    ):
        a.service.submit_message(message("report q3"))
        await asyncio.wait_for(tools.running.wait(), 60)
        await b.service.stop_turn(actor("alice"), conversation=conversation())
        # A learns of it by itself (its watch looks at PostgreSQL), while the tool still runs.
        await wait_until(
            lambda: any(activity.stopping == "alice" for _, activity in a.platform.activities), "A seeing the stop"
        )
        tools.release.set()
        await a.service.tasks.join()
        assert len(stopped(a.platform)) == 1 and len(model.prompts) == 1
        assert platform_b.notices == [] and platform_b.answers == []


async def test_a_card_stopped_on_a_replica_with_nothing_running_is_answered_there(db_url):
    """The turn waits for a card from replica A (since stopped, say); replica B's stop closes and resumes it."""
    tools = Tools()
    model = ScriptedChatModel(script=agent)
    async with open_service(db_url, model, tools.registry()) as a:
        await a.service.handle_message(message("send bob"))
        [card] = list(a.platform.cards.values())
    platform_b = RecordingPlatform(name="test")
    async with open_service(db_url, ScriptedChatModel(script=agent), Tools().registry(), platform_b) as b:
        await b.service.stop_turn(actor("alice"), conversation=conversation())
        await b.service.tasks.join()
        assert [u.approval.status for u in platform_b.updates] == [ApprovalStatus.STOPPED]
        assert len(stopped(platform_b)) == 1
        stored = await b.approvals.get(card.approval.id)
        assert stored is not None and stored.status is ApprovalStatus.STOPPED and tools.events == []


async def test_a_pause_raised_after_a_stop_made_elsewhere_is_closed_at_once(db_url):
    """B stops the turn while A's model call is held; the call's card (A learned too late) is closed as stopped."""
    tools, gate = Tools(), Gate()
    model = ScriptedChatModel(script=agent, gate=gate)
    async with (
        open_service(db_url, model, tools.registry()) as a,
        open_service(db_url, ScriptedChatModel(script=agent), Tools().registry(), RecordingPlatform()) as b,
    ):
        gate.arm()
        a.service.submit_message(message("send bob"))
        await gate.wait_arrived()
        await b.service.stop_turn(actor("alice"), conversation=conversation())
        gate.release()  # A's model now asks for a reviewed call, unless A's watch saw the stop first
        await a.service.tasks.join()
        await b.service.tasks.join()
        assert await a.service.pending_approvals(conversation()) == [] and tools.events == []
        assert len(stopped(a.platform)) == 1
        for card in a.platform.cards.values():  # a card posted in that moment is shown as stopped
            stored = await a.approvals.get(card.approval.id)
            assert stored is not None and stored.status is ApprovalStatus.STOPPED
            assert a.platform.cards[stored.card_ref or ""].approval.status is ApprovalStatus.STOPPED
        assert paired(await history(a))


async def test_stop_typed_as_a_command_with_subagent_cards_waiting(db_url, tool_log):
    """`/countersign stop` while two delegations wait for cards: both close, no subagent runs again, one stopped notice."""
    model = team(to_both)
    async with open_service(
        db_url, model, make_test_registry(tool_log), subagents=SPECS, default_agent=AgentKind.SUBAGENTS
    ) as h:
        await h.service.handle_message(message("bob"))
        await wait_until(lambda: len(h.platform.cards) == 2, "both delegations' cards")
        await h.service.tasks.join()
        calls_before = len(model.prompts)
        reply = await h.admin.execute(actor("alice"), StopTurn(), here="C1", conversation=conversation())
        assert isinstance(reply, StopRequested) and reply.paused and reply.cards_closed == 2
        await h.service.tasks.join()
        assert {c.approval.status for c in h.platform.cards.values()} == {ApprovalStatus.STOPPED}
        assert tool_log.calls == [] and len(stopped(h.platform)) == 1
        assert len(model.prompts) == calls_before  # no subagent, no supervisor model call after the stop
        messages = await history(h)
        assert paired(messages) and messages[-1].text == "Stopped by alice."
        assert [m.text for m in messages if isinstance(m, ToolMessage)] == [
            prompts.STOPPED_CALL.format(name="alice")
        ] * 2
        await h.service.handle_message(message("carol"))
        await wait_until(lambda: len([c for c in h.platform.cards.values() if c.approval.is_pending]) == 2, "new cards")
        assert role(model.prompts[-1]) in {"alpha", "beta"}
