"""Long conversations: what one more message costs at 10, 100 and 300 prior messages.

Run it with::

    uv run --frozen python -m bench.context [--prior 10,100,300] [--turns 20] [--warmup 1] [--lead-in 1]
        [--delta [--grow 49]]

It prints figures; nothing here asserts a time (docs/decisions/0013). Two sides (three with
`--delta`), side by side in one run, each on a fresh database cloned from the migrated
template, with the same model client (`build_chat_model` + `call_options`: langchain-google-genai
over HTTP to the local Gemini stand-in, which answers at once) and the same tools:

- **bare graph**, the reference: the template's ReAct graph (docs/DESIGN.md: `llm_call` with the system
  prompt and the *whole* history, LangGraph's prebuilt `ToolNode`, `should_continue`; state =
  `messages` with plain `add_messages` + `remaining_steps`) on one `AsyncPostgresSaver` over a
  pool of 10, invoked with `ainvoke` (`bench.common.seeds`). It is written there rather than taken from
  `bench.turns.bare_graph`, which compiles the bot's own review agent and so carries the bot's
  context window (and any later change to it).
- **bare graph with a DeltaChannel** (`--delta` only): the same graph, whose `messages` is
  `Annotated[list[AnyMessage], DeltaChannel(_messages_delta_reducer)]` (`DeltaSeedsState`, the
  way LangGraph documents it; beta): a step stores only its own writes, a full snapshot is
  stored every 100 updates of the channel, and a read replays the writes since the last one
  (`AsyncPostgresSaver.aget_delta_channel_history`). Seeding a new thread stores a snapshot.
- **Countersign**: the real bot as `bench.turns` runs it (`BotServer`, Bolt over HTTP, the Slack
  stand-in, the bot's own graphs and savers). The first message of a conversation is an
  `app_mention` (it opens the thread); the later ones are thread replies (`message` events).
  Timed from the signed event sent to the answer's `chat.postMessage` at the Slack stand-in.

One sample = one new conversation: its prior history is written into the conversation's graph
state in one `aupdate_state(..., as_node="llm_call")` (the graph the bot itself picks for the
thread; `bench.common.prior` says what the history looks like), then `--lead-in` real text turns
(the first one creates the bot's conversation row, inbox row and so on, as any real first
message does; a context window would make its summary there), then the measured text turn, at
exactly `prior` messages. Seeded history is one checkpoint, not the many a conversation grown
turn by turn leaves behind: "stored per conversation" is what a conversation holds after the
seed and its lead-in + measured turns, so for a graph that never prunes it understates what
a real conversation of that length holds (quadratically, PERFORMANCE.md), and for one that
prunes it shows whether storage stops growing with the history.

Per measured turn:
- latency (ms, percentiles over the kept samples);
- CPU (ms, mean per turn): this process (`time.process_time`: the bot or graph with its
  clients, and the in-process stand-ins and event sender, whose JSON work also grows with the
  history) plus the PostgreSQL server's processes (`bench.common.meter`, 10 ms ticks). For the bot,
  CPU and bytes include the work after the answer is posted, until the bot's tasks are idle;
- bytes written to the conversation's rows in LangGraph's tables and ours, and WAL bytes
  (`bench.common.meter` says exactly what each counts), and the bytes the conversation then keeps;
- what the model was sent: calls per turn, and per call the request body's characters (JSON as
  the stand-in received it: system prompt, tool declarations and the history), the tokens the
  stand-in estimates from that (4 characters a token) and the history entries (`contents`).

With `--delta`, after the series, a prune check on each bare graph: a conversation seeded and
then grown by `--grow` real text turns (with 49, the DeltaChannel replays 98 writes: as deep as
its default snapshot frequency lets it), its `aget_state` timed, then pruned as a pruner that
knows nothing of DeltaChannel would (all but the latest checkpoint deleted, with their writes
and the blobs no kept checkpoint names), read again, and continued by one more turn; and what
`AsyncPostgresSaver.aprune(keep_latest)` says of the thread. Once more for the DeltaChannel with
the history written back as an `Overwrite` before the prune, which stores a full snapshot in
the checkpoint the prune keeps.

The series are interleaved sample by sample in rotating order (load drift hits them alike); a
full garbage collection runs before each measured turn so that seeding's garbage is not charged
to it. The issue's targets, to be read from the output: Countersign's turn at 300 prior
messages at most 1.3x its turn at 10, and its stored bytes per conversation not growing once
its context window is full.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import itertools
import json
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import fmean, median
from typing import Any, Protocol

import asyncpg
from langchain_core.messages import AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.types import Overwrite
from pydantic import ValidationError

from bench.common import args as cli
from bench.common.harness import (
    TEXT_ANSWER_PREFIX,
    TOOL_ANSWER,
    TOOL_PROMPT,
    Conversation,
    Series,
    Stage,
    interleave,
    open_stage,
    pg_version,
    report_main,
    running_bot,
    settle,
)
from bench.common.meter import Bytes, PgMeter
from bench.common.prior import HistoryWriter, Templates, exchange_sizes, question
from bench.common.report import machine_lines
from bench.common.seeds import SeedsGraph, open_seeds_stack
from bench.common.slack_path import send_as_slack, thread_ref
from bot.base.conversation import ConversationRef
from bot.settings import AgentSettings, Settings
from bot.turns.context.window import DEFAULT_CONTEXT_TOKENS
from bot.turns.runner import TurnRunner
from countersign.server import BotServer
from tests.standins.gemini import GeminiRequest
from tests.standins.slack_events import SlackEventSender

DEFAULT_PRIOR = (10, 100, 300)
READS = 15
"""State reads timed per figure (the median is shown)."""
DEFAULT_GROW = 49
"""Text turns for the prune check: 98 updates of `messages`, the deepest replay below the
`DeltaChannel`'s default snapshot frequency (100) after the snapshot the seed leaves."""


