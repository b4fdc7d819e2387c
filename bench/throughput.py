"""Throughput and new-thread latency: the bare stack and Countersign, each in its own process(es), side by side.

Run it with::

    uv run --frozen python -m bench.throughput [--sides bare,bare-uvloop,countersign,workers2]
        [--latency-turns 100] [--latency-warmup 10] [--conversations 200] [--messages 3]
        [--concurrency 50] [--blocks 2] [--warmup 50] [--tool-every 5] [--no-prune-wait]
        [--profile [CONVERSATIONS]]

It prints figures; nothing here asserts a time (docs/decisions/0014, docs/decisions/0024). Each side is
a column of the report. Every side's stack runs in child processes of its own
(`bench.common.stack_process`), on a fresh database cloned from the migrated template on the same
PostgreSQL server, with the same settings (`child_env`: the end-to-end tests' settings as
environment variables), the same model client (`build_chat_model` + `call_options`:
langchain-google-genai over HTTP to the local Gemini stand-in, which answers at once), the same
tools and the same messages. This process holds only the network emulation: PostgreSQL's
management, the stand-ins (Gemini, Slack Web API, the HTTP target the tool calls), the Slack
event sender and the bare stack's HTTP client, the load generator and the meters
(docs/decisions/0024). The sides (`--sides`, in this order by default; the first is the
reference of every ratio and must be `bare`):

- `bare`, **bare stack**, the reference: `python -m bench.bare_server`, the template's ReAct graph
  on one `AsyncPostgresSaver` over a psycopg pool of 10 (`bench.common.seeds`, what
  `bench.context.bare_side` runs in-process), on the default event loop (`asyncio.run`), behind
  one HTTP endpoint; a message is one `POST /turn` (an `ainvoke` on the conversation's thread
  id), done when its answer comes back (`bench.common.bare_process`).
- `bare-uvloop`, **bare stack on uvloop**: the same server with `--loop uvloop`. Informational:
  it shows how much of a difference is the event loop's (the reference stays the template's stack on
  the default loop).
- `countersign`, **Countersign**: `countersign run` as one process (`COUNTERSIGN_WORKERS=1`, no
  supervisor), Bolt over HTTP against the Slack stand-in, the bot's own pools, savers and
  graphs (`bench.common.workers`). A conversation starts with a signed `app_mention` (it opens the
  thread) and goes on with thread replies (`message` events); a message is done when the Slack
  stand-in records its answer's `chat.postMessage`.
- `workersN` (`workers2` by default), **Countersign, N workers**: `countersign run --workers N`,
  a supervisor and N workers sharing the port (`SO_REUSEPORT`; the sender's kept-alive
  connections are spread over them by the kernel), measured like `countersign`.

First the **latency phase** (`--latency-turns`, 0 skips it): for every side, that many
single-message conversations, one message at a time, each the first of a new thread (an
`app_mention` for Countersign, a new thread id for the bare stack), text answers only
(`hello <n>`, answered `You said: hello <n>`), after `--latency-warmup` unreported ones; the
sides take turns message by message in rotating order (`bench.common.harness.interleave`), and a
side's turn is over when its stack is done with it (for Countersign, `countersign_turns_running`
at 0), so no side's leftover work runs during another's message. Reported: p50/p95/p99 per side
and each side's p50 over the reference's.

Then the **throughput blocks**. A block runs `--conversations` conversations of `--messages`
messages each, `--concurrency` conversations at once, each conversation's messages in order
(the next one is sent when the answer to the previous one is in). Every `--tool-every`-th
message of the block is `get` (one ungated tool round: `http_request` GET to the local target,
then the answer); the others are `hello <n>`. After one warm-up block per side (not reported),
the sides run `--blocks` blocks each, the order rotating from one block to the next (a b c, b c
a, ...), so load drift hits them alike.

Per block and side:
- msg/s: messages / wall time from the block's first message sent to its last answer in;
- latency per message (ms): message sent (signed event posted / `POST /turn` sent) to answer
  in; under load this includes queueing for the event loop, pool connections and locks;
- CPU per message (ms), from the block's start until the side is idle again, in three process
  groups measured apart: the stack's processes (psutil: the child and its descendants),
  PostgreSQL's processes for the side's database and the server's own (`bench.common.meter`), and this
  process (`time.process_time`), the harness row: what the emulation cost while that side ran
  (its stand-ins' handlers, the sender's signing, the meters' queries). Idle: the bare stack
  once its requests are answered (an `ainvoke` leaves no work behind); Countersign once
  `countersign_turns_running` reads 0 and, unless `--no-prune-wait`, its upkeep has pruned the
  checkpoints of every conversation that ran (`bench.common.workers`: the pass runs every 10 s, so
  this waits up to a pass or two after each block; the report says how much of the CPU came
  after the last answer, outside the wall time msg/s is taken over); busy: that CPU up to the
  last answer over the wall time, in % of one core, per group.

With `--profile`, the `bare` and `countersign` children run under `bench.profiled --paused`
(no cost until asked), and after the measured blocks each runs one extra block of `--profile`
conversations (not reported above) with its profiler on (cProfile counting CPU time, the main
thread), from the first message until the side is idle again. The report adds own CPU ms per
message by package side by side, sorted by Countersign's excess over the reference, and
Countersign's top functions.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import itertools
import pstats
import re
import tempfile
import textwrap
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from bench.common import args as cli
from bench.common.bare_process import bare_stack_process
from bench.common.harness import (
    TEXT_ANSWER_PREFIX,
    TEXT_PROMPT,
    TOOL_ANSWER,
    TOOL_PROMPT,
    Conversation,
    Stage,
    interleave,
    open_stage,
    pg_version,
    report_main,
)
from bench.common.meter import PgMeter
from bench.common.report import machine_lines
from bench.common.stack_process import StackProcess
from bench.common.throughput_report import Block, Cpu, Results, block_lines, latency_lines, profile_lines, summary_lines
from bench.common.workers import countersign_workers

# --- the sides -----------------------------------------------------------------------------


class ThroughputSide(Protocol):
    """One way of running conversations: a column of the report, measured like the others."""

    name: str
    meter: PgMeter
    """The meter on the side's database (PostgreSQL's CPU)."""
    stack: StackProcess
    """The side's child process(es)."""

    async def open_conversation(self) -> Conversation:
        """A new, empty conversation (no message sent yet)."""

    async def send(self, conversation: Conversation, text: str, answer: str) -> float:
        """Send one message and wait for its answer; return the ms in between.

        Args:
            conversation: where; its earlier messages have been answered.
            text: the person's message.
            answer: how the answer must start (anything else is an error).
        """

    async def settle(self) -> None:
        """Wait until the stack runs no turn for the messages answered so far."""

    async def idle(self) -> None:
        """`settle`, then wait for what the stack does later for those messages (Countersign: pruning)."""

    def cpu_s(self) -> float:
        """CPU seconds so far of the side's processes."""


