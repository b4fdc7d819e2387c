"""One outcome per message: an answer or one notice, never both, never none (docs/decisions/0038-one-outcome-per-message.md).

Each test leaves a message, a run or a decided review the way a fault would (an outage that
outlasted the upkeep, a database that drops or refuses a write at a chosen moment, a resume
that fails every time), then lets the bot go on, and counts what the people in the
conversation were told. Faults are made at the database, for real (`tests.support.db_faults`,
triggers); the model is scripted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from bot.admin.commands import ResetContext
from bot.admin.views import ContextReset
from bot.agents import prompts
from bot.base.agent_kind import AgentKind
from bot.base.errors import ModelError, ModelErrorKind
from bot.ports import ApprovalCard, ResumeGivenUp
from bot.reviews.decisions import Approve
from bot.reviews.lifecycle import ApprovalStatus, ReviewStatus
from bot.turns.inbox import inbox_key
from bot.turns.inbox_postgres import PostgresInbox
from bot.upkeep.unfinished_work import MAX_ATTEMPTS
from tests.integration.agents.test_subagents_service import SPECS, team
from tests.integration.upkeep.test_unfinished_work import FlakyPlatform, inbox_status, unfinished, upkeep_pass
from tests.support.db_faults import StatementDrop
from tests.support.recording_platform import RecordingPlatform
from tests.support.scripted_model import ScriptedChatModel, calls, tool_call
from tests.support.service import Harness, actor, conversation, message, open_service
from tests.support.tools import ToolLog


def told(h: Harness) -> list[tuple[str, str | None, str | None]]:
    """Every notice as (kind, recipient, the message it names)."""
    return [(type(n).__name__, who, getattr(n, "message", None)) for _, n, who in h.platform.notices]


async def left_by_an_outage(h: Harness, text: str, message_id: str, *, hours: float) -> str:
    """A message accepted `hours` ago whose handler died before it began (every replica was down)."""
    left = message(text, message_id=message_id)
    key = inbox_key(left) or ""
    assert await PostgresInbox(h.database.pool).accept(key, left) is None
    await h.database.pool.execute(
        "UPDATE inbox SET received_at = now() - make_interval(secs => $2) WHERE event_key = $1", key, hours * 3600
    )
    return key


# --- the inbox prune and messages too old to answer ---------------------------------------------


async def test_a_message_never_handled_survives_the_prune_and_is_given_up_with_one_notice(db_url, registry):
    """A day-old message nobody handled is not deleted by the prune: it is given up, its sender told once, and only then pruned."""
    model = ScriptedChatModel(replies=[])
    async with open_service(db_url, model, registry) as h:
        key = await left_by_an_outage(h, "deploy the api", "1.1", hours=25)
        assert await h.service.upkeep.prune() == 0  # as the prune after a restart finds it, before any look
        assert await inbox_status(h, key) == "accepted"
        await upkeep_pass(h)
        assert await inbox_status(h, key) == "abandoned"
        assert await upkeep_pass(h) == []
        assert await h.service.upkeep.prune() == 1  # finished, and a day old
    assert told(h) == [("TurnFailed", "alice", "deploy the api")]
    assert h.platform.answers == [] and model.prompts == []


async def test_a_message_left_by_an_outage_within_the_hour_is_answered(db_url, registry):
    """A message accepted half an hour ago and never handled is answered by the next look, not given up."""
    model = ScriptedChatModel(replies=[AIMessage("late, but answered")])
    async with open_service(db_url, model, registry) as h:
        key = await left_by_an_outage(h, "anyone?", "2.1", hours=0.5)
        await upkeep_pass(h)
        assert await inbox_status(h, key) == "handled"
    assert h.platform.answers == [(conversation().thread_id, "late, but answered")]
    assert h.platform.notices == []


async def test_a_message_whose_answer_waited_past_the_hour_is_given_up_without_the_late_answer(db_url, registry):
    """The answer could not be posted for over an hour: the message is given up with one notice, and the old answer is never posted."""
    model = ScriptedChatModel(replies=[AIMessage("an hour too late")])
    platform = FlakyPlatform(down=True)
    incoming = message("is the api up?", message_id="3.1")
    async with open_service(db_url, model, registry, platform) as h:
        await h.service.handle_message(incoming)
        key = inbox_key(incoming) or ""
        assert await unfinished(h, conversation()) and await inbox_status(h, key) == "accepted"
        await h.database.pool.execute(
            "UPDATE inbox SET received_at = now() - interval '2 hours' WHERE event_key = $1", key
        )
        platform.down = False
        await upkeep_pass(h)
        assert await inbox_status(h, key) == "abandoned"
        assert not await unfinished(h, conversation())
        assert await upkeep_pass(h) == []
    assert told(h) == [("TurnFailed", "alice", "is the api up?")]
    assert platform.answers == []
    assert len(model.prompts) == 1


# --- a failure is told once, or retried silently --------------------------------------------------


async def test_a_failure_that_cannot_be_recorded_is_not_told_and_the_message_is_answered_later(db_url, registry):
    """The database refuses to record a model failure as given up: nobody is told, and the upkeep answers the message once."""
    model = ScriptedChatModel(replies=[ModelError(ModelErrorKind.UNAVAILABLE, "unreachable"), AIMessage("answered")])
    async with open_service(db_url, model, registry) as h:
        await h.database.pool.execute(
            """
            CREATE FUNCTION refuse_give_up() RETURNS trigger LANGUAGE plpgsql AS
              $$ BEGIN RAISE EXCEPTION 'the disk is full'; END $$;
            CREATE TRIGGER refuse_give_up BEFORE UPDATE ON conversations FOR EACH ROW
              WHEN (NEW.run_given_up AND NOT OLD.run_given_up) EXECUTE FUNCTION refuse_give_up();
            """
        )
        await h.service.handle_message(message("hello", message_id="4.1"))
        assert h.platform.notices == [] and h.platform.answers == []
        await h.database.pool.execute("DROP TRIGGER refuse_give_up ON conversations; DROP FUNCTION refuse_give_up()")
        await upkeep_pass(h)
        assert await upkeep_pass(h) == []
    assert h.platform.notices == []
    assert h.platform.answers == [(conversation().thread_id, "answered")]


@dataclass
class DroppingAfterTheAnswer(RecordingPlatform):
    """Posts; right after the first answer, the database drops the bot's next write to the conversation."""

    drop: StatementDrop | None = None
    dropped: StatementDrop | None = None

    async def post_answer(self, conversation, text):
        await super().post_answer(conversation, text)
        if self.drop is not None:
            drop, self.drop = self.drop, None
            await drop.arm(
                "SELECT 1 FROM conversations WHERE thread_id = $1 FOR UPDATE",
                conversation.thread_id,
                statement="UPDATE conversations SET running_since = NULL",
            )
            self.dropped = drop


