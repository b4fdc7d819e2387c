"""What a `bench.throughput` run showed, and its report: the latency phase, blocks, side by side, profile."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from statistics import median

from bench.common.harness import percentile
from bench.common.report import Profile, own_time_by_package, top_function_lines

PROFILE_MIN_MS = 0.01
"""Own CPU ms per message below which a package is folded into one row (on every profiled side)."""


@dataclass(frozen=True, slots=True)
class Cpu:
    """CPU seconds of each process group over one stretch of a block.

    Attributes:
        stack: the side's processes (psutil: the child and its descendants).
        server: PostgreSQL's processes for the side's database and the server's own
            (`bench.common.meter`; None: not measurable from here).
        harness: the benchmark's own process (`time.process_time`): stand-ins, HTTP target,
            event sender or HTTP client, load generator, meters.
    """

    stack: float = 0.0
    server: float | None = None
    harness: float = 0.0


@dataclass
class Block:
    """What one block of one side showed.

    Attributes:
        side: the side's name.
        number: the block's number (1-based; 0 for a warm-up or the profiled block).
        position: its place in the run's order (1-based, all sides' blocks together).
        wall_s: first message sent -> last answer in.
        processes: the side's processes (the child and its descendants) at the block's end.
        text_ms: latencies of the text messages.
        tool_ms: latencies of the tool-round messages.
        cpu: CPU from the block's start until the side was idle again.
        tail: the part of `cpu` after the last answer (outside `wall_s`).
    """

    side: str
    number: int
    position: int
    wall_s: float
    processes: int = 1
    text_ms: list[float] = field(default_factory=list)
    tool_ms: list[float] = field(default_factory=list)
    cpu: Cpu = field(default_factory=Cpu)
    tail: Cpu = field(default_factory=Cpu)

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


@dataclass
class Results:
    """Everything a run showed.

    Attributes:
        sides: the sides' names, the reference first.
        latency_ms: per side, the kept latencies of the latency phase (empty when skipped).
        blocks: every side's kept blocks.
        warmups: the warm-up blocks (not counted).
        profiles: per profiled side, its profile of the extra block and the messages it ran.
    """

    sides: list[str]
    latency_ms: dict[str, list[float]] = field(default_factory=dict)
    blocks: list[Block] = field(default_factory=list)
    warmups: list[Block] = field(default_factory=list)
    profiles: dict[str, tuple[Profile, int]] = field(default_factory=dict)

    def of(self, side: str) -> list[Block]:
        """The kept blocks of `side`, by number."""
        return sorted((b for b in self.blocks if b.side == side), key=lambda b: b.number)


# --- tables --------------------------------------------------------------------------------


def _row(cells: Sequence[str], widths: Sequence[int]) -> str:
    first, *rest = cells
    return "  " + f"{first:<{widths[0]}}" + "".join(f"{c:>{w}}" for c, w in zip(rest, widths[1:], strict=True))


def table(title: str, head: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A titled table: the first column left-aligned, the others right-aligned, widths from the cells."""
    widths = [max(len(head[0]), *(len(r[0]) for r in rows)) + 2]
    widths += [max(len(head[i]), *(len(r[i]) for r in rows)) + 2 for i in range(1, len(head))]
    return [title, _row(head, widths), *(_row(r, widths) for r in rows)]


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


# --- the latency phase ---------------------------------------------------------------------


def latency_lines(results: Results, turns: int, warmup: int) -> list[str]:
    """p50/p95/p99 of a message in a new thread, per side, and each side's p50 over the reference's."""
    if not results.latency_ms:
        return []
    reference = results.sides[0]
    reference_p50 = percentile(results.latency_ms[reference], 50)
    rows = []
    for side in results.sides:
        values = results.latency_ms[side]
        p50 = percentile(values, 50)
        ratio = f"{p50 / reference_p50:.2f}x"
        rows.append([side, str(len(values)), *(f"{percentile(values, q):.1f}" for q in (50, 95, 99)), ratio])
    title = f"A message in a new thread, one at a time (ms sent -> answered; {turns} per side after {warmup} warm-up)"
    lines = table(title, ["side", "n", "p50", "p95", "p99", f"p50 / {reference}"], rows)
    lines.append("  (each message the first of a new conversation: an app_mention for Countersign, a new thread_id")
    lines.append("   for the bare stack; the sides take turns message by message in rotating order, and each side's")
    lines.append("   turns are done before the next message is sent; docs/decisions/0014: Countersign at most 1.3x)")
    return lines


# --- the throughput blocks -----------------------------------------------------------------


def _blocks_by_number(results: Results) -> dict[int, dict[str, Block]]:
    by_number: dict[int, dict[str, Block]] = {}
    for block in sorted(results.blocks, key=lambda b: b.number):
        by_number.setdefault(block.number, {})[block.side] = block
    return by_number


