"""Work a fault interrupted is finished by the bot itself (docs/decisions/0009).

Each test leaves work unfinished the way a fault would (a follow-up that fails, a task
cancelled at shutdown, a post the platform refuses, a process that died after claiming a
message), then lets the upkeep find it. Instead of waiting for `retry_at`, a test makes the work
due (`due_now`) and calls `Upkeep.sweep` itself, as the loop would a minute later.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from pydantic import Field

from bot.audit.entries import AuditEntry, AuditKind
from bot.base.conversation import ConversationRef
from bot.base.mode import Mode
from bot.ports import ReviewPending, TurnFailed
from bot.reviews.decisions import Approve
from bot.reviews.lifecycle import ApprovalStatus, ReviewStatus
from bot.reviews.store import VoteKind
from bot.tools.registry import ToolRegistry, ToolSpec
from bot.turns.inbox import inbox_key
from bot.turns.inbox_postgres import PostgresInbox
from bot.upkeep.unfinished_work import MAX_ATTEMPTS
from tests.support.postgres import own_embedded, restart_embedded
from tests.support.recording_platform import RecordingPlatform
from tests.support.scripted_model import ScriptedChatModel, calls, tool_call
from tests.support.service import Harness, actor, conversation, message, open_service

WAIT_S = 60.0


async def due_now(h: Harness) -> None:
    """What a minute of waiting does: every piece of unfinished work is due."""
    await h.database.pool.execute("UPDATE inbox SET retry_at = now() WHERE status = 'accepted'")
    await h.database.pool.execute("UPDATE conversations SET retry_at = now() WHERE running_since IS NOT NULL")
    await h.database.pool.execute("UPDATE reviews SET retry_at = now() WHERE status = 'resuming'")


async def upkeep_pass(h: Harness) -> list[str]:
    """One look of the upkeep at due work, waited for."""
    await due_now(h)
    tended = await h.service.upkeep.sweep()
    await h.service.tasks.join()
    return tended


async def inbox_status(h: Harness, key: str) -> str | None:
    return await h.database.pool.fetchval("SELECT status FROM inbox WHERE event_key = $1", key)


async def unfinished(h: Harness, conv: ConversationRef) -> bool:
    return bool(
        await h.database.pool.fetchval(
            "SELECT running_since IS NOT NULL FROM conversations WHERE thread_id = $1", conv.thread_id
        )
    )


@dataclass
class FlakyPlatform(RecordingPlatform):
    """A platform whose posts fail while `down` (an outage, a network error)."""

    down: bool = False
    working_fails: int = 0

    async def post_answer(self, conversation, text):
        if self.down:
            raise ConnectionError("platform unreachable")
        await super().post_answer(conversation, text)

    async def notify(self, conversation, notice, *, recipient):
        if self.down:
            raise ConnectionError("platform unreachable")
        await super().notify(conversation, notice, recipient=recipient)

    @asynccontextmanager
    async def working(self, conversation, anchor) -> AsyncIterator:
        if self.working_fails:
            self.working_fails -= 1
            raise ConnectionError("platform unreachable")
        async with super().working(conversation, anchor) as progress:
            yield progress


async def test_a_decision_whose_follow_up_failed_is_resumed_without_traffic(db_url, registry, tool_log):
    """The resume after the last click fails: nobody is told (it is tried again); the upkeep resumes the review once, with nobody writing."""
    model = ScriptedChatModel(replies=[calls(tool_call("send", {"to": "bob", "body": "hi"})), AIMessage("sent")])
    platform = FlakyPlatform()
    async with open_service(db_url, model, registry, platform) as h:
        await h.service.handle_message(message("send bob hi", message_id="1.1"))
        [card] = platform.cards.values()
        platform.working_fails = 1
        await h.service.decide(card.approval.id, actor("alice"), Approve())
        await h.service.tasks.join()
        review = await h.approvals.review(card.approval.review_id)
        assert review is not None and review.status is ReviewStatus.RESUMING
        assert tool_log.calls == [] and platform.notices == []

        assert await upkeep_pass(h) == [conversation().thread_id]
        review = await h.approvals.review(card.approval.review_id)
        assert await upkeep_pass(h) == []  # nothing left
    assert review is not None and review.status is ReviewStatus.DONE
    assert tool_log.calls == [("send", {"to": "bob", "body": "hi", "urgent": False})]
    assert platform.answers == [(conversation().thread_id, "sent")]
    assert platform.notices == []  # one outcome: the answer, no failure before it


async def test_a_database_restart_makes_the_next_look_take_work_that_is_not_due_yet(tmp_path: Path, registry, tool_log):
    """A resume whose retry is an hour away is taken at the upkeep's first look after the server restarted.

    The server is the test's own embedded PostgreSQL, restarted for real (every connection
    drops and its start time changes), as in the fault matrix's storms.
    """
    async with own_embedded(tmp_path / "own") as (embedded, url):
        model = ScriptedChatModel(replies=[calls(tool_call("send", {"to": "bob", "body": "hi"})), AIMessage("sent")])
        platform = FlakyPlatform()
        async with open_service(url, model, registry, platform) as h:
            await h.service.handle_message(message("send bob hi", message_id="1.1"))
            [card] = platform.cards.values()
            platform.working_fails = 1
            await h.service.decide(card.approval.id, actor("alice"), Approve())
            await h.service.tasks.join()
            review = await h.approvals.review(card.approval.review_id)
            assert review is not None and review.status is ReviewStatus.RESUMING
            # As attempts failed in an earlier outage leave it: the next try is far away.
            await h.database.pool.execute(
                "UPDATE reviews SET attempts = 4, retry_at = now() + interval '1 hour' WHERE id = $1", review.id
            )
            assert await h.service.upkeep.sweep() == []  # not due

            await restart_embedded(embedded)
            deadline = time.monotonic() + WAIT_S
            while True:  # the pools reconnect at their first use after the restart
                try:
                    tended = await h.service.upkeep.sweep()
                    break
                except Exception:
                    assert time.monotonic() < deadline, "the database did not come back"
                    await asyncio.sleep(0.2)
            # This look took it, unless the upkeep's own loop looked first (it also takes it).
            assert tended in ([conversation().thread_id], [])
            while not platform.answers:
                assert time.monotonic() < deadline, "the review was not resumed"
                await asyncio.sleep(0.1)
            await h.service.tasks.join()
            review = await h.approvals.review(card.approval.review_id)
        assert review is not None and review.status is ReviewStatus.DONE
        assert tool_log.calls == [("send", {"to": "bob", "body": "hi", "urgent": False})]
        assert platform.answers == [(conversation().thread_id, "sent")]


def blocking_registry(started: asyncio.Event, runs: list[str]) -> ToolRegistry:
    @tool
    async def deploy(service: str) -> str:
        """Deploy a service (takes a while)."""
        runs.append(service)
        started.set()
        await asyncio.Event().wait()  # until the task is cancelled
        return "deployed"

    return ToolRegistry([ToolSpec(tool=deploy, default_mode=Mode.AUTO)])


async def test_a_turn_cancelled_at_shutdown_is_finished_after_the_restart(db_url):
    """Shutdown cancels a turn inside a tool: the next start finishes it, says the outcome is unknown, runs nothing twice."""
    started, runs = asyncio.Event(), []
    registry = blocking_registry(started, runs)
    model = ScriptedChatModel(
        replies=[calls(tool_call("deploy", {"service": "api"})), AIMessage("The deploy was interrupted.")]
    )
    incoming = message("deploy api", message_id="2.1")
    async with open_service(db_url, model, registry) as h:
        task = asyncio.create_task(h.service.handle_message(incoming))
        await asyncio.wait_for(started.wait(), WAIT_S)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await unfinished(h, conversation())
        assert await inbox_status(h, inbox_key(incoming) or "") == "accepted"
    async with open_service(db_url, model, registry) as restarted:
        await restarted.service.recover()
        await restarted.service.tasks.join()
        assert not await unfinished(restarted, conversation())
        assert await inbox_status(restarted, inbox_key(incoming) or "") == "handled"
    assert runs == ["api"]  # the started call was not run again
    assert restarted.platform.answers == [(conversation().thread_id, "The deploy was interrupted.")]
    [result] = [m for m in model.prompts[-1] if isinstance(m, ToolMessage)]
    assert result.status == "error" and "interrupt" in str(result.content)
    assert len(model.prompts) == 2  # the message was not asked again


async def test_an_answer_the_platform_refused_is_posted_later_without_asking_again(db_url, registry):
    """The answer cannot be posted: it is kept, and posted once the platform is back; the model is not asked twice."""
    model = ScriptedChatModel(replies=[AIMessage("the answer")])
    platform = FlakyPlatform(down=True)
    incoming = message("question", message_id="3.1")
    async with open_service(db_url, model, registry, platform) as h:
        await h.service.handle_message(incoming)
        assert platform.answers == [] and await unfinished(h, conversation())
        assert await inbox_status(h, inbox_key(incoming) or "") == "accepted"
        await upkeep_pass(h)  # still down: kept again
        assert platform.answers == []
        platform.down = False
        await upkeep_pass(h)
        assert await inbox_status(h, inbox_key(incoming) or "") == "handled"
        assert not await unfinished(h, conversation())
    assert platform.answers == [(conversation().thread_id, "the answer")]
    assert len(model.prompts) == 1


async def test_a_message_claimed_by_a_process_that_died_is_answered(db_url, registry):
    """Claimed, then the process died before the turn began: a live replica answers it."""
    model = ScriptedChatModel(replies=[AIMessage("late but answered")])
    incoming = message("anyone?", message_id="4.1")
    async with open_service(db_url, model, registry) as h:
        assert await PostgresInbox(h.database.pool).accept(inbox_key(incoming) or "", incoming) is None
        assert h.platform.answers == []
        await upkeep_pass(h)
    assert h.platform.answers == [(conversation().thread_id, "late but answered")]
    assert model.prompts[0][-1].content == "anyone?"


async def test_a_repeated_delivery_is_dropped_when_handled_and_handled_when_not(db_url, registry):
    """A platform's retry of a handled message changes nothing; of an unhandled one, it is handled at once."""
    model = ScriptedChatModel(replies=[AIMessage("first"), AIMessage("second")])
    platform = FlakyPlatform()
    async with open_service(db_url, model, registry, platform) as h:
        await h.service.handle_message(message("one", message_id="5.1"))
        await h.service.handle_message(message("one", message_id="5.1"))
        assert platform.answers == [(conversation().thread_id, "first")]
        platform.down = True
        await h.service.handle_message(message("two", message_id="5.2"))
        platform.down = False
        await h.service.handle_message(message("two", message_id="5.2"))  # the platform's retry
        await h.service.tasks.join()
    assert platform.answers == [(conversation().thread_id, "first"), (conversation().thread_id, "second")]
    assert len(model.prompts) == 2


