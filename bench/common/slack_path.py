"""The whole Slack path as the benchmarks drive it: signed events in, the answer's `chat.postMessage` out.

`send_as_slack` sends one message of a conversation (an `app_mention` first, thread replies
after) to any bot listening for Slack events, in this process (`bench.common.harness.running_bot`)
or in child processes (`bench.common.workers`); `SlackTurns` is a latency series of one mention
in a new thread each, against the bot in this process.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from bench.common.harness import (
    BOT_USER,
    TURN_CHANNEL,
    WAIT_S,
    Conversation,
    Sampler,
    Series,
    Stage,
    is_post_in,
    settle,
)
from bot.base.conversation import ConversationRef
from countersign.server import BotServer
from tests.e2e.conftest import ALICE, TEAM
from tests.standins.slack_events import SlackEventSender


def thread_ref(ts: str | None) -> ConversationRef:
    """The conversation of the Slack thread whose first message has this ts."""
    return ConversationRef(platform="slack", workspace_id=TEAM, channel_id=TURN_CHANNEL, thread=ts)


async def send_as_slack(
    events: SlackEventSender, stage: Stage, conversation: Conversation, text: str, answer: str, side: str
) -> float:
    """Send one message of `conversation` as Slack would and wait for the answer; return the ms in between.

    The first message of a conversation is an `app_mention` (it opens the thread), the others
    are thread replies; done is the stand-in recording the answer's `chat.postMessage`.

    Raises:
        RuntimeError: the event got an HTTP status other than 200 (named after `side`).
        TimeoutError: no answer starting with `answer` within `WAIT_S`.
    """
    thread_ts = conversation.ts
    assert thread_ts is not None
    posted = stage.slack.expect(is_post_in(thread_ts, answer))
    if conversation.turns == 0:
        body = f"<@{BOT_USER}> {text}"
        stage.slack.add_message(TURN_CHANNEL, user=ALICE, text=body, ts=thread_ts)
        started = time.perf_counter()
        delivery = await events.app_mention(TURN_CHANNEL, ALICE, body, ts=thread_ts)
    else:
        ts = stage.clock.next()
        stage.slack.add_message(TURN_CHANNEL, user=ALICE, text=text, ts=ts, thread_ts=thread_ts)
        started = time.perf_counter()
        delivery = await events.message(TURN_CHANNEL, ALICE, text, ts=ts, thread_ts=thread_ts)
    if delivery.status != 200:
        raise RuntimeError(f"{side}: the event got HTTP {delivery.status}")
    done = await asyncio.wait_for(posted, WAIT_S)
    conversation.turns += 1
    return (done - started) * 1000


SLACK_MILESTONES = (
    ("reactions.add", "hourglass on (reactions.add)"),
    ("gemini", "first Gemini request in"),
    ("reactions.remove", "hourglass off (reactions.remove)"),
    ("chat.postMessage", "answer posted (chat.postMessage)"),
)


class SlackTurns(Sampler):
    """Signed `app_mention` sent -> the answer's `chat.postMessage` recorded by the stand-in."""

    def __init__(
        self,
        name: str,
        prompt: str,
        answer: str,
        bot: BotServer,
        events: SlackEventSender,
        stage: Stage,
    ):
        super().__init__(name, prompt, answer)
        self._bot = bot
        self._events = events
        self._stage = stage
        self.acks = Series(f"{name}: event ack")

    async def sample(self, *, keep: bool) -> None:
        """One mention in a new thread, timed until its answer is posted; then let it settle."""
        stage = self._stage
        ts = stage.clock.next()
        text = f"<@{BOT_USER}> {self.prompt}"
        # Seed the mention in the stand-in so the hourglass can go on and off as in Slack.
        stage.slack.add_message(TURN_CHANNEL, user=ALICE, text=text, ts=ts)
        posted = stage.slack.expect(is_post_in(ts, self.answer))
        first_mark = len(stage.marks.items)
        started = time.perf_counter()
        delivery = await self._events.app_mention(TURN_CHANNEL, ALICE, text, ts=ts)
        acked = time.perf_counter()
        if delivery.status != 200:
            raise RuntimeError(f"{self.name}: the event got HTTP {delivery.status}")
        done = await asyncio.wait_for(posted, WAIT_S)
        if keep:
            self.series.samples_ms.append((done - started) * 1000)
            self.acks.samples_ms.append((acked - started) * 1000)
            self.milestones.add("event acked (HTTP 200 at sender)", (acked - started) * 1000)
            self._add_milestones(stage.marks.since(first_mark), started)
        await settle(self._bot)

    def _add_milestones(self, marks: Sequence[tuple[float, str]], started: float) -> None:
        seen: dict[str, float] = {}
        for stamp, label in marks:
            seen.setdefault(label, stamp)
        for label, title in SLACK_MILESTONES:
            if label in seen:
                self.milestones.add(title, (seen[label] - started) * 1000)
        gemini = [stamp for stamp, label in marks if label == "gemini"]
        if len(gemini) > 1:
            self.milestones.add("last Gemini request in", (gemini[-1] - started) * 1000)
