"""`countersign run`: serve every configured platform until SIGTERM or Ctrl-C.

Shutdown order (DESIGN.md "Lifecycle"): stop taking new events (close the HTTP listener and
Socket Mode), let in-flight turns reach a checkpoint (the service drains its tasks), close
the pools, stop the embedded PostgreSQL we started.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import sys
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any

from aiohttp import web

from adapters.console import ConsoleChat, ConsolePlatform
from adapters.console.chat import StdinLines
from bot import metrics
from bot.errors import ConfigurationError
from bot.settings import Settings
from countersign.event_loop import running_loop_name, settle_heap
from countersign.runtime import Runtime, check_configuration, open_runtime
from countersign.signals import cancel_on_signals
from countersign.starting import start_with_retries

if TYPE_CHECKING:
    from adapters.slack.ack_board import AckBoard

log = logging.getLogger(__name__)

HEALTH_PATH = "/healthz"
READY_PATH = "/readyz"
METRICS_PATH = "/metrics"
CHECK_TIMEOUT_S = 2.0
"""Seconds `/healthz` and `/readyz` wait for the database (and a platform) to answer."""
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
    tried again with backoff for `START_RETRY_S` seconds (`countersign.starting`). A signal
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
            server = await start_with_retries(
                lambda: stack.enter_async_context(BotServer(settings)), retry_for_s=settings.server.start_retry_s
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


class BotServer:
    """The running bot: core, platform adapters and the HTTP listener, as one context.

    Args:
        settings: everything; `server.port` 0 picks a free port (see `port`).
    """

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._stack = AsyncExitStack()
        self.runtime: Runtime | None = None
        self.port = 0
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
        await self._stack.aclose()

    async def _start(self) -> None:
        settings = self._settings
        runtime = await self._stack.enter_async_context(open_runtime(settings))
        self.runtime = runtime
        web_app = web.Application(middlewares=_worker_header(settings.server.worker_index))
        web_app.router.add_get(HEALTH_PATH, _health(runtime))
        web_app.router.add_get(READY_PATH, self._ready)
        web_app.router.add_get(METRICS_PATH, _metrics(runtime))
        slack_adapter = None
        if settings.slack.enabled:
            from adapters.slack.app import SlackAdapter

            slack = SlackAdapter(
                settings.slack, runtime.service, runtime.admin, runtime.database.pool, board=self._ack_board()
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
        # Adapters connect first (Discord waits for READY), then the listener opens, so
        # `/healthz` answering 200 means the bot is ready. Unwound in reverse (DESIGN.md
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
        try:
            # A worker shares the port with its siblings (countersign.workers).
            shared = settings.server.worker_index is not None
            sock = socket.create_server(
                (settings.server.host, settings.server.port), reuse_port=shared, backlog=LISTEN_BACKLOG
            )
        except OSError as exc:
            where = f"{settings.server.host}:{settings.server.port}"
            raise ConfigurationError(f"cannot listen on {where} (HOST, PORT): {exc.strerror or exc}") from None
        site = web.SockSite(runner, sock, backlog=LISTEN_BACKLOG)
        await site.start()
        self.port = sock.getsockname()[1]
        runtime.service.start()
        await runtime.service.recover()

    def _ack_board(self) -> AckBoard | None:
        """A worker's view of the machine's `AckBoard` (None outside `countersign run --workers N`).

        Opened before the adapter and unmapped after everything else on this server's stack;
        the inherited file descriptor is closed once mapped (nothing this process starts needs
        it). A board that cannot be opened, or a descriptor that is not one, is logged and done
        without (the descriptor left as it was): the worker's decisions then wait only for its
        own acks, as a lone process's do.
        """
        from adapters.slack.ack_board import AckBoard

        server = self._settings.server
        if server.ack_board_fd is None or server.worker_index is None:
            return None
        try:
            board = AckBoard.open(server.ack_board_fd, server.worker_index)
        except (OSError, ValueError) as exc:
            log.warning(
                "cannot use the workers' ack board (COUNTERSIGN_ACK_BOARD_FD=%d): %s; this worker's decisions "
                "wait only for its own acks",
                server.ack_board_fd,
                exc,
            )
            return None
        os.close(server.ack_board_fd)
        self._stack.callback(board.close)
        return board

    async def _ready(self, request: web.Request) -> web.Response:
        """`GET /readyz`: 200 only when the database answers and every platform is connected.

        For a load balancer or an orchestrator to route around a replica that lost its
        database or a platform (issue 11 item 5); `/healthz` stays the liveness check. The
        body names what is down: `{"status": "unavailable", "database": "ok", "platforms":
        {"DiscordAdapter": "disconnected"}}`.
        """
        runtime = self.runtime
        database = "unreachable"
        if runtime is not None and await _database_answers(runtime):
            database = "ok"
        platforms: dict[str, str] = {}
        for adapter in self._adapters:
            try:
                up = await asyncio.wait_for(adapter.connected(), timeout=CHECK_TIMEOUT_S)
            except Exception as exc:
                log.warning("readiness: %s did not say whether it is connected: %s", type(adapter).__name__, exc)
                up = False
            platforms[type(adapter).__name__] = "connected" if up else "disconnected"
        ready = database == "ok" and all(state == "connected" for state in platforms.values())
        body = {"status": "ok" if ready else "unavailable", "database": database, "platforms": platforms}
        return web.json_response(body, status=200 if ready else 503)


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
            runtime.service.start()
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


async def _database_answers(runtime: Runtime) -> bool:
    """Whether PostgreSQL answers `SELECT 1` within `CHECK_TIMEOUT_S` (a failure is logged)."""
    try:
        await asyncio.wait_for(runtime.database.pool.fetchval("SELECT 1"), timeout=CHECK_TIMEOUT_S)
    except Exception as exc:
        log.warning("health check failed: %s", exc)
        return False
    return True


def _health(runtime: Runtime) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def health(request: web.Request) -> web.Response:
        """200 when PostgreSQL answers within `CHECK_TIMEOUT_S`, else 503."""
        if not await _database_answers(runtime):
            return web.json_response({"status": "unavailable", "database": "unreachable"}, status=503)
        return web.json_response({"status": "ok"})

    return health


def _metrics(runtime: Runtime) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def serve_metrics(request: web.Request) -> web.Response:
        """`GET /metrics`: `bot.metrics` in Prometheus' text format."""

        async def count_pending() -> int:
            value = await asyncio.wait_for(
                runtime.database.pool.fetchval("SELECT count(*) FROM approvals WHERE status = 'pending'"),
                timeout=CHECK_TIMEOUT_S,
            )
            return int(value)

        body = await metrics.render(count_pending)
        return web.Response(body=body, headers={"Content-Type": metrics.CONTENT_TYPE_LATEST})

    return serve_metrics
