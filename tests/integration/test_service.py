"""The core service on a real PostgreSQL: decisions, locks, recovery after crashes."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from bot.agents import prompts
from bot.audit.entries import AuditEntry, AuditKind
from bot.base.errors import (
    AlreadyDecidedError,
    ApprovalNotFoundError,
    InvalidDecisionError,
    NotPermittedError,
)
from bot.ports import ReviewPending
from bot.reviews.decisions import Approve, Edit, EditedAction, Reject
from bot.reviews.lifecycle import ApprovalStatus, ReviewStatus
from bot.reviews.store import VoteKind
from bot.settings import DatabaseSettings
from bot.storage.database import open_database
from bot.storage.locks import ThreadLocks
from tests.support.recording_platform import RecordingPlatform
from tests.support.scripted_model import ScriptedChatModel, calls, tool_call
from tests.support.service import actor, conversation, message, open_service


def send_call(to: str = "bob"):
    return tool_call("send", {"to": to, "body": "hi"})


async def pending_card(h, text: str = "send it"):
    await h.service.handle_message(message(text))
    [card] = [c for c in h.platform.cards.values() if c.approval.status is ApprovalStatus.PENDING]
    return card.approval


async def test_a_message_is_answered(db_url, registry):
    """A plain message runs the graph and posts the model's answer."""
    model = ScriptedChatModel(replies=[AIMessage("hello alice")])
    async with open_service(db_url, model, registry) as h:
        await h.service.handle_message(message("hi"))
    assert h.platform.answers == [(conversation().thread_id, "hello alice")]


async def test_decision_is_recorded_once_with_an_audit_row(db_url, registry, tool_log):
    """Approve: the approval row, the audit row, the card update and one tool run."""
    model = ScriptedChatModel(replies=[calls(send_call()), AIMessage("done")])
    async with open_service(db_url, model, registry) as h:
        approval = await pending_card(h)
        decided = await h.service.decide(approval.id, actor("alice"), Approve())
        await h.service.tasks.join()
        assert decided.status is ApprovalStatus.APPROVED and decided.decided_by_id == "alice"
        with pytest.raises(AlreadyDecidedError) as again:
            await h.service.decide(approval.id, actor("alice"), Approve())
        assert again.value.decided_by_id == "alice" and again.value.outcome == "approved"
        rows = await h.audit.recent("W1")
    assert tool_log.calls == [("send", {"to": "bob", "body": "hi", "urgent": False})]
    assert [(r.kind, r.outcome) for r in rows] == [
        (AuditKind.REFUSED, "already_decided"),
        (AuditKind.DECISION, "approved"),
    ]
    assert rows[1].proposed_args == {"to": "bob", "body": "hi"} and rows[1].final_args == {
        "to": "bob",
        "body": "hi",
    }
    assert h.platform.updates[-1].approval.status is ApprovalStatus.APPROVED
    assert h.platform.answers[-1][1] == "done"


async def test_refusals_change_nothing(db_url, registry, tool_log):
    """A stranger, an invalid edit and an unknown id are refused and audited; the card stays pending and usable."""
    model = ScriptedChatModel(replies=[calls(send_call()), AIMessage("done")])
    async with open_service(db_url, model, registry) as h:
        approval = await pending_card(h)
        with pytest.raises(NotPermittedError):
            await h.service.decide(approval.id, actor("mallory"), Approve())
        with pytest.raises(InvalidDecisionError, match="to"):
            await h.service.decide(
                approval.id,
                actor("alice"),
                Edit(edited_action=EditedAction(name="send", args={"to": 3})),
            )
        with pytest.raises(InvalidDecisionError, match="cannot change the tool"):
            await h.service.decide(
                approval.id,
                actor("alice"),
                Edit(edited_action=EditedAction(name="wipe", args={"target": "x"})),
            )
        with pytest.raises(ApprovalNotFoundError):
            await h.service.decide("nope", actor("alice"), Approve())
        still = await h.approvals.get(approval.id)
        assert still is not None and still.status is ApprovalStatus.PENDING
        assert tool_log.calls == []
        refused = await h.audit.recent("W1")
        assert [r.outcome for r in refused] == ["unknown_approval", "invalid", "invalid", "not_permitted"]
        assert (refused[0].approval_id, refused[0].detail) == (None, {"named": "nope"})  # not an approval id
        assert refused[-1].actor_id == "mallory"
        await h.service.decide(approval.id, actor("alice"), Approve())
        await h.service.tasks.join()
    assert len(tool_log.calls) == 1


