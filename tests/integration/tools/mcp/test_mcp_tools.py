"""MCP tools behind the approvals: a real FastMCP server over stdio (a subprocess) and Streamable HTTP (a local port).

The real core on a real PostgreSQL, driven through the terminal adapter (approvals as prompts,
`/countersign` commands), with a scripted model. What the server saw is read from the server's
own record of its calls, not from what the bot believes it sent.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage

from adapters.console import ConsoleChat, ConsolePlatform
from bot.audit.entries import MAX_REFUSED_ARGS_CHARS, AuditKind
from bot.base.errors import InvalidDecisionError
from bot.reviews.decisions import Edit, EditedAction
from bot.tools.mcp.config import load_mcp_config
from bot.tools.mcp.connection import State
from bot.tools.mcp.servers import McpServers
from bot.tools.mcp.tools import MAX_RESULT_CHARS
from bot.tools.registry import ToolRegistry
from countersign.server import _first_mcp_connections
from tests.integration.console.test_console_policies import Terminal
from tests.support.barriers import wait_until
from tests.support.bot_process import free_port
from tests.support.mcp_server import build_server, read_events, serve_http
from tests.support.scripted_model import ScriptedChatModel, calls, tool_call
from tests.support.service import actor, message, open_service
from tests.support.tools import ToolLog, make_test_registry

ROOT = Path(__file__).resolve().parents[4]
WAIT_S = 60.0


def servers_for(tmp: Path, entries: dict[str, Any], **options: Any) -> McpServers:
    path = tmp / "mcp.json"
    path.write_text(json.dumps({"mcpServers": entries}))
    return McpServers(
        load_mcp_config(path, {}),
        fixed_names=make_test_registry(ToolLog()).names(),
        default_timeout_s=options.pop("timeout_s", 20.0),
        poll_s=options.pop("poll_s", 30.0),
        first_retry_s=0.1,
        **options,
    )


async def connected(servers: McpServers, key: str) -> None:
    await servers.wait_until(lambda: servers.statuses()[key].state is State.CONNECTED, WAIT_S)


@pytest.fixture(scope="module")
async def stdio(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[McpServers, Path]]:
    """One stdio server for the module: a subprocess started once, its events in a file."""
    tmp = tmp_path_factory.mktemp("mcp")
    events = tmp / "events.jsonl"
    entry = {
        "command": sys.executable,
        "args": ["-m", "tests.support.mcp_server"],
        "env": {"MCP_TEST_LOG": str(events)},
    }
    servers = servers_for(tmp, {"notes": {**entry, "cwd": str(ROOT)}})
    servers.start()
    try:
        await connected(servers, "notes")
        yield servers, events
    finally:
        await servers.aclose(10)


def registry_with(servers: McpServers) -> ToolRegistry:
    registry = make_test_registry(ToolLog())
    registry.add_source(servers)
    return registry


def calls_of(events: Path, tool: str) -> list[dict[str, Any]]:
    return [event for event in read_events(events) if event["event"] == "call" and event["tool"] == tool]


async def converse(db_url: str, registry: ToolRegistry, model: ScriptedChatModel, *lines: str) -> str:
    """Chat `lines` in the terminal (then the end of input); everything printed."""
    out: list[str] = []
    terminal = Terminal(*lines)
    platform = ConsolePlatform(write=out.append, operator="olga")
    async with open_service(db_url, model, registry, platform) as h:
        await asyncio.wait_for(ConsoleChat(h.service, platform, read=terminal.read, admin=h.admin).run(), 120)
    return "\n".join(out)


def tool_results(model: ScriptedChatModel) -> list[ToolMessage]:
    return [m for m in model.prompts[-1] if isinstance(m, ToolMessage)]


async def test_an_approved_call_runs_once_on_the_server(db_url, stdio):
    """With no rule an MCP call is a card naming server, tool and hints; approved, the server sees it once."""
    servers, events = stdio
    before = len(calls_of(events, "create_note"))
    model = ScriptedChatModel(
        replies=[calls(tool_call("notes__create_note", {"title": "groceries", "body": "milk"})), AIMessage("noted")]
    )
    text = await converse(db_url, registry_with(servers), model, "note groceries", "a")
    assert "notes__create_note wants to run" in text and "bot> noted" in text
    assert "MCP server notes, tool create_note · the server's hints: destructive" in text
    assert calls_of(events, "create_note")[before:] == [
        {"event": "call", "tool": "create_note", "args": {"title": "groceries", "body": "milk"}}
    ]
    assert tool_results(model)[0].content == "created groceries"


async def test_an_edit_is_checked_against_the_tools_own_schema(db_url, stdio):
    """An edit the tool's input schema refuses is refused at the prompt in words about the edit; a valid one runs as edited."""
    servers, events = stdio
    before = len(calls_of(events, "create_note"))
    model = ScriptedChatModel(replies=[calls(tool_call("notes__create_note", {"title": "a"})), AIMessage("ok")])
    text = await converse(
        db_url, registry_with(servers), model, "note a", "e", '{"title": 5}', "e", '{"title": "b", "body": "x"}'
    )
    assert (
        "!  Your edit was not applied: invalid arguments for notes__create_note: title: 5 is not of type 'string'."
        in text
    )
    assert [c["args"] for c in calls_of(events, "create_note")[before:]] == [{"title": "b", "body": "x"}]


