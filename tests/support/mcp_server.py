"""A small real MCP server (FastMCP) for tests, over stdio (a subprocess) or Streamable HTTP (in process).

Every call it receives, every cancellation it sees, is written as one JSON line to the file
`MCP_TEST_LOG` names (stdio) or appended to `events` (in process), so a test asserts what the
server saw, not what the bot believes it sent.

Run as a stdio server: `python -m tests.support.mcp_server` (from the repository's root; its
entry in an MCP servers file: `stdio_entry`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from fastmcp import FastMCP
from mcp_types import ToolAnnotations


def build_server(record: Callable[[dict[str, Any]], None], name: str = "notes") -> FastMCP:
    """The test server; `record` is called with each event (`{"event": ..., ...}`)."""
    mcp = FastMCP(name)

    @mcp.tool(annotations=ToolAnnotations(readOnlyHint=True, idempotentHint=True))
    def add(a: int, b: int) -> int:
        """Add two whole numbers."""
        record({"event": "call", "tool": "add", "args": {"a": a, "b": b}})
        return a + b

    @mcp.tool(annotations=ToolAnnotations(destructiveHint=True, openWorldHint=False))
    def create_note(title: str, body: str = "") -> str:
        """Create a note."""
        record({"event": "call", "tool": "create_note", "args": {"title": title, "body": body}})
        return f"created {title}"

    @mcp.tool
    async def slow(seconds: float) -> str:
        """Wait `seconds`, then answer."""
        record({"event": "call", "tool": "slow"})
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            record({"event": "cancelled", "tool": "slow"})
            raise
        return "done"

    @mcp.tool
    def fail(why: str) -> str:
        """Always fails."""
        record({"event": "call", "tool": "fail"})
        raise ValueError(f"refused: {why}")

    @mcp.tool
    def huge(chars: int) -> str:
        """A long answer."""
        record({"event": "call", "tool": "huge"})
        return "x" * chars

    @mcp.tool
    def shout(lines: list[str], times: int = 1) -> str:
        """Write `lines` to stderr, `times` over, then answer."""
        record({"event": "call", "tool": "shout"})
        for _ in range(times):
            for line in lines:
                sys.stderr.write(line + "\n")
        sys.stderr.flush()
        return "shouted"

    @mcp.tool
    def die() -> str:
        """The server exits in the middle of the call."""
        record({"event": "call", "tool": "die"})
        os._exit(3)

    return mcp


ROOT = Path(__file__).resolve().parents[2]
"""The repository's root, where `python -m tests.support.mcp_server` runs."""


def stdio_entry(log: str, *, start_after: str | None = None) -> dict[str, Any]:
    """This server's `mcpServers` entry as a stdio server (started from `ROOT`), its events written to `log`.

    Args:
        log: the events file's path, or a `${NAME}` the bot replaces with its environment's `NAME`.
        start_after: a file's path (or `${NAME}`): each start of the server waits until that file
            exists before it answers anything, so a test can hold the bot's connection.
    """
    env = {"MCP_TEST_LOG": log} | ({"MCP_TEST_START_AFTER": start_after} if start_after is not None else {})
    return {"command": sys.executable, "args": ["-m", "tests.support.mcp_server"], "env": env, "cwd": str(ROOT)}


def file_recorder(path: Path) -> Callable[[dict[str, Any]], None]:
    """A `record` that appends JSON lines to `path`."""

    def record(event: dict[str, Any]) -> None:
        with path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(event) + "\n")

    return record


def read_events(path: Path) -> list[dict[str, Any]]:
    """The events a stdio server wrote to `path` so far."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@contextlib.asynccontextmanager
async def serve_http(
    mcp: FastMCP, port: int = 0, *, json_response: bool | None = None, wrap: Callable[[Any], Any] | None = None
) -> AsyncIterator[str]:
    """Serve `mcp` over Streamable HTTP in this process; yields its URL (`http://127.0.0.1:PORT/mcp`).

    `json_response`: False answers each request with an SSE stream, True with one JSON body;
    None: FastMCP's default. `wrap`: an ASGI middleware around the server's app (e.g. one that
    spoils an answer on its way out).

    Stopped by `should_exit` when the context ends (cancelling the server instead leaks its socket).
    """
    import uvicorn

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    app = mcp.http_app(json_response=json_response)
    server = uvicorn.Server(uvicorn.Config(wrap(app) if wrap else app, log_level="warning", lifespan="on"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    finally:
        server.should_exit = True
        await task
        sock.close()


def start_helper(pids: Path) -> None:
    """Start a child of this server that outlives stdin's end (as a server's helper may); write both pids to `pids`.

    The file says `<server pid> <helper pid>`, written once both run.
    """
    import subprocess

    helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    pids.write_text(f"{os.getpid()} {helper.pid}")


if __name__ == "__main__":
    held = os.environ.get("MCP_TEST_START_AFTER")
    while held and not Path(held).exists():  # the test holds this start (`stdio_entry`'s `start_after`)
        time.sleep(0.02)
    if os.environ.get("MCP_TEST_PIDS"):
        start_helper(Path(os.environ["MCP_TEST_PIDS"]))
    build_server(file_recorder(Path(os.environ["MCP_TEST_LOG"]))).run(transport="stdio", show_banner=False)
