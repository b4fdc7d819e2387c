"""Throughput: messages per second through the bare stack and through Countersign, side by side.

Run it with::

    uv run --frozen python -m bench.throughput [--conversations 200] [--messages 3] [--concurrency 50]
        [--blocks 2] [--warmup 50] [--tool-every 5] [--profile [CONVERSATIONS]]

It prints figures; nothing here asserts a time (issue 10 item 3, issue 11 item 3). Each side is
a column of the report, opened on a fresh database cloned from the migrated template on the same
PostgreSQL server, with the same model client (`build_chat_model` + `call_options`:
langchain-google-genai over HTTP to the local Gemini stand-in, which answers at once), the same
tools and the same messages:

- **bare stack**, the reference: the seeds' ReAct graph on one `AsyncPostgresSaver` over a
  psycopg pool of 10 (`bench.context.bare_side`); a message is one `ainvoke` on the
  conversation's thread id, done when it returns.
- **Countersign**: the real bot in this process, as `bench.turns` and `bench.context` run it
  (`BotServer`, Bolt over HTTP, the Slack stand-in, the bot's own pools, savers and graphs). A
  conversation starts with a signed `app_mention` (it opens the thread) and goes on with thread
  replies (`message` events); a message is done when the Slack stand-in records its answer's
  `chat.postMessage`.

A block runs `--conversations` conversations of `--messages` messages each, `--concurrency`
conversations at once, each conversation's messages in order (the next one is sent when the
answer to the previous one is in). Every `--tool-every`-th message of the block is `get` (one
ungated tool round: `http_request` GET to a local target, then the answer); the others are
`hello <n>`, answered in text, as the end-to-end tests' Gemini script does. After one warm-up
block per side (not reported), the sides run `--blocks` blocks each, the order rotating from one
block to the next (a b, b a, ...), so load drift hits them alike.

Per block and side:
- msg/s: messages / wall time from the block's first message sent to its last answer in;
- latency per message (ms): message sent (signed event posted / `ainvoke` called) to answer in;
  under load this includes queueing for the event loop, pool connections and locks;
- CPU per message (ms): this process (`time.process_time`) and PostgreSQL's processes for the
  side's database and the server's own (`bench.meter`), from the block's start until the side
  is idle again. For Countersign that includes its background tasks after the last answer and
  the pruning of the block's checkpoints that its upkeep loop had not done yet (done then, so
  that it does not spill into the next block, another side's); the report says how much of
  the CPU came after the last answer, outside the wall time msg/s is taken over.
  "This process" holds the stand-ins and the event sender too, on every side: their (small)
  cost is part of the figures, as a network's would be.

With `--profile`, one extra block per side (not reported above, `--profile` conversations) runs
under cProfile counting CPU time, and the report adds own CPU ms per message by package, side by
side, and the top functions of every side but the reference.

- **Countersign, 2 workers**: `countersign run --workers 2` as child processes on the same
  stand-ins (`bench.workers`), each event on a new connection so the kernel spreads them over
  the workers; its CPU sums this process, the supervisor and the workers.

A side is a function opening it (`SIDES`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import gc
import pstats
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import Any, Protocol

from bench.context import BareSide, Conversation, SlackSide, bare_side
from bench.harness import (
    TEXT_PROMPT,
    TOOL_ANSWER,
    TOOL_PROMPT,
    Stage,
    open_stage,
    percentile,
    pg_version,
    report_main,
    running_bot,
)
from bench.meter import PgMeter
from bench.report import machine_lines, own_time_by_package, top_function_lines
from bench.workers import countersign_workers
from countersign.server import BotServer

TEXT_ANSWER_PREFIX = "You said: "
"""The Gemini stand-in's script answers a plain message with `You said: <message>`."""


# --- the sides -----------------------------------------------------------------------------


class ThroughputSide(Protocol):
    """One way of running conversations: a column of the report, measured like the others."""

    name: str
    meter: PgMeter
    """The meter on the side's database (PostgreSQL's CPU)."""

    async def open_conversation(self) -> Conversation:
        """A new, empty conversation (no message sent yet)."""

    async def send(self, conversation: Conversation, text: str, answer: str) -> float:
        """Send one message and wait for its answer; return the ms in between.

        Args:
            conversation: where; its earlier messages have been answered.
            text: the person's message.
            answer: how the answer must start (anything else is an error).
        """

    async def idle(self) -> None:
        """Wait until the side's work for the messages answered so far is done."""

    def cpu_s(self) -> float:
        """CPU seconds so far of the processes running this side (and the stand-ins)."""


