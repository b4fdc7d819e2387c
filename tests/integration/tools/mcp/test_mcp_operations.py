"""Operating MCP servers: their calls in `/metrics`, their server and tool in JSON logs, a stdio server's stderr as log lines.

A real FastMCP server over stdio (a subprocess, `tests.support.mcp_server`), the bot's own
supervisor and tools, prometheus-client's registry as `/metrics` renders it, and the logging
`countersign run` configures (`LOG_FORMAT=json`) writing to a buffer.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import BaseTool
from prometheus_client import REGISTRY

from bot.base.errors import ToolOutcomeUnknownError
from bot.tools.mcp.connection import State
from bot.tools.mcp.servers import McpServers
from bot.tools.mcp.stderr import BURST_LINES, MAX_LINE_CHARS
from countersign.logs import configure_logging
from tests.integration.tools.mcp.test_mcp_tools import ROOT, WAIT_S, connected, servers_for
from tests.support.barriers import wait_until


def sample(name: str, **labels: str) -> float:
    """A metric's value as `/metrics` shows it (0 before its first count)."""
    return REGISTRY.get_sample_value(name, labels) or 0.0


@pytest.fixture
def json_logs() -> Iterator[io.StringIO]:
    """The logging of `countersign run` with `LOG_FORMAT=json` at DEBUG, into a buffer; restored after."""
    root = logging.getLogger()
    saved = (root.level, list(root.handlers))
    root.handlers[:] = []
    configure_logging("DEBUG", "json")
    buffer = io.StringIO()
    handler = root.handlers[0]
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(buffer)
    try:
        yield buffer
    finally:
        root.setLevel(saved[0])
        root.handlers[:] = saved[1]


def lines_of(buffer: io.StringIO) -> list[dict[str, Any]]:
    """Every line logged so far, each parsed as the JSON object it must be."""
    return [json.loads(line) for line in buffer.getvalue().splitlines()]


@contextlib.asynccontextmanager
async def stdio_server(tmp: Path, key: str, **options: Any) -> AsyncIterator[McpServers]:
    """The test server as the MCP server `key` (`options` added to its entry), connected; closed on exit."""
    entry = {
        **options,
        "command": sys.executable,
        "args": ["-m", "tests.support.mcp_server"],
        "env": {"MCP_TEST_LOG": str(tmp / "events.jsonl")},
        "cwd": str(ROOT),
    }
    servers = servers_for(tmp, {key: entry})
    servers.start()
    try:
        await connected(servers, key)
        yield servers
    finally:
        await servers.aclose(10)


def tool(servers: McpServers, name: str) -> BaseTool:
    """The offered MCP tool `name` (it keeps calling its server's connection after the server went)."""
    return next(spec.tool for spec in servers.specs() if spec.name == name)


async def invoke(called: BaseTool, arguments: dict[str, Any]) -> Any:
    """Call an MCP tool as the tool node does: an error result comes back as text; None when the outcome is unknown."""
    with contextlib.suppress(ToolOutcomeUnknownError):
        return await called.ainvoke(arguments)
    return None


async def test_metrics_count_calls_errors_latency_and_the_connection_by_server(tmp_path):
    """Calls, errors by kind (is_error, timeout, outcome_unknown, not_connected) and latency by server; connected 1, then 0."""
    key = "metered"
    async with stdio_server(tmp_path, key, timeout=2) as servers:
        assert sample("countersign_mcp_server_connected", server=key) == 1
        add = tool(servers, f"{key}__add")
        assert await invoke(tool(servers, f"{key}__add"), {"a": 2, "b": 3}) == "5"
        await invoke(tool(servers, f"{key}__fail"), {"why": "no"})
        assert await invoke(tool(servers, f"{key}__slow"), {"seconds": 30}) is None  # outcome unknown: timed out
        await invoke(tool(servers, f"{key}__die"), {})
        await servers.wait_until(lambda: servers.statuses()[key].state is not State.CONNECTED, WAIT_S)
        assert sample("countersign_mcp_server_connected", server=key) == 0
        assert "not available now" in await invoke(add, {"a": 1, "b": 1})  # refused at once: not connected
        await connected(servers, key)
        assert sample("countersign_mcp_server_connected", server=key) == 1
    assert sample("countersign_mcp_calls_total", server=key) == 5
    errors = {
        kind: sample("countersign_mcp_call_errors_total", server=key, kind=kind)
        for kind in ("is_error", "timeout", "outcome_unknown", "not_connected", "refused")
    }
    assert errors == {"is_error": 1, "timeout": 1, "outcome_unknown": 1, "not_connected": 1, "refused": 0}
    assert sample("countersign_mcp_call_seconds_count", server=key) == 4  # the calls sent
    assert sample("countersign_mcp_call_seconds_bucket", server=key, le="0.005") < 4
    assert sample("countersign_mcp_server_connected", server=key) == 0  # closed with the bot
    families = [metric for metric in REGISTRY.collect() if metric.name.startswith("countersign_mcp_")]
    for family in families:  # the server's key only: no tool, no arguments
        for each in family.samples:
            assert set(each.labels) <= {"server", "kind", "le"}, each


