"""The benchmarks' environment: PostgreSQL, stand-ins with timing hooks, series and statistics, `report_main`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import asyncpg

from bot.settings import Settings
from countersign.server import BotServer
from tests.e2e.agent_script import agent_script
from tests.e2e.conftest import ALICE, BOT_TOKEN, SIGNING_SECRET, TEAM, make_settings
from tests.standins.gemini import GeminiReply, GeminiRequest, GeminiStandIn, ScriptedResponder
from tests.standins.slack_api import ApiCall, SlackApiStandIn
from tests.standins.slack_events import SlackEventSender
from tests.support.http_target import HttpTarget
from tests.support.postgres import TestServer

GEMINI_KEY = "e2e-gemini-key"
BOT_USER = "UBOT"
TEXT_PROMPT = "hello"
TOOL_PROMPT = "get"
TEXT_ANSWER = "You said: hello"
TEXT_ANSWER_PREFIX = "You said: "
"""The Gemini stand-in's script answers a plain message with `You said: <message>`."""
TOOL_ANSWER = "Result: "
TURN_CHANNEL = "CBENCH1"
CLICK_CHANNEL = "CBENCH2"
WAIT_S = 30.0
REPO_ROOT = Path(__file__).resolve().parents[2]


def percentile(values: Sequence[float], q: float) -> float:
    """The `q`-th percentile (0-100) with linear interpolation between order statistics."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass
class Series:
    """Latency samples of one measured thing, in milliseconds."""

    name: str
    samples_ms: list[float] = field(default_factory=list)

    def p(self, q: float) -> float:
        """The `q`-th percentile in ms."""
        return percentile(self.samples_ms, q)

    @property
    def count(self) -> int:
        """How many samples were kept (warm-up excluded)."""
        return len(self.samples_ms)


class Sampling(Protocol):
    """One latency series in the making: each call runs and times one turn."""

    async def sample(self, *, keep: bool) -> None:
        """Run one turn; keep its figures unless it is a warm-up turn."""


async def interleave(samplers: Sequence[Sampling], turns: int, warmup: int) -> None:
    """Round-robin over the series, rotating the order, so load drift hits all of them alike."""
    for index in range(warmup + turns):
        shift = index % len(samplers)
        for sampler in [*samplers[shift:], *samplers[:shift]]:
            await sampler.sample(keep=index >= warmup)


@dataclass
class Milestones:
    """Per-sample times (ms since the turn started) at which named things happened."""

    name: str
    by_label: dict[str, list[float]] = field(default_factory=dict)

    def add(self, label: str, ms: float) -> None:
        """Record one sample's time for `label`."""
        self.by_label.setdefault(label, []).append(ms)


@dataclass
class Sampler:
    """One latency series in the making: what to send, what answer ends it, what was seen."""

    name: str
    prompt: str
    answer: str
    series: Series = field(init=False)
    milestones: Milestones = field(init=False)

    def __post_init__(self) -> None:
        self.series = Series(self.name)
        self.milestones = Milestones(self.name)


@dataclass(slots=True)
class Conversation:
    """One benchmark conversation.

    Attributes:
        thread_id: its LangGraph thread id.
        ts: Slack only: the ts of its first message, which is the thread's ts.
        turns: real turns run in it so far.
    """

    thread_id: str
    ts: str | None = None
    turns: int = 0