# --- the two sides -------------------------------------------------------------------------


class Side(Protocol):
    """One way of running a conversation, measured the same way as the other."""

    name: str
    meter: PgMeter

    async def seed(self, history: Sequence[AnyMessage]) -> Conversation:
        """A new conversation whose state already holds `history` (may be empty)."""

    async def turn(self, conversation: Conversation, text: str, answer: str) -> float:
        """Run one real turn; return its latency in ms once all of its work is done.

        Args:
            conversation: where.
            text: the person's message.
            answer: how the answer must start (anything else is an error).
        """

    async def stored_messages(self, conversation: Conversation) -> list[AnyMessage]:
        """The messages in the conversation's graph state."""

    async def tidy(self, conversation: Conversation) -> None:
        """What the side does to the conversation's storage after a turn (the bot prunes; the bare graph nothing)."""


BARE_NAME = "bare graph (seeds, add_messages)"
DELTA_NAME = "bare graph (seeds, DeltaChannel)"


class BareSide:
    """The template's graph on `AsyncPostgresSaver`, one `ainvoke` per turn.

    Args:
        graph: the compiled seeds graph.
        meter: the meter on its database.
        recursion_limit: steps per invocation.
        name: the series' name.
        saver: the graph's checkpointer.
        url: its database.
    """

    def __init__(
        self,
        graph: SeedsGraph,
        meter: PgMeter,
        recursion_limit: int,
        *,
        name: str = BARE_NAME,
        saver: AsyncPostgresSaver,
        url: str,
    ) -> None:
        self._graph = graph
        self.meter = meter
        self._limit = recursion_limit
        self.name = name
        self.saver = saver
        self.url = url

    def _config(self, conversation: Conversation) -> RunnableConfig:
        return {"configurable": {"thread_id": conversation.thread_id}, "recursion_limit": self._limit}

    async def seed(self, history: Sequence[AnyMessage]) -> Conversation:
        """A new thread; `history` written as if `llm_call` had just stored it."""
        conversation = Conversation(thread_id=f"bench:{uuid.uuid4().hex}")
        if history:
            await self._graph.aupdate_state(self._config(conversation), {"messages": list(history)}, as_node="llm_call")
        return conversation

    async def turn(self, conversation: Conversation, text: str, answer: str) -> float:
        """`ainvoke` with one new human message, timed."""
        graph_input: Any = {"messages": [HumanMessage(content=text)]}
        started = time.perf_counter()
        result = await self._graph.ainvoke(graph_input, self._config(conversation))
        elapsed = time.perf_counter() - started
        said = result["messages"][-1].text
        if not said.startswith(answer):
            raise RuntimeError(f"{self.name}: unexpected answer {said[:80]!r}")
        conversation.turns += 1
        return elapsed * 1000

    async def tidy(self, conversation: Conversation) -> None:
        """Nothing: the template's graph keeps every checkpoint."""

    async def stored_messages(self, conversation: Conversation) -> list[AnyMessage]:
        """The thread's messages."""
        state = await self._graph.aget_state(self._config(conversation))
        return list(state.values.get("messages", []))

    async def read_ms(self, conversation: Conversation, reads: int = READS) -> float:
        """Median time of `aget_state` (the read a turn starts with), over `reads` reads."""
        times = []
        for _ in range(reads):
            started = time.perf_counter()
            await self._graph.aget_state(self._config(conversation))
            times.append((time.perf_counter() - started) * 1000)
        return median(times)

    async def snapshot(self, conversation: Conversation) -> None:
        """Write the whole history back as an `Overwrite`: a `DeltaChannel` then stores a full snapshot."""
        messages = await self.stored_messages(conversation)
        update: Any = {"messages": Overwrite(messages)}
        await self._graph.aupdate_state(self._config(conversation), update, as_node="llm_call")