SideOpener = Callable[[Stage, Path | None], contextlib.AbstractAsyncContextManager[ThroughputSide]]


@dataclass(frozen=True, slots=True)
class SideKind:
    """A side `--sides` can name.

    Attributes:
        key: its name on the command line.
        open: opens it on a stage, under the profiler when given a path.
        profiled: whether `--profile` profiles it.
    """

    key: str
    open: SideOpener
    profiled: bool


HEADER_WIDTH = 110
REFERENCE = "bare"
DEFAULT_SIDES = ("bare", "bare-uvloop", "countersign", "workers2")
_WORKERS = re.compile(r"workers([2-9]|[1-5][0-9]|6[0-4])")


def side_kind(key: str, *, wait_pruning: bool) -> SideKind:
    """The side named `key`: `bare`, `bare-uvloop`, `countersign` or `workersN` (N from 2 to 64).

    Raises:
        ValueError: no side has that name.
    """
    if key in ("bare", "bare-uvloop"):
        loop = "uvloop" if key == "bare-uvloop" else "asyncio"
        return SideKind(
            key, lambda stage, profile: bare_stack_process(stage, loop=loop, profile=profile), profiled=key == "bare"
        )
    if key == "countersign":
        return SideKind(
            key,
            lambda stage, profile: countersign_workers(stage, 1, profile=profile, wait_pruning=wait_pruning),
            profiled=True,
        )
    if match := _WORKERS.fullmatch(key):
        workers = int(match.group(1))
        return SideKind(
            key, lambda stage, _: countersign_workers(stage, workers, wait_pruning=wait_pruning), profiled=False
        )
    raise ValueError(f"no side is called {key!r}: choose from bare, bare-uvloop, countersign, workersN (N >= 2)")


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
                conversation.append(text_message(n))
        result.append(conversation)
    return result


def text_message(n: int) -> Message:
    """`hello <n>`, answered in text."""
    text = f"{TEXT_PROMPT} {n}"
    return Message(text, TEXT_ANSWER_PREFIX + text, tool=False)


# --- the latency phase ---------------------------------------------------------------------


