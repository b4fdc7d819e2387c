"""One outcome per message: an answer or one notice, never both, never none (docs/decisions/XXXX-one-outcome-per-message.md).

Each test leaves a message, a run or a decided review the way a fault would (an outage that
outlasted the upkeep, a database that drops or refuses a write at a chosen moment, a resume
that fails every time), then lets the bot go on, and counts what the people in the
conversation were told. Faults are made at the database, for real (`tests.support.db_faults`,
triggers); the model is scripted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage

from bot.errors import ModelError, ModelErrorKind
from bot.storage.inbox import Inbox, inbox_key
from tests.integration.test_unfinished_work import FlakyPlatform, inbox_status, unfinished, upkeep_pass
from tests.support.db_faults import StatementDrop
from tests.support.recording_platform import RecordingPlatform
from tests.support.scripted_model import ScriptedChatModel
from tests.support.service import Harness, conversation, message, open_service


def told(h: Harness) -> list[tuple[str, str | None, str | None]]:
    """Every notice as (kind, recipient, the message it names)."""
    return [(type(n).__name__, who, getattr(n, "message", None)) for _, n, who in h.platform.notices]


async def left_by_an_outage(h: Harness, text: str, message_id: str, *, hours: float) -> str:
    """A message accepted `hours` ago whose handler died before it began (every replica was down)."""
    left = message(text, message_id=message_id)
    key = inbox_key(left) or ""
    assert await Inbox(h.database.pool).accept(key, left) is None
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
