"""Bounded storage on a real PostgreSQL (docs/decisions/0012): pruning and retention.

Pruning and retention run in the upkeep's housekeeping loop every few seconds; here the loop is
stopped (`quiet`) and a test runs one pass itself (`prune`, `retention_pass`) where the loop
would have run it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import asyncpg
import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from bot.audit.entries import AuditKind
from bot.base.agent_kind import AgentKind
from bot.base.conversation import ConversationRef
from bot.ports import ApprovalExpired, ReviewPending
from bot.reviews.decisions import Approve
from bot.reviews.lifecycle import ApprovalStatus, ReviewStatus
from bot.storage.locks import ThreadLocks
from bot.turns.conversations import PRUNE_EVERY_RUNS
from bot.turns.inbox import inbox_key
from bot.turns.inbox_postgres import PostgresInbox
from bot.upkeep import retention as housekeeping
from bot.upkeep.retention import RetentionPass
from tests.integration.agents.test_subagents_service import SPECS, role, team, to_both
from tests.support.scripted_model import ScriptedChatModel, calls, tool_call
from tests.support.service import WORKSPACE, Harness, actor, conversation, message, open_service


def react_script(messages: list[BaseMessage]) -> AIMessage:
    """`send <who>` asks for the gated `send`, `look <what>` for the ungated `lookup`; results are reported."""
    last = messages[-1]
    if isinstance(last, ToolMessage):
        return AIMessage(f"done: {last.content}")
    text = str(last.content)
    if isinstance(last, HumanMessage) and text.startswith("send "):
        return calls(tool_call("send", {"to": text.removeprefix("send "), "body": "hi"}))
    if isinstance(last, HumanMessage) and text.startswith("look "):
        return calls(tool_call("lookup", {"query": text.removeprefix("look ")}))
    return AIMessage(f"echo: {text}")


@dataclass(frozen=True)
class Stored:
    """A conversation's rows in LangGraph's checkpoint tables."""

    top: int
    nested: int
    writes: int
    blobs: int


async def stored(h: Harness, conv: ConversationRef) -> Stored:
    row = await h.database.pool.fetchrow(
        """
        SELECT
            (SELECT count(*) FROM checkpoints WHERE thread_id = $1 AND checkpoint_ns = '') AS top,
            (SELECT count(*) FROM checkpoints WHERE thread_id = $1 AND checkpoint_ns <> '') AS nested,
            (SELECT count(*) FROM checkpoint_writes WHERE thread_id = $1) AS writes,
            (SELECT count(*) FROM checkpoint_blobs WHERE thread_id = $1) AS blobs
        """,
        conv.thread_id,
    )
    return Stored(top=row["top"], nested=row["nested"], writes=row["writes"], blobs=row["blobs"])


@asynccontextmanager
async def quiet_service(db_url: str, model, registry, **kwargs) -> AsyncIterator[Harness]:
    """`open_service` without the upkeep's loops: passes run when the test says (the expiry sweeper still runs).

    A conversation is due for pruning after every run (`prune_every_runs=1`) unless the test
    says otherwise: these tests are about what a prune keeps and when it may run.
    """
    kwargs.setdefault("prune_every_runs", 1)
    async with open_service(db_url, model, registry, **kwargs) as h:
        await h.service.upkeep.stop()
        yield h


async def prune(h: Harness) -> int:
    """One pruning pass of the housekeeping loop."""
    assert h.service.housekeeping is not None
    return await h.service.housekeeping.prune_checkpoints()


async def retention_pass(h: Harness) -> RetentionPass:
    """One retention pass of the housekeeping loop."""
    assert h.service.housekeeping is not None
    return await h.service.housekeeping.apply_retention()


def pending(h: Harness):
    return [c.approval for c in h.platform.cards.values() if c.approval.status is ApprovalStatus.PENDING]


async def until(check: Callable[[], bool], *, seconds: float = 30.0) -> None:
    """Wait for `check()` to hold (generous: a busy machine is slow, never wrong)."""
    deadline = asyncio.get_running_loop().time() + seconds
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "timed out waiting"
        await asyncio.sleep(0.05)


# --- pruning ----------------------------------------------------------------------------------


async def test_a_pending_review_stays_resumable_after_pruning(db_url, registry, tool_log):
    """Pruned while its card waits, the conversation keeps one checkpoint; approving runs the tool once and answers."""
    async with quiet_service(db_url, ScriptedChatModel(script=react_script), registry) as h:
        await h.service.handle_message(message("hello"))  # an older checkpoint, for the prune to delete
        await h.service.handle_message(message("send bob"))
        [card] = pending(h)
        before = await stored(h, conversation())
        assert await prune(h) == 1
        after = await stored(h, conversation())
        assert before.top > 1 and after.top == 1 and after.blobs < before.blobs
        await h.service.decide(card.id, actor("alice"), Approve())
        await h.service.tasks.join()
        review = await h.approvals.review(card.review_id)
    assert tool_log.calls == [("send", {"to": "bob", "body": "hi", "urgent": False})]
    assert h.platform.answers[-1] == (conversation().thread_id, "done: sent to bob")
    assert review is not None and review.status is ReviewStatus.DONE


async def test_paused_subagents_stay_resumable_after_pruning(db_url, registry, tool_log):
    """Two subagents wait for cards: pruned before and between the decisions, each continues; nothing runs twice."""
    model = team(to_both)
    async with quiet_service(db_url, model, registry, subagents=SPECS, default_agent=AgentKind.SUBAGENTS) as h:
        await h.service.handle_message(message("x"))
        cards = {c.source: c for c in pending(h)}
        assert set(cards) == {"alpha", "beta"}
        assert await prune(h) == 1
        paused = await stored(h, conversation())
        assert paused.top == 1 and paused.nested == 2  # each paused delegation keeps its newest checkpoint
        await h.service.decide(cards["beta"].id, actor("alice"), Approve())
        await h.service.tasks.join()
        assert await prune(h) == 1
        assert (await stored(h, conversation())).nested == 2  # beta's finished call stays until the turn moves on
        await h.service.decide(cards["alpha"].id, actor("alice"), Approve())
        await h.service.tasks.join()
        assert await prune(h) == 1
        done = await stored(h, conversation())
    assert [c[1]["to"] for c in tool_log.calls] == ["x-b", "x-a"]
    assert h.platform.answers == [
        (conversation().thread_id, "answer: alpha reports: sent to x-a | beta reports: sent to x-b")
    ]
    # beta's finished work was kept in the pruned checkpoint's writes: it was not asked again for alpha's resume.
    assert [role(p) for p in model.prompts].count("beta") == 2
    assert (done.top, done.nested, done.writes) == (1, 0, 0)  # the subagents' calls are gone with their turn


async def test_a_conversation_pruned_and_continued_resumes_a_card_decided_afterwards(db_url, registry, tool_log):
    """Pruned after every turn, the conversation goes on, refuses input while a card waits, and resumes the card."""
    model = ScriptedChatModel(script=react_script)
    async with quiet_service(db_url, model, registry) as h:
        await h.service.handle_message(message("hello"))
        assert await prune(h) == 1
        await h.service.handle_message(message("look a"))
        assert await prune(h) == 1
        await h.service.handle_message(message("send carol"))
        assert await prune(h) == 1
        await h.service.handle_message(message("still there?"))
        notice = h.platform.notices[-1][1]
        [card] = pending(h)
        assert isinstance(notice, ReviewPending) and [a.id for a in notice.approvals] == [card.id]
        assert await prune(h) == 0  # a refused message ran nothing: nothing to prune
        await h.service.decide(card.id, actor("alice"), Approve())
        await h.service.tasks.join()
        assert await prune(h) == 1
        await h.service.handle_message(message("thanks"))
    assert tool_log.calls == [
        ("lookup", {"query": "a"}),
        ("send", {"to": "carol", "body": "hi", "urgent": False}),
    ]
    assert [text for _, text in h.platform.answers] == [
        "echo: hello",
        "done: found a",
        "done: sent to carol",
        "echo: thanks",
    ]
    # The model saw the whole history on the last turn: pruning dropped checkpoints, not messages.
    assert [m.content for m in model.prompts[-1] if isinstance(m, HumanMessage)] == [
        "hello",
        "look a",
        "send carol",
        "thanks",
    ]


async def test_stored_rows_per_conversation_stop_growing(db_url, registry):
    """Over many turns with a tool call each, the rows a conversation keeps after pruning stay the same."""
    async with quiet_service(db_url, ScriptedChatModel(script=react_script), registry) as h:
        unpruned, kept = [], []
        for turn in range(12):
            await h.service.handle_message(message(f"look {turn}"))
            unpruned.append(await stored(h, conversation()))
            await prune(h)
            kept.append(await stored(h, conversation()))
    assert unpruned[0].top > 1  # a turn writes several checkpoints
    assert len(set(kept)) == 1 and kept[0].top == 1 and kept[0].nested == 0
    assert all(before.blobs > kept[0].blobs for before in unpruned)


async def test_a_conversation_is_due_for_pruning_every_few_runs(db_url, registry):
    """By default a conversation is pruned every `PRUNE_EVERY_RUNS` runs, deleting those runs' checkpoints at once."""
    async with quiet_service(
        db_url, ScriptedChatModel(script=react_script), registry, prune_every_runs=PRUNE_EVERY_RUNS
    ) as h:
        grown = []
        for turn in range(2 * PRUNE_EVERY_RUNS):
            await h.service.handle_message(message(f"hello {turn}"))
            pruned = await prune(h)
            grown.append((pruned, (await stored(h, conversation())).top))
    # A text turn writes one checkpoint; every PRUNE_EVERY_RUNS-th run's prune leaves only the newest,
    # which the next runs add to.
    first = [(0, runs) for runs in range(1, PRUNE_EVERY_RUNS)] + [(1, 1)]
    then = [(0, 1 + runs) for runs in range(1, PRUNE_EVERY_RUNS)] + [(1, 1)]
    assert grown == first + then