class BareStack:
    """The seeds' graph in this process: `bench.context.BareSide`, one `ainvoke` per message."""

    name = "bare stack"

    def __init__(self, side: BareSide) -> None:
        self._side = side
        self.meter = side.meter

    async def open_conversation(self) -> Conversation:
        """A new thread id."""
        return await self._side.seed([])

    async def send(self, conversation: Conversation, text: str, answer: str) -> float:
        """`ainvoke` with the message, timed."""
        return await self._side.turn(conversation, text, answer)

    async def idle(self) -> None:
        """Nothing to wait for: `ainvoke` returns when all of the message's work is done."""

    def cpu_s(self) -> float:
        """This process's CPU seconds."""
        return time.process_time()


class CountersignInProcess:
    """The real bot in this process, Slack events in: `bench.context.SlackSide`."""

    name = "Countersign"

    def __init__(self, side: SlackSide, bot: BotServer) -> None:
        self._side = side
        self._bot = bot
        self.meter = side.meter

    async def open_conversation(self) -> Conversation:
        """A new Slack thread (its ts); the first message sent to it is an `app_mention`."""
        return await self._side.seed([])

    async def send(self, conversation: Conversation, text: str, answer: str) -> float:
        """Signed event sent -> the answer's `chat.postMessage` recorded by the stand-in."""
        return await self._side.send(conversation, text, answer)

    async def idle(self) -> None:
        """Wait for the bot's background tasks, then prune what its upkeep has not pruned yet.

        Pruning old checkpoints is work the bot does for every conversation that ran, in its
        upkeep loop every `bot.upkeep.INTERVAL_S` seconds. Left alone, the pruning of a block's
        last conversations would run during the next block, another side's, and be charged to it.
        """
        await self._side.idle()
        runtime = self._bot.runtime
        assert runtime is not None
        housekeeping = runtime.service.housekeeping
        if housekeeping is None:
            return
        # Nothing else runs now, so every due conversation's lock is free: each pass prunes
        # some, until none is due (or the rest failed, which the bot logs).
        while await housekeeping.prune_checkpoints():
            pass

    def cpu_s(self) -> float:
        """This process's CPU seconds (the bot, the stand-ins and the event sender)."""
        return time.process_time()


@contextlib.asynccontextmanager
async def bare_stack(stage: Stage) -> AsyncIterator[ThroughputSide]:
    """The reference column: the seeds' graph on one `AsyncPostgresSaver`, pool of 10."""
    async with bare_side(stage) as side:
        yield BareStack(side)


@contextlib.asynccontextmanager
async def countersign_one_process(stage: Stage) -> AsyncIterator[ThroughputSide]:
    """Countersign's whole Slack path, the bot in this process (its default settings)."""
    async with stage.database() as url, PgMeter.open(url) as meter, running_bot(stage, url) as (bot, events):
        yield CountersignInProcess(SlackSide(bot, events, stage, meter), bot)


def countersign_two_workers(stage: Stage) -> contextlib.AbstractAsyncContextManager[ThroughputSide]:
    """`countersign run --workers 2` in child processes (`bench.workers`)."""
    return countersign_workers(stage, 2)


SideFactory = Callable[[Stage], contextlib.AbstractAsyncContextManager[ThroughputSide]]

SIDES: tuple[SideFactory, ...] = (bare_stack, countersign_one_process, countersign_two_workers)
"""The report's columns, in order; the first is the reference every ratio is taken against."""


# --- the messages --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Message:
    """One message of the plan.

    Attributes:
        text: what the person says.
        answer: how the answer starts.
        tool: whether the answer takes one tool round.
    """

    text: str
    answer: str
    tool: bool


def plan(conversations: int, messages: int, tool_every: int) -> list[list[Message]]:
    """The block's messages, conversation by conversation: every `tool_every`-th one a tool round."""
    result: list[list[Message]] = []
    n = 0
    for _ in range(conversations):
        conversation = []
        for _ in range(messages):
            n += 1
            if tool_every and n % tool_every == 0:
                conversation.append(Message(TOOL_PROMPT, TOOL_ANSWER, tool=True))
            else:
                text = f"{TEXT_PROMPT} {n}"
                conversation.append(Message(text, TEXT_ANSWER_PREFIX + text, tool=False))
        result.append(conversation)
    return result


# --- running blocks ------------------------------------------------------------------------


