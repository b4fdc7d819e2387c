"""What the approver saw is what runs: an MCP call approved under one definition never runs under another.

A real FastMCP server over Streamable HTTP whose tool changes while a card waits, and an admin
accepts the change; the real core on a real PostgreSQL, driven through the terminal adapter
(docs/decisions/0046-mcp-pins-wiring.md). What the server saw is read from its own record.
"""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.messages import AIMessage

from adapters.console import ConsoleChat, ConsolePlatform
from adapters.console.people import TERMINAL
from adapters.words.mcp import DEFINITION_CHANGED
from bot.admin.commands import AcceptMcp
from bot.admin.views import McpAccepted
from bot.base.conversation import Actor
from bot.tools.mcp.servers import McpServers
from tests.integration.console.test_console_policies import Terminal
from tests.integration.tools.mcp.pins.test_mcp_pin_wiring import CHANGED, bot_on, calls_seen, change_description, held
from tests.integration.tools.mcp.test_mcp_tools import WAIT_S, tool_results
from tests.support.barriers import wait_until
from tests.support.mcp_server import build_server, serve_http
from tests.support.scripted_model import ScriptedChatModel, calls, tool_call
from tests.support.service import Harness

OLGA = Actor(
    platform=TERMINAL.platform, workspace_id=TERMINAL.workspace_id, user_id="olga", display_name="olga", is_admin=True
)


def offered_description(servers: McpServers, name: str) -> str | None:
    spec = next((spec for spec in servers.offered("notes") if spec.name == name), None)
    return spec.mcp.description if spec is not None and spec.mcp is not None else None


async def change_and_accept(h: Harness, servers: McpServers, mcp: Any) -> None:
    """The server changes `create_note`; it is held; an admin accepts it; the new definition is offered."""
    await change_description(mcp, "create_note", CHANGED)
    await held(servers, "notes__create_note")
    reply = await h.admin.execute(OLGA, AcceptMcp(server="notes"))
    assert isinstance(reply, McpAccepted), reply
    await servers.wait_until(lambda: offered_description(servers, "notes__create_note") == CHANGED, WAIT_S)


def chat_task(h: Harness, terminal: Terminal) -> asyncio.Task[None]:
    platform = h.platform
    assert isinstance(platform, ConsolePlatform)
    return asyncio.create_task(ConsoleChat(h.service, platform, read=terminal.read, admin=h.admin).run())


async def test_a_card_approved_after_its_tool_changed_runs_nothing_and_says_so(tmp_path, db_url):
    """Card waits, tool changes, admin accepts, card approved: nothing reaches the server, model and card say why; a new call runs."""
    seen: list[dict[str, Any]] = []
    mcp = build_server(seen.append)
    model = ScriptedChatModel(
        replies=[
            calls(tool_call("notes__create_note", {"title": "plan"})),
            AIMessage("the tool changed; ask me again"),
            calls(tool_call("notes__create_note", {"title": "again"})),
            AIMessage("done"),
        ]
    )
    async with serve_http(mcp) as url, bot_on(db_url, tmp_path, url, model) as (h, servers, out):
        terminal = Terminal("note the plan", end=False)
        running = chat_task(h, terminal)
        await wait_until(lambda: len(terminal.questions()) == 1, "the card is waiting")
        await change_and_accept(h, servers, mcp)
        terminal.type("a")  # the card made under the old definition, approved now
        await wait_until(lambda: len(model.prompts) == 2, "the model heard the outcome")
        assert calls_seen(seen, "create_note") == []
        [refused] = tool_results(model)
        assert refused.status == "error"
        assert "the tool's definition changed since the card was made" in str(refused.content)
        assert "Nothing was sent to the server" in str(refused.content)
        row = await h.database.pool.fetchrow(
            "SELECT status, definition_changed FROM approvals WHERE tool_call_id = $1", refused.tool_call_id
        )
        assert (row["status"], row["definition_changed"]) == ("approved", True)
        await wait_until(lambda: any(DEFINITION_CHANGED in line for line in out), "the card says it did not run")
        # Asked again: a new card, under the definition in force now, and the call runs.
        terminal.type("note it again", "a", None)
        await asyncio.wait_for(running, 120)
        assert len(terminal.questions()) == 2
        assert calls_seen(seen, "create_note") == [
            {"event": "call", "tool": "create_note", "args": {"title": "again", "body": ""}}
        ]
        assert tool_results(model)[-1].content == "created again"


async def test_a_trust_grant_made_before_an_accepted_change_does_not_cover_calls_after_it(tmp_path, db_url):
    """Approve and trust, then the tool changes and is accepted: the same call is a card again, not run under the old trust."""
    seen: list[dict[str, Any]] = []
    mcp = build_server(seen.append)
    note = {"title": "plan"}
    model = ScriptedChatModel(
        replies=[
            calls(tool_call("notes__create_note", note)),
            AIMessage("noted"),
            calls(tool_call("notes__create_note", note)),
            AIMessage("noted under trust"),
            calls(tool_call("notes__create_note", note)),
            AIMessage("noted after the change"),
        ]
    )
    async with serve_http(mcp) as url, bot_on(db_url, tmp_path, url, model) as (h, servers, _):
        terminal = Terminal(
            "/countersign trust notes__create_note up-to 1h", "note it", "t", "note it again", end=False
        )
        running = chat_task(h, terminal)
        await wait_until(lambda: len(calls_seen(seen, "create_note")) == 2, "the approved and the trusted call ran")
        assert len(terminal.questions()) == 1  # the second ran under the trust, without a card
        await change_and_accept(h, servers, mcp)
        terminal.type("note it once more")
        await wait_until(lambda: len(terminal.questions()) == 2, "a card for the call under the new definition")
        assert len(calls_seen(seen, "create_note")) == 2  # nothing ran under the old trust
        terminal.type("a", None)
        await asyncio.wait_for(running, 120)
        assert len(calls_seen(seen, "create_note")) == 3
        assert tool_results(model)[-1].content == "created plan"