async def test_json_logs_name_the_server_and_tool_of_a_call(tmp_path, json_logs):
    """With LOG_FORMAT=json the lines of an MCP call carry `mcp_server` and `tool` as fields."""
    async with stdio_server(tmp_path, "logged") as servers:
        await invoke(tool(servers, "logged__add"), {"a": 2, "b": 3})
        await invoke(tool(servers, "logged__fail"), {"why": "no"})
    about_calls = [line for line in lines_of(json_logs) if line["logger"] == "bot.tools.mcp.connection"]
    answered = [line for line in about_calls if "answered in" in line["message"]]
    failed = [line for line in about_calls if "is_error" in line["message"]]
    assert [(line["mcp_server"], line["tool"]) for line in answered] == [("logged", "logged__add")]
    assert [(line["mcp_server"], line["tool"], line["level"]) for line in failed] == [
        ("logged", "logged__fail", "INFO")
    ]


async def test_a_stdio_servers_stderr_becomes_bounded_json_log_lines(tmp_path, json_logs):
    """A stdio server's stderr (rich, escapes, a huge line, a flood) is logged as JSON lines with its key, cut and rate-bounded."""
    key = "chatty"

    def stderr_lines() -> list[dict[str, Any]]:
        return [line for line in lines_of(json_logs) if line["logger"] == "bot.tools.mcp.stderr"]

    async with stdio_server(tmp_path, key) as servers:
        await invoke(tool(servers, f"{key}__shout"), {"lines": ["\x1b[1;31mred\x1b[0m alert \u2502 boxed"]})
        await wait_until(lambda: any("red alert" in line["message"] for line in stderr_lines()), "the red line")
        await invoke(tool(servers, f"{key}__shout"), {"lines": ["y" * 50_000]})
        await wait_until(lambda: any("yyy" in line["message"] for line in stderr_lines()), "the long line")
        flood_before = sum("flood" in line["message"] for line in stderr_lines())
        await invoke(tool(servers, f"{key}__shout"), {"lines": ["flood"], "times": 3 * BURST_LINES})

        async def dropped_said() -> bool:
            await invoke(tool(servers, f"{key}__shout"), {"lines": ["tick"]})
            return any("were not logged" in line["message"] for line in stderr_lines())

        for _ in range(200):  # each shout is a round trip; the rate allows a line again within 50 ms
            if await dropped_said():
                break
        else:
            raise AssertionError("the dropped lines were never said")
    lines = stderr_lines()
    assert all(line["mcp_server"] == key for line in lines)
    [red] = [line for line in lines if "red alert" in line["message"]]
    assert red["message"] == f"MCP server {key}: red alert \u2502 boxed" and red["level"] == "INFO"
    [long] = [line for line in lines if "yyy" in line["message"]]
    assert long["message"].endswith(f"[cut: over {MAX_LINE_CHARS} characters]")
    assert len(long["message"]) < MAX_LINE_CHARS + 100
    flooded = sum("flood" in line["message"] for line in lines) - flood_before
    assert 0 < flooded < 3 * BURST_LINES
    [dropped] = [line for line in lines if "were not logged" in line["message"]]
    assert dropped["level"] == "WARNING"