def block_lines(results: Results) -> list[str]:
    """msg/s per block and side (run order in brackets), then each side's ratio to the reference per block.

    A row per side and per ratio, a column per block, then the median, min and max over the blocks.
    """
    reference, *others = results.sides
    by_number = _blocks_by_number(results)
    head = ["msg/s", *(f"block {number}" for number in by_number), "median", "min", "max"]
    rows = []
    for side in results.sides:
        rates = [by_side[side].rate for by_side in by_number.values()]
        cells = [f"{by_side[side].rate:.1f} (#{by_side[side].position})" for by_side in by_number.values()]
        rows.append([side, *cells, *(f"{pick(rates):.1f}" for pick in (median, min, max))])
    for other in others:
        ratios = [by_side[other].rate / by_side[reference].rate for by_side in by_number.values()]
        cells = [f"{ratio:.2f}x" for ratio in ratios]
        rows.append([f"{other} / {reference}", *cells, *(f"{pick(ratios):.2f}x" for pick in (median, min, max))])
    lines = table("Messages per second, per block (#n = place in the run's order)", head, rows)
    if results.warmups:
        warm = ", ".join(f"{b.side} {b.rate:.1f}" for b in results.warmups)
        lines.append(f"  (warm-up blocks, not counted: {warm} msg/s)")
    return lines


def _per_message_ms(blocks: Sequence[Block], seconds: Callable[[Block], float | None]) -> float | None:
    values = [seconds(b) for b in blocks]
    if any(value is None for value in values):
        return None
    return 1000 * sum(value or 0.0 for value in values) / sum(b.messages for b in blocks)


def _busy(blocks: Sequence[Block], in_wall: Callable[[Block], float | None]) -> str:
    """CPU up to the last answer over the blocks' wall time, in % of one core."""
    values = [in_wall(b) for b in blocks]
    if any(value is None for value in values):
        return "n/a"
    return f"{100 * sum(value or 0.0 for value in values) / sum(b.wall_s for b in blocks):.0f}"


def _server_in_wall(block: Block) -> float | None:
    if block.cpu.server is None or block.tail.server is None:
        return None
    return block.cpu.server - block.tail.server


def _stack_and_server(cpu: Cpu) -> float:
    return cpu.stack + (cpu.server or 0.0)


@dataclass(frozen=True, slots=True)
class Summary:
    """One side's figures over its kept blocks (CPU in ms per message answered)."""

    rate: float
    p50: float
    p95: float
    stack_ms: float
    server_ms: float | None
    tail_ms: float
    harness_ms: float

    @classmethod
    def of(cls, blocks: Sequence[Block]) -> Summary:
        """Median msg/s over blocks; latency percentiles over all their messages; CPU per message."""
        latencies = [ms for b in blocks for ms in b.latencies_ms]
        return cls(
            rate=median(b.rate for b in blocks),
            p50=percentile(latencies, 50),
            p95=percentile(latencies, 95),
            stack_ms=_per_message_ms(blocks, lambda b: b.cpu.stack) or 0.0,
            server_ms=_per_message_ms(blocks, lambda b: b.cpu.server),
            tail_ms=_per_message_ms(blocks, lambda b: _stack_and_server(b.tail)) or 0.0,
            harness_ms=_per_message_ms(blocks, lambda b: b.cpu.harness) or 0.0,
        )

    @property
    def cpu_ms(self) -> float:
        """The stack's and PostgreSQL's CPU per message (the stack's alone when the server is not measurable)."""
        return self.stack_ms + (self.server_ms or 0.0)


