"""The configured MCP servers of one process: their supervisors, and their tools for the registry.

`McpServers` is a `bot.tools.registry.ToolSource`: the registry offers a server's tools only
while its session is live, and a call of one while the server is down is answered with the
reason before anything is claimed or sent (`ToolRegistry.absent`). Each process (each worker,
each replica) holds its own sessions: a stdio server runs once per bot process.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Sequence
from functools import partial

import mcp_types

from bot.errors import ConfigurationError
from bot.tools.mcp.config import McpConfig, safe_server_name
from bot.tools.mcp.connection import CONNECT_TIMEOUT_S, FIRST_RETRY_S, POLL_S, McpConnection, State, Status
from bot.tools.mcp.gemini_schema import UnusableSchemaError
from bot.tools.mcp.tools import mcp_tool_spec, name_problem, tool_info, tool_name
from bot.tools.registry import AbsentTool, ToolSpec

log = logging.getLogger(__name__)


class McpServers:
    """Every configured server's supervisor, and the tools of those connected.

    Args:
        config: the checked servers file.
        fixed_names: the names of the built-in and operator tools; a server whose key makes
            one of them (`<server>__...`) stops the start.
        default_timeout_s: seconds one call may take when the server's entry sets no `timeout`
            (`COUNTERSIGN_MCP_TIMEOUT`).
        poll_s: seconds between two `tools/list` polls of a connected server.
        first_retry_s: the first wait before connecting again after a failure (then doubled).
        connect_timeout_s: seconds a connection's start may take.

    Raises:
        ConfigurationError: a server's key makes the name of a built-in or operator tool.
    """

    def __init__(
        self,
        config: McpConfig,
        *,
        fixed_names: Iterable[str],
        default_timeout_s: float,
        poll_s: float = POLL_S,
        first_retry_s: float = FIRST_RETRY_S,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
    ) -> None:
        fixed = sorted(fixed_names)
        self._prefixes: dict[str, str] = {}
        for key in config.servers:
            prefix = f"{safe_server_name(key)}__"
            clash = next((name for name in fixed if name.startswith(prefix)), None)
            if clash is not None:
                raise ConfigurationError(
                    f"COUNTERSIGN_MCP_CONFIG ({config.source}): server {key!r} makes tool names {prefix}…, "
                    f"like the tool {clash!r} the bot has already; rename the server"
                )
            self._prefixes[prefix] = key
        self._config = config
        self._default_timeout_s = default_timeout_s
        self._connections = {
            key: McpConnection(
                key,
                entry,
                on_tools=partial(self._listed, key),
                on_status=lambda status: self._notify(),
                poll_s=poll_s,
                first_retry_s=first_retry_s,
                connect_timeout_s=connect_timeout_s,
            )
            for key, entry in config.servers.items()
        }
        self._offered: dict[str, dict[str, ToolSpec]] = {key: {} for key in config.servers}
        self._last: dict[str, ToolSpec] = {}
        self._version = 0
        self._warned: set[tuple[str, str]] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self._waiters: list[asyncio.Event] = []

    # ToolSource -------------------------------------------------------------------------------

    @property
    def version(self) -> int:
        """Changes whenever the tools offered change."""
        return self._version

    def specs(self) -> Sequence[ToolSpec]:
        """The tools of the connected servers, in the file's order, each server's in its own order."""
        return [spec for offered in self._offered.values() for spec in offered.values()]

    def absent(self, name: str) -> AbsentTool | None:
        """Why `name`, a tool of a configured server, is not offered now; None otherwise.

        A server that is not connected: every name with its prefix is absent for that reason;
        a connected one: a tool it offered in this process and no longer lists.
        """
        key = next((key for prefix, key in self._prefixes.items() if name.startswith(prefix)), None)
        if key is None or name in self._offered[key]:
            return None
        status = self._connections[key].status
        last = self._last.get(name)
        if status.state is not State.CONNECTED:
            why = f" ({status.reason})" if status.reason else ""
            return AbsentTool(reason=f"MCP server {key!r} is not connected{why}", last_spec=last)
        if last is not None:
            return AbsentTool(reason=f"MCP server {key!r} no longer offers it", last_spec=last)
        return None

    def servers(self) -> dict[str, bool]:
        """Every configured server by its safe name (`<server>__<tool>`), and whether it is connected now."""
        return {
            prefix.removesuffix("__"): self._connections[key].status.state is State.CONNECTED
            for prefix, key in self._prefixes.items()
        }

    # State ------------------------------------------------------------------------------------

    def statuses(self) -> dict[str, Status]:
        """Each server's connection now, by key, in the file's order."""
        return {key: connection.status for key, connection in self._connections.items()}

    def timeout_s(self, key: str) -> float:
        """Seconds one call of the server `key`'s tools may take."""
        return self._config.servers[key].timeout or self._default_timeout_s

    async def wait_until(self, check: Callable[[], bool], timeout_s: float) -> None:
        """Return once `check()` is true, asked again after each change of tools or status.

        Raises:
            TimeoutError: not true within `timeout_s` seconds.
        """

        async def waiting() -> None:
            while not check():
                event = asyncio.Event()
                self._waiters.append(event)
                try:
                    await event.wait()
                finally:
                    self._waiters.remove(event)

        await asyncio.wait_for(waiting(), timeout_s)

    def _notify(self) -> None:
        for event in self._waiters:
            event.set()

    def _warn_once(self, name: str, reason: str) -> None:
        if (name, reason) not in self._warned:
            self._warned.add((name, reason))
            log.warning("MCP tool %s is left out: %s", name, reason)

    def _listed(self, key: str, tools: Sequence[mcp_types.Tool] | None) -> None:
        """A server's tools as just listed (None: its connection was lost): offer them from now on."""
        before = self._offered[key]
        offered: dict[str, ToolSpec] = {}
        if tools is not None:
            prefix = safe_server_name(key)
            names = [tool_name(prefix, tool.name) for tool in tools]
            for tool, name in zip(tools, names, strict=True):
                problem = name_problem(name)
                if problem is None and names.count(name) > 1:
                    problem = f"server {key!r} lists two tools named {tool.name!r}"
                if problem is not None:
                    self._warn_once(name, problem)
                    continue
                info = tool_info(key, tool)
                kept = before.get(name)
                if kept is not None and kept.mcp is not None and kept.mcp.digest == info.digest:
                    offered[name] = kept  # the same definition: the same tool (no new binding)
                    continue
                try:
                    offered[name] = mcp_tool_spec(name, info, self._connections[key], timeout_s=self.timeout_s(key))
                except UnusableSchemaError as exc:
                    self._warn_once(name, f"its input schema cannot be offered to the model: {exc.reason}")
        self._last.update(offered)
        if [(n, s.mcp.digest if s.mcp else "") for n, s in offered.items()] != [
            (n, s.mcp.digest if s.mcp else "") for n, s in before.items()
        ]:
            self._offered[key] = offered
            self._version += 1
        self._notify()

    # Lifecycle --------------------------------------------------------------------------------

    def start(self) -> None:
        """Start one supervisor task per server, in the running event loop.

        A server that cannot be reached is tried again in the background; the bot serves meanwhile.
        """
        for key, connection in self._connections.items():
            self._tasks.append(asyncio.create_task(connection.run(), name=f"mcp-server-{key}"))

    async def aclose(self, grace_s: float) -> None:
        """Close every server's session at once (a stdio server is stopped), within `grace_s` seconds."""
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=max(grace_s, 0.1))
            if pending:
                log.warning("%d MCP server(s) did not close within %g s", len(pending), grace_s)
        for key in self._offered:
            self._offered[key] = {}
        self._version += 1
