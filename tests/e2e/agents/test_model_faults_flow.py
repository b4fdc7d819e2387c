"""Model faults as a Slack user sees them: the real Bolt app, the real Gemini client, the stand-ins."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable

import pytest

from adapters.slack import messages as msg
from adapters.words import model as model_msg
from adapters.words.display import duration_words
from bot.base.errors import ModelErrorKind, NoAnswerReason
from bot.settings import Settings
from tests.e2e.agent_script import agent_script
from tests.e2e.conftest import ALICE, CHANNEL, make_settings
from tests.e2e.slack.test_slack_flow import settle, wait_answer
from tests.standins.gemini import GeminiReply, GeminiRequest, GeminiStandIn, ScriptedResponder, blocked, error
from tests.standins.slack_api import SlackApiStandIn
from tests.support.http_target import HttpTarget

pytestmark = pytest.mark.e2e

RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"


def faults() -> Callable[[GeminiRequest], GeminiReply | None]:
    """ "forbidden" is a blocked prompt; "busy" gets one 429 asking to wait a second, then the script answers."""
    busy = itertools.count()

    def rule(request: GeminiRequest) -> GeminiReply | None:
        said = (request.last_user_text or "").strip()
        if request.function_responses:
            return None
        if said == "forbidden":
            return blocked("SAFETY")
        if said == "busy" and next(busy) == 0:
            return error(429, details=[{"@type": RETRY_INFO, "retryDelay": "1s"}])
        return None

    return rule


@pytest.fixture
async def gemini(target: HttpTarget) -> AsyncIterator[GeminiStandIn]:
    responder = ScriptedResponder(rules=[faults(), agent_script(target.url())])
    async with GeminiStandIn(responder, api_key="e2e-gemini-key", allow_signature_placeholders=False) as server:
        yield server


@pytest.fixture
def settings(db_url: str, gemini: GeminiStandIn, slack: SlackApiStandIn, target: HttpTarget) -> Settings:
    base = make_settings(db_url, gemini, slack, target)
    # Announce waits from half a second, so a one-second retryDelay shows in the thread.
    return base.model_copy(update={"gemini": base.gemini.model_copy(update={"retry_announce_after_s": 0.5})})


async def test_slack_a_blocked_prompt_is_told_and_the_thread_goes_on(bot, events, slack: SlackApiStandIn, gemini):
    """Gemini blocks the prompt: the thread gets the clear sentence, nothing empty; the next mention is answered."""
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> forbidden")
    told = model_msg.MODEL_NO_ANSWER[NoAnswerReason.BLOCKED]
    await wait_answer(slack, mention.ts, starts=told)
    again = await events.app_mention(CHANNEL, ALICE, "<@UBOT> hello", thread_ts=mention.ts)
    await wait_answer(slack, mention.ts, starts="You said: hello")
    await settle(bot)
    texts = [str(c.args.get("text", "")) for c in slack.calls_to("chat.postMessage")]
    assert all(text.strip() for text in texts)
    assert texts.count(told) == 1
    assert again.status == 200
    assert [r.status_code for r in gemini.requests] == [200, 200]


async def test_slack_a_rate_limit_wait_is_shown_then_removed(bot, events, slack: SlackApiStandIn, gemini):
    """A 429 asking for one second: a progress message says the bot retries, the answer follows, the message goes."""
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> busy")
    await wait_answer(slack, mention.ts, starts="You said: busy")
    await settle(bot)
    retrying = msg.PROGRESS.retrying[ModelErrorKind.BUSY].format(wait=duration_words(1.0))
    [progress] = [c for c in slack.calls_to("chat.postMessage") if c.args.get("text") == retrying]
    assert progress.args.get("thread_ts") == mention.ts
    deleted = [c.args.get("ts") for c in slack.calls_to("chat.delete")]
    assert len(deleted) == 1
    assert [r.status_code for r in gemini.requests] == [429, 200]