@dataclass
class Block:
    """What one block of one side showed.

    Attributes:
        side: the side's name.
        number: the block's number (1-based; 0 for the warm-up).
        position: its place in the run's order (1-based, all sides' blocks together).
        wall_s: first message sent -> last answer in.
        text_ms: latencies of the text messages.
        tool_ms: latencies of the tool-round messages.
        process_cpu_s: CPU of the side's processes, until the side was idle again.
        server_cpu_s: PostgreSQL's CPU over the same time (None: not measurable from here).
        process_tail_s: the part of `process_cpu_s` after the last answer (outside `wall_s`).
        server_tail_s: the part of `server_cpu_s` after the last answer.
    """

    side: str
    number: int
    position: int
    wall_s: float
    text_ms: list[float] = field(default_factory=list)
    tool_ms: list[float] = field(default_factory=list)
    process_cpu_s: float = 0.0
    server_cpu_s: float | None = None
    process_tail_s: float = 0.0
    server_tail_s: float | None = None

    @property
    def messages(self) -> int:
        """Messages answered."""
        return len(self.text_ms) + len(self.tool_ms)

    @property
    def rate(self) -> float:
        """Messages per second."""
        return self.messages / self.wall_s

    @property
    def latencies_ms(self) -> list[float]:
        """Every message's latency."""
        return [*self.text_ms, *self.tool_ms]


async def run_block(
    side: ThroughputSide,
    messages: Sequence[Sequence[Message]],
    concurrency: int,
    number: int,
    position: int,
    profiler: cProfile.Profile | None = None,
) -> Block:
    """Run `messages` through `side`, `concurrency` conversations at once, and measure it.

    With `profiler`, profile from the first message sent until the side is idle again.
    """
    # Garbage of the previous block (or side) must not be collected on this one's time.
    gc.collect()
    mark = await side.meter.mark()
    if profiler is not None:
        profiler.enable()
    cpu_started = side.cpu_s()
    block = Block(side=side.name, number=number, position=position, wall_s=0.0)
    # One shared iterator: each runner takes the next conversation when its current one is done.
    pending = iter(messages)

    async def runner() -> None:
        for conversation_messages in pending:
            conversation = await side.open_conversation()
            for message in conversation_messages:
                latency_ms = await side.send(conversation, message.text, message.answer)
                (block.tool_ms if message.tool else block.text_ms).append(latency_ms)

    started = time.perf_counter()
    async with asyncio.TaskGroup() as group:
        for _ in range(min(concurrency, len(messages))):
            group.create_task(runner())
    block.wall_s = time.perf_counter() - started
    cpu_answered = side.cpu_s()
    answered = await side.meter.mark()
    await side.idle()
    cpu_idle = side.cpu_s()
    if profiler is not None:
        profiler.disable()
    block.process_cpu_s = cpu_idle - cpu_started
    block.process_tail_s = cpu_idle - cpu_answered
    block.server_cpu_s = await side.meter.cpu_since(mark)
    block.server_tail_s = await side.meter.cpu_since(answered)
    return block


@dataclass
class Results:
    """Every side's kept blocks, the warm-ups and, with `--profile`, a profile per side."""

    sides: list[str]
    blocks: list[Block] = field(default_factory=list)
    warmups: list[Block] = field(default_factory=list)
    profiles: dict[str, tuple[cProfile.Profile, int]] = field(default_factory=dict)

    def of(self, side: str) -> list[Block]:
        """The kept blocks of `side`, by number."""
        return sorted((b for b in self.blocks if b.side == side), key=lambda b: b.number)


async def bench_throughput(stage: Stage, args: argparse.Namespace, factories: Sequence[SideFactory] = SIDES) -> Results:
    """Open every side, warm each up, then run the blocks in rotating order (and profile if asked)."""
    messages = plan(args.conversations, args.messages, args.tool_every)
    async with contextlib.AsyncExitStack() as stack:
        sides = [await stack.enter_async_context(factory(stage)) for factory in factories]
        results = Results(sides=[side.name for side in sides])
        position = 0
        if args.warmup:
            warmup = plan(args.warmup, args.messages, args.tool_every)
            for side in sides:
                results.warmups.append(await run_block(side, warmup, args.concurrency, 0, 0))
        for number in range(1, args.blocks + 1):
            shift = (number - 1) % len(sides)
            for side in [*sides[shift:], *sides[:shift]]:
                position += 1
                results.blocks.append(await run_block(side, messages, args.concurrency, number, position))
        if args.profile:
            profiled = plan(args.profile, args.messages, args.tool_every)
            for side in sides:
                # CPU time, not wall time: time spent waiting in epoll would otherwise top the list.
                profiler = cProfile.Profile(time.process_time)
                block = await run_block(side, profiled, args.concurrency, 0, 0, profiler)
                results.profiles[side.name] = (profiler, block.messages)
        return results


