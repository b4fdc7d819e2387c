"""Click acks: pending cards in many conversations, Approve clicks sent from another process.

The bot is either this process's `BotServer` (`InProcessBot`) or `countersign run --workers N`
in child processes (`bench.common.workers`), as production runs it; the clicks come from
`bench.click_sender` in a child process either way. A phase of `bench.turns` (`click_runs`, then
`click_lines` for its report).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import asyncpg

from adapters.slack import blocks
from bench.common.harness import (
    BOT_USER,
    CLICK_CHANNEL,
    REPO_ROOT,
    TOOL_ANSWER,
    WAIT_S,
    Series,
    Stage,
    is_card_in,
    is_post_in,
    percentile,
    running_bot,
    settle,
)
from bench.common.report import table
from bench.common.workers import WORKER_POOL, CountersignWorkers, countersign_workers
from bot.settings import DatabaseSettings, Settings
from countersign.server import BotServer
from tests.e2e.conftest import ALICE, SIGNING_SECRET, TEAM
from tests.standins.slack_api import SlackApiStandIn
from tests.standins.slack_events import SlackEventSender


@dataclass(frozen=True)
class Ack:
    """One click's HTTP ack as the sender saw it.

    Attributes:
        ms: connection opened -> response read, in ms (`bench.click_sender`).
        worker: the `X-Countersign-Worker` that answered ("" for a lone process).
    """

    ms: float
    worker: str


@dataclass(frozen=True)
class Card:
    """A pending approval card: where it is and what Approve sends."""

    thread_ts: str
    ts: str
    approval_id: str


class ClickTarget(Protocol):
    """The bot the clicks go to, wherever it runs."""

    @property
    def port(self) -> int:
        """Where its Slack events and interactions are posted (loopback)."""
        ...

    async def settle(self) -> None:
        """Wait until its background work (turns, resumes, card updates) is done."""
        ...

    def stuck(self) -> list[str]:
        """Lines saying where a stalled burst's work waits, for the report."""
        ...


@dataclass(frozen=True)
class InProcessBot:
    """The bot in this process (`BotServer`): pool state and stuck tasks can be read directly."""

    server: BotServer

    @property
    def port(self) -> int:
        """The bot's HTTP port."""
        return self.server.port

    async def settle(self) -> None:
        """Wait until the bot's task group is empty."""
        await settle(self.server)

    def stuck(self) -> list[str]:
        """The asyncpg pool's state and the tasks waiting for one of its connections."""
        assert self.server.runtime is not None
        pool = self.server.runtime.database.pool
        return [f"asyncpg pool: {pool.get_size()} connections, {pool.get_idle_size()} idle", *stuck_tasks()]


@dataclass(frozen=True)
class WorkerBots:
    """`countersign run --workers N` in child processes: seen only through HTTP."""

    side: CountersignWorkers

    @property
    def port(self) -> int:
        """The port the workers share."""
        return self.side.port

    async def settle(self) -> None:
        """Wait until no worker runs a turn (their `/metrics` gauges)."""
        await self.side.settle()

    def stuck(self) -> list[str]:
        """The workers' tasks cannot be read from here; their log (stderr) says more."""
        return [f"{self.side.name}: answers missing; see the workers' log above"]


def find_card(slack: SlackApiStandIn, channel: str, thread_ts: str) -> Card:
    """The card posted in a thread, read from the stand-in's stored messages."""
    for message in slack.messages(channel, thread_ts=thread_ts):
        for block in message.get("blocks") or []:
            if block.get("type") != "actions":
                continue
            for element in block.get("elements", []):
                if element.get("action_id") == blocks.ACTION_APPROVE:
                    return Card(thread_ts, message["ts"], element["value"])
    raise RuntimeError(f"no card in thread {thread_ts}")


async def open_cards(stage: Stage, bot: ClickTarget, events: SlackEventSender, count: int, batch: int) -> list[Card]:
    """Start `count` conversations, `batch` at a time, each asking for a gated POST.

    Setup, not measured; batches of about half the pool keep the setup from queueing on it.
    (Advisory locks have their own pool, `bot.storage.locks`, so a burst of `pool_max_size`
    conversations or more no longer stalls the bot; a burst that did would be reported.)
    """
    threads = [stage.clock.next() for _ in range(count)]
    for start in range(0, count, batch):
        chunk = threads[start : start + batch]
        cards = [stage.slack.expect(is_card_in(ts)) for ts in chunk]
        for n, ts in enumerate(chunk, start):
            stage.slack.add_message(CLICK_CHANNEL, user=ALICE, text=f"post w{n}", ts=ts)
        deliveries = await asyncio.gather(
            *(
                events.app_mention(CLICK_CHANNEL, ALICE, f"<@{BOT_USER}> post w{n}", ts=ts)
                for n, ts in enumerate(chunk, start)
            )
        )
        if any(d.status != 200 for d in deliveries):
            raise RuntimeError("a mention was not acknowledged with HTTP 200")
        await asyncio.wait_for(asyncio.gather(*cards), WAIT_S)
        await bot.settle()
    return [find_card(stage.slack, CLICK_CHANNEL, ts) for ts in threads]