class NewThreadSampler:
    """One side's series of the latency phase: each sample is one message in a new conversation.

    Args:
        side: the side.
        numbers: numbers for unique messages (shared by all sides).
    """

    def __init__(self, side: ThroughputSide, numbers: itertools.count[int]) -> None:
        self.side = side
        self._numbers = numbers
        self.latencies_ms: list[float] = []

    async def sample(self, *, keep: bool) -> None:
        """Send the first message of a new conversation, time it, then wait until the stack is done with it."""
        message = text_message(next(self._numbers))
        conversation = await self.side.open_conversation()
        latency_ms = await self.side.send(conversation, message.text, message.answer)
        await self.side.settle()
        if keep:
            self.latencies_ms.append(latency_ms)


async def latency_phase(sides: Sequence[ThroughputSide], turns: int, warmup: int) -> dict[str, list[float]]:
    """Every side's new-thread latencies (ms), the sides interleaved message by message; then every side idle."""
    numbers = itertools.count(1_000_000)
    samplers = [NewThreadSampler(side, numbers) for side in sides]
    gc.collect()
    await interleave(samplers, turns, warmup)
    # Nothing is measured now, so the sides may finish their work (Countersign's pruning) together.
    await asyncio.gather(*(side.idle() for side in sides))
    return {sampler.side.name: sampler.latencies_ms for sampler in samplers}


# --- running blocks ------------------------------------------------------------------------


def _cpu(side: ThroughputSide) -> tuple[float, float]:
    """CPU seconds so far of the side's processes and of this one (the harness)."""
    return side.cpu_s(), time.process_time()


async def run_block(
    side: ThroughputSide, messages: Sequence[Sequence[Message]], concurrency: int, number: int, position: int
) -> Block:
    """Run `messages` through `side`, `concurrency` conversations at once, and measure it until the side is idle."""
    # Garbage of the previous block (or side) must not be collected on this one's time.
    gc.collect()
    mark = await side.meter.mark()
    stack_started, harness_started = _cpu(side)
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
    stack_answered, harness_answered = _cpu(side)
    answered = await side.meter.mark()
    await side.idle()
    stack_idle, harness_idle = _cpu(side)
    block.processes = len(side.stack.processes())
    block.cpu = Cpu(
        stack=stack_idle - stack_started,
        server=await side.meter.cpu_since(mark),
        harness=harness_idle - harness_started,
    )
    block.tail = Cpu(
        stack=stack_idle - stack_answered,
        server=await side.meter.cpu_since(answered),
        harness=harness_idle - harness_answered,
    )
    return block


async def bench_throughput(stage: Stage, args: argparse.Namespace, profile_dir: Path) -> Results:
    """Open every side, run the latency phase, warm each side up, run the blocks in rotating order, then profile."""
    kinds = [side_kind(key, wait_pruning=args.prune_wait) for key in args.sides]
    messages = plan(args.conversations, args.messages, args.tool_every)
    async with contextlib.AsyncExitStack() as stack:
        # Started side by side: most of a start is imports, and a supervisor starts its workers only
        # once it is up itself. If one fails, the others are cancelled, and closed with the stack.
        async with asyncio.TaskGroup() as group:
            opening = [
                group.create_task(
                    stack.enter_async_context(
                        kind.open(stage, profile_dir / f"{kind.key}.prof" if args.profile and kind.profiled else None)
                    )
                )
                for kind in kinds
            ]
        sides = [task.result() for task in opening]
        results = Results(sides=[side.name for side in sides])
        if args.latency_turns:
            results.latency_ms = await latency_phase(sides, args.latency_turns, args.latency_warmup)
        if args.warmup:
            warmup = plan(args.warmup, args.messages, args.tool_every)
            for side in sides:
                results.warmups.append(await run_block(side, warmup, args.concurrency, 0, 0))
        position = 0
        for number in range(1, args.blocks + 1):
            shift = (number - 1) % len(sides)
            for side in [*sides[shift:], *sides[:shift]]:
                position += 1
                results.blocks.append(await run_block(side, messages, args.concurrency, number, position))
        if args.profile:
            profiled = plan(args.profile, args.messages, args.tool_every)
            for side in sides:
                if side.stack.profile is None:
                    continue
                await side.stack.start_profile()
                block = await run_block(side, profiled, args.concurrency, 0, 0)
                results.profiles[side.name] = (pstats.Stats(str(await side.stack.stop_profile())), block.messages)
        # All sides stop at once (each takes a few seconds); leaving the stack waits for each.
        for side in sides:
            side.stack.terminate()
        return results


# --- report --------------------------------------------------------------------------------