# --- report --------------------------------------------------------------------------------


def _row(cells: Sequence[str], widths: Sequence[int]) -> str:
    first, *rest = cells
    return "  " + f"{first:<{widths[0]}}" + "".join(f"{c:>{w}}" for c, w in zip(rest, widths[1:], strict=True))


def _table(title: str, head: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(head[0]), *(len(r[0]) for r in rows)) + 2]
    widths += [max(len(head[i]), *(len(r[i]) for r in rows)) + 2 for i in range(1, len(head))]
    return [title, _row(head, widths), *(_row(r, widths) for r in rows)]


def _per_message_ms(seconds: float, blocks: Sequence[Block]) -> float:
    return 1000 * seconds / sum(b.messages for b in blocks)


def _server_cpu_ms(blocks: Sequence[Block], pick: Callable[[Block], float | None]) -> float | None:
    values = [pick(b) for b in blocks]
    if any(value is None for value in values):
        return None
    return _per_message_ms(sum(value or 0.0 for value in values), blocks)


@dataclass(frozen=True, slots=True)
class Summary:
    """One side's figures over its kept blocks."""

    rate: float
    p50: float
    p95: float
    process_cpu_ms: float
    server_cpu_ms: float | None
    tail_cpu_ms: float

    @classmethod
    def of(cls, blocks: Sequence[Block]) -> Summary:
        """Median msg/s over blocks; latency percentiles over all their messages; CPU per message."""
        latencies = [ms for b in blocks for ms in b.latencies_ms]
        return cls(
            rate=median(b.rate for b in blocks),
            p50=percentile(latencies, 50),
            p95=percentile(latencies, 95),
            process_cpu_ms=_per_message_ms(sum(b.process_cpu_s for b in blocks), blocks),
            server_cpu_ms=_server_cpu_ms(blocks, lambda b: b.server_cpu_s),
            tail_cpu_ms=_per_message_ms(sum(b.process_tail_s for b in blocks), blocks)
            + (_server_cpu_ms(blocks, lambda b: b.server_tail_s) or 0.0),
        )

    @property
    def cpu_ms(self) -> float:
        """Process + PostgreSQL CPU per message (process alone when the server is not measurable)."""
        return self.process_cpu_ms + (self.server_cpu_ms or 0.0)


def _process_in_wall(block: Block) -> float:
    return block.process_cpu_s - block.process_tail_s


def _server_in_wall(block: Block) -> float | None:
    if block.server_cpu_s is None or block.server_tail_s is None:
        return None
    return block.server_cpu_s - block.server_tail_s


def block_lines(results: Results) -> list[str]:
    """msg/s per block and side (run order in brackets), and each side's ratio to the reference."""
    reference, *others = results.sides
    head = ["block", *(f"{side} msg/s" for side in results.sides), *(f"{o} / {reference}" for o in others)]
    by_number = _blocks_by_number(results)
    rows = []
    for number, by_side in by_number.items():
        cells = [f"{by_side[s].rate:.1f} (#{by_side[s].position})" for s in results.sides]
        ratios = [f"{by_side[o].rate / by_side[reference].rate:.2f}x" for o in others]
        rows.append([str(number), *cells, *ratios])
    for name, pick in (("median", median), ("min", min), ("max", max)):
        cells = [f"{pick(b.rate for b in results.of(s)):.1f}" for s in results.sides]
        ratios = [f"{pick(by[o].rate / by[reference].rate for by in by_number.values()):.2f}x" for o in others]
        rows.append([name, *cells, *ratios])
    lines = _table("Messages per second, per block (#n = place in the run's order)", head, rows)
    if results.warmups:
        warm = ", ".join(f"{b.side} {b.rate:.1f}" for b in results.warmups)
        lines.append(f"  (warm-up blocks, not counted: {warm} msg/s)")
    return lines


def _blocks_by_number(results: Results) -> dict[int, dict[str, Block]]:
    by_number: dict[int, dict[str, Block]] = {}
    for block in sorted(results.blocks, key=lambda b: b.number):
        by_number.setdefault(block.number, {})[block.side] = block
    return by_number


