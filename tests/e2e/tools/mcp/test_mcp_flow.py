"""An MCP server's tool behind a card, end to end, the same scenarios on Slack and on Discord.

The real bot with `COUNTERSIGN_MCP_CONFIG` naming the test server (`tests.support.mcp_server`,
a FastMCP server over stdio, a subprocess the bot starts; or, for the approved call, the same
server over Streamable HTTP on a local port) as the MCP server `notes`; the model
is the Gemini stand-in (`tests.e2e.agent_script`: "note <title>" calls `notes__create_note`).
What ran is read from the server's own record of its calls, not from what the bot believes it
sent.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.settings import Settings
from countersign.server import BotServer
from tests.e2e.conftest import make_discord_settings, make_settings
from tests.e2e.drivers import DiscordDriver, SlackDriver
from tests.support import barriers
from tests.support.mcp_server import build_server, file_recorder, read_events, serve_http, stdio_entry

pytestmark = pytest.mark.e2e

SERVER = "notes"
"""The test server's key in the MCP servers file: its tools are `notes__<tool>`."""


def write_mcp_config(directory: Path, log: str, *, start_after: str | None = None, url: str | None = None) -> Path:
    """An MCP servers file in `directory` naming the test server as `notes` (`stdio_entry`'s arguments, or `url`)."""
    path = directory / "mcp.json"
    entry = {"url": url} if url is not None else stdio_entry(log, start_after=start_after)
    path.write_text(json.dumps({"mcpServers": {SERVER: entry}}), encoding="utf-8")
    return path


def server_calls(events: Path, tool: str) -> list[dict[str, Any]]:
    """The arguments of each call of `tool` the server received, in order (None for a tool that does not record them)."""
    return [e.get("args") for e in read_events(events) if e["event"] == "call" and e["tool"] == tool]


def with_mcp(settings: Settings, config: Path) -> Settings:
    """`settings` with `COUNTERSIGN_MCP_CONFIG` set to `config`."""
    return settings.model_copy(update={"tools": settings.tools.model_copy(update={"mcp_config": config})})


@pytest.fixture
def mcp_events(tmp_path: Path) -> Path:
    return tmp_path / "mcp-events.jsonl"


@pytest.fixture
async def mcp_url(request, mcp_events) -> AsyncIterator[str | None]:
    """None for the stdio server; parametrized `http` (indirect), the URL of the same server served over Streamable HTTP."""
    if getattr(request, "param", "stdio") == "stdio":
        yield None
        return
    async with serve_http(build_server(file_recorder(mcp_events))) as url:
        yield url


@pytest.fixture
def settings(db_url, gemini, slack, target, tmp_path, mcp_events, mcp_url) -> Settings:
    config = write_mcp_config(tmp_path, str(mcp_events), url=mcp_url)
    return with_mcp(make_settings(db_url, gemini, slack, target), config)


@pytest.fixture
async def discord_bot(db_url, gemini, target, discord_api, tmp_path, mcp_events, mcp_url) -> AsyncIterator[BotServer]:
    """The real bot with only Discord enabled and the MCP server `notes`."""
    from tests.standins.discord_api import point_discord_py_at

    config = write_mcp_config(tmp_path, str(mcp_events), url=mcp_url)
    with point_discord_py_at(discord_api.api_url) as routing:
        async with BotServer(with_mcp(make_discord_settings(db_url, gemini, target, discord_api), config)) as server:
            yield server
    assert routing.blocked == []


@pytest.fixture(params=["slack", "discord"])
def platform(request):
    if request.param == "slack":
        return SlackDriver(
            request.getfixturevalue("bot"), request.getfixturevalue("events"), request.getfixturevalue("slack")
        )
    return DiscordDriver(request.getfixturevalue("discord_bot"), request.getfixturevalue("discord_api"))


@pytest.fixture
async def driver(platform):
    """The platform's driver, once the bot offers the MCP server's tools (the model may call them)."""
    assert platform.bot.runtime is not None
    registry = platform.bot.runtime.registry
    await barriers.wait_until(lambda: f"{SERVER}__create_note" in registry.names(), "the MCP server's tools offered")
    return platform


@pytest.mark.parametrize("mcp_url", ["stdio", "http"], indirect=True)
async def test_an_approved_mcp_call_reaches_the_server_once_and_is_answered(mcp_url, driver, mcp_events):
    """The card names the server, the tool and its hints; Approve: the server sees one call with those arguments, the answer is posted."""
    await driver.ask("alice", "note groceries")
    [card] = await driver.cards()
    shown = driver.card_text(card).replace("\\\\_", "_")  # as read: Discord's markdown escapes `_` in the embed
    assert "notes__create_note" in shown
    assert "MCP server notes, tool create_note" in shown and "hints: destructive" in shown, shown
    assert "groceries" in shown
    assert server_calls(mcp_events, "create_note") == []
    await driver.approve(card, "alice")
    answer = await driver.answer()
    assert "created groceries" in answer
    assert server_calls(mcp_events, "create_note") == [{"title": "groceries", "body": ""}]
    assert "Approved" in driver.card_text(card)


async def test_an_edit_the_tools_schema_refuses_changes_nothing_and_a_valid_one_runs(driver, mcp_events):
    """An edit the tool's input schema refuses is refused to the clicker, nothing changes; a valid edit runs as edited."""
    await driver.ask("alice", "note draft")
    [card] = await driver.cards()
    before = driver.card_text(card)
    refused = await driver.edit(card, "alice", {"title": 5}, private=True)
    assert refused is not None and "5 is not of type 'string'" in refused, refused
    await driver.settle()
    assert driver.card_text(card) == before and driver.card_has_buttons(card)
    assert server_calls(mcp_events, "create_note") == []
    await driver.edit(card, "alice", {"title": "final", "body": "edited"})
    answer = await driver.answer()
    assert "created final" in answer
    assert server_calls(mcp_events, "create_note") == [{"title": "final", "body": "edited"}]
    assert "final" in driver.card_text(card)


async def test_a_rejected_mcp_call_never_reaches_the_server(driver, mcp_events):
    """Reject with a reason: the server sees no call, the model hears the reason, the card says rejected."""
    await driver.ask("alice", "note secret")
    [card] = await driver.cards()
    await driver.reject(card, "alice", "not in this channel")
    answer = await driver.answer()
    assert "not in this channel" in answer
    assert "Rejected" in driver.card_text(card)
    assert server_calls(mcp_events, "create_note") == []