async def test_a_refused_edit_is_audited_with_what_the_approver_sent(db_url, stdio):
    """The audit row of an edit the tool's schema refuses holds the edit's arguments (bounded), not the card's."""
    servers, events = stdio
    before = len(calls_of(events, "create_note"))
    model = ScriptedChatModel(replies=[calls(tool_call("notes__create_note", {"title": "a"})), AIMessage("ok")])
    async with open_service(db_url, model, registry_with(servers)) as h:
        await h.service.handle_message(message("note a"))
        [approval] = [card.approval for card in h.platform.cards.values()]
        attempts = [{"title": 5}, {"title": "x" * 10_000, "body": 7}, {"title": "nul\x00", "body": 10**30}]
        for args in attempts:
            with pytest.raises(InvalidDecisionError):
                await h.service.decide(
                    approval.id, actor("alice"), Edit(edited_action=EditedAction(name="notes__create_note", args=args))
                )
        rows = list(reversed(await h.audit.recent("W1")))
    assert [(row.kind, row.outcome) for row in rows] == [(AuditKind.REFUSED, "invalid")] * 3
    assert all(row.proposed_args == {"title": "a"} for row in rows)
    assert rows[0].final_args == {"title": 5}
    long = rows[1].final_args["json"]  # too long to keep whole: its JSON, cut
    assert set(rows[1].final_args) == {"json"} and len(long) == MAX_REFUSED_ARGS_CHARS + 1
    assert long == json.dumps(attempts[1], ensure_ascii=False)[:MAX_REFUSED_ARGS_CHARS] + "…"
    # What jsonb cannot hold (U+0000, a 100-bit integer) is kept as JSON text.
    assert rows[2].final_args == {"json": '{"title": "nul\\u0000", "body": 1000000000000000000000000000000}'}
    assert calls_of(events, "create_note")[before:] == []


async def test_a_rejected_call_never_reaches_the_server(db_url, stdio):
    """Rejected at the prompt: the server sees nothing, the model hears the reason."""
    servers, events = stdio
    before = len(calls_of(events, "create_note"))
    model = ScriptedChatModel(replies=[calls(tool_call("notes__create_note", {"title": "x"})), AIMessage("fine")])
    await converse(db_url, registry_with(servers), model, "note x", "r", "not now")
    assert calls_of(events, "create_note")[before:] == []
    assert "not now" in str(tool_results(model)[0].content)


async def test_an_admin_rule_makes_a_call_auto_and_another_denies(db_url, stdio):
    """`policy notes__add auto` runs it with no card; `policy notes__create_note deny` runs nothing; hints alone never do."""
    servers, events = stdio
    before_add, before_note = len(calls_of(events, "add")), len(calls_of(events, "create_note"))
    model = ScriptedChatModel(
        replies=[
            calls(tool_call("notes__add", {"a": 2, "b": 3}), tool_call("notes__create_note", {"title": "t"})),
            AIMessage("done"),
        ]
    )
    text = await converse(
        db_url,
        registry_with(servers),
        model,
        "/countersign policy notes__add auto",
        "/countersign policy notes__create_note deny",
        "add and note",
    )
    assert "wants to run" not in text
    assert [c["args"] for c in calls_of(events, "add")[before_add:]] == [{"a": 2, "b": 3}]
    assert calls_of(events, "create_note")[before_note:] == []
    add, note = tool_results(model)
    assert add.content == "5" and note.status == "error"


async def test_a_server_error_and_a_huge_result_reach_the_model_as_such(db_url, stdio):
    """`isError` is an error result with the server's words; a huge result is cut to the bound, and says so."""
    servers, _ = stdio
    model = ScriptedChatModel(
        replies=[
            calls(tool_call("notes__fail", {"why": "because"}), tool_call("notes__huge", {"chars": 50_000})),
            AIMessage("ok"),
        ]
    )
    await converse(
        db_url,
        registry_with(servers),
        model,
        "/countersign policy notes__fail auto",
        "/countersign policy notes__huge auto",
        "go",
    )
    failed, huge = tool_results(model)
    assert failed.status == "error" and "refused: because" in str(failed.content)
    assert len(str(huge.content)) < MAX_RESULT_CHARS + 200
    assert str(huge.content).endswith(f"[cut: the result had 50000 characters; the first {MAX_RESULT_CHARS} are shown]")


async def test_a_server_killed_mid_call_is_outcome_unknown_and_never_resent(db_url, stdio):
    """The server exits during an approved call: the model hears the outcome is unknown, the card says so, nothing is sent again."""
    servers, events = stdio
    model = ScriptedChatModel(replies=[calls(tool_call("notes__die", {})), AIMessage("unsure")])
    out: list[str] = []
    terminal = Terminal("kill it", "a")
    platform = ConsolePlatform(write=out.append, operator="olga")
    async with open_service(db_url, model, registry_with(servers), platform) as h:
        await asyncio.wait_for(ConsoleChat(h.service, platform, read=terminal.read, admin=h.admin).run(), 120)
        unknown = await h.database.pool.fetchval("SELECT outcome_unknown FROM approvals WHERE tool_name = 'notes__die'")
    [result] = tool_results(model)
    assert result.status == "error" and "Whether it took effect is unknown" in str(result.content)
    assert unknown is True
    await connected(servers, "notes")  # the supervisor started a new server process
    assert len(calls_of(events, "die")) == 1