class SlackSide:
    """The whole bot: signed Slack events in, the answer's `chat.postMessage` out.

    Args:
        bot: the running bot.
        events: signs and sends events to it.
        stage: the stand-ins and the ts clock.
        meter: the meter on the bot's database.
    """

    name = "Countersign (whole Slack path)"

    def __init__(self, bot: BotServer, events: SlackEventSender, stage: Stage, meter: PgMeter) -> None:
        self._bot = bot
        self._events = events
        self._stage = stage
        self.meter = meter

    @staticmethod
    def _ref(conversation: Conversation) -> ConversationRef:
        return thread_ref(conversation.ts)

    async def seed(self, history: Sequence[AnyMessage]) -> Conversation:
        """A new Slack thread; `history` written into the state of the graph the bot picks for it.

        The bot keeps no other record of a conversation before its first message: the first
        real turn (an `app_mention`) creates its rows, as in production.
        """
        ts = self._stage.clock.next()
        conversation = Conversation(thread_id=thread_ref(ts).thread_id, ts=ts)
        if history:
            runner = self._runner()
            ref = self._ref(conversation)
            graph = await runner.graph_for(ref)
            await graph.aupdate_state(runner.config(ref), {"messages": list(history)}, as_node="llm_call")
        return conversation

    async def turn(self, conversation: Conversation, text: str, answer: str) -> float:
        """Send the message as Slack would, wait for the answer, then for the bot to be idle."""
        latency_ms = await self.send(conversation, text, answer)
        await self.idle()
        return latency_ms

    async def idle(self) -> None:
        """Wait until the bot's background work (turns, hourglass, card updates) is done."""
        await settle(self._bot)

    async def send(self, conversation: Conversation, text: str, answer: str) -> float:
        """Send the message as Slack would and wait for its answer only; return the ms until it was posted.

        The bot may still be busy with the turn's work after the answer (the hourglass, the last
        checkpoint); `turn` waits for that too, this does not.
        """
        return await send_as_slack(self._events, self._stage, conversation, text, answer, self.name)

    async def tidy(self, conversation: Conversation) -> None:
        """The conversation's next prune (the upkeep's pass every 10 s, once it is due).

        A conversation is due every `PRUNE_EVERY_RUNS` runs; a sample has fewer, and its seeded
        checkpoint holds the whole prior history at once (one grown turn by turn never does),
        so it is made due here: "kept" is what a conversation holds right after a prune, and up
        to `PRUNE_EVERY_RUNS` runs' checkpoints more in between.
        """
        runtime = self._bot.runtime
        if runtime is not None and runtime.service.housekeeping is not None:
            await runtime.database.pool.execute(
                "UPDATE conversations SET prune_due = true WHERE thread_id = $1", conversation.thread_id
            )
            await runtime.service.housekeeping.prune_checkpoints()

    async def stored_messages(self, conversation: Conversation) -> list[AnyMessage]:
        """The messages in the state of the conversation's graph."""
        runner = self._runner()
        ref = self._ref(conversation)
        graph = await runner.graph_for(ref)
        state = await graph.aget_state(runner.config(ref))
        return list(state.values.get("messages", []))

    def _runner(self) -> TurnRunner:
        """The bot's `TurnRunner`: it picks a conversation's graph (agent kind, saver) as a turn does.

        The core offers no public way to its graphs, so this reaches into the service.
        """
        runtime = self._bot.runtime
        assert runtime is not None
        return runtime.service._runner


async def templates_of(side: Side) -> Templates:
    """Run one real tool turn (`get`) on `side` and take its four messages as templates."""
    conversation = await side.seed([])
    await side.turn(conversation, TOOL_PROMPT, TOOL_ANSWER)
    return Templates.from_turn(await side.stored_messages(conversation))


# --- sampling ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ModelCall:
    """One request the Gemini stand-in received.

    Attributes:
        chars: characters of its JSON body.
        contents: entries in its `contents` (the history as sent: one per turn of a role).
    """

    chars: int
    contents: int

    @classmethod
    def of(cls, request: GeminiRequest) -> ModelCall:
        """Measure one request."""
        return cls(chars=len(json.dumps(request.body, ensure_ascii=False)), contents=len(request.contents))