async def test_an_answer_followed_by_a_database_drop_is_not_followed_by_a_failure_notice(db_url, registry):
    """The database drops right after the answer was posted: nobody is told something failed (the answer may come twice)."""
    model = ScriptedChatModel(replies=[AIMessage("the answer")])
    platform = DroppingAfterTheAnswer(drop=StatementDrop(db_url))
    async with open_service(db_url, model, registry, platform) as h:
        await h.service.handle_message(message("question", message_id="5.1"))
        assert platform.dropped is not None
        await platform.dropped.done()
        assert platform.dropped.dropped
        await upkeep_pass(h)
        assert await upkeep_pass(h) == []
        assert await inbox_status(h, inbox_key(message("question", message_id="5.1")) or "") == "handled"
    assert platform.notices == []
    assert {text for _, text in platform.answers} == {"the answer"}
    assert len(model.prompts) == 1


@dataclass
class DroppingTheInboxAfterTheAnswer(RecordingPlatform):
    """Posts; right after the first answer, the database drops the write that records its message handled."""

    drop: StatementDrop | None = None
    dropped: StatementDrop | None = None

    async def post_answer(self, conversation, text):
        await super().post_answer(conversation, text)
        if self.drop is not None:
            drop, self.drop = self.drop, None
            await drop.arm("SELECT 1 FROM inbox FOR UPDATE", statement="UPDATE inbox SET status = 'handled'")
            self.dropped = drop


