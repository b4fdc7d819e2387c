"""`countersign run`: serve every configured platform until SIGTERM or Ctrl-C.

Shutdown order (DESIGN.md "Lifecycle"): stop taking new events (close the HTTP listener and
Socket Mode), let in-flight turns reach a checkpoint (the service drains its tasks), close
the pools, stop the embedded PostgreSQL we started.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import sys
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any

from aiohttp import web

from adapters.console import ConsoleChat, ConsolePlatform
from adapters.console import messages as console_msg
from adapters.console.chat import StdinLines
from adapters.console.people import TERMINAL
from bot.base.errors import ConfigurationError
from bot.settings import ServerSettings, Settings
from bot.storage.probe import DatabaseProbe
from bot.storage.secret_box import SecretBox
from bot.tools.mcp.connection import State
from bot.tools.mcp.servers import McpServers
from countersign.event_loop import running_loop_name, settle_heap
from countersign.probes import CHECK_TIMEOUT_S, Probes
from countersign.runtime import Runtime, check_configuration, open_runtime
from countersign.signals import cancel_on_signals
from countersign.starting import KeptDatabase, start_with_retries

log = logging.getLogger(__name__)

LISTEN_BACKLOG = 1024
"""Connections the kernel queues for `accept` on the HTTP port (each worker's socket has its own).

aiohttp's default is 128: a burst of more new connections than that while the event loop is busy
(200 clicks at once from Slack, each on its own connection) had the surplus SYNs dropped, and
each of those clicks waited for the client's retransmit, one second and then three: past
Slack's three-second limit for an ack. Linux caps it at `net.core.somaxconn` (4096 by default
since 5.4; 128 on older kernels, where raising that sysctl is the operator's part)."""


async def serve(settings: Settings) -> None:
    """Run the bot: Slack and Discord when configured, else the terminal chat.

    A start that fails because PostgreSQL, Slack or Discord cannot be reached is closed and
    tried again with backoff for `START_RETRY_S` seconds (`countersign.starting`); the embedded
    PostgreSQL (no `DATABASE_URL`) is started once and kept across the attempts
    (`KeptDatabase`), and which agent and tools run is logged by the first attempt only. A signal
    during start-up (or between two attempts) cancels the start (everything opened so far is
    closed again); after start-up it begins the orderly shutdown. A worker of `--workers` does
    the same when its supervisor is gone (`countersign.workers.watch_supervisor`).

    Raises:
        ConfigurationError: a platform is only half configured (e.g. a Slack bot token with
            neither a signing secret nor an app token); the tools module, the subagents file or
            SMTP_URL cannot be used (checked first); several workers are asked for without Slack
            or Discord, or on an OS without `SO_REUSEPORT`; no platform is configured and stdin
            is not a terminal (a container without `-it` would otherwise exit 0 at once); the
            listener cannot bind HOST:PORT; a platform refused its token.
        DatabaseUnavailableError: PostgreSQL refused us (a wrong password, a missing database).
        GaveUpError: an outage outlasted `START_RETRY_S`.
        StartFailedError: the start failed for another reason (one line; `countersign.starting`).
    """
    _check_platforms(settings)
    check_configuration(settings)
    supervisor = settings.server.workers > 1 and settings.server.worker_index is None
    if supervisor:
        from countersign.workers import check_workers

        check_workers(settings, settings.server.workers)  # before the terminal chat, which is one process
    if not settings.slack.enabled and not settings.discord.enabled:
        if not sys.stdin.isatty():
            raise ConfigurationError(
                "no platform is configured (set SLACK_BOT_TOKEN with SLACK_SIGNING_SECRET or SLACK_APP_TOKEN, "
                "or DISCORD_TOKEN), and there is no terminal for the chat"
            )
        log.info("no platform credentials set: starting the terminal chat")
        await chat(settings)
        return
    if supervisor:
        await _supervise(settings)
        return
    stop = asyncio.Event()
    started = False
    cancelled = False
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()

    def on_signal() -> None:
        # The handlers stay until the loop closes, through the whole clean-up (countersign.signals).
        nonlocal cancelled
        if started:
            stop.set()
        elif task is not None and not cancelled:
            # Once: a second signal must not cut short the clean-up the first one started.
            cancelled = True
            log.info("stopping during start-up")
            task.cancel()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal)
    orphan_watch = None
    if settings.server.worker_index is not None:
        from countersign.workers import watch_supervisor

        orphan_watch = asyncio.create_task(watch_supervisor(on_signal), name="supervisor watch")
    try:
        async with AsyncExitStack() as stack:
            probes = Probes()
            if settings.server.metrics_port is not None:
                # A bind of their own answers from now on: /readyz says what the start waits for.
                await stack.enter_async_context(ProbeServer(settings.server, probes))
            # The embedded PostgreSQL, once started, stays up across attempts until the process exits.
            kept = KeptDatabase(stack)
            announced = False

            async def attempt() -> BotServer:
                nonlocal announced
                bot = BotServer(await kept.settings(settings), probes, announce=not announced)
                announced = True  # its first step says which agent and tools run: once, not per attempt
                return await stack.enter_async_context(bot)

            server = await start_with_retries(
                attempt, retry_for_s=settings.server.start_retry_s, on_retry=probes.retrying
            )
            started = True
            settle_heap()
            log.info(
                "Countersign is running on %s:%s (%s; %s)",
                settings.server.host,
                server.port,
                server.describe(),
                running_loop_name(),
            )
            await stop.wait()
            log.info("stopping: no new work; letting in-flight turns reach a checkpoint")
    except asyncio.CancelledError:
        if started:
            raise
    finally:
        if orphan_watch is not None:
            orphan_watch.cancel()
    log.info("stopped")