async def test_a_message_that_cannot_be_handled_is_given_up_and_its_sender_told(db_url, registry):
    """After the last attempt the message is abandoned and its sender told, once; the upkeep stops trying."""
    model = ScriptedChatModel(replies=[AIMessage("never posted")])
    platform = FlakyPlatform(down=True)
    incoming = message("hello", message_id="6.1")
    async with open_service(db_url, model, registry, platform) as h:
        await h.service.handle_message(incoming)
        key = inbox_key(incoming) or ""
        await h.database.pool.execute("UPDATE inbox SET attempts = $2 WHERE event_key = $1", key, MAX_ATTEMPTS)
        await h.database.pool.execute("UPDATE conversations SET attempts = $1", MAX_ATTEMPTS + 1)
        platform.down = False
        await upkeep_pass(h)
        assert await inbox_status(h, key) == "abandoned"
        assert await upkeep_pass(h) == []
    # The run given up is the message's turn: one notice, to its sender, naming the message.
    assert [(type(n), who) for _, n, who in platform.notices] == [(TurnFailed, "alice")]
    assert [n.message for _, n, _ in platform.notices] == ["hello"]
    assert platform.answers == []


async def test_old_inbox_entries_are_deleted(db_url, registry):
    """The inbox does not grow forever: entries older than a day are deleted, newer ones kept."""
    model = ScriptedChatModel(replies=[AIMessage("a"), AIMessage("b")])
    async with open_service(db_url, model, registry) as h:
        await h.service.handle_message(message("old", message_id="7.1"))
        await h.service.handle_message(message("new", message_id="7.2"))
        await h.database.pool.execute(
            "UPDATE inbox SET received_at = now() - interval '25 hours' WHERE event_key LIKE '%:7.1'"
        )
        assert await h.service.upkeep.prune() == 1
        keys = [r["event_key"] for r in await h.database.pool.fetch("SELECT event_key FROM inbox")]
    assert [k.rsplit(":", 1)[1] for k in keys] == ["7.2"]