async def test_a_server_down_at_start_is_offered_once_it_comes_back(tmp_path, db_url):
    """An HTTP server unreachable at start stops nothing; its tools are absent (the model is told why), then offered."""
    port = free_port()
    servers = servers_for(tmp_path, {"later": {"url": f"http://127.0.0.1:{port}/mcp"}})
    registry = registry_with(servers)
    servers.start()
    try:
        await servers.wait_until(lambda: servers.statuses()["later"].state is State.RETRYING, WAIT_S)
        assert not [name for name in registry.names() if name.startswith("later__")]
        absent = registry.absent("later__add")
        assert absent is not None and "MCP server 'later' is not connected" in absent.reason
        model = ScriptedChatModel(replies=[calls(tool_call("later__add", {"a": 1, "b": 2})), AIMessage("later then")])
        await converse(db_url, registry, model, "add")
        assert "is not available now: MCP server 'later' is not connected" in str(tool_results(model)[0].content)
        seen: list[dict[str, Any]] = []
        async with serve_http(build_server(seen.append), port):
            await connected(servers, "later")
            assert "later__add" in registry.names() and "later__create_note" in registry.names()
    finally:
        await servers.aclose(10)


async def test_a_stop_cancels_a_running_call_and_the_server_hears_it(tmp_path, db_url):
    """Ctrl-C during a slow MCP call over HTTP: the server's tool is cancelled, the model is told it may have taken effect."""
    seen: list[dict[str, Any]] = []
    async with serve_http(build_server(seen.append)) as url:
        servers = servers_for(tmp_path, {"notes": {"url": url}})
        servers.start()
        try:
            await connected(servers, "notes")
            model = ScriptedChatModel(replies=[calls(tool_call("notes__slow", {"seconds": 60})), AIMessage("stopped")])
            out: list[str] = []
            terminal = Terminal("/countersign policy notes__slow auto", "wait", end=False)
            platform = ConsolePlatform(write=out.append, operator="olga")
            async with open_service(db_url, model, registry_with(servers), platform) as h:
                chat = ConsoleChat(h.service, platform, read=terminal.read, admin=h.admin)
                running = asyncio.create_task(chat.run())
                await wait_until(lambda: {"event": "call", "tool": "slow"} in seen, "the slow call reached the server")
                assert chat.interrupt()
                await wait_until(
                    lambda: {"event": "cancelled", "tool": "slow"} in seen, "the server saw the cancellation"
                )
                terminal.lines.put_nowait(None)
                await asyncio.wait_for(running, 60)
                result = await h.database.pool.fetchval("SELECT result FROM tool_runs WHERE tool_name = 'notes__slow'")
            assert "may or may not have taken effect" in result["content"]
            assert [e for e in seen if e["tool"] == "slow"] == [
                {"event": "call", "tool": "slow"},
                {"event": "cancelled", "tool": "slow"},
            ]
        finally:
            await servers.aclose(10)


async def test_a_timed_out_call_is_shown_as_outcome_unknown_without_saying_the_bot_stopped(tmp_path, db_url):
    """An approved MCP call past its server's `timeout`: its outcome line says "Outcome unknown", not "The bot stopped"."""
    seen: list[dict[str, Any]] = []
    async with serve_http(build_server(seen.append)) as url:
        servers = servers_for(tmp_path, {"notes": {"url": url, "timeout": 0.5}})
        servers.start()
        try:
            await connected(servers, "notes")
            model = ScriptedChatModel(replies=[calls(tool_call("notes__slow", {"seconds": 30})), AIMessage("ok")])
            text = await converse(db_url, registry_with(servers), model, "wait", "a")
        finally:
            await servers.aclose(10)
    outcome = [line for line in text.splitlines() if line.startswith("   notes__slow: approved")][-1]
    assert "Outcome unknown" in outcome and "may or may not have taken effect" in outcome
    assert "The bot stopped" not in outcome
    assert "no answer within" in tool_results(model)[0].content


async def test_the_chat_start_counts_one_tool_offered_in_the_singular(tmp_path):
    """`countersign chat`'s start line says "1 tool offered" for a server with one tool offered, and "N tools" else."""
    async with serve_http(build_server(lambda _: None)) as url:
        servers = servers_for(tmp_path, {"one": {"url": url, "includeTools": ["add"]}, "two": {"url": url}})
        servers.start()
        try:
            out: list[str] = []
            await _first_mcp_connections(servers, out.append)
        finally:
            await servers.aclose(10)
    assert "   MCP server one: connected, 1 tool offered." in out
    assert any(line.startswith("   MCP server two: connected, ") and line.endswith(" tools offered.") for line in out)
