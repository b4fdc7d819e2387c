"""Admin policy on MCP tools: server-wide `<server>__*` settings, the read-only hint opt-in, subagents.

A real FastMCP server over stdio (a subprocess, `tests.support.mcp_server`: `add` says it is
read-only, `create_note` destructive) or Streamable HTTP (a local port), the real core on a real
PostgreSQL, driven through the terminal adapter with a scripted model. What ran is read from the
server's own record of its calls (docs/decisions/0045-server-wide-mcp-rules.md).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from adapters.console import ConsoleChat, ConsolePlatform
from bot.agents import prompts
from bot.agents.subagent_specs import SubagentSpec, load_subagents
from bot.base.agent_kind import AgentKind
from bot.base.errors import ConfigurationError
from bot.tools.mcp.connection import State
from tests.integration.console.test_console_policies import Terminal
from tests.integration.tools.mcp import test_mcp_tools
from tests.integration.tools.mcp.test_mcp_tools import (
    WAIT_S,
    calls_of,
    connected,
    converse,
    registry_with,
    servers_for,
    tool_results,
)
from tests.support.bot_process import free_port
from tests.support.mcp_server import build_server, serve_http
from tests.support.scripted_model import ScriptedChatModel, calls, tool_call
from tests.support.service import open_service

stdio = test_mcp_tools.stdio
"""The stdio server of `test_mcp_tools`, one subprocess for this module too."""

NOTE = "notes__create_note"
ADD = "notes__add"


def note(title: str) -> dict[str, Any]:
    return tool_call(NOTE, {"title": title})


def add(a: int = 2, b: int = 3) -> dict[str, Any]:
    return tool_call(ADD, {"a": a, "b": b})


def questions(text: str) -> list[str]:
    return [line for line in text.splitlines() if "wants to run" in line or "wants to call" in line]


async def test_a_server_wide_review_when_rule_and_a_server_wide_deny(db_url, stdio):
    """`policy notes__* review when ...` decides each tool of the server; `policy notes__* deny` runs none of them."""
    servers, events = stdio
    before_note, before_add = len(calls_of(events, "create_note")), len(calls_of(events, "add"))
    model = ScriptedChatModel(
        replies=[
            calls(note("sandbox"), note("real"), add()),
            AIMessage("first"),
            calls(note("again"), add(1, 1)),
            AIMessage("second"),
        ]
    )
    text = await converse(
        db_url,
        registry_with(servers),
        model,
        "/countersign policy notes__* review when args.title != 'sandbox'",
        "/countersign policy elsewhere__* deny",
        "/countersign show",
        "three calls",
        "A",
        "/countersign policy notes__* deny",
        "two more",
    )
    # `sandbox` runs at once; `real` is reviewed; `add` has no `title`, so the condition cannot
    # be evaluated and the call is reviewed (fail closed).
    assert questions(text) == [f"?  {NOTE} wants to run (1 of 2), asked by @olga"]
    assert [c["args"]["title"] for c in calls_of(events, "create_note")[before_note:]] == ["sandbox", "real"]
    assert [c["args"] for c in calls_of(events, "add")[before_add:]] == [{"a": 2, "b": 3}]
    assert "Updated policy for `notes__*`: review when args.title != 'sandbox' (was: not set)" in text
    assert "That did not work: `elsewhere__*` names no configured MCP server; the servers are: `notes__*`." in text
    assert f"• `{NOTE}`: review when args.title != 'sandbox' (server-wide)" in text
    assert "• `notes__*` (connected): review when args.title != 'sandbox'" in text
    denied = tool_results(model)[-2:]
    assert [m.status for m in denied] == ["error", "error"]
    assert all("Rejected by policy" in str(m.content) for m in denied)


async def test_a_tools_own_rule_beats_its_servers(db_url, stdio):
    """`policy notes__* deny` with `policy notes__add auto`: add runs without a card, create_note is denied."""
    servers, events = stdio
    before_note, before_add = len(calls_of(events, "create_note")), len(calls_of(events, "add"))
    model = ScriptedChatModel(replies=[calls(add(4, 5), note("no")), AIMessage("done")])
    text = await converse(
        db_url,
        registry_with(servers),
        model,
        "/countersign policy notes__* deny",
        f"/countersign policy {ADD} auto",
        "/countersign show",
        "add and note",
    )
    assert questions(text) == []
    assert [c["args"] for c in calls_of(events, "add")[before_add:]] == [{"a": 4, "b": 5}]
    assert calls_of(events, "create_note")[before_note:] == []
    assert f"• `{ADD}`: auto (workspace)" in text and f"• `{NOTE}`: deny (server-wide)" in text
    added, noted = tool_results(model)
    assert added.content == "9" and noted.status == "error"


async def test_quorum_two_and_approvers_on_an_mcp_tool(db_url, stdio):
    """A server-wide quorum of 2 and the tool's own approvers: dave is refused, alice and bob make it run once."""
    servers, events = stdio
    before = len(calls_of(events, "create_note"))
    model = ScriptedChatModel(replies=[calls(note("quorum")), AIMessage("noted")])
    text = await converse(
        db_url,
        registry_with(servers),
        model,
        "/countersign quorum notes__* 2",
        f"/countersign approvers add @alice for {NOTE}",
        f"/countersign approvers add @bob for {NOTE}",
        "note it",
        "/as alice",
        "a",
        "/as dave",
        "a",
        "/as bob",
        "a",
    )
    assert "!  You can't decide this: you are not on the approvers list for this tool." in text
    assert "   approvals: 1 of 2 (@alice)" in text and f"   {NOTE}: approved by @bob" in text
    assert [c["args"]["title"] for c in calls_of(events, "create_note")[before:]] == ["quorum"]


