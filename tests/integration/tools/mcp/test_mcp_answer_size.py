"""An MCP answer over the size limit is refused as it arrives: no frozen event loop, outcome unknown (docs/decisions/0053-bounded-mcp-answers.md).

A real FastMCP server over stdio (a subprocess) and over Streamable HTTP (in process), the real
core on a real PostgreSQL, a scripted model. A probe task measures how late the event loop runs
it while the answer arrives.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import mcp_types
import pytest
from fastmcp import Context, FastMCP
from langchain_core.messages import AIMessage, ToolMessage

from tests.integration.tools.mcp.test_mcp_tools import ROOT, connected, converse, registry_with, servers_for
from tests.support.mcp_server import serve_http
from tests.support.scripted_model import ScriptedChatModel, calls, tool_call

MAX_LAG_S = 1.5
"""The longest the loop may be held while a huge answer arrives (unbounded, 30 MB held it for minutes)."""


@contextlib.asynccontextmanager
async def lag_probe() -> AsyncIterator[list[float]]:
    """Yields a list that holds, once the block ends, the longest delay (s) of a 10 ms sleep meanwhile."""
    loop = asyncio.get_running_loop()
    worst = [0.0]

    async def probe() -> None:
        while True:
            began = loop.time()
            await asyncio.sleep(0.01)
            worst[0] = max(worst[0], loop.time() - began - 0.01)

    task = asyncio.create_task(probe())
    try:
        yield worst
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def _results(model: ScriptedChatModel) -> list[ToolMessage]:
    return [m for m in model.prompts[-1] if isinstance(m, ToolMessage)]


async def _huge_then_add(db_url: str, servers: Any, chars: int) -> tuple[list[ToolMessage], float]:
    """The model asks for a huge answer, then for `add` on the same session; its results and the worst loop lag."""
    model = ScriptedChatModel(
        replies=[
            calls(tool_call("notes__huge", {"chars": chars})),
            calls(tool_call("notes__add", {"a": 2, "b": 3})),
            AIMessage("ok"),
        ]
    )
    lines = ("/countersign policy notes__huge auto", "/countersign policy notes__add auto", "go")
    async with lag_probe() as worst:
        await converse(db_url, registry_with(servers), model, *lines)
    return _results(model), worst[0]


def streaming_server() -> FastMCP:
    """`huge` and `add`; `huge` sends a log message first, so that an SSE-mode server commits to an SSE stream
    (a handler that answers at once gets one JSON body even then)."""
    mcp = FastMCP("notes")

    @mcp.tool
    async def huge(chars: int, ctx: Context) -> str:
        """A long answer."""
        await ctx.send_notification(mcp_types.ResourceListChangedNotification())
        return "x" * chars

    @mcp.tool
    def add(a: int, b: int) -> int:
        """Add two whole numbers."""
        return a + b

    return mcp


def _stdio_entry(tmp: Path) -> dict[str, Any]:
    return {
        "command": sys.executable,
        "args": ["-m", "tests.support.mcp_server"],
        "env": {"MCP_TEST_LOG": str(tmp / "events.jsonl")},
        "cwd": str(ROOT),
        "maxAnswerMB": 1,
    }


def _assert_refused(huge: ToolMessage, add: ToolMessage, worst: float) -> None:
    assert worst < MAX_LAG_S, f"the event loop was held {worst:.2f} s"
    assert huge.status == "error"
    assert "notes__huge: the answer was over 1 MB" in str(huge.content)
    assert "Whether it took effect is unknown" in str(huge.content)
    assert add.content == "5"


async def test_a_huge_stdio_answer_is_refused_as_it_arrives_and_the_session_goes_on(db_url, tmp_path: Path):
    """30 MB from a stdio server with `maxAnswerMB` 1: the model reads "over 1 MB ... unknown", the loop never
    stalls, and the next call on the same session answers."""
    servers = servers_for(tmp_path, {"notes": _stdio_entry(tmp_path)})
    servers.start()
    try:
        await connected(servers, "notes")
        [huge, add], worst = await _huge_then_add(db_url, servers, 15_000_000)
    finally:
        await servers.aclose(10)
    _assert_refused(huge, add, worst)


@pytest.mark.parametrize("json_response", [True, False], ids=["json", "sse"])
async def test_a_huge_streamable_http_answer_is_refused_as_it_arrives(db_url, tmp_path: Path, json_response):
    """2 MB from a Streamable HTTP server with `maxAnswerMB` 1, as one JSON body or an SSE event: the model reads
    "over 1 MB ... unknown", and the next call on the same session answers. (The answer is kept small: the server
    runs in this process and its own serialising would hold the loop the probe measures.)"""
    async with serve_http(streaming_server(), json_response=json_response) as url:
        servers = servers_for(tmp_path, {"notes": {"url": url, "maxAnswerMB": 1}})
        servers.start()
        try:
            await connected(servers, "notes")
            [huge, add], worst = await _huge_then_add(db_url, servers, 1_000_000)
        finally:
            await servers.aclose(10)
    _assert_refused(huge, add, worst)
