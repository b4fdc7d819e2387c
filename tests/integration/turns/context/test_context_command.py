"""`/countersign context [reset]` through the core on PostgreSQL: what it shows, what a reset clears.

The model is the long-conversation script (`test_long_conversations`): a small budget makes the
window fold older turns into a summary within a few messages.
"""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.messages import HumanMessage

from bot.admin.commands import ResetContext, ShowContext
from bot.admin.views import ContextReset, ContextView
from bot.agents.prompts import SUMMARY_SECTION
from bot.audit.entries import AuditKind
from bot.base.agent_kind import AgentKind
from bot.base.conversation import Actor
from bot.base.errors import BusyReason, ConversationBusyError, ModelError, ModelErrorKind, NotPermittedError
from bot.reviews.decisions import Approve
from bot.turns.context.window import view_tokens
from tests.integration.turns.context.test_long_conversations import BUDGET, Script, stored, turns_of
from tests.support.barriers import wait_until
from tests.support.recording_platform import RecordingPlatform
from tests.support.scripted_model import ScriptedChatModel
from tests.support.service import WORKSPACE, Harness, actor, conversation, message, open_service

ADMIN = "boss"


async def show(h: Harness, who: str = "alice") -> ContextView:
    reply = await h.admin.execute(actor(who), ShowContext(), here="C1", conversation=conversation())
    assert isinstance(reply, ContextView)
    return reply


async def reset(h: Harness, who: str = ADMIN) -> ContextReset:
    reply = await h.admin.execute(actor(who), ResetContext(), here="C1", conversation=conversation())
    assert isinstance(reply, ContextReset)
    return reply


async def talk(h: Harness, count: int, prefix: str = "question") -> None:
    for n in range(count):
        await h.service.handle_message(message(f"{prefix} {n}", message_id=f"{prefix}.{n}"))


async def audit_rows(h: Harness, kind: AuditKind) -> list:
    return [entry for entry in await h.audit.recent(WORKSPACE, limit=50) if entry.kind is kind]


async def test_a_conversation_without_state_says_so_and_has_nothing_to_reset(db_url, registry):
    """`context` where the bot never ran: no state; `reset` there changes nothing and writes no audit row."""
    async with open_service(
        db_url, ScriptedChatModel(script=Script()), registry, RecordingPlatform(admins={ADMIN})
    ) as h:
        view = await show(h)
        result = await reset(h)
        config_rows = await audit_rows(h, AuditKind.CONFIG)
    assert view == ContextView(thread_id=conversation().thread_id, exists=False, budget_tokens=view.budget_tokens)
    assert not result.changed and not result.before.exists and config_rows == []


@pytest.mark.parametrize("kind", [AgentKind.REACT, AgentKind.SUBAGENTS])
async def test_context_shows_the_summary_the_messages_kept_the_estimate_and_the_agent(db_url, registry, kind):
    """After a fold: the summary's text, the stored messages, the scaled estimate against the budget, the agent."""
    script = Script()
    model = ScriptedChatModel(script=script)
    async with open_service(db_url, model, registry, context_tokens=BUDGET, default_agent=kind) as h:
        await talk(h, 10)
        view = await show(h, "bob")  # anyone may look
        state = await stored(h, kind)
    assert script.summaries >= 1
    assert view.exists and view.agent is kind and view.thread_id == conversation().thread_id
    assert view.summary == state["summary"] == f"summary {script.summaries}"
    assert view.messages == len(state["messages"]) > 0
    expected = view_tokens(state["messages"], summary=state["summary"], scale=state.get("token_scale") or 1.0)
    assert view.tokens == expected > 0 and view.budget_tokens == BUDGET