async def test_a_conversation_in_use_is_pruned_later(db_url, registry):
    """A held lock (a turn running, here or on another replica) or an unfinished run defers pruning; it stays due."""
    async with quiet_service(db_url, ScriptedChatModel(script=react_script), registry) as h:
        await h.service.handle_message(message("hello"))
        await h.service.handle_message(message("hello again"))  # two turns: two checkpoints
        async with ThreadLocks(h.database.lock_pool).hold(conversation().thread_id):
            assert await prune(h) == 0
        await h.database.pool.execute("UPDATE conversations SET running_since = now()")
        assert await prune(h) == 0
        assert (await stored(h, conversation())).top > 1
        await h.database.pool.execute("UPDATE conversations SET running_since = NULL")
        assert await prune(h) == 1
        assert (await stored(h, conversation())).top == 1


# --- retention --------------------------------------------------------------------------------

IDLE_DAYS = 30


async def make_idle(h: Harness, conv: ConversationRef, days: int = IDLE_DAYS + 1) -> None:
    await h.database.pool.execute(
        "UPDATE conversations SET last_active_at = now() - make_interval(days => $2) WHERE thread_id = $1",
        conv.thread_id,
        days,
    )


_ROWS_OF = {
    **{
        table: f"SELECT count(*) FROM {table} WHERE thread_id = $1"  # noqa: S608 - fixed table names
        for table in (
            "conversations",
            "reviews",
            "approvals",
            "tool_runs",
            "checkpoints",
            "checkpoint_writes",
            "checkpoint_blobs",
        )
    },
    **{
        table: f"SELECT count(*) FROM {table} t JOIN approvals a ON a.id = t.approval_id WHERE a.thread_id = $1"  # noqa: S608
        for table in ("approval_votes", "approval_cards")
    },
}


