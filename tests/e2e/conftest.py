"""End-to-end fixtures: the real bot (Bolt over HTTP) with Slack, Gemini and HTTP stand-ins."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
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


PLATFORM_DEADLINE_S = 60.0
"""Slack's trigger ids and Discord's interactions expire 3 s after the click; end-to-end tests give
the bot 60 s instead. Under load a busy shared machine can take longer than 3 s between the click
and the bot's answer (the answer to Edit needs the database), and CI must not pass or fail on the
machine's speed; the stand-ins' own tests check the 3-second rules themselves."""


@pytest.fixture
async def slack() -> AsyncIterator[SlackApiStandIn]:
    async with SlackApiStandIn(bot_token=BOT_TOKEN, team_id=TEAM, trigger_ttl_s=PLATFORM_DEADLINE_S) as server:
        server.add_user(ALICE, "alice")
        server.add_user(BOB, "bob")
        server.add_user(CAROL, "carol", is_admin=True)
        server.add_channel(CHANNEL, name="general")
        yield server


@pytest.fixture
def settings(db_url: str, gemini: GeminiStandIn, slack: SlackApiStandIn, target: HttpTarget) -> Settings:
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
        slack=SlackSettings(bot_token=BOT_TOKEN, signing_secret=SIGNING_SECRET, api_url=slack.base_url),
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


# --- Discord ------------------------------------------------------------------------------

DISCORD_TOKEN = "discord-e2e-token"
D_APP = 1_500_000_000_000_000_001
D_BOT = 1_500_000_000_000_000_002
D_GUILD = 1_600_000_000_000_000_001
D_CHANNEL = 1_600_000_000_000_000_010
D_THREAD = 1_600_000_000_000_000_011
D_MODS = 1_600_000_000_000_000_020
D_OPS = 1_600_000_000_000_000_021
D_OWNER = 1_700_000_000_000_000_001
D_ALICE = 1_700_000_000_000_000_002
D_BOB = 1_700_000_000_000_000_003
D_CAROL = 1_700_000_000_000_000_004
D_ERIN = 1_700_000_000_000_000_005


@pytest.fixture
async def discord_api() -> AsyncIterator[Any]:
    async with discord_guild() as api:
        yield api


@asynccontextmanager
async def discord_guild() -> AsyncIterator[Any]:
    """The Discord stand-in with one guild: a channel, a thread, two roles and five members."""
    from tests.standins.discord_api import (
        DiscordStandIn,
        Permission,
        make_member,
        make_role,
        make_text_channel,
        make_thread,
        make_user,
    )

    async with DiscordStandIn(
        bot_token=DISCORD_TOKEN,
        application_id=D_APP,
        bot_user_id=D_BOT,
        interaction_response_timeout=PLATFORM_DEADLINE_S,
    ) as api:
        api.add_guild(
            D_GUILD,
            "Countersign e2e",
            owner_id=D_OWNER,
            channels=[
                make_text_channel(D_CHANNEL, "general"),
                make_thread(D_THREAD, D_CHANNEL, "ticket-1", owner_id=D_ALICE),
            ],
            roles=[make_role(D_MODS, "Mods", permissions=Permission.MANAGE_GUILD), make_role(D_OPS, "Ops")],
            members=[
                make_member(make_user(D_OWNER, "owner")),
                make_member(make_user(D_ALICE, "alice")),
                make_member(make_user(D_BOB, "bob")),
                make_member(make_user(D_CAROL, "carol"), roles=[D_MODS]),
                make_member(make_user(D_ERIN, "erin"), roles=[D_OPS]),
            ],
        )
        yield api


def make_discord_settings(db_url: str, gemini: GeminiStandIn, target: HttpTarget, discord_api: Any) -> Settings:
    from bot.settings import DiscordSettings

    base = make_settings(db_url, gemini, SlackApiStandInPlaceholder, target)
    return base.model_copy(
        update={
            "slack": SlackSettings(bot_token=None, signing_secret=None, app_token=None),
            # The stand-in sends every GUILD_CREATE at once: no need to wait for more.
            "discord": DiscordSettings(token=DISCORD_TOKEN, api_url=discord_api.api_url, guild_ready_timeout_s=0.05),
        }
    )


class SlackApiStandInPlaceholder:
    """make_settings wants a Slack base URL; Discord tests switch Slack off anyway."""

    base_url = "http://127.0.0.1:9/api/"


@pytest.fixture
async def discord_bot(db_url, gemini, target, discord_api) -> AsyncIterator[BotServer]:
    """The real bot with only Discord enabled; discord.py may reach nothing but the stand-in."""
    from tests.standins.discord_api import point_discord_py_at

    with point_discord_py_at(discord_api.api_url) as routing:
        async with BotServer(make_discord_settings(db_url, gemini, target, discord_api)) as server:
            yield server
    assert routing.blocked == []
