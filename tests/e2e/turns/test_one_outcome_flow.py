"""A decision the bot cannot carry out, as a Slack user sees it: the real Bolt app, PostgreSQL and the stand-ins.

Every resume of the conversation fails (a trigger on PostgreSQL refuses to start any run that
is not a new message's turn); new messages still run. The bot gives the decided pause up after
its attempts (docs/decisions/0038-one-outcome-per-message.md): the card says the call did not
run, the requester is told once, privately, and the thread answers the next message.
"""

from __future__ import annotations

import json

import pytest

from adapters.slack import blocks
from adapters.slack import messages as msg
from countersign.server import BotServer
from tests.e2e.conftest import ALICE, CHANNEL, TEAM
from tests.e2e.slack.test_slack_flow import Card, card_state, click, settle, wait_answer, wait_card
from tests.standins.slack_api import SlackApiStandIn
from tests.standins.slack_events import SlackEventSender
from tests.support.http_target import HttpTarget

pytestmark = pytest.mark.e2e

GAVE_UP = "I could not carry on after the decision on your request"


def refuse_resumes(thread_id: str) -> str:
    """SQL: a trigger refusing every run of `thread_id` that is not a new message's turn."""
    return f"""
    CREATE FUNCTION refuse_resume() RETURNS trigger LANGUAGE plpgsql AS
      $$ BEGIN RAISE EXCEPTION 'resuming is broken here'; END $$;
    CREATE TRIGGER refuse_resume BEFORE UPDATE ON conversations FOR EACH ROW
      WHEN (NEW.thread_id = '{thread_id}' AND OLD.running_since IS NULL AND NEW.running_since IS NOT NULL
            AND NEW.turn_id IS NOT DISTINCT FROM OLD.turn_id)
      EXECUTE FUNCTION refuse_resume();
    """


async def approved_and_failing(bot: BotServer, events: SlackEventSender, slack: SlackApiStandIn) -> tuple[str, Card]:
    """Alice asks for a gated POST, then approves it; its resume fails, and will every time."""
    assert bot.runtime is not None
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    [card] = await wait_card(slack)
    await bot.runtime.database.pool.execute(refuse_resumes(f"slack:{TEAM}:{CHANNEL}:{mention.ts}"))
    await click(events, slack, ALICE, blocks.ACTION_APPROVE, card)
    await settle(bot)
    return mention.ts, card


def told_alice(slack: SlackApiStandIn) -> list[str]:
    return [str(c.args.get("text", "")) for c in slack.calls_to("chat.postEphemeral") if c.args.get("user") == ALICE]


async def given_up_and_answering(
    events: SlackEventSender, slack: SlackApiStandIn, target: HttpTarget, thread: str, card: Card
) -> None:
    """Alice was told once, privately; the card says the call did not run; the next message is answered."""
    [told] = await slack.wait_for(
        "chat.postEphemeral", lambda a: a.get("user") == ALICE and GAVE_UP in a.get("text", "")
    )
    assert "Did not run: `http_request`" in str(told.args["text"]), told.args["text"]
    assert msg.CARD_NOT_RUN in json.dumps(card_state(slack, card)["blocks"], ensure_ascii=False)
    await events.message(CHANNEL, ALICE, "hello", thread_ts=thread)
    await wait_answer(slack, thread, starts="You said: hello")
    assert target.requests == []
    assert [t for t in told_alice(slack) if GAVE_UP in t] == [told.args["text"]]
    posted = [str(c.args.get("text", "")) for c in slack.calls_to("chat.postMessage")]
    assert not any("went wrong" in t for t in posted + told_alice(slack))


async def test_slack_a_decision_whose_resume_fails_every_attempt_is_given_up_once(
    bot, events, slack: SlackApiStandIn, target
):
    """After the last attempt at the resume: the card says the call did not run, Alice is told once, the thread goes on."""
    thread, card = await approved_and_failing(bot, events, slack)
    assert told_alice(slack) == []  # the resume is tried again: nobody is told yet
    await bot.runtime.database.pool.execute("UPDATE reviews SET attempts = 5, retry_at = now()")  # MAX_ATTEMPTS
    await bot.runtime.service.upkeep.sweep()
    await settle(bot)
    await given_up_and_answering(events, slack, target, thread, card)


async def test_slack_stop_frees_a_thread_an_older_version_left_busy(bot, events, slack: SlackApiStandIn, target):
    """A review left resuming after its last attempt (as older versions left it): `/countersign stop` gives it up; the thread goes on."""
    thread, card = await approved_and_failing(bot, events, slack)
    await bot.runtime.database.pool.execute(
        "UPDATE reviews SET attempts = 6, retry_at = now() + interval '1 hour'"  # not the upkeep's to take now
    )
    link = f"<https://{events.team_domain}.slack.com/archives/{CHANNEL}/p{thread.replace('.', '')}>"
    url = slack.new_response_url(CHANNEL, user=ALICE)
    delivery = await events.slash_command("/countersign", f"stop {link}", ALICE, CHANNEL, url)
    assert delivery.status == 200
    [reply] = await slack.wait_for("response_url")
    assert str(reply.args.get("text", "")).startswith("Stopping:")
    await settle(bot)
    await given_up_and_answering(events, slack, target, thread, card)
