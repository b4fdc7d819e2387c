"""End-to-end fixtures: the real bot (Bolt over HTTP) with Slack, Gemini and HTTP stand-ins."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from bot.settings import (
    AgentSettings,
    DatabaseSettings,
    GeminiSettings,
    ServerSettings,
    Settings,
    SlackSettings,
    ToolSettings,
)
from countersign.server import BotServer
from tests.e2e.agent_script import agent_script
from tests.standins.gemini import GeminiStandIn
from tests.standins.slack_api import SlackApiStandIn
from tests.standins.slack_events import SlackEventSender
from tests.support.http_target import HttpTarget

SIGNING_SECRET = "e2e-signing-secret"
BOT_TOKEN = "xoxb-e2e-token"
TEAM = "T1"
CHANNEL = "C1"
ALICE, BOB, CAROL = "UALICE", "UBOB", "UCAROL"


@pytest.fixture
async def target() -> AsyncIterator[HttpTarget]:
    async with HttpTarget() as server:
        yield server


@pytest.fixture
async def gemini(target: HttpTarget) -> AsyncIterator[GeminiStandIn]:
    async with GeminiStandIn(agent_script(target.url()), api_key="e2e-gemini-key") as server:
        yield server


@pytest.fixture
async def slack() -> AsyncIterator[SlackApiStandIn]:
    async with SlackApiStandIn(bot_token=BOT_TOKEN, team_id=TEAM) as server:
        server.add_user(ALICE, "alice")
        server.add_user(BOB, "bob")
        server.add_user(CAROL, "carol", is_admin=True)
        server.add_channel(CHANNEL, name="general")
        yield server


@pytest.fixture
def settings(
    db_url: str, gemini: GeminiStandIn, slack: SlackApiStandIn, target: HttpTarget
) -> Settings:
    return make_settings(db_url, gemini, slack, target)


def make_settings(
    db_url: str, gemini: GeminiStandIn, slack: SlackApiStandIn, target: HttpTarget, **server: Any
) -> Settings:
    return Settings(
        database=DatabaseSettings(url=db_url, pool_max_size=10),
        gemini=GeminiSettings(
            api_key="e2e-gemini-key",
            base_url=gemini.base_url,
            max_attempts=3,
            retry_initial_delay_s=0.01,
            retry_max_delay_s=0.05,
        ),
        agent=AgentSettings(),
        tools=ToolSettings(http_allowed_hosts=(target.host,)),
        slack=SlackSettings(
            bot_token=BOT_TOKEN, signing_secret=SIGNING_SECRET, api_url=slack.base_url
        ),
        server=ServerSettings(host="127.0.0.1", port=0, shutdown_grace_s=5, **server),
    )


@pytest.fixture
async def bot(settings: Settings) -> AsyncIterator[BotServer]:
    async with BotServer(settings) as server:
        yield server


@pytest.fixture
async def events(bot: BotServer) -> AsyncIterator[SlackEventSender]:
    async with SlackEventSender(
        f"http://127.0.0.1:{bot.port}/slack/events",
        SIGNING_SECRET,
        team_id=TEAM,
        bot_user_id="UBOT",
    ) as sender:
        yield sender