async def test_a_trust_grant_covers_a_second_identical_mcp_call(db_url, stdio):
    """`trust notes__* up-to 30m`: bob's call trusted once, the same call again runs without a card."""
    servers, events = stdio
    before = len(calls_of(events, "create_note"))
    model = ScriptedChatModel(
        replies=[calls(note("trusted")), AIMessage("noted"), calls(note("trusted")), AIMessage("again")]
    )
    out: list[str] = []
    terminal = Terminal(
        "/countersign trust notes__* up-to 30m",
        "/as bob",
        "note it",
        "/as",
        "t",
        "/as bob",
        "note it again",
    )
    platform = ConsolePlatform(write=out.append, operator="olga")
    async with open_service(db_url, model, registry_with(servers), platform) as h:
        await asyncio.wait_for(ConsoleChat(h.service, platform, read=terminal.read, admin=h.admin).run(), 120)
    trust = "[a]pprove / [t]rust for 30 minutes / [e]dit / [r]eject? "
    assert terminal.questions() == [f"   as bob: {trust}", f"   {trust}"]  # the first call only
    assert [c["args"]["title"] for c in calls_of(events, "create_note")[before:]] == ["trusted", "trusted"]


async def test_approve_all_runs_two_mcp_calls_of_one_turn(db_url, stdio):
    """Two MCP calls in one turn, the server's approvers alice: dave's [A]pprove all is left pending, alice's runs both once."""
    servers, events = stdio
    before_note, before_add = len(calls_of(events, "create_note")), len(calls_of(events, "add"))
    model = ScriptedChatModel(replies=[calls(note("batch"), add(7, 8)), AIMessage("both")])
    text = await converse(
        db_url,
        registry_with(servers),
        model,
        "/countersign approvers add @alice for notes__*",
        "two things",
        "/as dave",
        "A",
        "/as alice",
        "A",
    )
    assert f"!  Left pending: {NOTE} (1). You can't decide this: you are not on the approvers list" in text
    assert f"   Approved: {NOTE} (1), {ADD} (2)." in text
    assert [c["args"]["title"] for c in calls_of(events, "create_note")[before_note:]] == ["batch"]
    assert [c["args"] for c in calls_of(events, "add")[before_add:]] == [{"a": 7, "b": 8}]
    assert [m.content for m in tool_results(model)] == ["created batch", "15"]


