"""`countersign run --workers N`: N worker processes on one machine, under one supervisor.

The supervisor (this module) owns what the workers share and starts nothing of the bot itself:

- the database: without `DATABASE_URL` it starts the embedded PostgreSQL once, applies the
  migrations once, and hands every worker the URL (workers never run initdb side by side);
- the port: workers listen on the same HOST:PORT with `SO_REUSEPORT`, so the kernel spreads
  Slack's connections over them; the supervisor holds a bound, never-listening socket on it
  for its whole life, which picks the port for `PORT=0` and keeps it ours between restarts
  (and the same for `METRICS_PORT`, when the probes have a bind of their own);
- metrics: `PROMETHEUS_MULTIPROC_DIR` (a fresh directory, or the operator's, emptied at start),
  so `GET /metrics` on any worker sums them all (prometheus-client's multiprocess mode);
- Discord's shards: the shard count is `DISCORD_SHARD_COUNT`, else what `GET /gateway/bot`
  recommends (asked once here) but at least one per worker; the shards to run
  (`DISCORD_SHARD_IDS`, else all) are dealt out in turn, so each runs in exactly one worker and
  a restarted worker gets its own back (docs/decisions/0018). A worker left without one opens
  no gateway session (`DISCORD_SHARD_IDS=none`).

Each worker is `countersign run` with `COUNTERSIGN_WORKER_INDEX` set: it starts, tries its start
again after an outage (`countersign.starting`) and shuts down as a single process does. A worker
that exits on its own is restarted (after 0.5 s, doubling with each quick failure up to 30 s),
also one that gave up on an outage (status 75: PostgreSQL, Slack or Discord unreachable for
`START_RETRY_S`) or whose start failed otherwise (status 70); only one that exits with status 2
(a refusal: a token refused, a busy port, a wrong database password) stops them all, since its
siblings would fail the same way (docs/decisions/0037-outages-probes-and-tokens-at-rest.md). The
supervisor's own start (the database, the migrations, Discord's shard count) tries again after
an outage too, keeping the embedded PostgreSQL it started across its attempts. SIGTERM or SIGINT
to the supervisor is forwarded to every worker as SIGTERM; a worker still running
`SHUTDOWN_GRACE_S` + `KILL_AFTER_S` seconds later is killed. A worker whose supervisor is gone
without a word (kill -9, the OOM killer) shuts down as on SIGTERM within about a second
(`watch_supervisor`), so no orphan keeps serving the port beside the next supervisor's workers.

Why this supervisor is ours and not a process manager's (gunicorn's arbiter): see
docs/decisions/0058-workers-process-manager.md.

Every worker holds the same guarantees as replicas on several machines do (one run per
conversation, one decision per card; docs/decisions/0002), because they share nothing but
PostgreSQL.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path

from bot import metrics
from bot.base.errors import ConfigurationError
from bot.settings import Settings
from bot.storage.database import migrate
from countersign.exits import CONFIGURATION_EXIT, START_FAILED_EXIT, UNREACHABLE_EXIT
from countersign.starting import KeptDatabase, start_with_retries

log = logging.getLogger(__name__)

KILL_AFTER_S = 15.0
"""Seconds past the shutdown grace before a worker that has not exited is killed."""
FIRST_RESTART_DELAY_S = 0.5
MAX_RESTART_DELAY_S = 30.0
STABLE_AFTER_S = 60.0
"""A worker that ran this long before exiting is restarted after the first delay again."""
SUPERVISOR_PID_ENV = "COUNTERSIGN_SUPERVISOR_PID"
"""Set by the supervisor in each worker's environment: the pid `watch_supervisor` watches."""
SUPERVISOR_POLL_S = 1.0
"""Seconds between two looks of `watch_supervisor` at the worker's parent."""


class WorkersFailedError(ConfigurationError):
    """A worker could not start for a reason its siblings share (it exited with status 2)."""


@dataclass
class _Worker:
    index: int
    env: dict[str, str]
    process: asyncio.subprocess.Process | None = None
    started_at: float = 0.0
    quick_failures: int = 0


