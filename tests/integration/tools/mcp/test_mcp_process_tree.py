"""A stdio MCP server's whole process tree ends with its connection (docs/decisions/0052-stdio-server-process-trees.md).

A real FastMCP server started through `sh -c`, which starts a helper of its own that outlives
its stdin (as npx's node, or a server's browser, may); the processes are looked up by pid.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import pytest

from bot.base.errors import ToolOutcomeUnknownError
from bot.tools.mcp.connection import State
from tests.integration.tools.mcp.test_mcp_tools import ROOT, WAIT_S, connected, servers_for
from tests.support.barriers import wait_until

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX process groups")


def _entry(tmp: Path, pids: Path) -> dict[str, object]:
    server = f"{shlex.quote(sys.executable)} -m tests.support.mcp_server"
    return {
        "command": "sh",
        # `; exit $?` keeps sh from replacing itself with python: the server is sh's child.
        "args": ["-c", f"{server}; exit $?"],
        "env": {"MCP_TEST_LOG": str(tmp / "events.jsonl"), "MCP_TEST_PIDS": str(pids)},
        "cwd": str(ROOT),
    }


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, ended and waiting to be reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True  # no /proc (macOS): signal 0 is all there is
    return state != "Z"


async def _gone(*pids: int) -> None:
    await wait_until(lambda: not any(_alive(pid) for pid in pids), f"processes {pids} ending", WAIT_S)


def _written(path: Path, old: str) -> bool:
    return path.exists() and path.read_text() not in ("", old)


def _read_pids(path: Path) -> tuple[int, int]:
    server, helper = path.read_text().split()
    return int(server), int(helper)


async def _pids(path: Path, old: str = "") -> tuple[int, int]:
    """The `<server pid> <helper pid>` the server wrote to `path`, once it differs from `old`."""
    await wait_until(lambda: _written(path, old), "the server's pids", WAIT_S)
    return _read_pids(path)


async def test_stopping_the_bot_ends_the_servers_whole_process_tree(tmp_path):
    """After `aclose`, the server sh started and the helper the server started are gone too, not only sh."""
    pids = tmp_path / "pids"
    servers = servers_for(tmp_path, {"notes": _entry(tmp_path, pids)})
    servers.start()
    try:
        await connected(servers, "notes")
        server, helper = await _pids(pids)
        assert _alive(server) and _alive(helper)
    finally:
        await servers.aclose(10)
    await _gone(server, helper)


async def test_a_server_lost_and_started_again_leaves_nothing_of_its_first_process_tree(tmp_path):
    """The server dies mid-call; once the supervisor has started it again, the first server's helper is gone."""
    pids = tmp_path / "pids"
    servers = servers_for(tmp_path, {"notes": _entry(tmp_path, pids)})
    servers.start()
    try:
        await connected(servers, "notes")
        server, helper = await _pids(pids)
        first = pids.read_text()
        [die] = [spec.tool for spec in servers.specs() if spec.tool.name == "notes__die"]
        with pytest.raises(ToolOutcomeUnknownError):
            await die.ainvoke({"name": "notes__die", "args": {}, "id": "call_1", "type": "tool_call"})
        await _gone(server, helper)
        await servers.wait_until(lambda: servers.statuses()["notes"].state is State.CONNECTED, WAIT_S)
        again = await _pids(pids, old=first)
        assert again != (server, helper) and all(_alive(pid) for pid in again)
    finally:
        await servers.aclose(10)
    await _gone(*again)