async def test_the_read_only_hint_runs_calls_only_where_an_admin_opted_in(db_url, stdio):
    """`read-only-hint notes auto`: add (read-only) runs without a card, create_note (destructive) is carded; off: carded."""
    servers, events = stdio
    before_add = len(calls_of(events, "add"))
    model = ScriptedChatModel(
        replies=[
            calls(add(1, 2)),
            AIMessage("hinted"),
            calls(add(3, 4), note("hint")),
            AIMessage("mixed"),
            calls(add(5, 6)),
            AIMessage("own rule"),
            calls(add(7, 8)),
            AIMessage("off"),
        ]
    )
    text = await converse(
        db_url,
        registry_with(servers),
        model,
        "add without any setting",
        "a",
        "/countersign read-only-hint notes auto",
        "/countersign show",
        "add and note",
        "a",
        f"/countersign policy {ADD} review",
        "add with its own rule",
        "a",
        f"/countersign policy {ADD} default",
        "/countersign read-only-hint notes review",
        "add again",
        "a",
        "/countersign audit limit 10",
    )
    assert questions(text) == [
        f"?  {ADD} wants to run (1 of 1), asked by @olga",  # hints alone never run a call
        f"?  {NOTE} wants to run (1 of 1), asked by @olga",  # destructive: carded with the hint on
        f"?  {ADD} wants to run (1 of 1), asked by @olga",  # the tool's own rule beats the hint
        f"?  {ADD} wants to run (1 of 1), asked by @olga",  # off again
    ]
    assert [c["args"] for c in calls_of(events, "add")[before_add:]] == [
        {"a": 1, "b": 2},
        {"a": 3, "b": 4},
        {"a": 5, "b": 6},
        {"a": 7, "b": 8},
    ]
    assert "Updated read-only hint for `notes__*`: auto (a call the server says is read-only runs" in text
    assert f"• `{ADD}`: auto (the server's read-only hint, trusted by an admin)" in text
    assert "• `notes__*` (connected): read-only hint: auto" in text
    assert text.count("config · read_only_auto · @olga · `notes__*`") == 2


SCRIBE = SubagentSpec(name="scribe", description="Writes notes.", prompt="You are the scribe.", tools=("notes__*",))


def scribe_team(messages: list[BaseMessage]) -> AIMessage:
    """The supervisor hands the text to `scribe`, which creates a note titled with it, then both report."""
    system, last = str(messages[0].content), messages[-1]
    if prompts.SUPERVISOR_INSTRUCTIONS.strip() in system:
        if isinstance(last, ToolMessage):
            return AIMessage(f"answer: {last.content}")
        return calls(tool_call("scribe", {"query": str(last.content)}))
    if isinstance(last, ToolMessage):
        return AIMessage(f"scribe reports: {last.content}")
    return calls(note(str(last.content)))


async def test_a_subagent_lists_an_mcp_server_and_calls_its_tool_behind_a_card(db_url, stdio):
    """A subagent with `tools = ["notes__*"]` gets the server's tools; its call is a card naming it, and runs once approved."""
    servers, events = stdio
    before = len(calls_of(events, "create_note"))
    model = ScriptedChatModel(script=scribe_team)
    out: list[str] = []
    terminal = Terminal("minutes", "a")
    platform = ConsolePlatform(write=out.append, operator="olga")
    registry = registry_with(servers)
    async with open_service(
        db_url, model, registry, platform, subagents=(SCRIBE,), default_agent=AgentKind.SUBAGENTS
    ) as h:
        await asyncio.wait_for(ConsoleChat(h.service, platform, read=terminal.read, admin=h.admin).run(), 120)
    text = "\n".join(out)
    assert f"?  scribe wants to call {NOTE} (1 of 1), asked by @olga" in text
    assert [c["args"]["title"] for c in calls_of(events, "create_note")[before:]] == ["minutes"]
    assert "bot> answer: scribe reports: created minutes" in text


