"""Turn latency: the bare graph against the whole Slack path, delegation overhead, click acks.

Run it with::

    uv run --frozen python -m bench.turns [--turns N] [--conversations 50] [--profile]

It prints figures; nothing here asserts a time. As in the end-to-end tests, the real bot
(`BotServer`, Bolt over HTTP) runs in this process and event loop with embedded PostgreSQL (or
`TEST_DATABASE_URL`) and local stand-ins for Slack, Gemini and the HTTP endpoint the
`http_request` tool calls; their (small) cost is part of the Slack figures, as a network's
would be. Approve clicks come from a child process (`bench.click_sender`), built and signed
before each burst and sent each on a connection of its own, so that a burst is not slowed down
by its own sender (docs/decisions/0028).

Phases: six turn series interleaved (bare graph with the scripted model, bare graph with the
Gemini client, whole Slack path; each as a text answer and as one tool round), then a ReAct
turn against a supervisor turn with one delegation doing the same tool call (`bench.delegation`,
same turns and warm-up), then click acks with the bot's default pool and with a pool sized for
the burst, and (`--click-workers`, default 1 and 2) against `countersign run --workers N` in
child processes as production runs it, where the bot has no stand-in in its event loop.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from bench.common import args as cli
from bench.common.clicks import click_lines, click_runs
from bench.common.delegation import bench_delegation, delegation_lines
from bench.common.harness import (
    TEXT_ANSWER,
    TEXT_PROMPT,
    TOOL_ANSWER,
    TOOL_PROMPT,
    Sampler,
    Stage,
    interleave,
    open_stage,
    pg_version,
    report_main,
    running_bot,
)
from bench.common.report import (
    machine_lines,
    milestone_lines,
    profile_lines,
    ratio_lines,
    table,
)
from bench.common.slack_path import SlackTurns
from bot.agents.model import build_chat_model, call_options
from bot.agents.prompts import SYSTEM_PROMPT
from bot.agents.review_agent import ReviewAgent, build_review_agent
from bot.audit.postgres import PostgresAuditStore
from bot.policy.postgres import PostgresConfigStore
from bot.policy.review import ConfiguredPolicy
from bot.reviews.postgres import PostgresApprovalStore
from bot.settings import Settings
from bot.storage.database import open_database
from bot.tools.ledger.postgres import PostgresLedger
from bot.tools.operator import build_registry
from tests.support.scripted_model import ScriptedChatModel, calls, tool_call

PERFORMANCE_MD = (
    "PERFORMANCE.md (2-core machine, scripted model, 3-node turn llm->tool->llm):",
    "  one turn p50: no checkpointer 3.3 ms / InMemorySaver 4.5 ms / AsyncPostgresSaver 12.2 ms",
    "  AsyncPostgresSaver with durability='exit': 5.9 ms; 1 read + 9 write transactions a turn",
    "  interrupt + resume cycle / plain turn: 1.40x; 112-121 messages/s with ten savers",
    "  with the real Gemini client, google-genai history conversion dominated long threads",
)


def scripted_model(target_url: str) -> ScriptedChatModel:
    """The scripted model answering like the Gemini script: text, or one GET then a result."""

    def script(messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            return AIMessage(content=f"{TOOL_ANSWER}{last.content}")
        said = str(last.content).strip()
        if said == TOOL_PROMPT:
            return calls(tool_call("http_request", {"method": "GET", "url": target_url}))
        return AIMessage(content=f"You said: {said}")

    return ScriptedChatModel(script=script)


@contextlib.asynccontextmanager
async def bare_graph(settings: Settings, model: BaseChatModel) -> AsyncIterator[ReviewAgent]:
    """The review agent built as `open_runtime` builds it, on one `AsyncPostgresSaver`.

    Without a platform, so without the rules Discord DMs follow (`bot.policy.dm_rules`): the bench
    talks in a channel.
    """
    registry = build_registry(settings.tools, settings.agent.tools_module)
    async with open_database(settings.database, run_migrations=False) as database:
        audit = PostgresAuditStore(database.pool)
        config = PostgresConfigStore(database.pool, audit)
        yield build_review_agent(
            model=model,
            tools=registry.tools(),
            policy=ConfiguredPolicy(registry, config.load),
            checkpointer=database.savers[0],
            ledger=PostgresLedger(database.pool, PostgresApprovalStore(database.pool, audit)),
            system_prompt=settings.agent.system_prompt or SYSTEM_PROMPT,
            context_tokens=settings.agent.context_tokens,
            model_kwargs=call_options(settings.gemini),
        )


class BareTurns(Sampler):
    """`ainvoke` of the review agent for one new message, each turn on a fresh thread id."""

    def __init__(self, name: str, prompt: str, answer: str, graph: ReviewAgent, stage: Stage, limit: int):
        super().__init__(name, prompt, answer)
        self._graph = graph
        self._stage = stage
        self._limit = limit

    async def sample(self, *, keep: bool) -> None:
        """Run and time one turn; keep the figures unless it is a warm-up turn."""
        config: Any = {
            "configurable": {"thread_id": f"bench:{uuid.uuid4().hex}"},
            "recursion_limit": self._limit,
        }
        graph_input: Any = {"messages": [HumanMessage(content=self.prompt)]}
        first_mark = len(self._stage.marks.items)
        started = time.perf_counter()
        result = await self._graph.ainvoke(graph_input, config)
        elapsed = time.perf_counter() - started
        text = result["messages"][-1].text
        if not text.startswith(self.answer):
            raise RuntimeError(f"{self.name}: unexpected answer {text!r}")
        if not keep:
            return
        self.series.samples_ms.append(elapsed * 1000)
        marks = self._stage.marks.since(first_mark)
        gemini = [stamp for stamp, label in marks if label == "gemini"]
        if gemini:
            self.milestones.add("first Gemini request in", (gemini[0] - started) * 1000)
            if len(gemini) > 1:
                self.milestones.add("last Gemini request in", (gemini[-1] - started) * 1000)
        self.milestones.add("ainvoke returned", elapsed * 1000)


@dataclass
class TurnResults:
    """The six turn series: scripted and Gemini bare graphs, and the Slack path."""

    scripted: list[BareTurns]
    bare: list[BareTurns]
    whole: list[SlackTurns]


KINDS = (("text", TEXT_PROMPT, TEXT_ANSWER), ("tool", TOOL_PROMPT, TOOL_ANSWER))


async def bench_turns(stage: Stage, turns: int, warmup: int, profiler: cProfile.Profile | None) -> TurnResults:
    """Open both bare graphs and the bot (each on its own fresh database) and interleave."""
    async with contextlib.AsyncExitStack() as stack:
        scripted_url = await stack.enter_async_context(stage.database())
        scripted_graph = await stack.enter_async_context(
            bare_graph(stage.settings(scripted_url), scripted_model(stage.target.url()))
        )
        gemini_url = await stack.enter_async_context(stage.database())
        gemini_settings = stage.settings(gemini_url)
        model = build_chat_model(gemini_settings.gemini)
        stack.push_async_callback(model.aclose)
        gemini_graph = await stack.enter_async_context(bare_graph(gemini_settings, model))
        bot_url = await stack.enter_async_context(stage.database())
        bot, events = await stack.enter_async_context(running_bot(stage, bot_url))
        limit = gemini_settings.agent.recursion_limit
        results = TurnResults(
            scripted=[BareTurns(f"bare graph, scripted, {k}", p, a, scripted_graph, stage, limit) for k, p, a in KINDS],
            bare=[BareTurns(f"bare graph, gemini, {k}", p, a, gemini_graph, stage, limit) for k, p, a in KINDS],
            whole=[SlackTurns(f"whole Slack path, {k}", p, a, bot, events, stage) for k, p, a in KINDS],
        )
        await interleave([*results.scripted, *results.bare, *results.whole], turns, warmup)
        if profiler is not None:
            # An extra, unreported series: cProfile slows everything down several times.
            extra = SlackTurns("profiled", TEXT_PROMPT, TEXT_ANSWER, bot, events, stage)
            profiler.enable()
            await interleave([extra], turns, 0)
            profiler.disable()
        return results


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    parser = cli.parser("bench.turns", __doc__)
    cli.add_turns(parser, turns_help="kept turns per latency series")
    parser.add_argument("--conversations", type=int, default=50, help="cards clicked at once")
    parser.add_argument("--rounds", type=int, default=2, help="bursts of concurrent clicks")
    parser.add_argument("--sequential-clicks", type=int, default=20, help="one-at-a-time clicks")
    parser.add_argument("--stall-timeout", type=float, default=30.0, help="seconds to wait for a burst's answers")
    parser.add_argument(
        "--click-workers",
        type=_worker_count,
        nargs="*",
        default=[1, 2],
        help="also click against `countersign run --workers N` in child processes, for each N (none: skip)",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="cProfile an extra Slack text series (CPU time) and print it",
    )
    return parser.parse_args(argv)


def _worker_count(text: str) -> int:
    """A `--click-workers` value: a whole number of workers, 1 to 64 (what `--workers` takes).

    Raises:
        argparse.ArgumentTypeError: anything else (argparse prints it and exits with status 2).
    """
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of workers: {text!r}") from None
    if not 1 <= count <= 64:
        raise argparse.ArgumentTypeError(f"a number of workers is 1 to 64, not {count} (give no value to skip)")
    return count


def header_lines(args: argparse.Namespace) -> list[str]:
    """What is measured, and why the comparison is fair."""
    return [
        "Countersign turn benchmark: times in ms, percentiles over kept samples (warm-up excluded)",
        "",
        "Same model on both sides: the Gemini stand-in (answers at once) reached through the real",
        "client (GeminiChatModel from build_chat_model + call_options, HTTP on 127.0.0.1) in the",
        "bare graph AND in the bot, so whole/bare isolates what the bot adds around the graph:",
        "Bolt verification and dispatch, the service (dedupe insert, conversation touch, advisory",
        "lock, settle = aget_state), the hourglass (reactions.add/remove) and chat.postMessage.",
        "The 'scripted' rows (ScriptedChatModel: no HTTP, no google-genai) are the graph on",
        "AsyncPostgresSaver alone, the setting PERFORMANCE.md measured.",
        f"Each turn is a new thread (one app_mention = one thread); {args.turns} kept turns per",
        f"series after {args.warmup} warm-up turns, one conversation at a time, the six series",
        "interleaved turn by turn in rotating order (load drift hits them alike). Bare: ainvoke",
        "timed. Whole: signed app_mention sent -> the stand-in records the answer's",
        "chat.postMessage. 'tool' = one ungated tool round (http_request GET to a local target).",
        "The bot, PostgreSQL client, stand-ins and mention sender share one process and loop;",
        "Approve clicks come from a separate process (bench.click_sender), as Slack's would.",
    ]


def turn_lines(results: TurnResults) -> list[str]:
    """The turn table, the whole/bare ratios and where the time goes."""
    rows = [t.series for t in [*results.scripted, *results.bare, *results.whole]]
    rows += [t.acks for t in results.whole]
    pairs = [
        (kind, whole.series, bare.series)
        for (kind, _, _), whole, bare in zip(KINDS, results.whole, results.bare, strict=True)
    ]
    groups = [t.milestones for pair in zip(results.bare, results.whole, strict=True) for t in pair]
    return [
        *table("Turn latency", rows, (50, 95, 99)),
        "",
        *ratio_lines(pairs),
        "",
        *milestone_lines(groups),
    ]


async def run(args: argparse.Namespace) -> list[str]:
    """Run every phase and return the report's lines."""
    # CPU time, not wall time: time spent waiting in epoll would otherwise top the list.
    profiler = cProfile.Profile(time.process_time) if args.profile else None
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="countersign-bench-") as tmp:
        async with open_stage(Path(tmp)) as stage:
            version = await pg_version(stage)
            results = await bench_turns(stage, args.turns, args.warmup, profiler)
            delegation = await bench_delegation(stage, args.turns, args.warmup)
            clicks = await click_runs(stage, args)
    lines = [*header_lines(args), "", *machine_lines(version), "", *turn_lines(results)]
    lines += ["", *delegation_lines(delegation, args.turns, args.warmup)]
    lines += ["", *click_lines(clicks), "", *PERFORMANCE_MD]
    if profiler is not None:
        lines += ["", *profile_lines(profiler)]
    lines += ["", f"total run time {time.perf_counter() - started:.1f} s"]
    return lines


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: run the benchmark and print its report."""
    args = parse_args(argv)
    report_main(lambda: run(args))


if __name__ == "__main__":
    main()