def check_workers(settings: Settings, workers: int) -> None:
    """Refuse a worker count this machine or configuration cannot run.

    Raises:
        ConfigurationError: the OS has no `SO_REUSEPORT` (Windows); neither Slack nor Discord
            is configured (the terminal chat is one process).
    """
    if workers <= 1:
        return
    if not hasattr(socket, "SO_REUSEPORT"):
        raise ConfigurationError("COUNTERSIGN_WORKERS > 1 needs SO_REUSEPORT, which this OS lacks; run one worker")
    if not settings.slack.enabled and not settings.discord.enabled:
        raise ConfigurationError(
            "several workers (--workers, COUNTERSIGN_WORKERS) serve only Slack or Discord: set their "
            "credentials (see README, Slack setup), or run one worker for the terminal chat"
        )


def split_shards(shard_ids: Sequence[int], workers: int) -> list[tuple[int, ...]]:
    """Deal `shard_ids` out to `workers` workers in turn: worker i gets the i-th, (i+N)-th, ...

    With every shard (`0..count-1`) that is `{s : s % workers == i}`. Each id lands in exactly
    one worker; a worker gets none when there are fewer ids than workers.

    Args:
        shard_ids: the shards to run, each once (`DISCORD_SHARD_IDS`, or `range(count)`).
        workers: the worker count, at least 1.

    Returns:
        One tuple of shard ids per worker index, ascending.
    """
    ordered = sorted(shard_ids)
    return [tuple(ordered[index::workers]) for index in range(workers)]


async def plan_shards(settings: Settings, workers: int) -> list[dict[str, str]]:
    """Each worker's Discord shard settings (`DISCORD_SHARD_COUNT`, `DISCORD_SHARD_IDS`).

    The count is `DISCORD_SHARD_COUNT`, else the larger of what `GET /gateway/bot` recommends
    and `workers` (a shard per worker; Discord's Gateway docs, "Sharding", allow more shards
    than recommended). No Discord: no settings.

    Raises:
        ConfigurationError: Discord refuses the token.
        UnreachableError: Discord cannot be reached or cannot answer now.
    """
    discord = settings.discord
    if not discord.enabled:
        return [{} for _ in range(workers)]
    count = discord.shard_count
    if count is None:
        from adapters.discord.app import fetch_gateway_limits

        recommended = (await fetch_gateway_limits(discord)).shards
        count = max(recommended, workers)
        log.info("Discord recommends %d shards; running %d over %d workers", recommended, count, workers)
    ids = discord.shard_ids if discord.shard_ids is not None else tuple(range(count))
    plans = []
    for index, mine in enumerate(split_shards(ids, workers)):
        if mine:
            log.info("worker %d runs Discord shards %s of %d", index, ",".join(map(str, mine)), count)
        else:
            log.info("worker %d runs no Discord shard (fewer shards than workers): REST only", index)
        plans.append({"DISCORD_SHARD_COUNT": str(count), "DISCORD_SHARD_IDS": ",".join(map(str, mine)) or "none"})
    return plans


