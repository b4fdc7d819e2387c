"""The "Countersign with N workers" column of `bench.throughput`: `countersign run --workers N`.

The bot runs as it would in production, a supervisor and N worker processes started with
`python -m countersign.cli run --workers N`, on the side's database and against this process's
stand-ins (Slack, Gemini, the HTTP target) over loopback; messages are signed Slack events posted
to the shared port over the sender's pool of kept-alive connections (one per conversation under
way), which the kernel spreads over the workers (`SO_REUSEPORT`).

CPU is this process's plus the supervisor's and the workers' (psutil). The side is idle when
every worker's `countersign_turns_running` gauge (`GET /metrics`, summed across the workers) has
read 0 twice in a row. The workers' upkeep prunes old checkpoints every 10 s on its own; the
bench cannot run that pass for them as it does for the in-process bot, so pruning that falls into
another side's block is charged to neither (a small under-count for this side). `--profile`
sees this process only: for this side, the stand-ins and the event sender, not the workers.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import AsyncIterator

import httpx
import psutil

from bench.context import Conversation, send_as_slack, thread_ref
from bench.harness import BOT_USER, GEMINI_KEY, WAIT_S, Stage
from bench.meter import PgMeter
from tests.e2e.conftest import BOT_TOKEN, SIGNING_SECRET, TEAM
from tests.standins.slack_events import SlackEventSender
from tests.support.bot_process import base_env, free_port

IDLE_POLL_S = 0.05
WORKER_POOL = 10
"""`DATABASE_POOL_SIZE` of each worker: the bot's default."""


class CountersignWorkers:
    """`countersign run --workers N` in child processes; open it with `countersign_workers`.

    Args:
        name: the column's name.
        stage: the stand-ins and the ts clock.
        meter: the meter on the side's database.
        port: where the workers listen.
        supervisor: the supervisor process.
        events: the event sender; its pool keeps a connection per concurrent conversation,
            and the kernel spreads those connections over the workers.
    """

    def __init__(
        self,
        name: str,
        stage: Stage,
        meter: PgMeter,
        port: int,
        supervisor: psutil.Process,
        events: SlackEventSender,
    ) -> None:
        self.name = name
        self.meter = meter
        self.port = port
        self.events = events
        self._stage = stage
        self._supervisor = supervisor
        self._metrics = httpx.AsyncClient(timeout=WAIT_S)

    async def open_conversation(self) -> Conversation:
        """A new Slack thread (its ts); the first message sent to it is an `app_mention`."""
        ts = self._stage.clock.next()
        return Conversation(thread_id=thread_ref(ts).thread_id, ts=ts)

    async def send(self, conversation: Conversation, text: str, answer: str) -> float:
        """Signed event posted to the shared port -> the answer's `chat.postMessage` recorded."""
        return await send_as_slack(self.events, self._stage, conversation, text, answer, self.name)

    async def idle(self) -> None:
        """Wait until no worker runs a turn (two readings of 0 in a row)."""
        zeros = 0
        deadline = time.monotonic() + WAIT_S
        while zeros < 2:
            zeros = zeros + 1 if await self._turns_running() == 0 else 0
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name}: turns still running after {WAIT_S} s")
            await asyncio.sleep(IDLE_POLL_S)

    def cpu_s(self) -> float:
        """CPU seconds of this process, the supervisor and its workers."""
        total = time.process_time()
        for process in [self._supervisor, *self._supervisor.children(recursive=True)]:
            with contextlib.suppress(psutil.NoSuchProcess):
                times = process.cpu_times()
                total += times.user + times.system
        return total

    async def aclose(self) -> None:
        """Close the metrics client."""
        await self._metrics.aclose()

    async def _turns_running(self) -> float:
        text = (await self._metrics.get(f"http://127.0.0.1:{self.port}/metrics")).text
        return sum(
            float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith("countersign_turns_running")
        )


def _env(stage: Stage, url: str, port: int, workers: int) -> dict[str, str]:
    """`bench.harness.Stage.settings` as environment variables (the end-to-end tests' settings)."""
    return base_env(
        DATABASE_URL=url,
        DATABASE_POOL_SIZE=str(WORKER_POOL),
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
        COUNTERSIGN_WORKERS=str(workers),
    )


@contextlib.asynccontextmanager
async def countersign_workers(stage: Stage, workers: int) -> AsyncIterator[CountersignWorkers]:
    """Start the supervisor with `workers` workers on a fresh database; stop it (SIGTERM) on exit.

    Raises:
        RuntimeError: the bot exited or did not answer `/readyz` within `WAIT_S` seconds.
    """
    port = free_port()
    events = SlackEventSender(
        f"http://127.0.0.1:{port}/slack/events", SIGNING_SECRET, team_id=TEAM, bot_user_id=BOT_USER
    )
    async with stage.database() as url, PgMeter.open(url) as meter, events:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "countersign.cli", "run", env=_env(stage, url, port, workers)
        )
        name = f"Countersign, {workers} workers"
        side = CountersignWorkers(name, stage, meter, port, psutil.Process(process.pid), events)
        try:
            await _wait_ready(port, process, workers)
            yield side
        finally:
            await side.aclose()
            if process.returncode is None:
                process.terminate()
            await process.wait()


async def _wait_ready(port: int, process: asyncio.subprocess.Process, workers: int) -> None:
    """Until `/readyz` has answered 200 from every worker (by `X-Countersign-Worker`)."""
    seen: set[str] = set()
    deadline = time.monotonic() + WAIT_S
    while len(seen) < workers:
        if process.returncode is not None:
            raise RuntimeError(f"countersign run --workers {workers} exited with status {process.returncode}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"only workers {sorted(seen)} of {workers} were ready after {WAIT_S} s")
        with contextlib.suppress(httpx.TransportError):
            async with httpx.AsyncClient(timeout=5) as client:
                response = await client.get(f"http://127.0.0.1:{port}/readyz")
            if response.status_code == 200:
                seen.add(response.headers.get("X-Countersign-Worker", "?"))
        await asyncio.sleep(0.05)