@dataclass
class Figures:
    """What the kept measured turns of one (side, prior) series showed."""

    side: str
    prior: int
    latency: Series
    process_cpu_ms: list[float] = field(default_factory=list)
    server_cpu_ms: list[float] = field(default_factory=list)
    written: list[Bytes] = field(default_factory=list)
    wal_bytes: list[int] = field(default_factory=list)
    stored: list[Bytes] = field(default_factory=list)
    calls: list[list[ModelCall]] = field(default_factory=list)
    lead_in_calls: list[float] = field(default_factory=list)
    server_cpu_known: bool = True

    @property
    def n(self) -> int:
        """Kept samples."""
        return self.latency.count

    def cpu_ms(self) -> float:
        """Mean CPU per turn, process + server (process alone when the server is not measurable)."""
        server = fmean(self.server_cpu_ms) if self.server_cpu_known and self.server_cpu_ms else 0.0
        return fmean(self.process_cpu_ms) + server

    def mean_bytes(self, pick: Callable[[Bytes], int], of: Sequence[Bytes]) -> float:
        """Mean of one `Bytes` field over the samples."""
        return fmean(pick(b) for b in of) if of else float("nan")

    def per_call(self, pick: Callable[[ModelCall], int]) -> float:
        """Median over all model calls of the series."""
        values = [pick(call) for calls in self.calls for call in calls]
        return median(values) if values else float("nan")


class ContextSampler:
    """One (side, prior) series: each sample is a new conversation (see the module docstring).

    Args:
        side: the side.
        prior: stored messages before the measured turn.
        lead_in: real turns between the seed and the measured turn.
        history: the seeded messages (`prior - 2 * lead_in` of them).
        stage: the stand-ins.
        questions: numbers for unique questions (shared by all series).
    """

    def __init__(
        self,
        side: Side,
        prior: int,
        lead_in: int,
        history: list[AnyMessage],
        stage: Stage,
        questions: itertools.count[int],
    ) -> None:
        self.side = side
        self._lead_in = lead_in
        self._history = history
        self._stage = stage
        self._questions = questions
        self.figures = Figures(side=side.name, prior=prior, latency=Series(f"{side.name}, {prior} prior"))

    def _question(self) -> tuple[str, str]:
        text = question(next(self._questions))
        return text, TEXT_ANSWER_PREFIX + text[:40]

    async def sample(self, *, keep: bool) -> None:
        """Seed a conversation, run its lead-in turns, then measure one more text turn."""
        side, stage = self.side, self._stage
        conversation = await side.seed(self._history)
        stage.gemini.requests.clear()
        for _ in range(self._lead_in):
            await side.turn(conversation, *self._question())
        lead_in_calls = len(stage.gemini.requests) / self._lead_in
        text, answer = self._question()
        stage.gemini.requests.clear()
        gc.collect()
        mark = await side.meter.mark()
        cpu_started = time.process_time()
        latency_ms = await side.turn(conversation, text, answer)
        process_cpu_ms = (time.process_time() - cpu_started) * 1000
        delta = await side.meter.since(mark, conversation.thread_id)
        await side.tidy(conversation)
        kept = await side.meter.stored(conversation.thread_id)
        calls = [ModelCall.of(request) for request in stage.gemini.requests]
        stage.gemini.requests.clear()
        if not keep:
            return
        figures = self.figures
        figures.latency.samples_ms.append(latency_ms)
        figures.process_cpu_ms.append(process_cpu_ms)
        if delta.cpu_s is None:
            figures.server_cpu_known = False
        else:
            figures.server_cpu_ms.append(delta.cpu_s * 1000)
        figures.written.append(delta.written)
        figures.wal_bytes.append(delta.wal_bytes)
        figures.stored.append(kept)
        figures.calls.append(calls)
        figures.lead_in_calls.append(lead_in_calls)


@contextlib.asynccontextmanager
async def bare_side(stage: Stage, *, delta: bool = False) -> AsyncIterator[BareSide]:
    """The template's graph on a fresh database, with the bot's model client, tools and prompt (`open_seeds_stack`).

    `delta`: its `messages` in a `DeltaChannel` (`DeltaSeedsState`).
    """
    async with (
        stage.database() as url,
        PgMeter.open(url) as meter,
        open_seeds_stack(stage.settings(url), delta=delta) as stack,
    ):
        yield BareSide(
            stack.graph,
            meter,
            stack.recursion_limit,
            name=DELTA_NAME if delta else BARE_NAME,
            saver=stack.saver,
            url=url,
        )


@contextlib.asynccontextmanager
async def slack_side(stage: Stage, context_tokens: int | None = None) -> AsyncIterator[SlackSide]:
    """The real bot on a fresh database (with `COUNTERSIGN_CONTEXT_TOKENS` = `context_tokens` when given)."""

    def adjust(settings: Settings) -> Settings:
        if context_tokens is None:
            return settings
        agent = settings.agent.model_copy(update={"context_tokens": context_tokens})
        return settings.model_copy(update={"agent": agent})

    async with (
        stage.database() as url,
        PgMeter.open(url) as meter,
        running_bot(stage, url, adjust) as (bot, events),
    ):
        yield SlackSide(bot, events, stage, meter)


