"""The configured MCP servers of one process: their supervisors, and their tools for the registry.

`McpServers` is a `bot.tools.registry.ToolSource`: the registry offers a server's tools only
while its session is live, and a call of one while the server is down is answered with the
reason before anything is claimed or sent (`ToolRegistry.absent`). Each process (each worker,
each replica) holds its own sessions: a stdio server runs once per bot process.

Every listing goes through the pins (`bot.tools.mcp.pins.observe`,
docs/decisions/0043-pinned-mcp-definitions.md): only pinned definitions are offered; a changed
or new tool is held: not offered (the model never reads a definition nobody accepted), a call of
it is answered with why, and the admins are told once. Every call asks the pin store just before
it is sent (`check_call`), so a hold recorded by any worker or replica refuses it everywhere.

Before all that, a listing is cut to what the file's `includeTools` / `excludeTools` let through
(`offered_by_file`): a tool the file leaves out is never offered, never callable (its name is
unknown), never pinned nor held (docs/decisions/0051-offering-only-some-mcp-tools.md).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from functools import partial

import mcp_types

from bot.base.conversation import Actor
from bot.base.errors import ConfigurationError
from bot.tools.mcp.config import McpConfig, offered_by_file, registry_name, safe_server_name, said_at_once
from bot.tools.mcp.connection import (
    CONNECT_TIMEOUT_S,
    DEFAULT_MAX_ANSWER_MB,
    FIRST_RETRY_S,
    LIST_TIMEOUT_S,
    POLL_S,
    McpConnection,
    State,
    Status,
)
from bot.tools.mcp.gemini_schema import UnusableSchemaError
from bot.tools.mcp.info import McpToolInfo, tool_info
from bot.tools.mcp.listing import Listing
from bot.tools.mcp.pins import (
    AcceptPlan,
    AcceptRefused,
    DuplicateToolError,
    HeldTool,
    HoldNotice,
    InMemoryPinStore,
    MalformedDefinitionError,
    PinStore,
    ServerPins,
    ToolDefinition,
    accept_server,
    check_call,
    observe,
)
from bot.tools.mcp.pins.rules import held_reason
from bot.tools.mcp.tools import mcp_tool_spec, name_problem
from bot.tools.registry import AbsentTool, ToolSpec

NoticeSink = Callable[[HoldNotice], Awaitable[None]]
"""Sends the admins' message about newly held tools (`bot.admin.notices.AdminChannels.tools_held`)."""

PINS_UNREADABLE = (
    "the pinned definitions of MCP server '{server}' could not be read, so the call was not sent; nothing "
    "ran. Tell the user and try later."
)
"""The model's refusal when the pin store cannot be asked before a call (it fails closed)."""

log = logging.getLogger(__name__)