async def answered_then_dropped(h: Harness, platform: DroppingTheInboxAfterTheAnswer, incoming) -> str:
    """`incoming` answered, then left `accepted` (the database dropped), and the database back two hours later."""
    h.service.submit_message(incoming)  # as the adapters do
    await h.service.tasks.join()
    assert platform.dropped is not None
    await platform.dropped.done()
    assert platform.dropped.dropped
    key = inbox_key(incoming) or ""
    assert await inbox_status(h, key) == "accepted"
    # Back after more than `bot.upkeep.unfinished_work.ANSWER_WITHIN_S`.
    await h.database.pool.execute("UPDATE inbox SET received_at = now() - interval '2 hours' WHERE event_key = $1", key)
    return key


async def test_an_answered_message_left_accepted_by_a_long_outage_is_not_given_up_by_the_upkeep(db_url, registry):
    """Answered, then the database dropped before the message was recorded handled and stayed down over an hour: the upkeep records it handled and tells nobody."""
    model = ScriptedChatModel(replies=[AIMessage("the answer"), AIMessage("asked twice")])
    platform = DroppingTheInboxAfterTheAnswer(drop=StatementDrop(db_url))
    async with open_service(db_url, model, registry, platform) as h:
        key = await answered_then_dropped(h, platform, message("send the weekly report", message_id="5.2"))
        await upkeep_pass(h)
        assert await inbox_status(h, key) == "handled"
        assert await upkeep_pass(h) == []
    assert told(h) == []
    assert platform.answers == [(conversation().thread_id, "the answer")]
    assert len(model.prompts) == 1


async def test_an_answered_message_left_accepted_by_a_long_outage_is_not_given_up_before_the_next(db_url, registry):
    """The same, and the next message of the conversation arrives before the upkeep: it is answered, the earlier one only recorded handled."""
    model = ScriptedChatModel(replies=[AIMessage("the answer"), AIMessage("the next answer")])
    platform = DroppingTheInboxAfterTheAnswer(drop=StatementDrop(db_url))
    async with open_service(db_url, model, registry, platform) as h:
        key = await answered_then_dropped(h, platform, message("send the weekly report", message_id="5.3"))
        await h.service.handle_message(message("thanks", message_id="5.4"))
        assert await inbox_status(h, key) == "handled"
        assert await upkeep_pass(h) == []
    assert told(h) == []
    assert platform.answers == [(conversation().thread_id, "the answer"), (conversation().thread_id, "the next answer")]
    assert len(model.prompts) == 2


class DroppingAfterTheModel(ScriptedChatModel):
    """Scripted; once armed, its next call first has the database drop the bot's next write to the conversation."""

    drop: Any = None

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
        if self.drop is not None:
            await self.drop.arm(
                "SELECT 1 FROM conversations WHERE thread_id = $1 FOR UPDATE",
                conversation().thread_id,
                statement="UPDATE conversations SET",
            )
        return await super()._agenerate(messages, stop, run_manager, **kwargs)


