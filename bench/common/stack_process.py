"""A stack under test in child processes: started, watched, measured, profiled and stopped.

`bench.throughput` runs every side this way (`bench.bare_server` for the bare stack,
`countersign run` for Countersign, `bench.common.workers`), so that the benchmark's own process holds
only the network emulation: PostgreSQL's management, the stand-ins, the senders and the meters.

- The child is `python -m MODULE ARGS...` with `child_env`'s environment (the end-to-end tests'
  settings as variables, the same for every side) and the repository as its working directory;
  its output goes to the benchmark's stderr and stdout.
- CPU: user + system seconds of the child and all of its descendants (a supervisor's workers),
  read from /proc through psutil. A process that is gone is no longer counted (a worker's
  restart would lose its CPU; none is expected in a run).
- Profiling (`profile` given): the child runs under `bench.profiled --paused`, which profiles
  the main thread's CPU time only between `start_profile` and `stop_profile`.
- Stopping: SIGTERM, then SIGKILL after `STOP_WAIT_S`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path

import psutil

from bench.common.children import enabled_marker
from bench.common.harness import GEMINI_KEY, REPO_ROOT, Stage
from tests.e2e.conftest import BOT_TOKEN, SIGNING_SECRET
from tests.support.bot_process import base_env

START_WAIT_S = 120.0
"""Seconds a child has to become ready: imports and pools, all sides at once, on a 2-core machine
that may be running other benchmarks (over 40 s was seen)."""
STOP_WAIT_S = 30.0
"""Seconds a child has to exit after SIGTERM before it is killed (its grace is 5 s)."""
POLL_S = 0.05
POOL_SIZE = 10
"""`DATABASE_POOL_SIZE` of every stack process: the bot's default, and the bare stack's pool."""


def child_env(stage: Stage, url: str, port: int, **extra: str) -> dict[str, str]:
    """`bench.common.harness.Stage.settings` as environment variables (the end-to-end tests' settings).

    Args:
        stage: the stand-ins the stack talks to.
        url: the side's database.
        port: where the stack listens (on 127.0.0.1).
        extra: more variables (e.g. `COUNTERSIGN_WORKERS`).
    """
    return base_env(
        DATABASE_URL=url,
        DATABASE_POOL_SIZE=str(POOL_SIZE),
        GOOGLE_API_KEY=GEMINI_KEY,
        GEMINI_BASE_URL=stage.gemini.base_url,
        GEMINI_MAX_ATTEMPTS="3",
        GEMINI_RETRY_INITIAL_DELAY="0.01",
        SLACK_BOT_TOKEN=BOT_TOKEN,
        SLACK_SIGNING_SECRET=SIGNING_SECRET,
        SLACK_API_URL=stage.slack.base_url,
        HTTP_REQUEST_ALLOWED_HOSTS=stage.target.host,
        HOST="127.0.0.1",
        PORT=str(port),
        SHUTDOWN_GRACE_S="5",
        LOG_LEVEL="WARNING",
        **extra,
    )


async def wait_for(
    check: Callable[[], Awaitable[bool]], what: str, timeout_s: float, *, poll_s: float = POLL_S
) -> None:
    """Call `check` every `poll_s` seconds until it says True.

    Raises:
        TimeoutError: still False after `timeout_s` seconds (the message says `what`).
    """
    deadline = time.monotonic() + timeout_s
    while not await check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} after {timeout_s:g} s")
        await asyncio.sleep(poll_s)


class StackProcess:
    """A running child process and its descendants; open it with `StackProcess.running`.

    Args:
        name: the side's name (for errors).
        process: the child.
        profile: where the child writes its profile (None: not profiled).
    """

    def __init__(self, name: str, process: asyncio.subprocess.Process, profile: Path | None) -> None:
        self.name = name
        self.process = process
        self.profile = profile
        self._root = psutil.Process(process.pid)

    @classmethod
    @contextlib.asynccontextmanager
    async def running(
        cls, name: str, module: str, args: Sequence[str], env: dict[str, str], *, profile: Path | None = None
    ) -> AsyncIterator[StackProcess]:
        """Start `python -m module args...` (under `bench.profiled --paused` with `profile`); stop it on exit.

        Args:
            name: the side's name.
            module: the module to run.
            args: its arguments.
            env: its whole environment.
            profile: where to write a profile taken between `start_profile` and `stop_profile`.
        """
        command = ["-m", module, *args]
        if profile is not None:
            command = ["-m", "bench.profiled", "--paused", str(profile), *command]
        process = await asyncio.create_subprocess_exec(
            sys.executable, *command, env=env, cwd=REPO_ROOT, stdin=asyncio.subprocess.DEVNULL
        )
        try:
            yield cls(name, process, profile)
        finally:
            await _stop(process)

    def check_alive(self) -> None:
        """Raise if the child has exited.

        Raises:
            RuntimeError: it has, with its status.
        """
        if self.process.returncode is not None:
            raise RuntimeError(f"{self.name}: the process exited with status {self.process.returncode}")

    def terminate(self) -> None:
        """Send SIGTERM, if it still runs, without waiting (leaving `running` waits for the exit)."""
        if self.process.returncode is None:
            self.process.terminate()

    def processes(self) -> list[psutil.Process]:
        """The child and its live descendants."""
        with contextlib.suppress(psutil.NoSuchProcess):
            return [self._root, *self._root.children(recursive=True)]
        return []

    def cpu_s(self) -> float:
        """User + system CPU seconds so far of the child and its live descendants."""
        total = 0.0
        for process in self.processes():
            with contextlib.suppress(psutil.NoSuchProcess):
                times = process.cpu_times()
                total += times.user + times.system
        return total

    async def start_profile(self) -> None:
        """Start the child's profiler (SIGUSR1) and wait until it runs.

        Raises:
            RuntimeError: the child was not started with a profile path.
            TimeoutError: the profiler did not say it runs within `START_WAIT_S`.
        """
        out = self._profile_path()
        out.unlink(missing_ok=True)
        self.process.send_signal(signal.SIGUSR1)
        await wait_for(_exists(enabled_marker(out)), f"{self.name}: the profiler had not started", START_WAIT_S)

    async def stop_profile(self) -> Path:
        """Stop the child's profiler (SIGUSR2) and return the file it wrote (pstats format).

        Raises:
            RuntimeError: the child was not started with a profile path.
            TimeoutError: no profile was written within `START_WAIT_S`.
        """
        out = self._profile_path()
        self.process.send_signal(signal.SIGUSR2)
        await wait_for(_exists(out), f"{self.name}: no profile was written", START_WAIT_S)
        return out

    def _profile_path(self) -> Path:
        if self.profile is None:
            raise RuntimeError(f"{self.name}: not started with a profile")
        return self.profile


def _exists(path: Path) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return os.path.exists(path)  # noqa: ASYNC240 - one stat of a local file

    return check


async def _stop(process: asyncio.subprocess.Process) -> None:
    """SIGTERM, then SIGKILL if it has not exited within `STOP_WAIT_S`."""
    if process.returncode is None:
        process.terminate()
    try:
        await asyncio.wait_for(process.wait(), STOP_WAIT_S)
    except TimeoutError:
        process.kill()
        await process.wait()
