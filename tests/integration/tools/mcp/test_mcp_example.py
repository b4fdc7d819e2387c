"""The example MCP server (`examples/mcp/`) works as the "Try it" of docs/tools-and-mcp.md says: started from its own config file, one card, one call."""

from __future__ import annotations

import os

from langchain_core.messages import AIMessage

from bot.tools.mcp.config import load_mcp_config
from bot.tools.mcp.servers import McpServers
from tests.integration.tools.mcp.test_mcp_tools import ROOT, connected, converse, registry_with, tool_results
from tests.support.scripted_model import ScriptedChatModel, calls, tool_call
from tests.support.tools import ToolLog, make_test_registry

CONFIG = ROOT / "examples" / "mcp" / "servers.json"


async def test_the_example_server_starts_from_its_config_and_a_call_is_a_card(db_url):
    """`examples/mcp/servers.json` as COUNTERSIGN_MCP_CONFIG: the notes tools are offered, a search is a card, approved it answers."""
    servers = McpServers(
        load_mcp_config(CONFIG, os.environ),
        fixed_names=make_test_registry(ToolLog()).names(),
        default_timeout_s=20,
    )
    servers.start()
    try:
        await connected(servers, "notes")
        assert [spec.name for spec in servers.specs()] == [
            "notes__list_notes",
            "notes__search_notes",
            "notes__create_note",
            "notes__delete_note",
        ]
        model = ScriptedChatModel(
            replies=[calls(tool_call("notes__search_notes", {"query": "wifi"})), AIMessage("found it")]
        )
        text = await converse(db_url, registry_with(servers), model, "where is the wifi password?", "a")
    finally:
        await servers.aclose(10)
    assert "notes__search_notes wants to run" in text, text
    assert "MCP server notes, tool search_notes · the server's hints: read-only, idempotent" in text, text
    assert "bot> found it" in text
    assert "the password is on the fridge" in tool_results(model)[0].content