async def test_admin_may_decide_and_the_platform_is_asked_only_for_others(db_url, registry):
    """An admin (per the platform) may decide someone else's call."""
    model = ScriptedChatModel(replies=[calls(send_call()), AIMessage("done")])
    platform = RecordingPlatform(admins={"carol"})
    async with open_service(db_url, model, registry, platform) as h:
        approval = await pending_card(h)
        decided = await h.service.decide(approval.id, actor("carol"), Reject(message="no"))
        await h.service.tasks.join()
    assert decided.status is ApprovalStatus.REJECTED and decided.reason == "no"


async def test_two_calls_resume_only_when_both_are_decided(db_url, registry, tool_log):
    """One pause with two cards: the first decision does not resume; the second does, once."""
    model = ScriptedChatModel(replies=[calls(send_call("bob"), send_call("eve")), AIMessage("both handled")])
    async with open_service(db_url, model, registry) as h:
        await h.service.handle_message(message("send both"))
        first, second = sorted(h.platform.cards.values(), key=lambda c: c.position)
        assert (first.total, second.total) == (2, 2)
        await h.service.decide(first.approval.id, actor(), Approve())
        await h.service.tasks.join()
        state = await h.graph(conversation()).aget_state({"configurable": {"thread_id": conversation().thread_id}})
        assert state.interrupts and tool_log.calls == []
        await h.service.decide(second.approval.id, actor(), Reject())
        await h.service.tasks.join()
    assert [args["to"] for _, args in tool_log.calls] == ["bob"]
    assert h.platform.answers[-1][1] == "both handled"


async def test_concurrent_decisions_of_one_pause_resume_exactly_once(db_url, registry, tool_log):
    """Both approvals decided at the same moment: one resume, each tool once, one answer."""
    model = ScriptedChatModel(replies=[calls(send_call("bob"), send_call("eve")), AIMessage("done")])
    async with open_service(db_url, model, registry) as h:
        await h.service.handle_message(message("send both"))
        cards = list(h.platform.cards.values())
        for _ in range(3):  # several rounds of racing clicks on both cards
            results = await asyncio.gather(
                *[h.service.decide(c.approval.id, actor(), Approve()) for c in cards],
                return_exceptions=True,
            )
            assert all(not isinstance(r, Exception) or isinstance(r, AlreadyDecidedError) for r in results)
        await h.service.tasks.join()
    assert sorted(args["to"] for _, args in tool_log.calls) == ["bob", "eve"]
    assert [a for _, a in h.platform.answers] == ["done"]


async def test_a_message_while_pending_is_refused_with_the_cards(db_url, registry):
    """A new message while a card waits is not fed to the graph; the sender gets the pending cards."""
    model = ScriptedChatModel(replies=[calls(send_call()), AIMessage("done")])
    async with open_service(db_url, model, registry) as h:
        approval = await pending_card(h)
        await h.service.handle_message(message("hello?", user="bob"))
    assert len(model.prompts) == 1
    [(_, notice, recipient)] = h.platform.notices
    assert isinstance(notice, ReviewPending) and recipient == "bob"
    assert [a.id for a in notice.approvals] == [approval.id]


async def test_messages_of_one_conversation_never_run_at_the_same_time(db_url, registry):
    """Five messages at once in one conversation: the model is never called concurrently."""
    model = ScriptedChatModel(script=lambda msgs: AIMessage(f"ok {len(msgs)}"), delay_s=0.05)
    async with open_service(db_url, model, registry) as h:
        await asyncio.gather(*[h.service.handle_message(message(f"m{i}")) for i in range(5)])
    assert model.max_active == 1
    assert len(h.platform.answers) == 5


async def test_different_conversations_run_in_parallel(db_url, registry):
    """Messages in different conversations do overlap (the lock is per thread)."""
    model = ScriptedChatModel(script=lambda msgs: AIMessage("ok"), delay_s=0.2)
    async with open_service(db_url, model, registry) as h:
        await asyncio.gather(*[h.service.handle_message(message("m", conv=conversation(f"C{i}"))) for i in range(3)])
    assert model.max_active > 1


async def test_more_busy_conversations_than_pool_connections_do_not_deadlock(db_url, registry):
    """Twelve conversations needing cards at once with pools of three: every card arrives."""
    model = ScriptedChatModel(script=lambda msgs: calls(send_call()), delay_s=0.02)
    async with open_service(db_url, model, registry, pool_size=3) as h:
        messages = [message("send", conv=conversation(f"C{i}")) for i in range(12)]
        await asyncio.wait_for(asyncio.gather(*[h.service.handle_message(m) for m in messages]), timeout=30)
        cards = list(h.platform.cards.values())
        await asyncio.wait_for(
            asyncio.gather(*[h.service.decide(c.approval.id, actor(), Reject()) for c in cards]),
            timeout=30,
        )
        model.script = lambda msgs: AIMessage("fine")
        await asyncio.wait_for(h.service.tasks.join(), timeout=30)
    assert len(cards) == 12
    assert len(h.platform.answers) == 12