# --- a conversation grown turn by turn, then pruned naively (--delta) -----------------------

_CHECKPOINTS_SQL = "SELECT count(*) FROM checkpoints WHERE thread_id = $1"

# What a pruner that knows nothing of DeltaChannel does: per namespace, keep the latest
# checkpoint, delete the others and their writes, forget the parent, drop unreferenced blobs.
_NAIVE_PRUNE_SQL = (
    """
    DELETE FROM checkpoint_writes w WHERE w.thread_id = $1
    AND (w.checkpoint_ns, w.checkpoint_id) NOT IN (
        SELECT DISTINCT ON (checkpoint_ns) checkpoint_ns, checkpoint_id FROM checkpoints
        WHERE thread_id = $1 ORDER BY checkpoint_ns, checkpoint_id DESC)
    """,
    """
    DELETE FROM checkpoints c WHERE c.thread_id = $1
    AND (c.checkpoint_ns, c.checkpoint_id) NOT IN (
        SELECT DISTINCT ON (checkpoint_ns) checkpoint_ns, checkpoint_id FROM checkpoints
        WHERE thread_id = $1 ORDER BY checkpoint_ns, checkpoint_id DESC)
    """,
    "UPDATE checkpoints SET parent_checkpoint_id = NULL WHERE thread_id = $1",
    """
    DELETE FROM checkpoint_blobs b WHERE b.thread_id = $1 AND NOT EXISTS (
        SELECT 1 FROM checkpoints c
        WHERE c.thread_id = b.thread_id AND c.checkpoint_ns = b.checkpoint_ns
        AND c.checkpoint -> 'channel_versions' ->> b.channel = b.version)
    """,
)


async def naive_prune(url: str, thread_id: str) -> None:
    """Delete all but the latest checkpoint of `thread_id` (per namespace), as a naive pruner would."""
    connection = await asyncpg.connect(url)
    try:
        async with connection.transaction():
            for sql in _NAIVE_PRUNE_SQL:
                await connection.execute(sql, thread_id)
    finally:
        await connection.close()


async def checkpoint_rows(url: str, thread_id: str) -> int:
    """Rows of `thread_id` in `checkpoints`."""
    connection = await asyncpg.connect(url)
    try:
        return int(await connection.fetchval(_CHECKPOINTS_SQL, thread_id))
    finally:
        await connection.close()


@dataclass(frozen=True, slots=True)
class PruneCheck:
    """A conversation grown turn by turn, then pruned to its latest checkpoint, then continued.

    Attributes:
        series: the side, and how it was pruned.
        turns: real text turns after the seed.
        checkpoints: the thread's checkpoints before the prune.
        read_ms: `aget_state` before the prune (median).
        messages: messages in the state before the prune.
        library: what `AsyncPostgresSaver.aprune(keep_latest)` said, asked afterwards.
        kept: checkpoints after the prune.
        messages_after: messages `aget_state` returned after the prune.
        read_after_ms: `aget_state` after the prune (median).
        contents_next: history entries the model was sent in the next turn.
        messages_next: messages in the state after the next turn.
    """

    series: str
    turns: int
    checkpoints: int
    read_ms: float
    messages: int
    library: str
    kept: int
    messages_after: int
    read_after_ms: float
    contents_next: int
    messages_next: int


async def prune_check(
    side: BareSide,
    history: Sequence[AnyMessage],
    grow: int,
    stage: Stage,
    questions: itertools.count[int],
    *,
    snapshot_first: bool = False,
) -> PruneCheck:
    """Seed `history`, run `grow` text turns, prune naively, read the state, run one more turn.

    `snapshot_first`: write the history back as an `Overwrite` before the prune (a `DeltaChannel`
    then holds a full snapshot in the checkpoint the prune keeps).
    """

    def ask() -> tuple[str, str]:
        text = question(next(questions))
        return text, TEXT_ANSWER_PREFIX + text[:40]

    conversation = await side.seed(history)
    for _ in range(grow):
        await side.turn(conversation, *ask())
    checkpoints = await checkpoint_rows(side.url, conversation.thread_id)
    read_ms = await side.read_ms(conversation)
    messages = len(await side.stored_messages(conversation))
    if snapshot_first:
        await side.snapshot(conversation)
    await naive_prune(side.url, conversation.thread_id)
    kept = await checkpoint_rows(side.url, conversation.thread_id)
    try:
        await side.saver.aprune([conversation.thread_id], strategy="keep_latest")
        library = "pruned"
    except NotImplementedError:
        library = "refused"
    messages_after = len(await side.stored_messages(conversation))
    read_after_ms = await side.read_ms(conversation)
    stage.gemini.requests.clear()
    await side.turn(conversation, *ask())
    contents = len(stage.gemini.requests[0].contents) if stage.gemini.requests else 0
    stage.gemini.requests.clear()
    how = ", snapshot, then pruned" if snapshot_first else ", pruned"
    return PruneCheck(
        series=side.name + how,
        turns=grow,
        checkpoints=checkpoints,
        read_ms=read_ms,
        messages=messages,
        library=library,
        kept=kept,
        messages_after=messages_after,
        read_after_ms=read_after_ms,
        contents_next=contents,
        messages_next=len(await side.stored_messages(conversation)),
    )