async def supervise(settings: Settings, workers: int, stop: asyncio.Event) -> None:
    """Run `workers` worker processes until `stop` is set, then stop them.

    Args:
        settings: the supervisor's settings (the workers read the same environment, plus what
            they share: `DATABASE_URL`, `PORT`, `METRICS_PORT` when set, `PROMETHEUS_MULTIPROC_DIR`).
        workers: how many (at least 2; `check_workers` has passed).
        stop: set on SIGTERM or SIGINT; set during start-up, it cancels the start-up and this
            returns without starting a worker.

    Raises:
        WorkersFailedError: a worker exited with status 2 (its own message is on stderr).
        ConfigurationError: HOST:PORT (or METRICS_HOST:METRICS_PORT) cannot be bound, or another
            process already listens on it (`_hold_port`); Discord refused the token.
        DatabaseUnavailableError: the database refused us or the embedded one cannot start.
        GaveUpError: the database or Discord was still unreachable after `START_RETRY_S`.
        StartFailedError: the supervisor's start failed for another reason.
    """
    async with AsyncExitStack() as stack:
        # The port first: a second supervisor on a served port must not migrate the database
        # its running siblings use before it is refused.
        holder = _hold_port(settings.server.host, settings.server.port)
        stack.callback(holder.close)
        probes_holder = None
        server = settings.server
        if server.metrics_port is not None:
            probes_holder = _hold_port(server.probes_host, server.metrics_port, "METRICS_HOST, METRICS_PORT")
            stack.callback(probes_holder.close)

        # The embedded server, once started, is kept across attempts (Discord may be what fails).
        kept = KeptDatabase(stack)

        async def prepare() -> tuple[str, list[dict[str, str]]]:
            url = await kept.url(settings.database)
            await migrate(url)
            return url, await plan_shards(settings, workers)

        # A signal during start-up (the embedded database starting, `GET /gateway/bot` being
        # retried, a wait between two attempts) cancels it, as a single `countersign run`
        # does, instead of being noticed only when the start-up is over.
        preparing = asyncio.ensure_future(
            start_with_retries(prepare, retry_for_s=settings.server.start_retry_s, what="the supervisor's start")
        )
        stopping = asyncio.ensure_future(stop.wait())
        await asyncio.wait({preparing, stopping}, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if not preparing.done():
            log.info("stopping during start-up")
            preparing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await preparing
            return
        url, shard_env = preparing.result()
        port = holder.getsockname()[1]
        metrics_dir = _metrics_dir(stack)
        env = {
            **os.environ,
            "DATABASE_URL": url,
            "PORT": str(port),
            "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir),
            "COUNTERSIGN_WORKERS": "1",
        }
        if probes_holder is not None:
            env["METRICS_PORT"] = str(probes_holder.getsockname()[1])
        log.info("Countersign starts %d workers on %s:%s", workers, settings.server.host, port)
        await _Supervisor(env, shard_env, metrics_dir, settings.server.shutdown_grace_s).run(stop)


def _hold_port(host: str, port: int, names: str = "HOST, PORT") -> socket.socket:
    """A socket bound to `host:port` with SO_REUSEPORT that never listens (see the module docstring).

    For `PORT`, and for `METRICS_PORT` when it is set (`names` says which, in messages).

    SO_REUSEPORT lets any process of the same user bind the port too, so a second supervisor
    (or an orphaned worker of an earlier one) would otherwise share it silently, the kernel
    splitting Slack's requests between two bots. A port some socket already listens on is
    therefore refused first: a probe bound without SO_REUSEPORT (SO_REUSEADDR only, so sockets
    left in TIME_WAIT do not count) fails exactly then. A supervisor still starting, whose
    workers do not listen yet, is not seen.

    Raises:
        ConfigurationError: the address cannot be bound, or something already listens on it.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    if port != 0:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((host, port))
            except OSError as exc:
                raise ConfigurationError(
                    f"cannot listen on {host}:{port} ({names}): {exc.strerror or exc} "
                    "(another countersign run, or its workers, may still serve it)"
                ) from None
    holder = socket.socket(family, socket.SOCK_STREAM)
    try:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        holder.bind((host, port))
    except OSError as exc:
        holder.close()
        raise ConfigurationError(f"cannot listen on {host}:{port} ({names}): {exc.strerror or exc}") from None
    return holder


def _metrics_dir(stack: AsyncExitStack) -> Path:
    """The operator's `PROMETHEUS_MULTIPROC_DIR` emptied, or a fresh one removed at the end.

    prometheus-client's multiprocess mode needs the directory wiped between runs, or counters of
    an earlier run are summed in.
    """
    given = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if given:
        directory = Path(given)
        directory.mkdir(parents=True, exist_ok=True)
        for stale in directory.glob("*.db"):
            stale.unlink()
        return directory
    directory = Path(tempfile.mkdtemp(prefix="countersign-metrics-"))
    stack.callback(shutil.rmtree, directory, ignore_errors=True)
    return directory


_ENDINGS = {
    UNREACHABLE_EXIT: f"could not reach a service it needs (exit status {UNREACHABLE_EXIT}, see above)",
    START_FAILED_EXIT: f"could not start (exit status {START_FAILED_EXIT}, see above)",
}
"""A worker's end in words, for the exit statuses that say why (`countersign.exits`)."""


def _how_it_ended(returncode: int | None) -> str:
    """A worker's end in words: "exited with status 1", or "was killed by signal 9 (SIGKILL)".

    asyncio gives a process ended by a signal the signal's number, negated, as its returncode.
    """
    if returncode is not None and returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "unknown"
        return f"was killed by signal {-returncode} ({name})"
    return f"exited with status {returncode}"


async def watch_supervisor(on_gone: Callable[[], None], *, poll_s: float = SUPERVISOR_POLL_S) -> None:
    """In a worker: call `on_gone` once the supervisor that started it has died, then return.

    The supervisor is the pid in `COUNTERSIGN_SUPERVISOR_PID` (else the parent at the call); it
    is gone when this process's parent is no longer that pid (an orphan is adopted by init or a
    subreaper), checked every `poll_s` seconds. Polling `getppid()` rather than Linux's
    `PR_SET_PDEATHSIG` keeps this portable and free of the race where the supervisor dies
    before the worker could ask for the signal.

    Args:
        on_gone: what SIGTERM would do (the worker's stop); called once, on the event loop.
        poll_s: seconds between two looks.
    """
    given = os.environ.get(SUPERVISOR_PID_ENV, "")
    supervisor = int(given) if given.isdigit() else os.getppid()
    while os.getppid() == supervisor:  # noqa: ASYNC110 - nothing announces a parent's death portably
        await asyncio.sleep(poll_s)
    log.warning("the supervisor (pid %d) is gone: this worker stops", supervisor)
    on_gone()


class _Supervisor:
    def __init__(self, env: dict[str, str], own: list[dict[str, str]], metrics_dir: Path, grace_s: float) -> None:
        self._env = env
        # `own`: each worker's own settings (its Discord shards), the same at every restart.
        self._workers = [_Worker(index, extra) for index, extra in enumerate(own)]
        self._metrics_dir = metrics_dir
        self._grace_s = grace_s
        self._failed: _Worker | None = None

    async def run(self, stop: asyncio.Event) -> None:
        watchers = [asyncio.create_task(self._keep(worker, stop)) for worker in self._workers]
        try:
            await asyncio.wait(watchers, return_when=asyncio.FIRST_EXCEPTION)
        finally:
            stop.set()
            await self._stop_all()
            for watcher in watchers:
                watcher.cancel()
            await asyncio.gather(*watchers, return_exceptions=True)
        if self._failed is not None:
            raise WorkersFailedError(
                f"worker {self._failed.index} could not start (exit status {CONFIGURATION_EXIT}, see above); "
                "all workers stopped"
            )

    async def _keep(self, worker: _Worker, stop: asyncio.Event) -> None:
        """Start `worker` and restart it whenever it exits, until `stop`."""
        while not stop.is_set():
            process = await self._spawn(worker)
            stopping = asyncio.ensure_future(stop.wait())
            exiting = asyncio.ensure_future(process.wait())
            await asyncio.wait({stopping, exiting}, return_when=asyncio.FIRST_COMPLETED)
            stopping.cancel()
            if not exiting.done():
                exiting.cancel()
                return  # stop was set: _stop_all takes it from here
            metrics.forget_process(process.pid, str(self._metrics_dir))
            code = process.returncode
            if code == CONFIGURATION_EXIT:
                self._failed = worker
                raise WorkersFailedError(str(worker.index))
            delay = self._restart_delay(worker)
            # An outage (status 75) is restarted like a crash: it may be over by then, and
            # its siblings keep serving meanwhile. So is a start that failed otherwise (70).
            log.warning(
                "worker %d (pid %d) %s; restarting it in %.1f s",
                worker.index,
                process.pid,
                _ENDINGS.get(code or 0) or _how_it_ended(code),
                delay,
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=delay)

    async def _spawn(self, worker: _Worker) -> asyncio.subprocess.Process:
        env = {
            **self._env,
            **worker.env,
            "COUNTERSIGN_WORKER_INDEX": str(worker.index),
            SUPERVISOR_PID_ENV: str(os.getpid()),
        }
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "countersign.cli",
            "run",
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
        )
        worker.process = process
        worker.started_at = time.monotonic()
        log.info("worker %d started (pid %d)", worker.index, process.pid)
        return process

    def _restart_delay(self, worker: _Worker) -> float:
        if time.monotonic() - worker.started_at >= STABLE_AFTER_S:
            worker.quick_failures = 0
        delay: float = min(MAX_RESTART_DELAY_S, FIRST_RESTART_DELAY_S * 2.0**worker.quick_failures)
        worker.quick_failures += 1
        return delay

    async def _stop_all(self) -> None:
        """SIGTERM to every running worker; kill those still running after the grace."""
        running = [w.process for w in self._workers if w.process is not None and w.process.returncode is None]
        for process in running:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
        if not running:
            return
        waits = [asyncio.ensure_future(p.wait()) for p in running]
        _, late = await asyncio.wait(waits, timeout=self._grace_s + KILL_AFTER_S)
        for process in running:
            if process.returncode is None:
                log.error("worker pid %d did not stop in time; killing it", process.pid)
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
        if late:
            await asyncio.gather(*late, return_exceptions=True)
        log.info("all workers stopped")