async def _supervise(settings: Settings) -> None:
    """`countersign run` with several workers: this process supervises them (countersign.workers)."""
    from countersign.workers import supervise

    workers = settings.server.workers
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await supervise(settings, workers, stop)
    log.info("stopped")


def _check_platforms(settings: Settings) -> None:
    slack = settings.slack
    if slack.problem is not None:
        raise ConfigurationError(slack.problem)
    if (slack.bot_token is not None or slack.signing_secret is not None or slack.app_token is not None) and (
        not slack.enabled
    ):
        missing = "SLACK_BOT_TOKEN" if slack.bot_token is None else "SLACK_SIGNING_SECRET or SLACK_APP_TOKEN"
        raise ConfigurationError(f"Slack is only half configured: set {missing} too (see README, Slack setup)")


class ProbeServer:
    """`/healthz`, `/readyz` and `/metrics` on `METRICS_HOST:METRICS_PORT`, apart from Slack's `PORT`.

    Workers of `countersign run --workers N` share the port (`SO_REUSEPORT`), as they share
    `PORT`: the kernel picks the worker that answers.

    Args:
        server: `metrics_port` must be set (0 picks a free port: see `port`).
        probes: what the endpoints answer.
    """

    def __init__(self, server: ServerSettings, probes: Probes) -> None:
        if server.metrics_port is None:
            raise ValueError("ProbeServer needs METRICS_PORT")
        self._server = server
        self._probes = probes
        self._runner: web.AppRunner | None = None
        self.port = 0

    async def __aenter__(self) -> ProbeServer:
        """Listen; raises `ConfigurationError` when `METRICS_HOST:METRICS_PORT` cannot be bound."""
        server = self._server
        app = web.Application(middlewares=_worker_header(server.worker_index))
        self._probes.add_routes(app)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1)
        await runner.setup()
        try:
            port = server.metrics_port or 0
            sock = _listen(server.probes_host, port, server.worker_index, "METRICS_HOST, METRICS_PORT")
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        await web.SockSite(runner, sock).start()
        self.port = sock.getsockname()[1]
        log.info("/healthz, /readyz and /metrics are served on %s:%s (METRICS_PORT)", server.probes_host, self.port)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


def _listen(host: str, port: int, worker_index: int | None, names: str) -> socket.socket:
    """A listening socket on `host:port`, shared with sibling workers (`SO_REUSEPORT`) in a worker.

    Raises:
        ConfigurationError: the address cannot be bound (naming the settings `names`).
    """
    try:
        return socket.create_server((host, port), reuse_port=worker_index is not None, backlog=LISTEN_BACKLOG)
    except OSError as exc:
        raise ConfigurationError(f"cannot listen on {host}:{port} ({names}): {exc.strerror or exc}") from None


