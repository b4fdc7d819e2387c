"""A stdio server's process ending, or never starting: noticed at once, said in words.

A real FastMCP server over stdio (`tests.support.mcp_server`, a subprocess the bot starts),
killed from outside with SIGKILL; and entries whose command or working directory does not exist.
The polls are an hour apart, so only the process's end can be what the supervisor noticed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import psutil

from bot.tools.mcp.config import load_mcp_config
from bot.tools.mcp.connection import State
from bot.tools.mcp.servers import McpServers
from tests.integration.tools.mcp.test_mcp_operations import invoke, tool
from tests.integration.tools.mcp.test_mcp_tools import ROOT, WAIT_S, connected
from tests.support.tools import ToolLog, make_test_registry

HOUR_S = 3600.0


def servers_at(tmp: Path, entries: dict[str, Any]) -> McpServers:
    """The servers of `entries`, polled an hour apart, tried again 1 to 2 s after a loss."""
    path = tmp / "mcp.json"
    path.write_text(json.dumps({"mcpServers": entries}))
    return McpServers(
        load_mcp_config(path, {}),
        fixed_names=make_test_registry(ToolLog()).names(),
        default_timeout_s=20.0,
        poll_s=HOUR_S,
        first_retry_s=2.0,
    )


def server_process(events: Path) -> psutil.Process:
    """The test server process this test started: the child whose `MCP_TEST_LOG` is `events` (not its reaper)."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            reaper = any(part.endswith("reaper.py") for part in child.cmdline())
            if child.environ().get("MCP_TEST_LOG") == str(events) and not reaper:
                found.append(child)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    [process] = found
    return process


async def test_a_killed_stdio_server_is_retrying_at_once_with_why(tmp_path):
    """SIGKILL of a connected stdio server: not connected long before the next poll, the reason says the process ended."""
    events = tmp_path / "events.jsonl"
    entry = {
        "command": sys.executable,
        "args": ["-m", "tests.support.mcp_server"],
        "env": {"MCP_TEST_LOG": str(events)},
        "cwd": str(ROOT),
    }
    servers = servers_at(tmp_path, {"notes": entry})
    servers.start()
    try:
        await connected(servers, "notes")
        add = tool(servers, "notes__add")
        server_process(events).kill()
        await servers.wait_until(lambda: servers.statuses()["notes"].state is not State.CONNECTED, WAIT_S)
        status = servers.statuses()["notes"]
        assert status.state is State.RETRYING
        assert "the server process ended" in status.reason and "log at level INFO" in status.reason
        said = await invoke(add, {"a": 1, "b": 1})  # refused before anything is sent, not outcome unknown
        assert "not available now" in said and "the server process ended" in said
        await connected(servers, "notes")  # started again by the supervisor
    finally:
        await servers.aclose(10)


async def test_a_command_or_working_directory_that_does_not_exist_is_named(tmp_path, caplog):
    """A stdio entry whose command is not found, cannot be run, or whose cwd is missing: the status and the log say which, by name."""
    missing_dir = tmp_path / "no-such-dir"
    servers = servers_at(
        tmp_path,
        {
            "typo": {"command": "npxx-countersign-test", "args": ["-y", "some-server"]},
            "nodir": {"command": sys.executable, "cwd": str(missing_dir)},
            "notexec": {"command": str(tmp_path / "mcp.json")},
        },
    )
    servers.start()
    try:
        await servers.wait_until(
            lambda: all(status.state is State.RETRYING for status in servers.statuses().values()), WAIT_S
        )
        reasons = {key: status.reason for key, status in servers.statuses().items()}
    finally:
        await servers.aclose(10)
    assert reasons == {
        "typo": "the command 'npxx-countersign-test' was not found (not on PATH, nor a file)",
        "nodir": f"the working directory '{missing_dir}' does not exist",
        "notexec": f"the command '{tmp_path / 'mcp.json'}' cannot be run: permission denied",
    }
    logged = [record.getMessage() for record in caplog.records if record.name == "bot.tools.mcp.connection"]
    assert any(
        "MCP server typo is not connected: the command 'npxx-countersign-test' was not found" in line for line in logged
    )