async def test_the_thread_lock_holds_across_processes(db_url):
    """Two independent pools (as two replicas would have): the second waits for the first's lock."""
    settings = DatabaseSettings(url=db_url, pool_max_size=3)
    async with (
        open_database(settings, run_migrations=False) as one,
        open_database(settings, run_migrations=False) as two,
    ):
        first, second = ThreadLocks(one.lock_pool), ThreadLocks(two.lock_pool)
        order: list[str] = []
        held = asyncio.Event()

        async def hold_first():
            async with first.hold("test:W1:C1"):
                order.append("first in")
                held.set()
                await asyncio.sleep(0.3)  # a while to hold it; the order holds however long
                order.append("first out")

        async def then_second():
            await held.wait()
            async with second.hold("test:W1:C1"):
                order.append("second in")

        await asyncio.gather(hold_first(), then_second())
    assert order == ["first in", "first out", "second in"]


async def test_a_repeated_delivery_is_dropped(db_url, registry):
    """The same platform message delivered twice runs the agent once."""
    model = ScriptedChatModel(replies=[AIMessage("once")])
    async with open_service(db_url, model, registry) as h:
        await h.service.handle_message(message("hi", message_id="1.0001"))
        await h.service.handle_message(message("hi", message_id="1.0001"))
    assert [a for _, a in h.platform.answers] == ["once"]


# --- recovery: the checkpoint is the truth; settle() repairs crash windows ------------------


async def test_an_interrupt_without_review_rows_gets_its_card_on_the_next_message(db_url, registry):
    """Crash between the pause and the approvals rows: the next message creates the card and is refused."""
    model = ScriptedChatModel(replies=[calls(send_call()), AIMessage("done")])
    async with open_service(db_url, model, registry) as h:
        conv = conversation()
        config = {"configurable": {"thread_id": conv.thread_id}, "recursion_limit": 25}
        await h.database.pool.execute(
            "INSERT INTO conversations (thread_id, platform, workspace_id, channel_id) VALUES ($1, 'test', 'W1', 'C1')",
            conv.thread_id,
        )
        await h.graph(conv).ainvoke({"messages": [HumanMessage("send it")]}, config)  # paused, no rows
        assert h.platform.cards == {}
        await h.service.handle_message(message("anything?"))
        [card] = h.platform.cards.values()
        assert card.approval.tool_name == "send" and card.approval.tool_call_id is not None
        assert isinstance(h.platform.notices[-1][1], ReviewPending)
        assert len(model.prompts) == 1  # the new message did not reach the model


async def test_a_claimed_review_is_resumed_after_a_restart(db_url, registry, tool_log):
    """Crash after the last decision was recorded but before the resume: recover() finishes it once."""
    model = ScriptedChatModel(replies=[calls(send_call()), AIMessage("finished after restart")])
    async with open_service(db_url, model, registry) as h:
        approval = await pending_card(h)
        audit = AuditEntry(kind=AuditKind.DECISION, workspace_id="W1", outcome="approved")
        result = await h.approvals.vote(approval.id, actor=actor(), kind=VoteKind.APPROVE, quorum=1, audit=audit)
        assert result.review_complete
    assert tool_log.calls == []
    async with open_service(db_url, model, registry) as restarted:
        await restarted.service.recover()
        await restarted.service.tasks.join()
        review = await restarted.approvals.review(approval.review_id)
    assert review is not None and review.status is ReviewStatus.DONE
    assert len(tool_log.calls) == 1
    assert restarted.platform.answers[-1][1] == "finished after restart"


async def test_a_tool_round_cut_short_is_finished_without_running_a_started_call_twice(db_url, registry, tool_log):
    """Crash inside the tool node: the next message finishes the round; the started call is not re-run."""
    started = tool_call("lookup", {"query": "a"})
    fresh = tool_call("lookup", {"query": "b"})
    model = ScriptedChatModel(replies=[AIMessage("round finished"), AIMessage("answer to the new message")])
    async with open_service(db_url, model, registry) as h:
        conv = conversation()
        config = {"configurable": {"thread_id": conv.thread_id}, "recursion_limit": 25}
        await h.database.pool.execute(
            "INSERT INTO conversations (thread_id, platform, workspace_id, channel_id) VALUES ($1, 'test', 'W1', 'C1')",
            conv.thread_id,
        )
        graph = h.graph(conv)
        await graph.aupdate_state(
            config,
            {
                "messages": [HumanMessage("look up a and b"), calls(started, fresh)],
                "review_plan": {started["id"]: "auto", fresh["id"]: "auto"},
            },
            as_node="llm_call",
        )
        await h.ledger.claim(
            thread_id=conv.thread_id, tool_call_id=started["id"], tool_name="lookup", args={}, reviewed=False
        )
        await h.service.handle_message(message("and now?"))
        state = await graph.aget_state(config)
    assert tool_log.calls == [("lookup", {"query": "b"})]
    results = [m for m in state.values["messages"] if m.type == "tool"]
    assert [m.content for m in results] == [prompts.ALREADY_STARTED_MESSAGE, "found b"]
    assert [a for _, a in h.platform.answers] == ["round finished", "answer to the new message"]