def summary_lines(results: Results) -> list[str]:
    """The side-by-side table: throughput, latency and CPU per message, ratio to the reference."""
    summaries = {side: Summary.of(results.of(side)) for side in results.sides}
    reference = summaries[results.sides[0]]

    def row(label: str, value: Callable[[str, Summary], str]) -> list[str]:
        return [label, *(value(side, summaries[side]) for side in results.sides)]

    def ms(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.1f}"

    def kind_p50(side: str, kind: str) -> str:
        values = [ms for b in results.of(side) for ms in (b.tool_ms if kind == "tool" else b.text_ms)]
        return ms(percentile(values, 50)) if values else "-"

    def busy(side: str, cpu_s: Callable[[Block], float | None]) -> str:
        blocks = results.of(side)
        seconds = [cpu_s(b) for b in blocks]
        if any(value is None for value in seconds):
            return "n/a"
        return f"{100 * sum(value or 0.0 for value in seconds) / sum(b.wall_s for b in blocks):.0f}"

    kept = len(results.of(results.sides[0]))
    rows = [
        row(f"msg/s, median of {kept} block(s)", lambda _, s: f"{s.rate:.1f}"),
        row("  / reference", lambda _, s: f"{s.rate / reference.rate:.2f}x"),
        row("latency p50 ms, all messages", lambda _, s: ms(s.p50)),
        row("latency p95 ms, all messages", lambda _, s: ms(s.p95)),
        row("latency p50 ms, text answers", lambda side, _: kind_p50(side, "text")),
        row("latency p50 ms, one tool round", lambda side, _: kind_p50(side, "tool")),
        row("CPU ms/msg, this process", lambda _, s: ms(s.process_cpu_ms)),
        row("CPU ms/msg, PostgreSQL", lambda _, s: ms(s.server_cpu_ms)),
        row("CPU ms/msg, total", lambda _, s: ms(s.cpu_ms)),
        row("  / reference", lambda _, s: f"{s.cpu_ms / reference.cpu_ms:.2f}x"),
        row("  of which after the last answer", lambda _, s: ms(s.tail_cpu_ms)),
        row("this process busy, % of one core", lambda side, _: busy(side, _process_in_wall)),
        row("PostgreSQL busy, % of one core", lambda side, _: busy(side, _server_in_wall)),
        row("messages per block", lambda side, _: str(results.of(side)[0].messages)),
    ]
    lines = _table(f"Side by side (reference: {results.sides[0]})", ["", *results.sides], rows)
    lines.append("  (latency: message sent -> answer in, over every message of the kept blocks;")
    lines.append("   CPU: process_time of this process and PostgreSQL's processes, per message answered, until the")
    lines.append("   side is idle again: for Countersign its background tasks done and its checkpoints pruned;")
    lines.append("   busy: that CPU up to the last answer over the blocks' wall time; one process runs its Python")
    lines.append("   on one core at most)")
    return lines


def profile_report(results: Results, top_packages: int = 20, top_functions: int = 25) -> list[str]:
    """Own CPU time per message by package for each side, then the top functions of the others."""
    if not results.profiles:
        return []
    per_side = {
        side: {name: 1000 * own / count for name, own in own_time_by_package(profiler).items()}
        for side, (profiler, count) in results.profiles.items()
    }
    sides = list(per_side)
    last = per_side[sides[-1]]
    names = sorted({name for packages in per_side.values() for name in packages}, key=lambda n: -last.get(n, 0.0))
    rows = [[name, *(f"{per_side[side].get(name, 0.0):.2f}" for side in sides)] for name in names[:top_packages]]
    rows.append(["total", *(f"{sum(per_side[side].values()):.2f}" for side in sides)])
    lines = _table(
        "cProfile (CPU time) of one extra, unreported block per side: own ms per message by package",
        ["package", *sides],
        rows,
    )
    lines.append("  (this process only: bot or graph, stand-ins, event sender; PostgreSQL is not in it.")
    lines.append("   cProfile slows Python down several times: compare shares, not absolute times)")
    lines += ["", *harness_lines(results)]
    for side in sides[1:]:
        profiler, _ = results.profiles[side]
        lines += ["", f"{side}:", *top_function_lines(profiler, top_functions)]
    return lines