@pytest.mark.parametrize("kind", [AgentKind.REACT, AgentKind.SUBAGENTS])
async def test_reset_clears_the_view_and_the_next_message_starts_afresh(db_url, registry, kind):
    """An admin's reset: no message, no summary, nothing pending; the next message is answered and the
    model sees neither an earlier message nor the summary; audited with the sizes removed."""
    script = Script()
    model = ScriptedChatModel(script=script)
    async with open_service(
        db_url, model, registry, RecordingPlatform(admins={ADMIN}), context_tokens=BUDGET, default_agent=kind
    ) as h:
        await talk(h, 10)
        assert h.service.housekeeping is not None
        await h.service.housekeeping.prune_checkpoints()  # what the upkeep did after the last turn
        before = await stored(h, kind)
        result = await reset(h)
        graph = h.graph(conversation(), kind)
        snapshot = await graph.aget_state({"configurable": {"thread_id": conversation().thread_id}})
        await h.service.housekeeping.prune_checkpoints()  # the upkeep's next pass: the old messages go
        stored_blobs = await h.database.pool.fetchval(
            "SELECT string_agg(encode(blob, 'escape'), '') FROM checkpoint_blobs WHERE thread_id = $1",
            conversation().thread_id,
        )
        assert "question 9" not in (stored_blobs or "")
        after_reset = await show(h)
        await h.service.handle_message(message("a fresh start", message_id="fresh.1"))
        after = await stored(h, kind)
        [row] = await audit_rows(h, AuditKind.CONFIG)
    assert result.changed and result.before.messages == len(before["messages"])
    assert result.before.summary == before["summary"] != ""
    # LangGraph: the update is written as `llm_call`'s, whose edge ends the graph on an empty history.
    assert snapshot.values["messages"] == [] and snapshot.values["summary"] == ""
    assert snapshot.next == () and snapshot.tasks == () and snapshot.interrupts == ()
    assert after_reset.exists and after_reset.is_empty and after_reset.tokens == 0
    earlier, prompt = turns_of(model)[-2:]
    header = SUMMARY_SECTION.split("{")[0].strip()
    assert header in earlier[0].text  # the summary was sent until the reset
    assert [type(m) for m in prompt[1:]] == [HumanMessage] and prompt[-1].text == "a fresh start"
    assert header not in prompt[0].text and "question" not in str(prompt)
    assert h.platform.answers[-1][1].startswith("re: a fresh start")
    assert [m.type for m in after["messages"]] == ["human", "ai"] and after["messages"][0].text == "a fresh start"
    assert row.outcome == "context" and row.actor_id == ADMIN and row.thread_id == conversation().thread_id
    assert row.detail["before"] == {"messages": len(before["messages"]), "summary_chars": len(before["summary"])}
    assert row.detail["after"] == {"messages": 0, "summary_chars": 0}


async def test_reset_is_refused_while_a_card_waits_and_the_card_still_works(db_url, registry, tool_log):
    """A pending review blocks the reset (audited as a refusal); the approved call then runs once."""
    script = Script()
    model = ScriptedChatModel(script=script)
    async with open_service(db_url, model, registry, RecordingPlatform(admins={ADMIN})) as h:
        await talk(h, 2)
        await h.service.handle_message(message("send bob hi", message_id="send.1"))
        [card] = h.platform.cards.values()
        before = await stored(h)
        with pytest.raises(ConversationBusyError) as refused:
            await reset(h)
        unchanged = await stored(h)
        [row] = await audit_rows(h, AuditKind.REFUSED)
        await h.service.decide(card.approval.id, actor(), Approve())
        await h.service.tasks.join()
    assert refused.value.reason is BusyReason.REVIEW_PENDING
    assert unchanged["messages"] == before["messages"]
    assert row.outcome == "review_pending" and row.detail["command"] == "context reset"
    assert row.thread_id == conversation().thread_id
    assert tool_log.calls == [("send", {"to": "bob", "body": "hi", "urgent": False})]