class BotServer:
    """The running bot: core, platform adapters and the HTTP listener, as one context.

    `/healthz`, `/readyz` and `/metrics` (`countersign.probes`) are served on `PORT` beside
    Slack's routes, or with `METRICS_PORT` set on a listener of their own (`ProbeServer`): the
    one whoever passed `probes` opened, else this server's own (see `metrics_port`).

    Args:
        settings: everything; `server.port` 0 picks a free port (see `port`).
        probes: the process's probes, already served on `METRICS_PORT` when that is set
            (`serve` makes them before its first start attempt); None: this server makes its own.
        announce: log which agent, subagents and tools run (`open_runtime`); False for a start
            attempt after the first.
    """

    def __init__(self, settings: Settings, probes: Probes | None = None, *, announce: bool = True) -> None:
        self._settings = settings
        self._announce = announce
        self._stack = AsyncExitStack()
        self.runtime: Runtime | None = None
        self.port = 0
        self.metrics_port: int | None = None
        """The port of this server's own `ProbeServer` (`METRICS_PORT` set and no `probes` given)."""
        self._own_probes = probes is None
        self.probes = probes if probes is not None else Probes()
        self._adapters: list[Any] = []

    def describe(self) -> str:
        """The adapters that run, for the start-up line."""
        return ", ".join(type(a).__name__ for a in self._adapters) or "no platform"

    async def __aenter__(self) -> BotServer:
        try:
            await self._start()
        except BaseException:
            await self._stack.aclose()
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.probes.stopping()
        await self._stack.aclose()

    async def _start(self) -> None:
        settings = self._settings
        if settings.server.metrics_port is not None and self._own_probes:
            probe_server = await self._stack.enter_async_context(ProbeServer(settings.server, self.probes))
            self.metrics_port = probe_server.port
        runtime = await self._stack.enter_async_context(open_runtime(settings, announce=self._announce))
        self.runtime = runtime
        database_probe = DatabaseProbe(runtime.database.url, timeout_s=CHECK_TIMEOUT_S)
        self._stack.push_async_callback(database_probe.close)
        web_app = web.Application(middlewares=_worker_header(settings.server.worker_index))
        if settings.server.metrics_port is None:
            self.probes.add_routes(web_app)
        slack_adapter = None
        if settings.slack.enabled:
            from adapters.slack.app import SlackAdapter

            keys = [key.get_secret_value() for key in settings.encryption.keys]
            slack = SlackAdapter(
                settings.slack,
                runtime.service,
                runtime.admin,
                runtime.database.pool,
                box=SecretBox(keys),
            )
            runtime.platforms[slack.platform.name] = slack.platform
            slack.add_routes(web_app)
            self._adapters.append(slack)
            slack_adapter = slack
        if settings.discord.enabled:
            from adapters.discord.app import DiscordAdapter
            from bot.storage.start_spacing import StartSpacing

            # IDENTIFYs spaced per bucket across every process on this database (decision 0018).
            spacing = StartSpacing(runtime.database.pool, IDENTIFY_SPACING_S)
            discord_adapter = DiscordAdapter(settings.discord, runtime.service, runtime.admin, identify_gate=spacing)
            runtime.platforms[discord_adapter.platform.name] = discord_adapter.platform
            self._adapters.append(discord_adapter)
        # Adapters connect first (Discord waits for READY), then the listener opens, so `PORT`
        # answering (its `/healthz`, without METRICS_PORT) means the bot has started; `/readyz`
        # says 200 once the service has recovered too (`Probes.serving`). Unwound in reverse (DESIGN.md
        # "Lifecycle"): the listener stops taking events, the service drains in-flight turns
        # (they still post through the adapters' clients), the adapters close, then the runtime
        # closes pools and the embedded server.
        for adapter in self._adapters:
            self._stack.push_async_callback(adapter.close)  # also when start fails half way
            await adapter.start()
        self._stack.push_async_callback(runtime.service.aclose, settings.server.shutdown_grace_s)
        if slack_adapter is not None:
            # Socket Mode is a listener of its own: it stops taking events before the drain too.
            self._stack.push_async_callback(slack_adapter.stop_receiving)
        runner = web.AppRunner(web_app, access_log=None, shutdown_timeout=5)
        await runner.setup()
        self._stack.push_async_callback(runner.cleanup)
        # A worker shares the port with its siblings (countersign.workers).
        sock = _listen(settings.server.host, settings.server.port, settings.server.worker_index, "HOST, PORT")
        site = web.SockSite(runner, sock, backlog=LISTEN_BACKLOG)
        await site.start()
        self.port = sock.getsockname()[1]
        runtime.service.start()
        await runtime.service.recover()
        self.probes.serving(database_probe, self._adapters)