# --- the run -------------------------------------------------------------------------------


@dataclass
class Results:
    """What one run measured.

    Attributes:
        figures: per (side, prior), ordered by prior, then bare, DeltaChannel, Countersign.
        prunes: the prune checks (with `--delta` only).
    """

    figures: list[Figures]
    prunes: list[PruneCheck] = field(default_factory=list)


async def bench_context(
    stage: Stage,
    priors: Sequence[int],
    turns: int,
    warmup: int,
    lead_in: int,
    context_tokens: int | None = None,
    *,
    delta: bool = False,
    grow: int = DEFAULT_GROW,
) -> Results:
    """Open the sides, write their histories, and interleave every (side, prior) series.

    `context_tokens` overrides the bot's `COUNTERSIGN_CONTEXT_TOKENS` (None: its default).
    `delta` adds the template's graph with a `DeltaChannel` (on a database of its own) and, after the
    series, the prune checks on both bare graphs, each grown by `grow` text turns.
    """
    async with contextlib.AsyncExitStack() as stack:
        bare = await stack.enter_async_context(bare_side(stage))
        bares = [bare]
        if delta:
            bares.append(await stack.enter_async_context(bare_side(stage, delta=True)))
        whole = await stack.enter_async_context(slack_side(stage, context_tokens))
        sides: list[Side] = [*bares, whole]
        questions = itertools.count(1)
        samplers: list[ContextSampler] = []
        writers: dict[str, HistoryWriter] = {}
        for side in sides:
            writer = writers[side.name] = HistoryWriter(await templates_of(side), stage.target.url())
            for prior in priors:
                history = writer.history(prior - 2 * lead_in, seed=prior)
                samplers.append(ContextSampler(side, prior, lead_in, history, stage, questions))
        ordered = sorted(samplers, key=lambda s: (s.figures.prior, sides.index(s.side)))
        await interleave(ordered, turns, warmup)
        results = Results(figures=[sampler.figures for sampler in ordered])
        if delta:
            seeded = min(priors) - 2 * lead_in
            for side in bares:
                history = writers[side.name].history(seeded, seed=0)
                results.prunes.append(await prune_check(side, history, grow, stage, questions))
            history = writers[bares[-1].name].history(seeded, seed=0)
            results.prunes.append(await prune_check(bares[-1], history, grow, stage, questions, snapshot_first=True))
        return results


# --- report --------------------------------------------------------------------------------


def _kib(value: float) -> str:
    return f"{value / 1024:.1f}"


def _ms(value: float) -> str:
    return f"{value:.1f}"


def _row(cells: Sequence[str], widths: Sequence[int]) -> str:
    first, *rest = cells
    return (
        "  "
        + f"{first:<{widths[0]}}"
        + "".join(f"{cell:>{width}}" for cell, width in zip(rest, widths[1:], strict=True))
    )


def _table(title: str, head: Sequence[str], rows: Sequence[Sequence[str]], note: Sequence[str] = ()) -> list[str]:
    widths = [max(len(head[0]), *(len(r[0]) for r in rows)) + 2]
    widths += [max(len(head[i]), *(len(r[i]) for r in rows)) + 2 for i in range(1, len(head))]
    return [title, _row(head, widths), *(_row(r, widths) for r in rows), *note]


def _label(f: Figures) -> str:
    return f"{f.side} @ {f.prior}"


def cost_lines(figures: Sequence[Figures]) -> list[str]:
    """Latency and CPU per measured turn."""
    rows = []
    for f in figures:
        server = fmean(f.server_cpu_ms) if f.server_cpu_known and f.server_cpu_ms else None
        rows.append(
            [
                _label(f),
                str(f.n),
                _ms(f.latency.p(50)),
                _ms(f.latency.p(90)),
                _ms(fmean(f.process_cpu_ms)) if f.process_cpu_ms else "-",
                _ms(server) if server is not None else "n/a",
                _ms(f.cpu_ms()) if f.process_cpu_ms else "-",
            ]
        )
    head = ["series @ prior messages", "n", "p50 ms", "p90 ms", "CPU proc", "CPU PG", "CPU total"]
    return _table("One more text turn: latency, and CPU ms per turn (mean)", head, rows)