class McpServers:
    """Every configured server's supervisor, and the tools of those connected.

    Args:
        config: the checked servers file.
        fixed_names: the names of the built-in and operator tools; a server whose key makes
            one of them (`<server>__...`) stops the start.
        default_timeout_s: seconds one call may take when the server's entry sets no `timeout`
            (`COUNTERSIGN_MCP_TIMEOUT`).
        default_max_answer_mb: megabytes one answer may have when the server's entry sets no
            `maxAnswerMB` (`COUNTERSIGN_MCP_MAX_ANSWER_MB`).
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
        default_max_answer_mb: float = DEFAULT_MAX_ANSWER_MB,
        poll_s: float = POLL_S,
        first_retry_s: float = FIRST_RETRY_S,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
    ) -> None:
        fixed = sorted(fixed_names)
        self._prefixes: dict[str, str] = {}
        clashes: list[str] = []
        for key in config.servers:
            prefix = f"{safe_server_name(key)}__"
            clash = next((name for name in fixed if name.startswith(prefix)), None)
            if clash is not None:
                clashes.append(
                    f"server {key!r} makes tool names {prefix}…, like the tool {clash!r} the bot has already; "
                    "rename the server"
                )
            self._prefixes[prefix] = key
        if clashes:
            raise ConfigurationError(said_at_once(f"COUNTERSIGN_MCP_CONFIG ({config.source})", clashes))
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
                max_answer_bytes=round((entry.maxAnswerMB or default_max_answer_mb) * 1_000_000),
            )
            for key, entry in config.servers.items()
        }
        self._offered: dict[str, dict[str, ToolSpec]] = {key: {} for key in config.servers}
        self._held: dict[str, dict[str, HeldTool]] = {key: {} for key in config.servers}
        self._left_out: dict[str, dict[str, str]] = {key: {} for key in config.servers}
        self._by_file_left_out: dict[str, int] = {key: 0 for key in config.servers}
        self._unlisted_warned: dict[str, set[str]] = {key: set() for key in config.servers}
        self._pins: PinStore = InMemoryPinStore()
        self._on_notice: NoticeSink | None = None
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
        found = next(((prefix, key) for prefix, key in self._prefixes.items() if name.startswith(prefix)), None)
        if found is None or name in self._offered[found[1]]:
            return None
        prefix, key = found
        if not self._by_file(key, name.removeprefix(prefix)):
            return None  # the file leaves it out: no tool of that name, whatever the server's state
        status = self._connections[key].status
        last = self._last.get(name)
        if status.state is not State.CONNECTED:
            why = f" ({status.reason})" if status.reason else ""
            return AbsentTool(reason=f"MCP server {key!r} is not connected{why}", last_spec=last)
        if name in self._held[key]:
            return AbsentTool(reason=held_reason(key, name), last_spec=last)
        if last is not None:
            return AbsentTool(reason=f"MCP server {key!r} no longer offers it", last_spec=last)
        return None

    def servers(self) -> dict[str, bool]:
        """Every configured server by its safe name (`<server>__<tool>`), and whether it is connected now."""
        return {
            prefix.removesuffix("__"): self._connections[key].status.state is State.CONNECTED
            for prefix, key in self._prefixes.items()
        }

    def key_of(self, name: str) -> str | None:
        """The key in the file of the server `name` names: its name in tool names, or its key; None: no server.

        `/countersign mcp accept` takes either spelling (`my_tickets` or `my.tickets`).
        """
        if name in self._connections:
            return name
        return self._prefixes.get(f"{name}__")

    # State ------------------------------------------------------------------------------------

    def statuses(self) -> dict[str, Status]:
        """Each server's connection now, by key, in the file's order."""
        return {key: connection.status for key, connection in self._connections.items()}

    def offered(self, key: str) -> Sequence[ToolSpec]:
        """The tools of the server `key` offered now (none while it is not connected)."""
        return list(self._offered[key].values())

    def held(self, key: str) -> Sequence[HeldTool]:
        """The tools the server `key` lists now whose definitions are held (as this process last listed them)."""
        return list(self._held[key].values())

    def left_out(self, key: str) -> dict[str, str]:
        """The tools the server `key` lists now that cannot be offered, and why (as this process last listed them).

        By `<server>__<tool>` name, or `#<position> of <server key>` for an entry with no usable
        name; each reason in words, e.g. "it has no inputSchema", "its name has 70 characters,
        over Gemini's 64". Empty while the server is not connected.
        """
        return dict(self._left_out[key])

    def left_out_by_file(self, key: str) -> int:
        """How many of the tools the server `key` lists now its entry's `includeTools` / `excludeTools` leave out.

        As this process last listed them; 0 while the server is not connected.
        """
        return self._by_file_left_out[key]

    async def pins(self, key: str) -> ServerPins:
        """The server's pins and holds as stored (every worker's and replica's, across restarts).

        Raises:
            Exception: the store's, when it cannot be reached.
        """
        return await self._pins.load(key)

    async def accept(self, key: str, actor: Actor) -> AcceptPlan | AcceptRefused:
        """`/countersign mcp accept <key>` for an admin (the caller checked they may): pin what the admins were shown.

        The server is listed afresh first (when connected), so a definition it changed again
        since the admins' message refuses the accept (`AcceptRefusal.CHANGED_AGAIN`; that one
        is held and its message sent); once accepted, the server is listed again at once so
        its accepted tools are offered without waiting for the next poll.

        Raises:
            KeyError: `key` is no configured server.
            DuplicateToolError: the server lists a tool twice.
            Exception: the store's, when it cannot be reached.
        """
        connection = self._connections[key]
        listed = await connection.list_now(LIST_TIMEOUT_S)
        tools = [tool for tool in (listed.tools if listed else ()) if self._by_file(key, tool.name)]
        definitions = [tool_info(key, tool).contract for tool in self._usable(key, tools)]
        outcome = await accept_server(self._pins, key, definitions, actor)
        if isinstance(outcome, AcceptRefused):
            if outcome.notice is not None:
                await self._tell(outcome.notice)
        else:
            connection.poll_now()
        return outcome

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

    def _by_file(self, key: str, upstream: str) -> bool:
        """Whether the file lets the server `key`'s tool `upstream` (its own name) be offered."""
        return offered_by_file(self._config.servers[key], upstream)

    def _filtered(self, key: str, listing: Listing) -> Listing:
        """`listing` without the tools the file leaves out (counted in `left_out_by_file`).

        A name `includeTools` gives that the server does not list is warned about once per
        connection (a typo, most likely). An entry with no usable name cannot be named by
        `includeTools`: with one, it is left out by the file too.
        """
        entry = self._config.servers[key]
        tools = tuple(tool for tool in listing.tools if self._by_file(key, tool.name))
        left_out = tuple(
            tool
            for tool in listing.left_out
            if (self._by_file(key, tool.name) if tool.name else entry.includeTools is None)
        )
        self._by_file_left_out[key] = len(listing.tools) - len(tools) + len(listing.left_out) - len(left_out)
        if entry.includeTools:
            listed = {tool.name for tool in listing.tools} | {tool.name for tool in listing.left_out}
            unlisted = [name for name in dict.fromkeys(entry.includeTools) if name not in listed]
            new = [name for name in unlisted if name not in self._unlisted_warned[key]]
            if new:
                self._unlisted_warned[key].update(new)
                log.warning(
                    "MCP server %s does not list %s, which its includeTools names (a typo?); its tools are: %s",
                    key,
                    ", ".join(repr(name) for name in new),
                    ", ".join(repr(name) for name in sorted(listed))[:1000] or "none",
                )
        return Listing(tools=tools, left_out=left_out)

    def _warn_once(self, name: str, reason: str) -> None:
        if (name, reason) not in self._warned:
            self._warned.add((name, reason))
            log.warning("MCP tool %s is left out: %s", name, reason)

    def _usable(
        self, key: str, tools: Sequence[mcp_types.Tool], left_out: dict[str, str] | None = None
    ) -> list[mcp_types.Tool]:
        """The listed tools that can be named and pinned (the others are left out, with one warning each).

        Args:
            key: the server's key.
            tools: the tools the SDK could read.
            left_out: filled with each tool left out, by name, and why.
        """
        usable = []
        for tool in tools:
            name = registry_name(key, tool.name)
            problem = name_problem(name)
            if problem is None:
                try:
                    ToolDefinition.from_listing(key, tool.model_dump(mode="json", by_alias=True, exclude_none=True))
                except MalformedDefinitionError as exc:
                    problem = exc.problem
            if problem is not None:
                self._warn_once(name, problem)
                if left_out is not None:
                    left_out[name] = problem
                continue
            usable.append(tool)
        return usable

    async def _listed(self, key: str, listing: Listing | None) -> None:
        """A server's tools as just listed (None: its connection was lost): offer the pinned ones from now on.

        A tool the file's `includeTools` / `excludeTools` leave out is dropped first, as if the
        server did not list it (never pinned, held nor warned about; `left_out_by_file` counts them).
        An entry the SDK cannot read, a name Gemini cannot take, a definition that cannot be
        pinned or a schema that cannot be offered leaves that tool out (one warning each, and
        `left_out`), never the server's others; such a tool is never pinned, so once it is listed
        well it is a new tool like any other. The rest is judged against the pins (`observe`); a
        store that cannot be reached or does not answer within `LIST_TIMEOUT_S`, or a listing
        naming a tool twice, offers none of the server's tools until the next listing.
        """
        if listing is None:
            self._held[key] = {}
            self._left_out[key] = {}
            self._by_file_left_out[key] = 0
            self._unlisted_warned[key] = set()  # the next connection says it again
            self._offer(key, {})
            return
        listing = self._filtered(key, listing)
        left_out: dict[str, str] = {}
        for entry in listing.left_out:
            name = registry_name(key, entry.name) if entry.name else f"#{entry.position} of {key}"
            self._warn_once(name, entry.reason)
            left_out[name] = entry.reason
        infos = [tool_info(key, tool) for tool in self._usable(key, listing.tools, left_out)]
        self._left_out[key] = left_out
        try:
            # Bounded: a store that does not answer must not hold the supervisor (it offers none).
            observation = await asyncio.wait_for(
                observe(self._pins, key, [info.contract for info in infos]), LIST_TIMEOUT_S
            )
        except DuplicateToolError as exc:
            self._warn_once(key, f"{exc}; none of its tools is offered")
            self._held[key] = {}
            self._offer(key, {})
            return
        except Exception:
            log.exception("MCP server %s: its tools could not be checked against their pins; none is offered", key)
            self._held[key] = {}
            self._offer(key, {})
            return
        pinned = {definition.name for definition in observation.review.offered}
        self._held[key] = {tool.definition.registry_name: tool for tool in observation.review.held}
        before = self._offered[key]
        offered: dict[str, ToolSpec] = {}
        for info in infos:
            if info.upstream not in pinned:
                continue
            name = registry_name(key, info.upstream)
            kept = before.get(name)
            if kept is not None and kept.mcp is not None and kept.mcp.digest == info.digest:
                offered[name] = kept  # the same definition: the same tool (no new binding)
                continue
            try:
                offered[name] = self._spec(name, info)
            except UnusableSchemaError as exc:
                problem = f"its input schema cannot be offered to the model: {exc.reason}"
                self._warn_once(name, problem)
                left_out[name] = problem
        self._offer(key, offered)
        if observation.notice is not None:
            await self._tell(observation.notice)

    def _spec(self, name: str, info: McpToolInfo) -> ToolSpec:
        return mcp_tool_spec(
            name,
            info,
            self._connections[info.server],
            timeout_s=self.timeout_s(info.server),
            before_call=partial(self._may_call, info.contract),
        )

    async def _may_call(self, definition: ToolDefinition) -> str | None:
        """The pins' refusal of a call of `definition`, asked of the store just before it is sent; None: send it."""
        try:
            return await check_call(self._pins, definition)
        except Exception:
            log.exception(
                "MCP server %s: the pins could not be read before a call of %s", definition.server, definition.name
            )
            return PINS_UNREADABLE.format(server=definition.server)

    async def _tell(self, notice: HoldNotice) -> None:
        """Send the admins' message (claimed already: at most once); a failure is logged, the hold stays."""
        names = ", ".join(change.tool for change in notice.changes)
        log.warning(
            "MCP server %s: held until an admin accepts them (%s): %s", notice.server, notice.accept_command, names
        )
        if self._on_notice is None:
            return
        try:
            await self._on_notice(notice)
        except Exception:
            log.exception("MCP server %s: the admins could not be told of held tools (%s)", notice.server, names)

    def _offer(self, key: str, offered: dict[str, ToolSpec]) -> None:
        before = self._offered[key]
        self._last.update(offered)
        if [(n, s.mcp.digest if s.mcp else "") for n, s in offered.items()] != [
            (n, s.mcp.digest if s.mcp else "") for n, s in before.items()
        ]:
            self._offered[key] = offered
            self._version += 1
        self._notify()

    # Lifecycle --------------------------------------------------------------------------------

    def start(self, *, pins: PinStore | None = None, on_notice: NoticeSink | None = None) -> None:
        """Start one supervisor task per server, in the running event loop.

        A server that cannot be reached is tried again in the background; the bot serves meanwhile.

        Args:
            pins: where definitions are pinned and held: the database's
                (`bot.tools.mcp.pins.PostgresPinStore`) when the bot runs, shared by every worker
                and replica; omitted, an in-memory store of this process only (tests).
            on_notice: sends the admins' message about newly held tools (once per change);
                omitted, the message is only logged.
        """
        if pins is not None:
            self._pins = pins
        self._on_notice = on_notice
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