class ClickSender:
    """`bench.click_sender` in a child process: Approve clicks sent from outside this loop.

    Slack's servers are not in the bot's process; a sender in the bot's event loop would
    compete with it for the loop and make a burst's acks look slower than the bot makes them.
    """

    def __init__(self, process: asyncio.subprocess.Process, slack: SlackApiStandIn) -> None:
        self._process = process
        self._slack = slack

    @classmethod
    @contextlib.asynccontextmanager
    async def start(cls, bot: ClickTarget, slack: SlackApiStandIn) -> AsyncIterator[ClickSender]:
        """Start the child for `bot` and wait until it is ready; stop it on exit."""
        url = f"http://127.0.0.1:{bot.port}/slack/events"
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bench.click_sender",
            url,
            SIGNING_SECRET,
            TEAM,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            cwd=REPO_ROOT,
        )
        try:
            assert process.stdout is not None
            ready = await asyncio.wait_for(process.stdout.readline(), WAIT_S)
            if not ready.strip():
                raise RuntimeError("the click sender did not start")
            yield cls(process, slack)
        finally:
            if process.stdin is not None and not process.stdin.is_closing():
                process.stdin.write(b"\n")
                process.stdin.close()
            try:
                await asyncio.wait_for(process.wait(), 5)
            except TimeoutError:
                process.kill()
                await process.wait()

    async def approve(self, cards: Sequence[Card]) -> list[Ack]:
        """Send Approve on every card at once; return each click's ack, in the cards' order.

        Raises:
            RuntimeError: the sender could not deliver the burst (its `error`), or a click was
                not answered with HTTP 200.
        """
        jobs = [
            {
                "user": ALICE,
                "channel": CLICK_CHANNEL,
                "ts": card.ts,
                "thread_ts": card.thread_ts,
                "action_id": blocks.ACTION_APPROVE,
                "value": card.approval_id,
                "trigger_id": self._slack.new_trigger_id(),
            }
            for card in cards
        ]
        assert self._process.stdin is not None
        assert self._process.stdout is not None
        self._process.stdin.write(json.dumps(jobs).encode() + b"\n")
        await self._process.stdin.drain()
        answer = json.loads(await asyncio.wait_for(self._process.stdout.readline(), WAIT_S))
        if "error" in answer:
            raise RuntimeError(f"the click sender failed: {answer['error']}")
        if any(status != 200 for status in answer["status"]):
            raise RuntimeError(f"clicks got HTTP {sorted(set(answer['status']))}")
        return [Ack(float(ms), worker) for ms, worker in zip(answer["ack_ms"], answer["worker"], strict=True)]


@dataclass
class ClickRound:
    """One burst: its acks, when the last came back, and how many answers followed, how fast.

    Attributes:
        last_ack_ms: burst sent -> its last ack read, in ms.
        answered: answers posted (the resumed turns' replies).
        answered_ms: burst sent -> the last answer, in ms (the stall timeout when stalled).
        acks: the burst's acks.
        stuck: where the bot's tasks waited, when the burst stalled.
    """

    last_ack_ms: float
    answered: int
    answered_ms: float
    acks: list[Ack] = field(default_factory=list)
    stuck: list[str] = field(default_factory=list)

    def by_worker(self) -> dict[str, list[float]]:
        """Ack latencies (ms) by the worker that answered, workers in name order."""
        split: dict[str, list[float]] = {}
        for ack in sorted(self.acks, key=lambda a: a.worker):
            split.setdefault(ack.worker, []).append(ack.ms)
        return split


@dataclass
class ClickRun:
    """Click figures for one bot configuration.

    Attributes:
        label: the configuration in the series names and the burst lines, e.g. "pool 10,
            default" or "2 workers, pool 10 each".
        pool_size: the asyncpg pool size of each bot process.
    """

    label: str
    pool_size: int
    conversations: int
    sequential: Series
    concurrent: Series
    rounds: list[ClickRound] = field(default_factory=list)


async def sequential_clicks(
    stage: Stage,
    bot: ClickTarget,
    events: SlackEventSender,
    clicks: ClickSender,
    series: Series,
    count: int,
) -> None:
    """Baseline: one card, one click, wait for the answer; `count` times."""
    for _ in range(count):
        [card] = await open_cards(stage, bot, events, 1, 1)
        answered = stage.slack.expect(is_post_in(card.thread_ts, TOOL_ANSWER))
        series.samples_ms.extend(ack.ms for ack in await clicks.approve([card]))
        await asyncio.wait_for(answered, WAIT_S)
        await bot.settle()


