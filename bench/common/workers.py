"""Countersign's columns of `bench.throughput` (and `bench.turns`' worker clicks): `countersign run` as a child.

The bot runs as it would in production, `python -m countersign.cli run` with `COUNTERSIGN_WORKERS`
set (`bench.common.stack_process`): with 1, one process serving Slack (no supervisor); with N > 1, a
supervisor and N worker processes sharing the port (`SO_REUSEPORT`). It runs on the side's
database and against the benchmark's stand-ins (Slack, Gemini, the HTTP target) over loopback;
messages are signed Slack events posted to the port over the sender's pool of kept-alive
connections (one per conversation under way), which the kernel spreads over the workers. A
message is done when the Slack stand-in records its answer's `chat.postMessage`.

CPU (`cpu_s`) is the child's and its descendants' (psutil): the stack alone. The benchmark's own
process (stand-ins, sender) is measured by the caller, PostgreSQL by the side's `PgMeter`.

When the side's work is done:
- `settle`: no turn runs, i.e. the `countersign_turns_running` gauge (`GET /metrics`, summed
  across the workers by prometheus-client's multiprocess mode) has read 0 twice in a row;
- `idle`: settled, and then, unless the side was opened with `wait_pruning=False`, no
  conversation is left due for checkpoint pruning. The bot's upkeep prunes every conversation
  that ran, in passes every `bot.upkeep.unfinished_work.INTERVAL_S` (10) seconds of at most
  `bot.upkeep.retention.PRUNE_BATCH` conversations; the benchmark cannot run that pass for a child
  process, so it waits for it (up to a pass interval or two after a block): the pruning of a
  block's conversations is work the bot does for them, and must not fall into the next block,
  another side's.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncIterator
from pathlib import Path

import httpx

from bench.common.harness import BOT_USER, WAIT_S, Conversation, Stage
from bench.common.meter import PgMeter
from bench.common.slack_path import send_as_slack, thread_ref
from bench.common.stack_process import POOL_SIZE, START_WAIT_S, StackProcess, child_env, wait_for
from bot.upkeep.retention import PRUNE_BATCH
from bot.upkeep.unfinished_work import INTERVAL_S
from tests.e2e.conftest import SIGNING_SECRET, TEAM
from tests.standins.slack_events import SlackEventSender
from tests.support.bot_process import free_port

PRUNE_POLL_S = 0.25
"""Seconds between two looks at the pruning backlog (the upkeep's passes are 10 s apart)."""
WORKER_POOL = POOL_SIZE
"""`DATABASE_POOL_SIZE` of each worker: the bot's default."""

_PRUNE_DUE_SQL = """
SELECT count(*) FROM conversations c
WHERE c.prune_due AND c.running_since IS NULL
  AND NOT EXISTS (SELECT 1 FROM reviews r WHERE r.thread_id = c.thread_id AND r.status = 'resuming')
"""
"""Conversations the upkeep's next pass would prune (`RetentionStore.due_for_pruning`'s condition)."""


class CountersignWorkers:
    """`countersign run` in child processes; open it with `countersign_workers`.

    Args:
        name: the column's name.
        stage: the stand-ins and the ts clock.
        meter: the meter on the side's database.
        port: where the bot listens.
        stack: the child process (the supervisor, with several workers).
        events: the event sender; its pool keeps a connection per concurrent conversation,
            and the kernel spreads those connections over the workers.
        wait_pruning: whether `idle` waits for the upkeep to prune what ran.
    """

    def __init__(
        self,
        name: str,
        stage: Stage,
        meter: PgMeter,
        port: int,
        stack: StackProcess,
        events: SlackEventSender,
        *,
        wait_pruning: bool = True,
    ) -> None:
        self.name = name
        self.meter = meter
        self.port = port
        self.stack = stack
        self.events = events
        self._stage = stage
        self._wait_pruning = wait_pruning
        self._metrics = httpx.AsyncClient(timeout=WAIT_S)

    async def open_conversation(self) -> Conversation:
        """A new Slack thread (its ts); the first message sent to it is an `app_mention`."""
        ts = self._stage.clock.next()
        return Conversation(thread_id=thread_ref(ts).thread_id, ts=ts)

    async def send(self, conversation: Conversation, text: str, answer: str) -> float:
        """Signed event posted to the bot's port -> the answer's `chat.postMessage` recorded; the ms in between."""
        return await send_as_slack(self.events, self._stage, conversation, text, answer, self.name)

    async def settle(self) -> None:
        """Wait until no worker runs a turn (two readings of 0 in a row).

        Raises:
            TimeoutError: turns still ran after `WAIT_S` seconds.
        """
        zeros = 0

        async def two_zeros() -> bool:
            nonlocal zeros
            self.stack.check_alive()
            zeros = zeros + 1 if await self._turns_running() == 0 else 0
            return zeros >= 2

        await wait_for(two_zeros, f"{self.name}: turns still running", WAIT_S)

    async def idle(self) -> None:
        """`settle`, then (with `wait_pruning`) wait until the upkeep has pruned every conversation that ran.

        Raises:
            TimeoutError: turns still ran after `WAIT_S` seconds, or conversations were still due
                for pruning after the upkeep passes they need plus `WAIT_S`.
        """
        await self.settle()
        if not self._wait_pruning:
            return
        due = await self._prune_due()
        if not due:
            return
        passes = math.ceil(due / PRUNE_BATCH) + 1

        async def pruned() -> bool:
            self.stack.check_alive()
            return await self._prune_due() == 0

        what = f"{self.name}: conversations still due for pruning"
        await wait_for(pruned, what, passes * INTERVAL_S + WAIT_S, poll_s=PRUNE_POLL_S)

    def cpu_s(self) -> float:
        """CPU seconds so far of the bot's processes (the supervisor and its workers, or the one process)."""
        return self.stack.cpu_s()

    async def aclose(self) -> None:
        """Close the metrics client."""
        await self._metrics.aclose()

    async def _turns_running(self) -> float:
        text = (await self._metrics.get(f"http://127.0.0.1:{self.port}/metrics")).text
        return sum(
            float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith("countersign_turns_running")
        )

    async def _prune_due(self) -> int:
        return int(await self.meter.fetchval(_PRUNE_DUE_SQL))


def side_name(workers: int) -> str:
    """The column's name: "Countersign" for one process, "Countersign, N workers" for more."""
    return "Countersign" if workers == 1 else f"Countersign, {workers} workers"


@contextlib.asynccontextmanager
async def countersign_workers(
    stage: Stage, workers: int, *, profile: Path | None = None, wait_pruning: bool = True
) -> AsyncIterator[CountersignWorkers]:
    """Start `countersign run` with `COUNTERSIGN_WORKERS=workers` on a fresh database; stop it (SIGTERM) on exit.

    Args:
        stage: the stand-ins.
        workers: 1 for one process (no supervisor), more for a supervisor and its workers.
        profile: run the process under `bench.profiled --paused`, writing its profile there (one
            process only: a supervisor's workers are not profiled).
        wait_pruning: see `CountersignWorkers`.

    Raises:
        RuntimeError: the bot exited before it was ready.
        TimeoutError: not every worker answered `/readyz` within `START_WAIT_S` seconds.
    """
    port = free_port()
    events = SlackEventSender(
        f"http://127.0.0.1:{port}/slack/events", SIGNING_SECRET, team_id=TEAM, bot_user_id=BOT_USER
    )
    name = side_name(workers)
    async with stage.database() as url, PgMeter.open(url) as meter, events:
        env = child_env(stage, url, port, COUNTERSIGN_WORKERS=str(workers))
        async with StackProcess.running(name, "countersign.cli", ["run"], env, profile=profile) as stack:
            side = CountersignWorkers(name, stage, meter, port, stack, events, wait_pruning=wait_pruning)
            try:
                await _wait_ready(side, workers)
                yield side
            finally:
                await side.aclose()


async def _wait_ready(side: CountersignWorkers, workers: int) -> None:
    """Until `/readyz` has answered 200 from every worker (by `X-Countersign-Worker`; one process sends none)."""
    seen: set[str] = set()

    async def all_ready() -> bool:
        side.stack.check_alive()
        with contextlib.suppress(httpx.TransportError):
            async with httpx.AsyncClient(timeout=5) as client:
                response = await client.get(f"http://127.0.0.1:{side.port}/readyz")
            if response.status_code == 200:
                seen.add(response.headers.get("X-Countersign-Worker", "?"))
        return len(seen) >= workers

    await wait_for(all_ready, f"{side.name}: not all {workers} worker(s) answered /readyz", START_WAIT_S)
