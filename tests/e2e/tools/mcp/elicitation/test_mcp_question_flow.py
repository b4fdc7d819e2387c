"""An MCP server's question mid-call, answered on Discord, end to end.

The real bot with only Discord enabled, the Gemini stand-in as the model ("pay 100" calls
`bank__pay`), and an MCP server over Streamable HTTP whose `pay` asks who to pay
(`tests.integration.tools.mcp.elicitation.test_mcp_question_on_discord.asking_server`). The requester approves the
call, answers the question in its modal, and the server pays whom she named.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from countersign.server import BotServer
from tests.e2e.conftest import D_ALICE, D_CHANNEL, D_GUILD, make_discord_settings
from tests.e2e.drivers import DiscordDriver
from tests.e2e.tools.mcp.test_mcp_flow import with_mcp
from tests.integration.tools.mcp.elicitation.test_mcp_question_on_discord import asking_server
from tests.support import barriers
from tests.support.mcp_server import serve_http

pytestmark = pytest.mark.e2e


@pytest.fixture
def seen() -> list[dict[str, Any]]:
    return []


@pytest.fixture
async def discord_bot(db_url, gemini, target, discord_api, tmp_path, seen) -> AsyncIterator[BotServer]:
    """The real bot with only Discord enabled and the asking MCP server `bank`."""
    from tests.standins.discord_api import point_discord_py_at

    async with serve_http(asking_server(seen)) as url:
        config = tmp_path / "mcp.json"
        config.write_text(json.dumps({"mcpServers": {"bank": {"url": url}}}), encoding="utf-8")
        with point_discord_py_at(discord_api.api_url) as routing:
            settings = with_mcp(make_discord_settings(db_url, gemini, target, discord_api), config)
            async with BotServer(settings) as server:
                yield server
        assert routing.blocked == []


async def test_a_question_answered_in_its_modal_completes_the_call(discord_bot, discord_api, seen):
    """Approve the call, Answer the server's question in its modal: the server pays whom Alice named."""
    assert discord_bot.runtime is not None
    registry = discord_bot.runtime.registry
    await barriers.wait_until(lambda: "bank__pay" in registry.names(), "the MCP server's tools offered")
    driver = DiscordDriver(discord_bot, discord_api)
    await driver.ask("alice", "pay 100")
    [card] = await driver.cards()
    await driver.approve(card, "alice")
    [post] = await discord_api.wait_for_request(
        "POST", r"/channels/\d+/messages$", lambda r: "cs:q-answer:" in json.dumps(r.json)
    )
    question_id = post.json["components"][0]["components"][0]["custom_id"].split(":")[2]
    clicked = await discord_api.click_button(
        post.response["id"], f"cs:q-answer:{question_id}", D_ALICE, guild_id=D_GUILD, channel_id=D_CHANNEL
    )
    await discord_api.wait_for_request("POST", rf"/interactions/{clicked.id}/[^/]+/callback")
    await discord_api.submit_modal(f"cs:q-modal:{question_id}:1", D_ALICE, {"f0": "bob", "f1": "2"})
    answer = await driver.answer()
    assert "paid 100" in answer
    assert seen[-1] == {"round": "answer", "action": "accept", "content": {"payee": "bob", "times": 2}}
    assert "answered" in discord_api.message(post.response["id"])["embeds"][0]["title"]