def summary_lines(results: Results) -> list[str]:
    """The side-by-side table: throughput, latency and CPU per message per process group, ratios."""
    summaries = {side: Summary.of(results.of(side)) for side in results.sides}
    reference = summaries[results.sides[0]]

    def row(label: str, value: Callable[[str, Summary], str]) -> list[str]:
        return [label, *(value(side, summaries[side]) for side in results.sides)]

    def kind_p50(side: str, tool: bool) -> str:
        values = [ms for b in results.of(side) for ms in (b.tool_ms if tool else b.text_ms)]
        return _ms(percentile(values, 50)) if values else "-"

    def busy(in_wall: Callable[[Block], float | None]) -> Callable[[str, Summary], str]:
        return lambda side, _: _busy(results.of(side), in_wall)

    kept = len(results.of(results.sides[0]))
    rows = [
        row(f"msg/s, median of {kept} block(s)", lambda _, s: f"{s.rate:.1f}"),
        row("  / reference", lambda _, s: f"{s.rate / reference.rate:.2f}x"),
        row("latency p50 ms, all messages", lambda _, s: _ms(s.p50)),
        row("latency p95 ms, all messages", lambda _, s: _ms(s.p95)),
        row("latency p50 ms, text answers", lambda side, _: kind_p50(side, tool=False)),
        row("latency p50 ms, one tool round", lambda side, _: kind_p50(side, tool=True)),
        row("CPU ms/msg, the stack's processes", lambda _, s: _ms(s.stack_ms)),
        row("CPU ms/msg, PostgreSQL", lambda _, s: _ms(s.server_ms)),
        row("CPU ms/msg, stack + PostgreSQL", lambda _, s: _ms(s.cpu_ms)),
        row("  / reference", lambda _, s: f"{s.cpu_ms / reference.cpu_ms:.2f}x"),
        row("  of which after the last answer", lambda _, s: _ms(s.tail_ms)),
        row("CPU ms/msg, harness (stand-ins, sender)", lambda _, s: _ms(s.harness_ms)),
        row("stack busy, % of one core", busy(lambda b: b.cpu.stack - b.tail.stack)),
        row("PostgreSQL busy, % of one core", busy(_server_in_wall)),
        row("harness busy, % of one core", busy(lambda b: b.cpu.harness - b.tail.harness)),
        row("the stack's processes", lambda side, _: str(results.of(side)[0].processes)),
        row("messages per block", lambda side, _: str(results.of(side)[0].messages)),
    ]
    lines = table(f"Side by side (reference: {results.sides[0]})", ["", *results.sides], rows)
    lines += [
        "  (latency: message sent -> answer in, over every message of the kept blocks;",
        "   CPU per message answered, from the block's start until the side is idle again (Countersign: no turn",
        "   running and, unless --no-prune-wait, its upkeep done pruning the block's checkpoints), of three",
        "   process groups measured apart: the stack's own processes (psutil), PostgreSQL's processes for the",
        "   side's database and the server's own (bench.common.meter), and this benchmark's process, the harness: the",
        "   stand-ins (Gemini, Slack Web API, HTTP target), the event sender or HTTP client, the meters;",
        "   busy: that CPU up to the last answer over the blocks' wall time; one process runs its Python on",
        "   one core at most, and this machine's cores are shared by all three groups)",
    ]
    return lines


# --- the profile ---------------------------------------------------------------------------


def profile_lines(results: Results, reference: str, compared: str, top_functions: int = 25) -> list[str]:
    """Own CPU ms per message by package of each profiled side, then the top functions of `compared`.

    Packages are sorted by `compared`'s value minus `reference`'s, largest first (by the one
    profiled side's value when only one was profiled); those under `PROFILE_MIN_MS` on every
    side are summed into one row.
    """
    if not results.profiles:
        return []
    sides = [side for side in (reference, compared) if side in results.profiles]
    per_side = {
        side: {name: 1000 * own / count for name, own in own_time_by_package(profile).items()}
        for side, (profile, count) in ((side, results.profiles[side]) for side in sides)
    }
    names = {name for packages in per_side.values() for name in packages}
    shown = {name for name in names if any(per_side[side].get(name, 0.0) >= PROFILE_MIN_MS for side in sides)}

    def value(side: str, name: str) -> float:
        return per_side[side].get(name, 0.0)

    def difference(name: str) -> float:
        if len(sides) == 2:
            return value(compared, name) - value(reference, name)
        return value(sides[0], name)

    both = len(sides) == 2
    rows = []
    for name in sorted(shown, key=lambda n: -difference(n)):
        rows.append([name, *(f"{value(side, name):.3f}" for side in sides), *([f"{difference(name):+.3f}"] * both)])
    rest = names - shown
    if rest:
        cells = [sum(value(side, name) for name in rest) for side in sides]
        label = f"{len(rest)} other package(s), each under {PROFILE_MIN_MS} ms"
        rows.append([label, *(f"{cell:.3f}" for cell in cells), *([f"{cells[-1] - cells[0]:+.3f}"] * both)])
    totals = [sum(per_side[side].values()) for side in sides]
    rows.append(["total", *(f"{t:.3f}" for t in totals), *([f"{totals[-1] - totals[0]:+.3f}"] * both)])
    counts = ", ".join(f"{side} {results.profiles[side][1]}" for side in sides)
    lines = table(
        "cProfile (CPU time) of one extra, unreported block per profiled side: own ms per message by package, "
        "in the stack's process",
        ["package", *sides, *([f"{compared} - {reference}"] * both)],
        rows,
    )
    lines.append(f"  (messages profiled: {counts}; the stack's main thread, its event loop, from the block's first")
    lines.append("   message until the side was idle again; PostgreSQL and the harness are not in it. cProfile slows")
    lines.append("   Python down several times: compare shares and differences, not absolute times)")
    if compared in results.profiles:
        profile, _ = results.profiles[compared]
        lines += ["", f"{compared}:", *top_function_lines(profile, top_functions)]
    return lines