def bytes_lines(figures: Sequence[Figures]) -> list[str]:
    """Bytes written per measured turn, and bytes kept per conversation afterwards."""
    rows = []
    for f in figures:
        rows.append(
            [
                _label(f),
                _kib(f.mean_bytes(lambda b: b.langgraph_raw, f.written)),
                _kib(f.mean_bytes(lambda b: b.langgraph_stored, f.written)),
                _kib(f.mean_bytes(lambda b: b.ours_raw, f.written)),
                _kib(fmean(f.wal_bytes)) if f.wal_bytes else "-",
                _kib(f.mean_bytes(lambda b: b.langgraph_raw, f.stored)),
                _kib(f.mean_bytes(lambda b: b.langgraph_stored, f.stored)),
                _kib(f.mean_bytes(lambda b: b.ours_raw, f.stored)),
            ]
        )
    head = ["series @ prior messages", "LG raw", "LG disk", "ours", "WAL", "kept LG raw", "LG disk", "ours"]
    note = [
        "  (written per turn, then kept per conversation after the seed, lead-in and measured turns and,",
        "   for Countersign, one pass of the upkeep's pruning (the bare graph keeps every checkpoint);",
        "   LG = LangGraph's checkpoint tables, raw = values' own length, disk = as PostgreSQL stores them;",
        "   ours = our tables' rows of the conversation; WAL = the server's whole WAL for the turn)",
    ]
    return _table("Bytes (KiB, mean over samples)", head, rows, note)


def model_lines(figures: Sequence[Figures]) -> list[str]:
    """What the model was sent per call of the measured turn."""
    rows = []
    for f in figures:
        per_turn = fmean(len(calls) for calls in f.calls) if f.calls else float("nan")
        lead_in = fmean(f.lead_in_calls) if f.lead_in_calls else float("nan")
        rows.append(
            [
                _label(f),
                f"{lead_in:.1f}",
                f"{per_turn:.1f}",
                f"{f.per_call(lambda c: c.chars):.0f}",
                f"{f.per_call(lambda c: c.chars) / 4:.0f}",
                f"{f.per_call(lambda c: c.contents):.0f}",
            ]
        )
    head = ["series @ prior messages", "lead-in calls", "calls/turn", "chars/call", "~tokens/call", "contents/call"]
    note = [
        "  (lead-in calls = model calls per lead-in turn, where a context window's first summary would be",
        "   made; then, for the measured turn, calls and the median per call of the request body as JSON:",
        "   system prompt, tool declarations and history; ~tokens = chars / 4, the stand-in's estimate)",
    ]
    return _table("Sent to the model", head, rows, note)


def ratio_lines(figures: Sequence[Figures]) -> list[str]:
    """Turn at the largest prior / turn at the smallest, for each side."""
    priors = sorted({f.prior for f in figures})
    if len(priors) < 2:
        return []
    low, high = priors[0], priors[-1]
    lines = [f"Turn at {high} / turn at {low} prior messages (docs/decisions/0013: Countersign's p50 at most 1.3x)"]
    for side in dict.fromkeys(f.side for f in figures):
        a = next(f for f in figures if f.side == side and f.prior == low)
        b = next(f for f in figures if f.side == side and f.prior == high)
        ratios = {
            "p50": (b.latency.p(50), a.latency.p(50)),
            "p90": (b.latency.p(90), a.latency.p(90)),
            "CPU": (b.cpu_ms(), a.cpu_ms()),
            "written": (_written(b), _written(a)),
            "kept": (_kept(b), _kept(a)),
            "chars/call": (b.per_call(_chars), a.per_call(_chars)),
        }
        cells = "".join(
            f"   {name} {high_value / low_value:>5.2f}x" for name, (high_value, low_value) in ratios.items()
        )
        lines.append(f"  {side:<34}{cells}")
    lines.append("  (written = LangGraph + our tables per turn, kept = per conversation, both as stored on disk)")
    return lines


def _chars(call: ModelCall) -> int:
    return call.chars


def _written(f: Figures) -> float:
    return f.mean_bytes(lambda b: b.langgraph_stored + b.ours_stored, f.written)


def _kept(f: Figures) -> float:
    return f.mean_bytes(lambda b: b.langgraph_stored + b.ours_stored, f.stored)


def prune_lines(checks: Sequence[PruneCheck]) -> list[str]:
    """The prune checks: a conversation grown turn by turn, pruned to its latest checkpoint, continued."""
    rows = [
        [
            c.series,
            str(c.turns),
            str(c.checkpoints),
            str(c.messages),
            _ms(c.read_ms),
            str(c.kept),
            str(c.messages_after),
            _ms(c.read_after_ms),
            c.library,
            str(c.contents_next),
            str(c.messages_next),
        ]
        for c in checks
    ]
    head = [
        "conversation",
        "turns",
        "ckpts",
        "msgs",
        "read ms",
        "kept",
        "msgs",
        "read ms",
        "aprune",
        "model got",
        "msgs",
    ]
    note = [
        "  (seeded history, then `turns` real text turns: checkpoints, messages and aget_state's median time;",
        "   then all but the latest checkpoint deleted with their writes and unreferenced blobs, as a naive",
        "   pruner would: checkpoints kept, messages aget_state returns, its time; aprune = what",
        "   AsyncPostgresSaver.aprune(keep_latest) then says; then one more turn: history entries sent to the",
        "   model, messages stored after it. 'snapshot' = the history written back as an Overwrite first)",
    ]
    return _table("Pruned to the latest checkpoint (--delta)", head, rows, note)


