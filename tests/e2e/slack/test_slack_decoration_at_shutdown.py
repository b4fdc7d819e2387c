"""The hourglass a turn put on a message comes off even when the bot stops right after the answer."""

from __future__ import annotations

import pytest

from countersign.server import BotServer
from tests.e2e.conftest import ALICE, CHANNEL, SIGNING_SECRET, TEAM
from tests.standins.slack_api import SlackApiStandIn
from tests.standins.slack_events import SlackEventSender
from tests.support.barriers import GENEROUS_S

pytestmark = pytest.mark.e2e

HOURGLASS = "hourglass_flowing_sand"


async def test_hourglass_is_removed_when_the_bot_stops_right_after_the_answer(settings, slack: SlackApiStandIn):
    """SIGTERM right after a turn answered: the hourglass still comes off (it is not lost with the session)."""
    ts = slack.add_message(CHANNEL, user=ALICE, text="<@UBOT> hello")
    # Slack asks the removal to wait a second (rate limit): the stop begins meanwhile.
    slack.rate_limit("reactions.remove", times=1, retry_after=1)
    async with BotServer(settings) as bot:
        async with SlackEventSender(
            f"http://127.0.0.1:{bot.port}/slack/events", SIGNING_SECRET, team_id=TEAM, bot_user_id="UBOT"
        ) as events:
            await events.app_mention(CHANNEL, ALICE, "<@UBOT> hello", ts=ts)
            await slack.wait_for(
                "chat.postMessage", lambda a: str(a.get("text", "")).startswith("You said"), timeout=GENEROUS_S
            )
            await slack.wait_for("reactions.remove", timeout=GENEROUS_S)  # the rate-limited first try
        assert bot.runtime is not None
        await bot.runtime.service.tasks.join()
    # The bot has stopped: its session is closed. The reaction must be gone.
    reactions = slack.message(CHANNEL, ts).get("reactions") or []
    assert not [r for r in reactions if r["name"] == HOURGLASS], reactions