def header_lines(args: argparse.Namespace, sides: Sequence[str]) -> list[str]:
    """What the run did, wrapped at `HEADER_WIDTH` characters."""
    tools = f"every {args.tool_every}th message one tool round" if args.tool_every else "text answers only"
    warmup = f"after a warm-up block of {args.warmup} conversations" if args.warmup else "without a warm-up"
    latency = (
        f"{args.latency_turns} single-message new threads per side after {args.latency_warmup} warm-up, one at a "
        "time, the sides interleaved, text answers."
        if args.latency_turns
        else "skipped."
    )
    pruning = "its upkeep has pruned them" if args.prune_wait else "not waiting for its pruning (--no-prune-wait)"
    paragraphs = [
        f"Sides: {'; '.join(sides)}. The first is the reference of every ratio.",
        "Every side's stack runs in its own process(es): the bare stack behind one HTTP endpoint "
        "(bench.bare_server), Countersign as countersign run. This process holds only the network emulation: "
        "the stand-ins (Gemini, Slack Web API, HTTP target), the Slack event sender and the bare stack's HTTP "
        "client, the load generator and the meters. Same settings, model client (langchain-google-genai -> the "
        "Gemini stand-in), tools and PostgreSQL server on every side; each side on its own fresh database.",
        f"Latency phase: {latency}",
        f"Throughput: {args.conversations} conversations x {args.messages} messages per block, "
        f"{args.concurrency} conversations at once, {tools}; {args.blocks} block(s) per side {warmup}, the "
        "sides' order rotating block by block; a block is measured until its side is idle again (Countersign: "
        f"no turn running and {pruning}).",
    ]
    lines = ["Countersign throughput benchmark (python -m bench.throughput): new-thread latency, then messages/s"]
    for paragraph in paragraphs:
        lines += textwrap.wrap(paragraph, HEADER_WIDTH)
    return lines


def _sides(value: str) -> list[str]:
    keys = [key.strip() for key in value.split(",") if key.strip()]
    for key in keys:
        try:
            side_kind(key, wait_pruning=True)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return keys


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    parser = cli.parser("bench.throughput", __doc__)
    parser.add_argument(
        "--sides",
        type=_sides,
        default=list(DEFAULT_SIDES),
        help=f"comma-separated sides, the reference ({REFERENCE}) first (default: {','.join(DEFAULT_SIDES)})",
    )
    parser.add_argument("--latency-turns", type=int, default=100, help="new-thread messages per side (0: no phase)")
    parser.add_argument("--latency-warmup", type=int, default=10, help="unreported new-thread messages per side first")
    parser.add_argument("--conversations", type=int, default=200, help="conversations per block")
    parser.add_argument("--messages", type=int, default=3, help="messages per conversation")
    parser.add_argument("--concurrency", type=int, default=50, help="conversations at once")
    parser.add_argument("--blocks", type=int, default=2, help="measured blocks per side")
    parser.add_argument("--warmup", type=int, default=50, help="conversations in each side's warm-up block (0: none)")
    parser.add_argument("--tool-every", type=int, default=5, help="every Nth message is a tool round (0: none)")
    parser.add_argument(
        "--no-prune-wait",
        dest="prune_wait",
        action="store_false",
        help="end Countersign's blocks when no turn runs, without waiting for its upkeep to prune (quicker; "
        "pruning then runs during other sides' blocks and is charged to no side)",
    )
    parser.add_argument(
        "--profile",
        type=int,
        nargs="?",
        const=50,
        default=0,
        metavar="CONVERSATIONS",
        help="after the measured blocks, cProfile (CPU time) one extra block of this many conversations "
        "(default 50) in the bare stack's and Countersign's process, and print where the time went",
    )
    args = parser.parse_args(argv)
    if min(args.conversations, args.messages, args.concurrency, args.blocks) < 1:
        parser.error("--conversations, --messages, --concurrency and --blocks must be at least 1")
    if min(args.warmup, args.tool_every, args.profile, args.latency_turns, args.latency_warmup) < 0:
        parser.error("--warmup, --tool-every, --profile, --latency-turns and --latency-warmup must be at least 0")
    if not args.sides or args.sides[0] != REFERENCE:
        parser.error(f"--sides must start with {REFERENCE}, the reference of every ratio")
    if len(set(args.sides)) != len(args.sides):
        parser.error("--sides names a side twice")
    return args


async def run(args: argparse.Namespace) -> list[str]:
    """Run the benchmark and return the report's lines."""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="countersign-bench-") as tmp:
        # The embedded server's data directory beside the profiles (it creates it).
        async with open_stage(Path(tmp, "postgres")) as stage:
            version = await pg_version(stage)
            results = await bench_throughput(stage, args, Path(tmp))
    lines = [*header_lines(args, results.sides), "", *machine_lines(version), ""]
    latency = latency_lines(results, args.latency_turns, args.latency_warmup)
    if latency:
        lines += [*latency, ""]
    lines += [*block_lines(results), "", *summary_lines(results)]
    names = dict(zip(args.sides, results.sides, strict=True))
    profile = profile_lines(results, names[REFERENCE], names.get("countersign", ""))
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