HARNESS_ENTRY_POINTS = (
    ("Slack event sender (signing, httpx)", "tests/standins/slack_events.py", "send_raw"),
    ("Slack Web API stand-in (handler)", "tests/standins/slack_api.py", "_handle_api"),
    ("Gemini stand-in (handler)", "tests/standins/gemini.py", "_handle"),
    ("HTTP target (handler)", "tests/support/http_target.py", "_handle"),
)
"""Where the benchmark's own helpers in this process start: (label, file, function)."""


def harness_lines(results: Results) -> list[str]:
    """Cumulative CPU ms per message inside the stand-ins' handlers and the event sender."""
    lines = [
        "Of which the harness, not the product (cumulative ms per message in the profile; a lower bound:",
        "the servers' HTTP parsing before the handlers and the sender's reads after its call are not in it)",
    ]
    sides = list(results.profiles)
    width = max(len(label) for label, _, _ in HARNESS_ENTRY_POINTS) + 2
    lines.append("  " + " " * width + "".join(f"{side:>14}" for side in sides))
    cumulative = {side: _cumulative_by_entry(profiler) for side, (profiler, _) in results.profiles.items()}
    for label, path, function in HARNESS_ENTRY_POINTS:
        cells = "".join(
            f"{1000 * cumulative[side].get((path, function), 0.0) / results.profiles[side][1]:>14.2f}" for side in sides
        )
        lines.append(f"  {label:<{width}}{cells}")
    return lines


def _cumulative_by_entry(profiler: cProfile.Profile) -> dict[tuple[str, str], float]:
    """Cumulative seconds of each `HARNESS_ENTRY_POINTS` function (all its resumptions)."""
    raw: dict[Any, Any] = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    found: dict[tuple[str, str], float] = {}
    for (filename, _, function), (_, _, _, cumulative, _) in raw.items():
        for _, path, name in HARNESS_ENTRY_POINTS:
            if function == name and filename.replace("\\", "/").endswith(path):
                found[(path, name)] = found.get((path, name), 0.0) + cumulative
    return found


def header_lines(args: argparse.Namespace) -> list[str]:
    """What the run did."""
    tools = f"every {args.tool_every}th message one tool round" if args.tool_every else "text answers only"
    warmup = f"after a warm-up block of {args.warmup} conversations" if args.warmup else "without a warm-up"
    return [
        "Countersign throughput benchmark (python -m bench.throughput): messages per second, side by side",
        f"{args.conversations} conversations x {args.messages} messages per block, {args.concurrency} conversations"
        f" at once, {tools};",
        f"{args.blocks} block(s) per side {warmup}, the sides' order rotating block by block.",
        "Same model client (langchain-google-genai -> local Gemini stand-in), tools and PostgreSQL server on",
        "every side; each side on its own fresh database; everything in this process (stand-ins included).",
    ]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.throughput",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--conversations", type=int, default=200, help="conversations per block")
    parser.add_argument("--messages", type=int, default=3, help="messages per conversation")
    parser.add_argument("--concurrency", type=int, default=50, help="conversations at once")
    parser.add_argument("--blocks", type=int, default=2, help="measured blocks per side")
    parser.add_argument("--warmup", type=int, default=50, help="conversations in each side's warm-up block (0: none)")
    parser.add_argument("--tool-every", type=int, default=5, help="every Nth message is a tool round (0: none)")
    parser.add_argument(
        "--profile",
        type=int,
        nargs="?",
        const=50,
        default=0,
        metavar="CONVERSATIONS",
        help="after the measured blocks, cProfile (CPU time) one extra block of this many conversations "
        "(default 50) per side and print where the time went",
    )
    args = parser.parse_args(argv)
    if min(args.conversations, args.messages, args.concurrency, args.blocks) < 1:
        parser.error("--conversations, --messages, --concurrency and --blocks must be at least 1")
    if min(args.warmup, args.tool_every, args.profile) < 0:
        parser.error("--warmup, --tool-every and --profile must be at least 0")
    return args


async def run(args: argparse.Namespace) -> list[str]:
    """Run the benchmark and return the report's lines."""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="countersign-bench-") as tmp:
        async with open_stage(Path(tmp)) as stage:
            version = await pg_version(stage)
            results = await bench_throughput(stage, args)
    lines = [*header_lines(args), "", *machine_lines(version), ""]
    lines += [*block_lines(results), "", *summary_lines(results)]
    profile = profile_report(results)
    if profile:
        lines += ["", *profile]
    lines += ["", f"total run time {time.perf_counter() - started:.1f} s"]
    return lines


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: run the benchmark and print its report."""
    args = parse_args(argv)
    report_main(lambda: run(args))


if __name__ == "__main__":
    main()