async def test_reset_is_refused_while_a_turn_runs(db_url, registry):
    """With a turn in the model, the reset does not wait for the lock: it is refused and the turn ends normally."""
    model = ScriptedChatModel(script=Script(), delay_s=0.5)
    async with open_service(db_url, model, registry, RecordingPlatform(admins={ADMIN})) as h:
        await talk(h, 1)
        running = asyncio.create_task(h.service.handle_message(message("slow one", message_id="slow.1")))
        await wait_until(lambda: model.active == 1, "the second turn's model call")
        with pytest.raises(ConversationBusyError) as refused:
            await reset(h)
        await running
        state = await stored(h)
    assert refused.value.reason is BusyReason.TURN_RUNNING
    assert len(state["messages"]) == 4 and h.platform.answers[-1][1].startswith("re: slow one")


async def test_reset_works_after_a_model_failure_left_the_message_in_the_history(db_url, registry):
    """The model was unreachable: the message stays (its model step pending), yet nothing runs, so an
    admin's reset is not refused; the next message is answered afresh."""
    script = Script()
    calls = {"n": 0}

    def flaky(messages):
        calls["n"] += 1
        if calls["n"] == 2:
            raise ModelError(ModelErrorKind.UNAVAILABLE, "unreachable")
        return script(messages)

    model = ScriptedChatModel(script=flaky)
    async with open_service(db_url, model, registry, RecordingPlatform(admins={ADMIN})) as h:
        await talk(h, 1)
        await h.service.handle_message(message("lost in the outage", message_id="lost.1"))
        result = await reset(h)
        await h.service.handle_message(message("after the reset", message_id="after.1"))
        after = await stored(h)
    assert result.changed and result.before.messages == 3
    assert after["messages"][0].text == "after the reset"
    assert h.platform.answers[-1][1].startswith("re: after the reset")


async def test_reset_is_for_admins_and_keeps_approvals_and_the_ledger(db_url, registry):
    """A non-admin's reset is refused and audited; an admin's removes only graph state: the approval,
    its audit rows and the tool-run ledger stay."""
    model = ScriptedChatModel(script=Script())
    async with open_service(db_url, model, registry, RecordingPlatform(admins={ADMIN})) as h:
        await h.service.handle_message(message("send bob hi", message_id="send.1"))
        [card] = h.platform.cards.values()
        await h.service.decide(card.approval.id, actor(), Approve())
        await h.service.tasks.join()
        with pytest.raises(NotPermittedError) as refused:
            await reset(h, "alice")
        [refusal] = await audit_rows(h, AuditKind.REFUSED)
        counts = "SELECT (SELECT count(*) FROM approvals), (SELECT count(*) FROM audit_log WHERE kind = 'decision')"
        kept_before = await h.database.pool.fetchrow(counts)
        ledger_before = await h.database.pool.fetchval("SELECT count(*) FROM tool_runs")
        result = await reset(h)
        kept_after = await h.database.pool.fetchrow(counts)
        ledger_after = await h.database.pool.fetchval("SELECT count(*) FROM tool_runs")
    assert refused.value.reason == "not_an_admin"
    assert refusal.outcome == "not_an_admin" and refusal.detail["command"] == "context reset"
    assert result.changed and tuple(kept_after) == tuple(kept_before) == (1, 1)
    assert ledger_after == ledger_before >= 1


async def test_reset_in_a_discord_dm_is_refused_but_context_is_shown(db_url, registry):
    """A Discord DM has no server, so nobody is its admin: `context` works there, `reset` is refused."""
    model = ScriptedChatModel(script=Script())
    async with open_service(db_url, model, registry, RecordingPlatform(admins={ADMIN})) as h:
        dm = conversation().__class__(platform="test", workspace_id="dm", channel_id="D1")
        someone = Actor(platform="test", workspace_id="dm", user_id=ADMIN, display_name=ADMIN)
        await h.service.handle_message(message("hello", conv=dm, message_id="dm.1"))
        view = await h.admin.execute(someone, ShowContext(), conversation=dm)
        with pytest.raises(NotPermittedError) as refused:
            await h.admin.execute(someone, ResetContext(), conversation=dm)
    assert isinstance(view, ContextView) and view.messages == 2
    assert refused.value.reason == "dm_reset"
