"""Attacks on Discord sharding (docs/decisions/0018): work that reaches a process without the guild's shard."""

from __future__ import annotations

import pytest

from bot.settings import DiscordSettings
from countersign.server import BotServer
from tests.e2e import conftest as c
from tests.e2e.discord.test_discord_flow import _buttons
from tests.e2e.drivers import DiscordDriver
from tests.standins.discord_api import point_discord_py_at
from tests.support.barriers import wait_until

pytestmark = pytest.mark.e2e

SHARDS = 3
GUILD_SHARD = (c.D_GUILD >> 22) % SHARDS
"""The shard of the test guild among three: 2, so not shard 0, which gets every DM."""


def sharded(settings, shard: int):
    discord = settings.discord.model_dump()
    return settings.model_copy(
        update={"discord": DiscordSettings.model_validate({**discord, "shard_count": SHARDS, "shard_ids": (shard,)})}
    )


async def test_a_dm_card_is_decided_by_a_process_without_the_guilds_shard(db_url, gemini, target, discord_api):
    """`cards dm`: Carol's Approve in her DMs reaches shard 0's process, which does not hold the card's guild.

    Replicas (or workers) split the shards, and Discord sends every DM to shard 0; the clicker's
    standing in the guild must then be read over REST, not from a guild cache this process
    never filled, or every DM approval of a guild on another shard is refused as "another server".
    """
    assert GUILD_SHARD != 0
    settings = c.make_discord_settings(db_url, gemini, target, discord_api)
    with point_discord_py_at(discord_api.api_url):
        async with BotServer(sharded(settings, GUILD_SHARD)) as guild_process:
            driver = DiscordDriver(guild_process, discord_api)
            assert "Updated approvers" in await driver.command("carol", "approvers", action="add", user="carol")
            assert "Updated cards" in await driver.command("carol", "cards", where="dm")
            await driver.ask("alice", "post widget")
            [card] = await driver.cards()
            await driver.settle()
        assert card.channel != str(c.D_CHANNEL)  # a DM channel
        async with BotServer(sharded(settings, 0)) as dm_process:
            custom_id = next(i for i in _buttons(discord_api.message(card.message)) if i.startswith("cs:approve:"))
            interaction = await discord_api.click_button(
                card.message, custom_id, c.D_CAROL, channel_id=int(card.channel)
            )
            await discord_api.wait_for_request("POST", rf"/interactions/{interaction.id}/[^/]+/callback")
            await wait_until(
                lambda: bool(target.requests or discord_api.followups(interaction.id)), "the approval's outcome"
            )
            await DiscordDriver(dm_process, discord_api).settle()
    followups = [f["content"] for f in discord_api.followups(interaction.id)]
    assert [r.json for r in target.requests] == [{"name": "widget"}], f"Carol's DM approval was refused: {followups}"