async def test_two_replicas_finish_a_stuck_resume_once(db_url, registry, tool_log):
    """Both replicas' upkeep find the same stuck review: the tool runs once, one answer is posted."""
    model = ScriptedChatModel(
        replies=[calls(tool_call("send", {"to": "bob", "body": "hi"})), AIMessage("sent once")], delay_s=0.05
    )
    platform = FlakyPlatform()
    async with (
        open_service(db_url, model, registry, platform) as a,
        open_service(db_url, model, registry, platform) as b,
    ):
        await a.service.handle_message(message("send", message_id="8.1"))
        [card] = platform.cards.values()
        platform.working_fails = 1
        await a.service.decide(card.approval.id, actor("alice"), Approve())
        await a.service.tasks.join()
        await due_now(a)
        await asyncio.gather(a.service.upkeep.sweep(), b.service.upkeep.sweep())
        await asyncio.gather(a.service.tasks.join(), b.service.tasks.join())
        await due_now(a)
        await asyncio.gather(a.service.upkeep.sweep(), b.service.upkeep.sweep())
        await asyncio.gather(a.service.tasks.join(), b.service.tasks.join())
        approval = await a.approvals.get(card.approval.id)
    assert approval is not None and approval.status is ApprovalStatus.APPROVED
    assert tool_log.calls == [("send", {"to": "bob", "body": "hi", "urgent": False})]
    assert platform.answers == [(conversation().thread_id, "sent once")]