async def rows_of(h: Harness, conv: ConversationRef) -> dict[str, int]:
    """How many rows each table holds about the conversation."""
    return {table: await h.database.pool.fetchval(sql, conv.thread_id) for table, sql in _ROWS_OF.items()}


async def test_retention_deletes_exactly_the_idle_conversations(db_url, registry, tool_log):
    """Idle and at rest: deleted from every table but the audit log. Active, waiting or unfinished: kept; a waiting card is expired first."""
    idle, active, carded, running, unhandled, paused = (conversation(f"C{n}") for n in range(1, 7))
    model = ScriptedChatModel(script=react_script)
    async with quiet_service(db_url, model, registry, retention_days=IDLE_DAYS) as h:
        # idle: a decided card, a tool run, votes and cards, all idle for a month and a day.
        await h.service.handle_message(message("send bob", conv=idle))
        [card] = pending(h)
        await h.service.decide(card.id, actor("alice"), Approve())
        await h.service.tasks.join()
        for conv in (active, carded, running, unhandled, paused):
            text = "send dave" if conv in (carded, paused) else "hello"
            await h.service.handle_message(message(text, conv=conv))
        # paused: a pause in the checkpoint whose review a crash kept from being stored.
        [waiting] = [a for a in pending(h) if a.thread_id == paused.thread_id]
        await h.database.pool.execute("DELETE FROM approval_cards WHERE approval_id = $1", waiting.id)
        await h.database.pool.execute("DELETE FROM approvals WHERE thread_id = $1", paused.thread_id)
        await h.database.pool.execute("DELETE FROM reviews WHERE thread_id = $1", paused.thread_id)
        # running: a run whose outcome is not out; unhandled: a message accepted, not yet handled.
        await h.database.pool.execute(
            "UPDATE conversations SET running_since = now() WHERE thread_id = $1", running.thread_id
        )
        late = message("one more", conv=unhandled, message_id="9.9")
        assert await PostgresInbox(h.database.pool).accept(inbox_key(late) or "", late) is None
        for conv in (idle, carded, running, unhandled, paused):
            await make_idle(h, conv)
        await make_idle(h, active, days=IDLE_DAYS - 1)
        assert (await rows_of(h, idle))["approval_votes"] == 1

        first = await retention_pass(h)
        assert (first.expired, first.deleted) == (1, 1)
        # The waiting card expires the usual way: redrawn, requester told, the graph resumed.
        await until(
            lambda: (
                (carded.thread_id, "alice")
                in {(t, who) for t, n, who in h.platform.notices if isinstance(n, ApprovalExpired)}
            )
        )
        await until(lambda: any(t == carded.thread_id for t, _ in h.platform.answers))
        await h.service.tasks.join()  # the expiry's follow-up: the answer is out, the review done
        second = await retention_pass(h)
        third = await retention_pass(h)
        audit = await h.audit.recent(WORKSPACE, limit=100)
        remaining = {
            conv.thread_id: await rows_of(h, conv) for conv in (idle, active, carded, running, unhandled, paused)
        }
    assert (second.expired, second.deleted) == (0, 1) and (third.expired, third.deleted) == (0, 0)
    assert set(remaining[idle.thread_id].values()) == {0}
    assert set(remaining[carded.thread_id].values()) == {0}
    for kept in (active, running, unhandled, paused):
        assert remaining[kept.thread_id]["conversations"] == 1 and remaining[kept.thread_id]["checkpoints"] >= 1
    assert tool_log.calls == [("send", {"to": "bob", "body": "hi", "urgent": False})]  # the expired call never ran
    [expired] = [u for u in h.platform.updates if u.approval.status is ApprovalStatus.EXPIRED]
    assert expired.approval.thread_id == carded.thread_id
    # The audit log keeps the deleted conversations' decisions and expiries.
    assert {(e.kind, e.thread_id) for e in audit} >= {
        (AuditKind.DECISION, idle.thread_id),
        (AuditKind.EXPIRY, carded.thread_id),
    }