async def test_subagents_may_name_a_servers_tools_before_it_connects(tmp_path):
    """The subagents file names `later__add` and `later__*` while `later` is down; its tools appear once it connects."""
    port = free_port()
    servers = servers_for(tmp_path, {"later": {"url": f"http://127.0.0.1:{port}/mcp"}})
    registry = registry_with(servers)
    good = tmp_path / "subagents.toml"
    good.write_text(
        '[[subagents]]\nname = "one"\ndescription = "d"\nprompt = "p"\ntools = ["later__add"]\n'
        '[[subagents]]\nname = "all"\ndescription = "d"\nprompt = "p"\ntools = ["lookup", "later__*"]\n'
    )
    bad = tmp_path / "bad.toml"
    bad.write_text('[[subagents]]\nname = "x"\ndescription = "d"\nprompt = "p"\ntools = ["elsewhere__add"]\n')
    one, every = load_subagents(good, registry)
    with pytest.raises(ConfigurationError, match=r"names unknown tool 'elsewhere__add'.*the MCP servers are: later"):
        load_subagents(bad, registry)
    view_one, view_all = registry.view(one.tools), registry.view(every.tools)
    assert list(view_one) == [] and list(view_all) == ["lookup"]
    servers.start()
    try:
        async with serve_http(build_server(lambda event: None), port):
            await connected(servers, "later")
            assert list(view_one) == ["later__add"]
            assert list(view_all)[:3] == ["lookup", "later__add", "later__create_note"]
    finally:
        await servers.aclose(10)


async def test_admin_commands_name_an_mcp_tool_while_its_server_is_down(tmp_path, db_url):
    """With `later` down: its known tool and `later__*` are accepted (and said to wait for it); unknown names are refused."""
    port = free_port()
    servers = servers_for(tmp_path, {"later": {"url": f"http://127.0.0.1:{port}/mcp"}}, poll_s=0.2)
    registry = registry_with(servers)
    servers.start()
    try:
        async with serve_http(build_server(lambda event: None), port):
            await connected(servers, "later")
        await servers.wait_until(lambda: servers.statuses()["later"].state is not State.CONNECTED, WAIT_S)
        assert registry.get("later__create_note") is None
        model = ScriptedChatModel(replies=[])
        text = await converse(
            db_url,
            registry,
            model,
            "/countersign quorum later__create_note 2",
            "/countersign policy later__* review when args.title != 'x'",
            "/countersign trust later__add up-to 30m matching a",
            "/countersign policy later__nothing auto",
            "/countersign show",
        )
    finally:
        await servers.aclose(10)
    waits = "Its MCP server `later` is not offering it now; the setting applies to its calls once it is back."
    assert f"Updated quorum for `later__create_note`: 2 (was: not set). Recorded in the audit log. {waits}" in text
    assert (
        f"Updated policy for `later__*`: review when args.title != 'x' (was: not set). Recorded in the audit log. {waits}"
        in text
    )
    assert "Updated trust for `later__add`: up to 30m, matching `a`" in text
    assert "That did not work: `later__nothing` cannot be checked now: MCP server 'later' is not connected" in text
    assert "or set it for the whole server with `later__*`" in text
    assert "• `later__*` (not connected): review when args.title != 'x'" in text


async def test_a_tool_never_listed_while_its_server_is_down_is_refused_in_words(tmp_path, db_url):
    """`later` has been down since the start: naming one of its tools says why it cannot be checked; `later__*` is accepted."""
    port = free_port()
    servers = servers_for(tmp_path, {"later": {"url": f"http://127.0.0.1:{port}/mcp"}})
    registry = registry_with(servers)
    text = await converse(
        db_url,
        registry,
        ScriptedChatModel(replies=[]),
        "/countersign policy later__add auto",
        "/countersign expiry 30m for later__*",
    )
    assert "That did not work: `later__add` cannot be checked now: MCP server 'later' is not connected" in text
    assert "Updated expiry for `later__*`: 30m (was: not set)" in text