def await_chain(task: asyncio.Task[Any]) -> list[str]:
    """`file:function` of each coroutine a task is suspended in, outermost first."""
    chain: list[str] = []
    coro: Any = task.get_coro()
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "ag_frame", None)
        if frame is not None:
            chain.append(f"{Path(frame.f_code.co_filename).name}:{frame.f_code.co_name}")
        coro = getattr(coro, "cr_await", None) or getattr(coro, "ag_await", None)
    return chain


def stuck_tasks() -> list[str]:
    """The bot's tasks waiting for an asyncpg pool connection, grouped by where they wait."""
    counts: dict[str, int] = {}
    for task in asyncio.all_tasks():
        chain = await_chain(task)
        if not any(step.startswith("pool.py:_acquire") for step in chain):
            continue
        ours = [s for s in chain if not s.startswith(("pool.py", "queues.py", "tasks.py"))]
        where = " > ".join(ours[-3:])
        counts[where] = counts.get(where, 0) + 1
    return [f"{n:>3} waiting for a pool connection in {where}" for where, n in counts.items()]


async def concurrent_clicks(
    stage: Stage,
    bot: ClickTarget,
    events: SlackEventSender,
    clicks: ClickSender,
    run: ClickRun,
    stall_s: float,
) -> ClickRound:
    """One burst: `conversations` pending cards, every Approve sent at once."""
    batch = max(1, min(run.pool_size // 2, run.conversations))
    cards = await open_cards(stage, bot, events, run.conversations, batch)
    answers = [stage.slack.expect(is_post_in(c.thread_ts, TOOL_ANSWER)) for c in cards]
    started = time.perf_counter()
    acks = await clicks.approve(cards)
    last_ack = time.perf_counter()
    run.concurrent.samples_ms.extend(ack.ms for ack in acks)
    done, pending = await asyncio.wait(answers, timeout=stall_s)
    if pending:
        # Stop waiting, and say where the bot's tasks are stuck.
        for future in pending:
            future.cancel()
        return ClickRound((last_ack - started) * 1000, len(done), stall_s * 1000, acks, stuck=bot.stuck())
    answered = max(future.result() for future in done)
    await bot.settle()
    return ClickRound((last_ack - started) * 1000, len(done), (answered - started) * 1000, acks)


def with_pool(settings: Settings, pool_size: int) -> Settings:
    """`settings` with another asyncpg/psycopg pool size and a short shutdown grace."""
    database = settings.database.model_copy(update={"pool_max_size": pool_size})
    server = settings.server.model_copy(update={"shutdown_grace_s": 1.0})
    return settings.model_copy(update={"database": database, "server": server})


async def measure_clicks(
    stage: Stage,
    bot: ClickTarget,
    events: SlackEventSender,
    run: ClickRun,
    *,
    rounds: int,
    sequential: int,
    stall_s: float,
) -> ClickRun:
    """Fill `run`: a warm-up, `sequential` clicks one at a time, then up to `rounds` bursts.

    A burst whose answers do not all arrive within `stall_s` seconds ends the run for this
    configuration (no further bursts), with what `bot.stuck()` says.
    """
    async with ClickSender.start(bot, stage.slack) as clicks:
        await sequential_clicks(stage, bot, events, clicks, Series("warm-up"), 3)
        await sequential_clicks(stage, bot, events, clicks, run.sequential, sequential)
        for _ in range(rounds):
            outcome = await concurrent_clicks(stage, bot, events, clicks, run, stall_s)
            run.rounds.append(outcome)
            if outcome.stuck or outcome.answered < run.conversations:
                break
    return run


def new_run(label: str, pool_size: int, conversations: int) -> ClickRun:
    """An empty `ClickRun` whose series are named after `label`."""
    return ClickRun(
        label=label,
        pool_size=pool_size,
        conversations=conversations,
        sequential=Series(f"click ack, one at a time ({label})"),
        concurrent=Series(f"click ack, {conversations} at once ({label})"),
    )


async def bench_clicks(
    stage: Stage,
    *,
    conversations: int,
    rounds: int,
    sequential: int,
    pool_size: int,
    stall_s: float,
    note: str = "",
) -> ClickRun:
    """Click acks against the bot in this process with an asyncpg pool of `pool_size`.

    `note` is appended to the pool size in the series names (", default"). See
    `measure_clicks` for the phases and `stall_s`.
    """
    run = new_run(f"pool {pool_size}{note}", pool_size, conversations)
    async with (
        stage.database() as url,
        running_bot(stage, url, lambda s: with_pool(s, pool_size)) as (server, events),
    ):
        bot = InProcessBot(server)
        return await measure_clicks(stage, bot, events, run, rounds=rounds, sequential=sequential, stall_s=stall_s)


async def bench_worker_clicks(
    stage: Stage, *, workers: int, conversations: int, rounds: int, sequential: int, stall_s: float
) -> ClickRun:
    """Click acks against `countersign run --workers N` in child processes (`bench.common.workers`).

    Each worker has the pool `bench.common.workers` gives it; the click sender's connections are
    spread over the workers by the kernel (`SO_REUSEPORT`). See `measure_clicks`.
    """
    async with countersign_workers(stage, workers) as side:
        label = f"run --workers {workers}"
        run = new_run(label, WORKER_POOL, conversations)
        return await measure_clicks(
            stage, WorkerBots(side), side.events, run, rounds=rounds, sequential=sequential, stall_s=stall_s
        )


BOT_POOLS = 3
"""Connection pools one bot opens, each up to `pool_max_size` (`bot.storage.database`)."""


async def max_connections(stage: Stage) -> int:
    """The server's `max_connections`."""
    connection = await asyncpg.connect(stage.server.admin_url)
    try:
        return int(await connection.fetchval("SHOW max_connections"))
    finally:
        await connection.close()


async def click_runs(stage: Stage, args: argparse.Namespace) -> list[ClickRun]:
    """Clicks with the bot's default pool, and with a pool big enough for the burst.

    With a burst larger than the default pool, the default pool gets one burst and the
    one-at-a-time baseline and further bursts use the big pool, to show what the pool size
    changes; then the same against `countersign run --workers N` for each `--click-workers`.
    """
    default_pool = int(DatabaseSettings.model_fields["pool_max_size"].default)
    # The bot opens three pools of `pool_max_size` (asyncpg, advisory locks, psycopg for the
    # savers); sized past the server's connection budget, a burst fails with "too many clients".
    big_pool = min(args.conversations + 2, 200, (await max_connections(stage) - 30) // BOT_POOLS)
    fits = args.conversations < default_pool or big_pool <= default_pool
    runs = [
        await bench_clicks(
            stage,
            conversations=args.conversations,
            rounds=args.rounds if fits else 1,
            sequential=args.sequential_clicks if fits else 0,
            pool_size=default_pool,
            stall_s=args.stall_timeout,
            note=", default",
        )
    ]
    if not fits:
        runs.append(
            await bench_clicks(
                stage,
                conversations=args.conversations,
                rounds=args.rounds,
                sequential=args.sequential_clicks,
                pool_size=big_pool,
                stall_s=args.stall_timeout,
            )
        )
    for workers in args.click_workers:
        runs.append(
            await bench_worker_clicks(
                stage,
                workers=workers,
                conversations=args.conversations,
                rounds=args.rounds,
                sequential=args.sequential_clicks,
                stall_s=args.stall_timeout,
            )
        )
    return runs


def click_lines(runs: Sequence[ClickRun]) -> list[str]:
    """The click table, then what each burst led to (throughput context or a stall)."""
    rows = [series for run in runs for series in (run.sequential, run.concurrent) if series.count]
    lines = table("Click acks: connection opened -> HTTP response read, at the sender", rows, (50, 95, 99))
    lines.append("  (Each click is built and signed before its burst and sent on a connection of its own;")
    lines.append("   Bolt answers when the listener returns, right after its ack(); a burst's first acks")
    lines.append("   come back after its connections are opened and accepted: docs/decisions/0028.)")
    for run in runs:
        for n, burst in enumerate(run.rounds, 1):
            ms = [ack.ms for ack in burst.acks]
            head = f"  {run.label}, burst {n}: p99 {percentile(ms, 99):.0f} ms"
            split = burst.by_worker()
            if len(split) > 1:
                head += (
                    " ("
                    + ", ".join(f"worker {w}: {len(v)} acks, p99 {percentile(v, 99):.0f}" for w, v in split.items())
                    + ")"
                )
            head += f"; last ack after {burst.last_ack_ms:.0f} ms; "
            if burst.answered == run.conversations:
                rate = run.conversations / (burst.answered_ms / 1000)
                lines.append(f"{head}all answers posted after {burst.answered_ms:.0f} ms ({rate:.0f} resumed turns/s)")
                continue
            lines.append(
                f"{head}STALLED: {burst.answered}/{run.conversations} answers after "
                f"{burst.answered_ms / 1000:.0f} s; no further bursts with this configuration"
            )
            lines += [f"    {line}" for line in burst.stuck]
    return lines