async def test_a_decision_counts_as_activity(db_url, registry, tool_log):
    """A card decided today keeps a conversation whose last message is a month old."""
    async with quiet_service(db_url, ScriptedChatModel(script=react_script), registry, retention_days=IDLE_DAYS) as h:
        await h.service.handle_message(message("send bob"))
        [card] = pending(h)
        await make_idle(h, conversation())
        await h.service.decide(card.id, actor("alice"), Approve())
        await h.service.tasks.join()
        done = await retention_pass(h)
        kept = await rows_of(h, conversation())
    assert (done.expired, done.deleted) == (0, 0) and kept["conversations"] == 1
    assert tool_log.calls == [("send", {"to": "bob", "body": "hi", "urgent": False})]


async def test_a_deleted_conversation_starts_afresh(db_url, registry):
    """A message in a conversation retention deleted starts a new one with no history."""
    model = ScriptedChatModel(script=react_script)
    async with quiet_service(db_url, model, registry, retention_days=IDLE_DAYS) as h:
        await h.service.handle_message(message("old"))
        await make_idle(h, conversation())
        assert (await retention_pass(h)).deleted == 1
        assert not await h.service.knows_conversation(conversation())
        await h.service.handle_message(message("new"))
    assert [m.content for m in model.prompts[-1] if isinstance(m, HumanMessage)] == ["new"]