class LogTally(logging.Handler):
    """Counts the bot's log records at WARNING and above instead of printing them."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.counts: dict[str, int] = {}

    def emit(self, record: logging.LogRecord) -> None:
        """Count the record under its level, logger and message template."""
        key = f"{record.levelname} {record.name}: {str(record.msg)[:70]}"
        self.counts[key] = self.counts.get(key, 0) + 1

    def lines(self) -> list[str]:
        """A short summary, most frequent first."""
        total = sum(self.counts.values())
        lines = [f"Log records at WARNING and above (counted, not printed): {total}"]
        for key, n in sorted(self.counts.items(), key=lambda item: -item[1])[:6]:
            lines.append(f"  {n:>5}  {key}")
        return lines


class Marks:
    """A shared timeline: hooks append `(perf_counter(), label)` as things happen."""

    def __init__(self) -> None:
        self.items: list[tuple[float, str]] = []

    def mark(self, label: str) -> None:
        """Note that `label` happened now."""
        self.items.append((time.perf_counter(), label))

    def since(self, index: int) -> list[tuple[float, str]]:
        """Marks added after position `index` (take `len(marks.items)` before a sample)."""
        return self.items[index:]


class TimedSlack(SlackApiStandIn):
    """The Slack stand-in plus a hook: a `perf_counter` stamp when each call is recorded.

    `expect` returns a future that resolves to that stamp for the first matching call, which
    costs O(waiters) per call instead of `wait_for`'s rescans of every recorded call.
    """

    def __init__(self, marks: Marks, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._marks = marks
        self._waiters: list[tuple[Callable[[ApiCall], bool], asyncio.Future[float]]] = []

    def expect(self, predicate: Callable[[ApiCall], bool]) -> asyncio.Future[float]:
        """A future for the `perf_counter` time at which a matching call gets recorded."""
        future: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        self._waiters.append((predicate, future))
        return future

    async def _record(self, call: ApiCall) -> None:
        now = time.perf_counter()
        self._marks.items.append((now, call.method))
        await super()._record(call)
        if not self._waiters:
            return
        waiting = []
        for predicate, future in self._waiters:
            if future.done():
                continue
            if predicate(call):
                future.set_result(now)
            else:
                waiting.append((predicate, future))
        self._waiters = waiting


def marking_responder(
    marks: Marks, target_url: str, script_for: Callable[[str], ScriptedResponder] = agent_script
) -> Callable[[GeminiRequest], Any]:
    """A Gemini script (the end-to-end tests' by default), marking "gemini" when each request reaches it."""
    script = script_for(target_url)

    async def respond(request: GeminiRequest) -> GeminiReply:
        marks.mark("gemini")
        return await script(request)

    return respond


def is_post_in(thread_ts: str, starts: str) -> Callable[[ApiCall], bool]:
    """Matches the bot's `chat.postMessage` in a thread whose text starts with `starts`."""

    def predicate(call: ApiCall) -> bool:
        return (
            call.method == "chat.postMessage"
            and call.args.get("thread_ts") == thread_ts
            and str(call.args.get("text", "")).startswith(starts)
        )

    return predicate


def is_card_in(thread_ts: str) -> Callable[[ApiCall], bool]:
    """Matches a card (a message with buttons) posted in a thread."""

    def predicate(call: ApiCall) -> bool:
        return (
            call.method == "chat.postMessage"
            and call.args.get("thread_ts") == thread_ts
            and any(b.get("type") == "actions" for b in call.args.get("blocks") or [])
        )

    return predicate


class TsClock:
    """Unique, increasing Slack message timestamps, so a test knows a thread's id up front."""

    def __init__(self) -> None:
        self._last_us = 0

    def next(self) -> str:
        """The next `seconds.micros` ts."""
        self._last_us = max(time.time_ns() // 1000, self._last_us + 1)
        seconds, micros = divmod(self._last_us, 1_000_000)
        return f"{seconds}.{micros:06d}"


@dataclass
class Stage:
    """The shared pieces: PostgreSQL, the stand-ins, the timeline."""

    server: TestServer
    gemini: GeminiStandIn
    slack: TimedSlack
    target: HttpTarget
    marks: Marks
    clock: TsClock

    @contextlib.asynccontextmanager
    async def database(self) -> AsyncIterator[str]:
        """A fresh database cloned from the migrated template, dropped afterwards."""
        url = await self.server.create_database()
        try:
            yield url
        finally:
            await self.server.drop_database(url)

    def settings(self, db_url: str) -> Settings:
        """The end-to-end tests' settings: stand-ins, the target host allowed."""
        return make_settings(db_url, self.gemini, self.slack, self.target)


@contextlib.asynccontextmanager
async def open_stage(
    data_dir: Path, script_for: Callable[[str], ScriptedResponder] = agent_script
) -> AsyncIterator[Stage]:
    """Start PostgreSQL (prepared template) and the stand-ins; stop them all on exit.

    Args:
        data_dir: where PostgreSQL keeps its data.
        script_for: the Gemini stand-in's script, given the HTTP target's URL (the end-to-end
            tests' agent by default).
    """
    server = await TestServer.start(data_dir)
    try:
        await server.prepare_template()
        marks = Marks()
        async with (
            HttpTarget() as target,
            GeminiStandIn(marking_responder(marks, target.url(), script_for), api_key=GEMINI_KEY) as gemini,
            TimedSlack(marks, bot_token=BOT_TOKEN, team_id=TEAM, bot_user_id=BOT_USER) as slack,
        ):
            slack.add_user(ALICE, "alice")
            yield Stage(server, gemini, slack, target, marks, TsClock())
    finally:
        await server.stop()


@contextlib.asynccontextmanager
async def running_bot(
    stage: Stage, url: str, adjust: Callable[[Settings], Settings] | None = None
) -> AsyncIterator[tuple[BotServer, SlackEventSender]]:
    """The real bot on `url` (settings changed by `adjust`) and a signed-event sender."""
    settings = stage.settings(url)
    async with (
        BotServer(adjust(settings) if adjust else settings) as bot,
        SlackEventSender(
            f"http://127.0.0.1:{bot.port}/slack/events",
            SIGNING_SECRET,
            team_id=TEAM,
            bot_user_id=BOT_USER,
        ) as events,
    ):
        yield bot, events


async def settle(bot: BotServer) -> None:
    """Wait until the bot's background work (turns, resumes, card updates) is done."""
    assert bot.runtime is not None
    await bot.runtime.service.tasks.join()


async def pg_version(stage: Stage) -> str:
    """The server's version string."""
    connection = await asyncpg.connect(stage.server.admin_url)
    try:
        return str(await connection.fetchval("SHOW server_version"))
    finally:
        await connection.close()


def report_main(report: Callable[[], Coroutine[Any, Any, list[str]]]) -> None:
    """Run a benchmark's report coroutine and print its lines, then the warnings it logged (counted).

    Args:
        report: makes the coroutine that runs the benchmark and returns its report's lines.
    """
    tally = LogTally()
    root = logging.getLogger()
    root.addHandler(tally)
    root.setLevel(logging.WARNING)
    lines = asyncio.run(report())
    print("\n".join([*lines, "", *tally.lines()]))
    sys.stdout.flush()