async def test_a_message_waiting_behind_a_card_is_refused_once(db_url, registry):
    """A refusal ("review pending") is the message's outcome: the message is handled, not retried."""
    model = ScriptedChatModel(replies=[calls(tool_call("send", {"to": "bob", "body": "hi"}))])
    async with open_service(db_url, model, registry) as h:
        await h.service.handle_message(message("send", message_id="9.1"))
        await h.service.handle_message(message("and?", message_id="9.2", user="bob"))
        assert await upkeep_pass(h) == []
    assert [(type(n), who) for _, n, who in h.platform.notices] == [(ReviewPending, "bob")]
    assert h.platform.answers == []


async def test_a_run_whose_lock_connection_drops_stops_and_is_finished_under_a_new_lock(db_url):
    """The lock's connection is killed mid-tool: the holder stops at once (not unguarded); the upkeep finishes the turn."""
    started, runs = asyncio.Event(), []
    registry = blocking_registry(started, runs)
    model = ScriptedChatModel(replies=[calls(tool_call("deploy", {"service": "api"})), AIMessage("Interrupted.")])
    async with open_service(db_url, model, registry) as h:
        task = asyncio.create_task(h.service.handle_message(message("deploy api", message_id="10.1")))
        await asyncio.wait_for(started.wait(), WAIT_S)
        [pid] = [
            row["pid"]
            for row in await h.database.pool.fetch(
                "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND database = "
                "(SELECT oid FROM pg_database WHERE datname = current_database())"
            )
        ]
        await h.database.pool.execute("SELECT pg_terminate_backend($1)", pid)
        await asyncio.wait_for(task, WAIT_S)  # stopped, not left running unguarded
        assert h.platform.answers == [] and await unfinished(h, conversation())
        await upkeep_pass(h)
    assert runs == ["api"]
    assert h.platform.answers == [(conversation().thread_id, "Interrupted.")]


async def test_a_click_after_every_connection_was_dropped_still_runs_the_call(db_url, registry, tool_log):
    """The server drops every connection while a card waits (as a PostgreSQL restart does): the click still works."""
    model = ScriptedChatModel(replies=[calls(tool_call("send", {"to": "bob", "body": "hi"})), AIMessage("sent")])
    async with open_service(db_url, model, registry) as h:
        await h.service.handle_message(message("send bob hi", message_id="11.1"))
        [card] = h.platform.cards.values()
        async with h.database.pool.acquire() as connection:
            await connection.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        await asyncio.sleep(0)  # let the pools' sockets see the close, as any idle time would
        await h.service.decide(card.approval.id, actor("alice"), Approve())
        await h.service.tasks.join()
    assert tool_log.calls == [("send", {"to": "bob", "body": "hi", "urgent": False})]
    assert h.platform.answers == [(conversation().thread_id, "sent")]


class StallingModel(ScriptedChatModel):
    """Stalls on its first call (the process dies while the model thinks), then answers from `replies`."""

    stalled: asyncio.Event = Field(default_factory=asyncio.Event)

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
        if not self.stalled.is_set():
            self.stalled.set()
            await asyncio.Event().wait()
        return await super()._agenerate(messages, stop, run_manager, **kwargs)