async def test_no_retention_set_deletes_nothing(db_url, registry):
    """Without COUNTERSIGN_RETENTION_DAYS and AUDIT_RETENTION_DAYS, nothing is ever deleted."""
    async with quiet_service(db_url, ScriptedChatModel(script=react_script), registry) as h:
        await h.service.handle_message(message("send bob"))
        await make_idle(h, conversation(), days=3650)
        done = await retention_pass(h)
        kept = await rows_of(h, conversation())
    assert done == RetentionPass() and kept["conversations"] == 1 and kept["approvals"] == 1


# --- audit retention --------------------------------------------------------------------------


async def audit_row(h: Harness, outcome: str, *, days_ago: int) -> None:
    """An audit row written `days_ago` days ago (the trigger refuses UPDATE, not INSERT)."""
    await h.database.pool.execute(
        "INSERT INTO audit_log (at, kind, workspace_id, outcome) "
        "VALUES (now() - make_interval(days => $1), 'config', $2, $3)",
        days_ago,
        WORKSPACE,
        outcome,
    )


async def test_audit_retention_deletes_only_old_rows(db_url, registry, monkeypatch):
    """AUDIT_RETENTION_DAYS deletes rows older than that, a batch at a time; newer rows and conversations stay."""
    monkeypatch.setattr(housekeeping, "AUDIT_BATCH", 2)
    monkeypatch.setattr(housekeeping, "AUDIT_BATCHES", 2)
    async with quiet_service(db_url, ScriptedChatModel(script=react_script), registry, audit_retention_days=90) as h:
        await h.service.handle_message(message("hello"))
        await make_idle(h, conversation(), days=3650)
        for n in range(5):
            await audit_row(h, f"old {n}", days_ago=91 + n)
        await audit_row(h, "recent", days_ago=89)
        await audit_row(h, "today", days_ago=0)
        first = await retention_pass(h)
        second = await retention_pass(h)
        left = [e.outcome for e in await h.audit.recent(WORKSPACE, limit=100)]
        kept = await rows_of(h, conversation())
        with pytest.raises(asyncpg.RaiseError, match="append-only"):
            await h.database.pool.execute("DELETE FROM audit_log")
    assert (first.audit_rows, first.more) == (4, True)
    assert (second.audit_rows, second.more) == (1, False)
    assert left == ["today", "recent"]
    assert kept["conversations"] == 1  # the audit retention alone deletes no conversation