def header_lines(args: argparse.Namespace) -> list[str]:
    """What the run did."""
    return [
        "Countersign context benchmark: one more text turn after N prior messages (python -m bench.context)",
        f"priors {', '.join(map(str, args.prior))}; {args.turns} kept samples per series after {args.warmup} warm-up;",
        f"each sample a new conversation: history seeded in one update, {args.lead_in} lead-in turn(s), then the",
        "measured turn. Same client and stand-in on both sides; bare = template's graph sending the whole history.",
        "Countersign's context budget: COUNTERSIGN_CONTEXT_TOKENS="
        + (f"{args.context_tokens}" if args.context_tokens else f"{DEFAULT_CONTEXT_TOKENS} (the default)")
        + ".",
        *(
            [
                "--delta: also the template's graph with messages in a DeltaChannel(_messages_delta_reducer) (beta;",
                f"snapshot every 100 updates), and the prune checks ({args.grow} text turns grown).",
            ]
            if args.delta
            else []
        ),
    ]


def parse_priors(text: str) -> list[int]:
    """`10,100,300` -> [10, 100, 300] (sorted, unique)."""
    try:
        values = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of numbers: {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError("no prior message counts given")
    return values


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    parser = cli.parser("bench.context", __doc__)
    parser.add_argument(
        "--prior",
        type=parse_priors,
        default=list(DEFAULT_PRIOR),
        help="prior messages before the measured turn, comma-separated (default 10,100,300)",
    )
    cli.add_turns(
        parser,
        turns=20,
        warmup=1,
        turns_help="kept samples (measured turns) per series",
        warmup_help="discarded samples per series first",
    )
    parser.add_argument(
        "--context-tokens", type=int, default=None, help="the bot's COUNTERSIGN_CONTEXT_TOKENS (default: its default)"
    )
    parser.add_argument(
        "--delta",
        action="store_true",
        help="add the template's graph with a DeltaChannel for messages, and the prune checks",
    )
    parser.add_argument(
        "--grow",
        type=int,
        default=DEFAULT_GROW,
        help=f"with --delta: text turns a prune check's conversation grows by (default {DEFAULT_GROW})",
    )
    parser.add_argument(
        "--lead-in", type=int, default=1, help="real text turns after the seed, before the measured one (>= 1)"
    )
    args = parser.parse_args(argv)
    if args.turns < 1 or args.warmup < 0 or args.lead_in < 1 or args.grow < 1:
        parser.error("--turns, --lead-in and --grow must be at least 1, --warmup at least 0")
    if args.context_tokens is not None:
        try:
            AgentSettings.model_validate({"COUNTERSIGN_CONTEXT_TOKENS": args.context_tokens})
        except ValidationError as exc:
            parser.error(f"--context-tokens: {exc.errors()[0]['msg']} (the bot's own bounds)")
    for prior in args.prior:
        try:
            exchange_sizes(prior - 2 * args.lead_in)
        except ValueError:
            parser.error(
                f"--prior {prior}: with --lead-in {args.lead_in}, {prior} - {2 * args.lead_in} seeded messages "
                "must be 0, 2 or at least 4 (whole exchanges)"
            )
    return args


async def run(args: argparse.Namespace) -> list[str]:
    """Run the benchmark and return the report's lines."""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="countersign-bench-") as tmp:
        async with open_stage(Path(tmp)) as stage:
            version = await pg_version(stage)
            results = await bench_context(
                stage,
                args.prior,
                args.turns,
                args.warmup,
                args.lead_in,
                args.context_tokens,
                delta=args.delta,
                grow=args.grow,
            )
    figures = results.figures
    lines = [*header_lines(args), "", *machine_lines(version), ""]
    lines += [*cost_lines(figures), "", *bytes_lines(figures), "", *model_lines(figures), ""]
    lines += [*ratio_lines(figures), ""]
    if results.prunes:
        lines += [*prune_lines(results.prunes), ""]
    lines.append(f"total run time {time.perf_counter() - started:.1f} s")
    return lines


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: run the benchmark and print its report."""
    args = parse_args(argv)
    report_main(lambda: run(args))


if __name__ == "__main__":
    main()