async def test_a_message_whose_failure_cannot_be_recorded_is_given_up_with_its_run(db_url, registry):
    """The model fails and the database drops the write after it: the sender is told once, and the upkeep never finishes that run."""
    model = DroppingAfterTheModel(
        replies=[AIMessage("first"), ModelError(ModelErrorKind.UNAVAILABLE, "unreachable"), AIMessage("too late")]
    )
    async with open_service(db_url, model, registry) as h:
        await h.service.handle_message(message("hi", message_id="6.1"))
        drop = model.drop = StatementDrop(db_url)
        await h.service.handle_message(message("hello", message_id="6.2"))
        model.drop = None
        await drop.done()
        assert drop.dropped
        await upkeep_pass(h)
        assert await upkeep_pass(h) == []
    assert told(h) == [("TurnFailed", "alice", "hello")]
    assert h.platform.answers == [(conversation().thread_id, "first")]
    assert len(model.prompts) == 2


# --- a decided pause whose resume fails for good ------------------------------------------------

REFUSE_RESUMES = """
CREATE FUNCTION refuse_resume() RETURNS trigger LANGUAGE plpgsql AS
  $$ BEGIN RAISE EXCEPTION 'resuming is broken here'; END $$;
CREATE TRIGGER refuse_resume BEFORE UPDATE ON conversations FOR EACH ROW
  WHEN (OLD.running_since IS NULL AND NEW.running_since IS NOT NULL AND NEW.turn_id IS NOT DISTINCT FROM OLD.turn_id)
  EXECUTE FUNCTION refuse_resume();
"""
"""Every run that is not a new message's turn (a resume) fails to start; new messages still run."""


def send_then_chat() -> ScriptedChatModel:
    """Asks to `send` (a card) for "send ...", and answers anything else with "re: <text>"."""

    def script(messages):
        last = messages[-1]
        if isinstance(last, HumanMessage) and str(last.content).startswith("send"):
            return calls(tool_call("send", {"to": "bob", "body": "hi"}))
        return AIMessage(f"re: {last.content}")

    return ScriptedChatModel(script=script)


async def approved_but_never_resumed(h: Harness) -> ApprovalCard:
    """Alice asks to send, approves the card, and the resume fails (and will fail every time)."""
    await h.service.handle_message(message("send bob hi", message_id="7.1"))
    [card] = h.platform.cards.values()
    await h.database.pool.execute(REFUSE_RESUMES)
    await h.service.decide(card.approval.id, actor("alice"), Approve())
    await h.service.tasks.join()
    review = await h.approvals.review(card.approval.review_id)
    assert review is not None and review.status is ReviewStatus.RESUMING
    return card


async def left_stuck_by_an_older_version(h: Harness) -> ApprovalCard:
    """A decided review whose resume failed every attempt, left resuming (what versions before this one did)."""
    card = await approved_but_never_resumed(h)
    await h.database.pool.execute("UPDATE reviews SET attempts = $1", MAX_ATTEMPTS + 1)
    return card


async def given_up_and_free(h: Harness, card: ApprovalCard, tool_log: ToolLog) -> None:
    """The review is done, its call did not run and its card says so, Alice was told once, and the next message is answered."""
    review = await h.approvals.review(card.approval.review_id)
    approval = await h.approvals.get(card.approval.id)
    assert review is not None and review.status is ReviewStatus.DONE
    assert approval is not None and approval.status is ApprovalStatus.APPROVED and approval.not_run
    [shown] = [c.approval for c in h.platform.cards.values() if c.approval.id == card.approval.id]
    assert shown.not_run  # the card was redrawn to say so
    [(_, notice, who)] = h.platform.notices
    assert isinstance(notice, ResumeGivenUp) and who == "alice"
    assert [(a.tool_name, a.not_run) for a in notice.approvals] == [("send", True)]
    await h.service.handle_message(message("hello again", message_id="7.9"))
    assert h.platform.answers[-1] == (conversation().thread_id, "re: hello again")
    assert tool_log.calls == []
    assert await upkeep_pass(h) == []