async def chat(settings: Settings) -> None:
    """`countersign chat`: the core in the terminal.

    Work left over from an earlier run is finished first, as a turn of the chat (`ConsoleChat.run`
    with `recover`). Ctrl-C while the bot works stops its turn (`ConsoleChat.interrupt`); Ctrl-C
    otherwise (or a second one), SIGTERM or a closed terminal (SIGHUP) leave as `countersign run`
    does: no new input, the turn in progress gets up to `SHUTDOWN_GRACE_S` to reach a checkpoint
    (`ConsoleChat.shut_down`; one more Ctrl-C or SIGTERM ends that wait at once, one more SIGHUP
    does not: a closing terminal may send several), then the embedded PostgreSQL is stopped.
    """
    console: ConsoleChat | None = None

    def taken_by_the_chat(sig: signal.Signals) -> bool:
        if console is None:
            return False
        if console.stopping:  # during the grace: Ctrl-C or SIGTERM leaves at once, SIGHUP is ignored
            return sig is signal.SIGHUP or console.interrupt()
        return sig is signal.SIGINT and console.interrupt()

    stopping = cancel_on_signals(signal.SIGINT, signal.SIGTERM, signal.SIGHUP, first=taken_by_the_chat)
    try:
        async with open_runtime(settings) as runtime:
            lines = StdinLines()
            platform = ConsolePlatform(write=lines.write)
            runtime.platforms[platform.name] = platform
            runtime.admin_channels.add(TERMINAL)  # the operator at the terminal is its admin
            runtime.service.start()
            if runtime.mcp is not None:
                await _first_mcp_connections(runtime.mcp, lines.write)
            # A person types ahead without having seen the card to come; input piped in is a
            # script, each line the answer to what is asked next.
            typed_ahead = lines if sys.stdin.isatty() else None
            console = ConsoleChat(
                runtime.service, platform, read=lines.read, admin=runtime.admin, typed_ahead=typed_ahead
            )
            try:
                await console.run(recover=True)
            except asyncio.CancelledError:
                if stopping.is_set():
                    await console.shut_down(settings.server.shutdown_grace_s)
                raise
            finally:
                console = None
                lines.close()
    except asyncio.CancelledError:
        if not stopping.is_set():
            raise
        log.info("stopped by a signal")


MCP_CHAT_WAIT_S = 20.0
"""Seconds `countersign chat` waits, before its first prompt, for each MCP server's first attempt."""


async def _first_mcp_connections(servers: McpServers, write: Callable[[str], None]) -> None:
    """Say how each MCP server stands once each has connected or failed once (at most `MCP_CHAT_WAIT_S`).

    A first question typed before a server connected would be answered without its tools, and
    nothing would say why.
    """
    write(console_msg.MCP_CONNECTING.format(servers=", ".join(servers.statuses())))

    def attempted() -> bool:
        return all(status.state is not State.CONNECTING for status in servers.statuses().values())

    with contextlib.suppress(TimeoutError):
        await servers.wait_until(attempted, MCP_CHAT_WAIT_S)
    for key, status in servers.statuses().items():
        if status.state is State.CONNECTED:
            offered = len(servers.offered(key))
            tools = console_msg.MCP_TOOL_COUNT[offered != 1].format(n=offered)
            write(console_msg.MCP_CONNECTED.format(server=key, tools=tools))
        else:
            write(console_msg.MCP_NOT_YET.format(server=key, reason=status.reason or status.state.value))


IDENTIFY_SPACING_S = 6.0
"""Seconds between two Discord IDENTIFYs of one bucket: Discord allows one per bucket per 5 s
(Gateway docs, "Session start limit"); one more second covers the time between recording a
start and its IDENTIFY arriving."""

WORKER_HEADER = "X-Countersign-Worker"
"""Response header naming the worker that answered, when `countersign run --workers` runs several."""


def _worker_header(index: int | None) -> list[Any]:
    """A middleware adding `WORKER_HEADER` to every response of worker `index` (none for a lone process)."""
    if index is None:
        return []

    @web.middleware
    async def name_the_worker(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        response = await handler(request)
        response.headers[WORKER_HEADER] = str(index)
        return response

    return [name_the_worker]
