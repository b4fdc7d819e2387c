"""A server listing malformed tools: each is left out with one warning, the server's other tools are offered and run.

The server is `tests.support.handshake_server`, written without an SDK so that it can send
entries the MCP SDK refuses; the real core on a real PostgreSQL is driven through the terminal
adapter (approvals as prompts, `/countersign` commands) with a scripted model.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage

from adapters.console import ConsoleChat, ConsolePlatform
from bot.tools.mcp.connection import State
from bot.tools.mcp.servers import McpServers
from tests.integration.console.test_console_policies import Terminal
from tests.integration.tools.mcp.test_mcp_tools import (
    WAIT_S,
    connected,
    converse,
    registry_with,
    servers_for,
    tool_results,
)
from tests.support.barriers import wait_until
from tests.support.handshake_server import handshake_entry, read_log
from tests.support.scripted_model import ScriptedChatModel, calls, tool_call
from tests.support.service import open_service

OBJECT = {"type": "object", "properties": {"a": {"type": "integer"}}}
GOOD = [
    {"name": "add", "description": "Adds.", "inputSchema": OBJECT},
    {"name": "lookup", "description": "Looks up.", "inputSchema": {"type": "object"}},
]
MALFORMED = [
    {"name": "no_schema", "description": "No input schema at all."},
    {"name": "bad_hint", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": "sure"}},
    {"name": 7, "inputSchema": {"type": "object"}},
]
"""What the SDK cannot read: the 5th entry of the listing (after `ask` and `GOOD`) has no usable name."""
REASONS = {
    "old__no_schema": "it has no inputSchema",
    "old__bad_hint": "annotations.readOnlyHint should be a valid boolean (it is 'sure')",
    "#6 of old": "name should be a valid string (it is 7)",
}
LONG = "x" * 70
"""A well-formed tool whose `old__...` name is over Gemini's 64 characters."""


def left_out_warnings(caplog: Any) -> list[str]:
    return [record.getMessage() for record in caplog.records if "is left out" in record.getMessage()]


async def listings(log: Path, count: int) -> None:
    """Return once the server has answered `count` complete listings (pages: each listing's first request)."""

    def listed() -> bool:
        return sum(1 for m in read_log(log) if m.get("method") == "tools/list" and not m.get("params")) >= count

    await wait_until(listed, f"{count} listings")


async def test_malformed_tools_are_left_out_once_and_the_others_offered_and_called(tmp_path, db_url, caplog):
    """Two good tools among three malformed ones (in pages): the server is connected, the good ones are offered and run."""
    log = tmp_path / "server.jsonl"
    servers = servers_for(tmp_path, {"old": handshake_entry(log, [*GOOD, *MALFORMED], page=2)}, poll_s=0.2)
    registry = registry_with(servers)
    with caplog.at_level(logging.WARNING):
        servers.start()
        try:
            await connected(servers, "old")
            await listings(log, 3)  # polled again twice: each malformed tool still warned about once
            offered = [spec.name for spec in servers.offered("old")]
            pinned = set((await servers.pins("old")).pins)
            model = ScriptedChatModel(replies=[calls(tool_call("old__add", {"a": 2})), AIMessage("added")])
            text = await converse(db_url, registry, model, "add 2", "a")
        finally:
            await servers.aclose(10)
    assert offered == ["old__ask", "old__add", "old__lookup"]
    assert pinned == {"ask", "add", "lookup"}
    assert "bot> added" in text
    assert tool_results(model)[0].content == 'ran add with {"a": 2}'
    assert sorted(left_out_warnings(caplog)) == sorted(
        f"MCP tool {name} is left out: {reason}" for name, reason in REASONS.items()
    )
    assert not [r for r in caplog.records if "is not connected" in r.getMessage()]


async def test_mcp_status_shows_each_left_out_tool_and_why(tmp_path, db_url):
    """`/countersign mcp` lists the tools left out (malformed, a name or schema Gemini cannot take) with the reason."""
    log = tmp_path / "server.jsonl"
    versioned = {"name": "versioned", "inputSchema": {"type": "object", "properties": {"api-version": {}}}}
    tools = [*GOOD, *MALFORMED, {"name": LONG, "inputSchema": {"type": "object"}}, versioned]
    servers = servers_for(tmp_path, {"old": handshake_entry(log, tools)})
    out: list[str] = []
    platform = ConsolePlatform(write=out.append, operator="olga")
    model = ScriptedChatModel(replies=[])
    async with open_service(db_url, model, registry_with(servers), platform, mcp=servers) as h:
        await connected(servers, "old")
        chat = ConsoleChat(h.service, platform, read=Terminal("/countersign mcp").read, admin=h.admin)
        await asyncio.wait_for(chat.run(), 120)
    text = "\n".join(out)
    assert "old: connected (protocol 2025-06-18)" in text
    for name, reason in REASONS.items():
        assert f"  left out: `{name}`: {reason}" in text
    assert f"  left out: `old__{LONG}`: its name has 75 characters, over Gemini's 64" in text
    assert "  left out: `old__versioned`: its input schema cannot be offered to the model: " in text


async def test_a_listing_without_a_list_of_tools_is_a_failed_poll_said_in_words(tmp_path):
    """An answer whose `tools` is not a list leaves the server not connected, its reason in words, not a pydantic dump."""
    servers: McpServers = servers_for(tmp_path, {"old": handshake_entry(tmp_path / "server.jsonl", {"add": GOOD[0]})})
    servers.start()
    try:
        await servers.wait_until(lambda: servers.statuses()["old"].state is State.RETRYING, WAIT_S)
        status = servers.statuses()["old"]
    finally:
        await servers.aclose(10)
    assert status.reason == "its tools/list answer has no list of tools"
    assert servers.offered("old") == []