async def test_a_card_opened_while_finishing_a_cut_round_belongs_to_the_original_requester(db_url, registry, tool_log):
    """Alice's round was cut short; Mallory's message finishes it and a gated call follows: the card is Alice's."""
    started = tool_call("lookup", {"query": "a"})
    model = ScriptedChatModel(replies=[calls(send_call("bob")), AIMessage("sent")])
    async with open_service(db_url, model, registry) as h:
        conv = conversation()
        config = {"configurable": {"thread_id": conv.thread_id}, "recursion_limit": 25}
        await h.database.pool.execute(
            "INSERT INTO conversations (thread_id, platform, workspace_id, channel_id) VALUES ($1, 'test', 'W1', 'C1')",
            conv.thread_id,
        )
        author = {"countersign_author": {"user_id": "alice", "name": "alice"}}
        await h.graph(conv).aupdate_state(
            config,
            {
                "messages": [HumanMessage("look up a, then tell bob", additional_kwargs=author), calls(started)],
                "review_plan": {started["id"]: "auto"},
            },
            as_node="llm_call",
        )
        await h.service.handle_message(message("what's going on?", user="mallory"))
        [card] = [c.approval for c in h.platform.cards.values()]
        with pytest.raises(NotPermittedError):
            await h.service.decide(card.id, actor("mallory"), Approve())
    assert (card.requester_id, card.tool_name) == ("alice", "send")
    assert tool_log.calls == [("lookup", {"query": "a"})]


async def test_model_failure_is_a_notice_and_the_thread_stays_usable(db_url, registry):
    """The model failing after retries gives a notice; the next message in the thread is answered."""
    from langchain_core.exceptions import ModelAPIError

    model = ScriptedChatModel(replies=[ModelAPIError("503 UNAVAILABLE"), AIMessage("back again")])
    async with open_service(db_url, model, registry) as h:
        await h.service.handle_message(message("hello"))
        await h.service.handle_message(message("hello again"))
    assert [type(n).__name__ for _, n, _ in h.platform.notices] == ["ModelFailed"]
    assert h.platform.answers[-1][1] == "back again"
    assert "hello" in str(model.prompts[-1])


async def test_an_approved_call_with_a_huge_integer_runs_once(db_url):
    """An integer beyond 64 bits (kept as a float in the checkpoint, stored as jsonb) still matches its approval."""
    from langchain_core.tools import tool

    from bot.base.mode import Mode
    from bot.tools.registry import ToolRegistry, ToolSpec

    ran: list[float] = []

    @tool
    async def transfer(amount: float) -> str:
        """Move money."""
        ran.append(amount)
        return "moved"

    registry = ToolRegistry([ToolSpec(tool=transfer, default_mode=Mode.REVIEW)])
    model = ScriptedChatModel(replies=[calls(tool_call("transfer", {"amount": 2**70})), AIMessage("done")])
    async with open_service(db_url, model, registry) as h:
        approval = await pending_card(h)
        await h.service.decide(approval.id, actor("alice"), Approve())
        await h.service.tasks.join()
    assert ran == [float(2**70)]
    assert prompts.NOT_APPROVED_MESSAGE not in str(model.prompts[-1])


class _MutePlatform(RecordingPlatform):
    """A platform that cannot post notices (the platform is down)."""

    async def notify(self, conversation, notice, *, recipient):
        raise ConnectionError("platform unreachable")


@pytest.mark.parametrize("platform_up", [True, False])
async def test_a_failure_outside_the_turn_is_told_or_the_message_stays_retryable(db_url, registry, platform_up):
    """The database fails while settling: the sender is told; if telling fails too, a retry of the message is handled."""
    model = ScriptedChatModel(replies=[AIMessage("answered the retry")])
    platform = RecordingPlatform() if platform_up else _MutePlatform()
    async with open_service(db_url, model, registry, platform) as h:
        await h.database.pool.execute("ALTER TABLE checkpoints RENAME TO checkpoints_away")
        await h.service.handle_message(message("hello", message_id="1.1"))
        await h.database.pool.execute("ALTER TABLE checkpoints_away RENAME TO checkpoints")
        await h.service.handle_message(message("hello", message_id="1.1"))  # the platform's retry
    if platform_up:
        assert [type(n).__name__ for _, n, _ in h.platform.notices] == ["TurnFailed"]
        assert h.platform.answers == []  # told once; the retry is a duplicate
    else:
        assert h.platform.answers == [(conversation().thread_id, "answered the retry")]
