"""Shared pieces of the hostile-input property tests on Discord: approvals to aim at, and checks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from tests.adversarial.hostile import pauses_and_turns
from tests.e2e.conftest import D_ALICE, D_APP, D_BOT, D_THREAD
from tests.e2e.discord.test_discord_flow import Card, click, mention, settle, wait_answer, wait_card

D_GUILD2 = 1_600_000_000_000_000_101
D_CHANNEL2 = 1_600_000_000_000_000_110
D_ZED = 1_700_000_000_000_000_099
"""Guild 2, its channel, and its only member besides the owner (who asks there)."""
NAMED = ("pending", "foreign", "decided")
UNKNOWN_ID = "0123456789abcdef0123456789abcdef"
EPHEMERAL = 64


@dataclass
class Cards:
    pending: Card
    foreign: Card
    decided: Card
    pauses: dict[str, str]
    """Review id (a batch button's) by `NAMED` name."""
    turns: dict[str, str]
    """Turn id (a Stop button's) of the card's conversation by `NAMED` name; the decided card's has ended."""


@pytest.fixture(name="discord_api")
def discord_api_with_a_second_guild(discord_api):
    """The end-to-end Discord stand-in, with a second guild (zed's) the bot is in too."""
    from tests.standins.discord_api import make_member, make_text_channel, make_user

    discord_api.add_guild(
        D_GUILD2,
        "Elsewhere",
        owner_id=D_ZED,
        channels=[make_text_channel(D_CHANNEL2, "elsewhere")],
        members=[make_member(make_user(D_ZED, "zed"))],
    )
    return discord_api


@pytest.fixture(name="cards")
async def cards_fixture(discord_bot, discord_api, target) -> Cards:
    """Alice's pending card, her decided one, and a pending card in guild 2 (zed's)."""
    await mention(discord_api, D_ALICE, "post widget")
    [pending] = await wait_card(discord_api)
    await settle(discord_bot)
    # A ticket (thread) is its own conversation; the channel's is blocked by the pending card.
    await mention(discord_api, D_ALICE, "post gadget", channel=D_THREAD)
    [decided] = await wait_card(discord_api, channel=D_THREAD)
    await settle(discord_bot)
    await click(discord_api, decided, D_ALICE, "approve")
    await wait_answer(discord_api, channel=D_THREAD)
    await discord_api.send_message(D_CHANNEL2, D_ZED, f"<@{D_BOT}> post gizmo", mentions=[D_BOT], guild_id=D_GUILD2)
    [foreign] = await wait_card(discord_api, channel=D_CHANNEL2)
    await settle(discord_bot)
    pauses, turns = await pauses_and_turns(
        discord_bot, {"pending": pending.approval_id, "foreign": foreign.approval_id, "decided": decided.approval_id}
    )
    return Cards(pending=pending, foreign=foreign, decided=decided, pauses=pauses, turns=turns)


async def answer_of(api, interaction) -> tuple[int, list[dict[str, Any]]]:
    """Wait until the bot answered an interaction; its callback type and the messages it showed.

    A deferred answer (type 5 or 6) counts once its followup arrived.
    """
    callbacks = await api.wait_for_request(
        "POST", rf"/interactions/{interaction.id}/[^/]+/callback", lambda r: r.status < 300
    )
    kind = int(callbacks[0].json["type"])
    if kind == 4:
        return kind, [callbacks[0].json["data"]]
    if kind in (5, 6):
        await api.wait_for_request("POST", rf"/webhooks/{D_APP}/{interaction.token}", lambda r: r.status < 300)
        return kind, api.followups(interaction.id)
    return kind, []


async def approval_statuses(bot, cards: Cards) -> dict[str, str]:
    ids = [getattr(cards, name).approval_id for name in NAMED]
    rows = await bot.runtime.database.pool.fetch("SELECT id, status FROM approvals WHERE id = ANY($1::text[])", ids)
    return {row["id"]: row["status"] for row in rows}


async def audit_rows(bot) -> list[dict[str, Any]]:
    return [dict(row) for row in await bot.runtime.database.pool.fetch("SELECT * FROM audit_log ORDER BY id")]