async def test_a_run_killed_before_its_first_step_was_saved_is_finished(db_url, registry):
    """Only the input checkpoint was saved when the process died: the turn is run, not answered with nothing."""
    model = StallingModel(replies=[AIMessage("answered after all")])
    incoming = message("question", message_id="12.1")
    async with open_service(db_url, model, registry) as h:
        task = asyncio.create_task(h.service.handle_message(incoming))
        await asyncio.wait_for(model.stalled.wait(), WAIT_S)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # What kill -9 leaves when the first step's checkpoint had not been written yet.
        deleted = await h.database.pool.execute(
            "DELETE FROM checkpoints WHERE thread_id = $1 AND checkpoint_ns = '' AND metadata->>'source' = 'loop'",
            conversation().thread_id,
        )
        assert deleted == "DELETE 1"
        await upkeep_pass(h)
    assert h.platform.answers == [(conversation().thread_id, "answered after all")]
    assert [m.content for m in model.prompts[-1][1:]] == ["question"]


async def test_a_run_that_fails_every_attempt_is_given_up_once_and_not_restarted(db_url, registry):
    """The last attempt at a cut run gives it up: its message's sender is told once; the next message is answered."""
    model = StallingModel(replies=[AIMessage("answer to the next message")])
    async with open_service(db_url, model, registry) as h:
        task = asyncio.create_task(h.service.handle_message(message("poison", message_id="13.1")))
        await asyncio.wait_for(model.stalled.wait(), WAIT_S)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await h.database.pool.execute("UPDATE conversations SET attempts = $1", MAX_ATTEMPTS)
        await upkeep_pass(h)
        assert not await unfinished(h, conversation())
        assert await upkeep_pass(h) == []  # given up: nothing left to try
        await h.service.handle_message(message("hello", message_id="13.2"))
    assert [(type(n), who, n.message) for _, n, who in h.platform.notices] == [(TurnFailed, "alice", "poison")]
    assert h.platform.answers == [(conversation().thread_id, "answer to the next message")]
    assert len(model.prompts) == 1  # only the next message's call: the cut run was not run again


async def test_the_upkeep_works_off_a_backlog_two_conversations_at_a_time(db_url, registry):
    """Many messages left unhandled (an outage): the upkeep answers them all, never more than two at once."""
    model = ScriptedChatModel(script=lambda messages: AIMessage(f"re: {messages[-1].content}"), delay_s=0.2)
    async with open_service(db_url, model, registry) as h:
        inbox = PostgresInbox(h.database.pool)
        for n in range(6):
            left = message(f"m{n}", conv=conversation(channel=f"C{n}"), message_id=f"14.{n}")
            assert await inbox.accept(inbox_key(left) or "", left) is None
        await upkeep_pass(h)
    assert sorted(text for _, text in h.platform.answers) == [f"re: m{n}" for n in range(6)]
    assert model.max_active <= 2


async def test_an_expiry_whose_follow_up_died_still_tells_the_requester(db_url, registry, tool_log):
    """The expiry was recorded, then the process stopped before the requester was told: the restart tells them."""
    model = ScriptedChatModel(replies=[calls(tool_call("send", {"to": "bob", "body": "hi"})), AIMessage("expired")])
    async with open_service(db_url, model, registry) as h:
        await h.service.handle_message(message("send bob hi", message_id="15.1"))
        [card] = h.platform.cards.values()
        await h.service.expiry.stop()
        await h.database.pool.execute("UPDATE approvals SET expires_at = now()")
        [expired] = await h.approvals.expire_due(platforms=["test"])  # recorded; its follow-up never ran
        assert expired.review_complete and h.platform.notices == []
    async with open_service(db_url, model, registry) as restarted:
        await restarted.service.recover()
        await restarted.service.tasks.join()
    assert [(type(n).__name__, who) for _, n, who in restarted.platform.notices] == [("ApprovalExpired", "alice")]
    assert restarted.platform.updates[-1].approval.id == card.approval.id
    assert restarted.platform.updates[-1].approval.status is ApprovalStatus.EXPIRED
    assert tool_log.calls == [] and restarted.platform.answers == [(conversation().thread_id, "expired")]