async def test_a_resume_that_fails_every_attempt_is_given_up_and_its_requester_told_once(db_url, registry, tool_log):
    """The resume after Approve fails each time: nobody is told meanwhile; after the last attempt the call is marked not run, Alice is told once, and the thread goes on."""
    model = send_then_chat()
    async with open_service(db_url, model, registry) as h:
        card = await approved_but_never_resumed(h)
        await upkeep_pass(h)  # a second attempt fails too, silently
        assert h.platform.notices == []
        await h.database.pool.execute("UPDATE reviews SET attempts = $1", MAX_ATTEMPTS)
        await upkeep_pass(h)  # the attempt after the last gives it up
        await given_up_and_free(h, card, tool_log)
    [result] = [m for m in model.prompts[-1] if isinstance(m, ToolMessage)]
    assert result.content == prompts.GIVEN_UP_CALL and result.status == "error"


async def test_a_conversation_stuck_on_a_spent_resume_answers_the_next_message(db_url, registry, tool_log):
    """A review an older version left resuming after its last attempt does not make the next message 'busy': it is given up first."""
    async with open_service(db_url, send_then_chat(), registry) as h:
        card = await left_stuck_by_an_older_version(h)
        await h.service.handle_message(message("anyone there?", message_id="7.2"))
        assert h.platform.answers == [(conversation().thread_id, "re: anyone there?")]
        await given_up_and_free(h, card, tool_log)


async def test_stop_frees_a_conversation_stuck_on_a_spent_resume(db_url, registry, tool_log):
    """`/countersign stop` in a conversation stuck on a spent resume gives the pause up: Alice is told, the next message is answered."""
    async with open_service(db_url, send_then_chat(), registry) as h:
        card = await left_stuck_by_an_older_version(h)
        await h.service.stop_turn(actor("alice"), conversation=conversation())
        await h.service.tasks.join()
        await given_up_and_free(h, card, tool_log)


async def test_a_context_reset_frees_a_conversation_stuck_on_a_spent_resume(db_url, registry, tool_log):
    """`/countersign context reset` in a conversation stuck on a spent resume gives the pause up first, then resets."""
    async with open_service(db_url, send_then_chat(), registry, RecordingPlatform(admins={"boss"})) as h:
        card = await left_stuck_by_an_older_version(h)
        reply = await h.admin.execute(actor("boss"), ResetContext(), here="C1", conversation=conversation())
        assert isinstance(reply, ContextReset) and reply.changed
        await given_up_and_free(h, card, tool_log)


async def test_the_upkeep_frees_a_conversation_stuck_on_a_spent_resume(db_url, registry, tool_log):
    """After an upgrade, the first look of the upkeep gives up a review an older version left resuming for good."""
    async with open_service(db_url, send_then_chat(), registry) as h:
        card = await left_stuck_by_an_older_version(h)
        assert await h.service.recover() == [conversation().thread_id]
        await h.service.tasks.join()
        await given_up_and_free(h, card, tool_log)


async def test_a_subagents_pause_whose_resume_is_spent_is_given_up_and_the_supervisor_goes_on(
    db_url, registry, tool_log
):
    """A delegation's card was approved, its resume never worked: the pause is given up, the supervisor reads why, and answers the next message."""
    model = team(lambda text: [("alpha", "bob")] if text.startswith("send") else [])
    async with open_service(db_url, model, registry, subagents=SPECS, default_agent=AgentKind.SUBAGENTS) as h:
        card = await left_stuck_by_an_older_version(h)
        assert card.approval.source == "alpha"
        await h.service.handle_message(message("hello", message_id="7.2"))
        review = await h.approvals.review(card.approval.review_id)
        approval = await h.approvals.get(card.approval.id)
    assert review is not None and review.status is ReviewStatus.DONE
    assert approval is not None and approval.not_run
    [(_, notice, who)] = h.platform.notices
    assert isinstance(notice, ResumeGivenUp) and who == "alice"
    assert h.platform.answers == [(conversation().thread_id, "ok")]
    assert tool_log.calls == []
    [result] = [m for m in model.prompts[-1] if isinstance(m, ToolMessage)]
    assert result.content == prompts.GIVEN_UP_DELEGATION.format(name="alpha")