async def test_a_vote_whose_redraw_died_is_shown_after_a_restart(db_url, registry):
    """Quorum 2: one approval recorded, then the process stopped before the card showed it; the restart redraws it."""
    model = ScriptedChatModel(replies=[calls(tool_call("send", {"to": "bob", "body": "hi"}))])
    async with open_service(db_url, model, registry) as h:
        await h.service.handle_message(message("send bob hi", message_id="16.1"))
        [card] = h.platform.cards.values()
        entry = AuditEntry(kind=AuditKind.DECISION, workspace_id="W1", outcome="approved")
        voted = await h.approvals.vote(card.approval.id, actor=actor(), kind=VoteKind.APPROVE, quorum=2, audit=entry)
        assert voted.approval.votes == ("alice",) and h.platform.updates == []
    async with open_service(db_url, model, registry) as restarted:
        await restarted.service.recover()
    [shown] = restarted.platform.updates
    assert shown.approval.id == card.approval.id and shown.approval.votes == ("alice",)


class _Died(BaseException):
    """The process dying at one point of a run (nothing after it runs, nothing is recorded)."""


async def test_a_resume_cut_between_its_invocations_is_finished_once(db_url, registry, tool_log, monkeypatch):
    """The approved call ran and the model's next call was stored (docs/decisions/0027), then the process died: after a restart the run goes on, the approved call is not run again, the review is done and the answer posted."""
    import bot.turns.runner as turns_module

    model = ScriptedChatModel(
        replies=[
            calls(tool_call("send", {"to": "bob", "body": "hi"})),
            calls(tool_call("lookup", {"query": "x"})),
            AIMessage("done"),
        ]
    )
    waiting = turns_module._calls_waiting
    armed: list[bool] = []

    def dies_at_the_static_stop(values):
        if waiting(values) and armed:
            raise _Died()
        return waiting(values)

    monkeypatch.setattr(turns_module, "_calls_waiting", dies_at_the_static_stop)
    async with open_service(db_url, model, registry) as h:
        await h.service.handle_message(message("send bob hi", message_id="6.1"))
        [card] = h.platform.cards.values()
        armed.append(True)
        audit = AuditEntry(kind=AuditKind.DECISION, workspace_id="W1", outcome="approved")
        result = await h.approvals.vote(card.approval.id, actor=actor(), kind=VoteKind.APPROVE, quorum=1, audit=audit)
        with pytest.raises(_Died):
            await h.service._resumes.after_decision(result)
    armed.clear()
    assert tool_log.calls == [("send", {"to": "bob", "body": "hi", "urgent": False})]
    async with open_service(db_url, model, registry) as restarted:
        await restarted.service.recover()
        await restarted.service.tasks.join()
        review = await restarted.approvals.review(card.approval.review_id)
    assert tool_log.calls == [("send", {"to": "bob", "body": "hi", "urgent": False}), ("lookup", {"query": "x"})]
    assert review is not None and review.status is ReviewStatus.DONE
    assert [answer for _, answer in restarted.platform.answers] == ["done"]


async def test_a_turn_cut_by_one_shutdown_after_another_is_not_given_up(db_url, registry):
    """Each of more than `MAX_ATTEMPTS` starts is stopped, with no grace, while the left-over turn's
    model call runs (deploys during a long turn): the shutdowns are not failures, so the turn is
    finished by the next start, its question asked once, nobody told something went wrong."""
    from tests.support.gate import Gate

    gate = Gate()
    model = ScriptedChatModel(replies=[AIMessage("finally")], gate=gate)
    incoming = message("a long one", message_id="9.1")
    for start in range(MAX_ATTEMPTS + 2):
        async with open_service(db_url, model, registry) as h:
            gate.arm()
            if start == 0:
                h.service.submit_message(incoming)
            else:
                await h.service.recover()
            await gate.wait_arrived()
            assert await h.service.aclose(0)  # cut
            counted = await h.database.pool.fetchrow(
                "SELECT i.attempts AS message, c.attempts AS run FROM inbox i, conversations c "
                "WHERE i.event_key = $1 AND c.thread_id = i.thread_id",
                inbox_key(incoming),
            )
            assert (counted["message"], counted["run"]) == (1, 0), f"start {start}: the cut counted as a failure"
    gate.release()
    async with open_service(db_url, model, registry) as h:
        await h.service.recover()
        await h.service.tasks.join()
        assert await inbox_status(h, inbox_key(incoming) or "") == "handled"
    assert h.platform.answers == [(conversation().thread_id, "finally")] and h.platform.notices == []
