"""One ungated MCP call: the whole Slack path against the bare LangGraph ReAct graph, side by side.

Run it with::

    uv run --frozen python -m bench.mcp_turns [--turns 100] [--warmup 10]

It prints figures; nothing here asserts a time. A message whose answer needs one call of the
example notes server's `search_notes` (`examples/mcp/`, over stdio), in a new thread each time,
two series interleaved (`bench.harness.interleave`) after the same warm-up:

- **bare stack**: the seeds' ReAct graph (`bench.seeds.seeds_graph`: `llm_call` <-> LangGraph's
  `ToolNode`, on the bot's `AsyncPostgresSaver` and model client) whose one tool calls the server
  through fastmcp's client on one session held open for the whole run (what a LangGraph app with
  MCP tools does at best); a turn is one `ainvoke`.
- **whole Slack path**: the real bot (`BotServer`, Bolt over HTTP, as `bench.turns` runs it) with
  `COUNTERSIGN_MCP_CONFIG` naming the same server and an admin rule `policy notes__search_notes
  auto` (set with `/countersign` through Slack before the run), so the call runs without a card,
  through the policy, the tool-run ledger and the bot's supervised session; a turn is a signed
  `app_mention` until the stand-in records its answer's `chat.postMessage`.

Both ask the same Gemini stand-in (the bot's model client over HTTP) with the same script, and
reach the same server code (`bench.mcp_server`, which counts its starts): the report says how
many server processes each side started during the run (one each: a session per process, never
a process per call). The target is a p50 within 1.3x of the bare stack's, as for plain messages.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from fastmcp import Client
from fastmcp.client.transports import StdioTransport
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool

from bench.harness import (
    REPO_ROOT,
    TURN_CHANNEL,
    WAIT_S,
    Series,
    Stage,
    interleave,
    open_stage,
    pg_version,
    report_main,
    running_bot,
)
from bench.report import machine_lines, ratio_lines, table
from bench.seeds import SeedsGraph, seeds_graph
from bench.turns import SlackTurns
from bot.agents.model import build_chat_model, call_options
from bot.agents.prompts import SYSTEM_PROMPT
from bot.settings import Settings
from bot.storage.database import open_database
from bot.tools.mcp.tools import result_text
from tests.e2e.conftest import ALICE
from tests.standins.gemini import GeminiReply, GeminiRequest, ScriptedResponder, call, text

SERVER = "notes"
UPSTREAM = "search_notes"
TOOL = f"{SERVER}__{UPSTREAM}"
PROMPT = "where is the wifi password?"
ANSWER = "Notes say: "
FOUND = "the fridge"
"""Words of the note the search finds: an answer without them means the call did not happen."""
TARGET_RATIO = 1.3


def mcp_script(target_url: str) -> ScriptedResponder:
    """The Gemini stand-in's script: `PROMPT` -> one `TOOL` call, its result -> `ANSWER` + the result."""

    def rule(request: GeminiRequest) -> GeminiReply | None:
        if request.function_responses:
            said = json.dumps([response for _, response in request.function_responses])
            return text(ANSWER + said if FOUND in said else "the search found nothing")
        if (request.last_user_text or "").strip() == PROMPT:
            return call(TOOL, {"query": "wifi"})
        return text(f"unexpected: {request.last_user_text!r}")

    return ScriptedResponder(rules=[rule])


def server_command(starts: Path) -> tuple[str, list[str]]:
    """The command and arguments that start the example server, each start noted in `starts`."""
    return sys.executable, ["-m", "bench.mcp_server", str(starts)]


def started(starts: Path) -> int:
    """How many server processes were started so far with `starts`."""
    return len(starts.read_text(encoding="utf-8").splitlines()) if starts.exists() else 0


@contextlib.asynccontextmanager
async def bare_stack(settings: Settings, starts: Path) -> AsyncIterator[SeedsGraph]:
    """The seeds' graph whose one tool is the server's `search_notes`, on one held fastmcp session."""
    command, args = server_command(starts)
    # Its stderr to a file beside `starts`, not into the report.
    log_file = starts.with_suffix(".stderr")
    transport = StdioTransport(
        command=command, args=args, env={}, cwd=str(REPO_ROOT), keep_alive=False, log_file=log_file
    )
    model = build_chat_model(settings.gemini)
    try:
        async with (
            Client(transport, timeout=WAIT_S) as client,
            open_database(settings.database, run_migrations=False) as database,
        ):
            [listed] = [tool for tool in await client.list_tools() if tool.name == UPSTREAM]

            async def search(**arguments: Any) -> str:
                return result_text(await client.call_tool_mcp(UPSTREAM, arguments))

            tool: BaseTool = StructuredTool(
                name=TOOL, description=listed.description or "", args_schema=listed.input_schema, coroutine=search
            )
            yield seeds_graph(
                model=model,
                tools=[tool],
                checkpointer=database.savers[0],
                system_prompt=settings.agent.system_prompt or SYSTEM_PROMPT,
                model_kwargs=call_options(settings.gemini),
            )
    finally:
        await model.aclose()


class SeedsTurns:
    """`ainvoke` of the seeds' graph for `PROMPT`, each turn on a fresh thread id."""

    def __init__(self, graph: SeedsGraph, limit: int) -> None:
        self.series = Series("bare stack (seeds graph, fastmcp session)")
        self._graph = graph
        self._limit = limit

    async def sample(self, *, keep: bool) -> None:
        """Run and time one turn; keep the figure unless it is a warm-up turn."""
        config: RunnableConfig = {
            "configurable": {"thread_id": f"bench:mcp:{uuid.uuid4().hex}"},
            "recursion_limit": self._limit,
        }
        graph_input: Any = {"messages": [HumanMessage(content=PROMPT)]}
        begun = time.perf_counter()
        result = await self._graph.ainvoke(graph_input, config)
        elapsed = time.perf_counter() - begun
        answer = result["messages"][-1].text
        if not answer.startswith(ANSWER):
            raise RuntimeError(f"{self.series.name}: unexpected answer {answer!r}")
        if keep:
            self.series.samples_ms.append(elapsed * 1000)


async def set_auto(stage: Stage, events: Any) -> None:
    """`/countersign policy notes__search_notes auto` by a workspace admin, through Slack.

    Raises:
        RuntimeError: the bot did not say it was updated.
    """
    stage.slack.add_user(ALICE, "alice", is_admin=True)
    url = stage.slack.new_response_url(TURN_CHANNEL, user=ALICE)
    before = len(stage.slack.calls_to("response_url"))
    await events.slash_command("/countersign", f"policy {TOOL} auto", ALICE, TURN_CHANNEL, url)
    answers = await stage.slack.wait_for("response_url", count=before + 1)
    said = str(answers[-1].args.get("text", ""))
    if "Updated" not in said:
        raise RuntimeError(f"the policy was not set: {said!r}")


async def wait_offered(bot: Any) -> None:
    """Wait until the bot offers `TOOL` (its server connected).

    Raises:
        TimeoutError: not within `WAIT_S` seconds.
    """
    registry = bot.runtime.registry
    async with asyncio.timeout(WAIT_S):
        while registry.get(TOOL) is None:  # noqa: ASYNC110 - the registry has no change event to wait on
            await asyncio.sleep(0.05)


async def bench_mcp(stage: Stage, tmp: Path, turns: int, warmup: int) -> tuple[Series, Series, int, int]:
    """Both sides on their own fresh databases, interleaved; their series and server starts."""
    bare_starts, bot_starts = tmp / "bare-starts", tmp / "bot-starts"
    command, args = server_command(bot_starts)
    config = tmp / "mcp.json"
    entry = {"command": command, "args": args, "cwd": str(REPO_ROOT)}
    config.write_text(json.dumps({"mcpServers": {SERVER: entry}}), encoding="utf-8")

    def with_mcp(settings: Settings) -> Settings:
        return settings.model_copy(update={"tools": settings.tools.model_copy(update={"mcp_config": config})})

    async with contextlib.AsyncExitStack() as stack:
        bare_url = await stack.enter_async_context(stage.database())
        bare_settings = stage.settings(bare_url)
        graph = await stack.enter_async_context(bare_stack(bare_settings, bare_starts))
        bot_url = await stack.enter_async_context(stage.database())
        bot, events = await stack.enter_async_context(running_bot(stage, bot_url, with_mcp))
        await wait_offered(bot)
        await set_auto(stage, events)
        bare = SeedsTurns(graph, bare_settings.agent.recursion_limit)
        whole = SlackTurns("whole Slack path, one MCP call (auto)", PROMPT, ANSWER, bot, events, stage)
        await interleave([bare, whole], turns, warmup)
        return bare.series, whole.series, started(bare_starts), started(bot_starts)


def mcp_lines(bare: Series, whole: Series, bare_starts: int, bot_starts: int, turns: int, warmup: int) -> list[str]:
    """The side-by-side table, the ratio against the target, and the server processes started."""
    ratio = whole.p(50) / bare.p(50)
    return [
        "One ungated MCP call (notes__search_notes, stdio): whole Slack path vs bare LangGraph ReAct graph",
        f"(same Gemini stand-in and server; {turns} kept turns per series after {warmup} warm-up turns,",
        " alternating, a new thread per turn)",
        *table("Turn latency", [bare, whole], (50, 95, 99)),
        "",
        *ratio_lines([("one MCP call", whole, bare)]),
        f"  p50 target: within {TARGET_RATIO:g}x of the bare stack: {'met' if ratio <= TARGET_RATIO else 'NOT met'}"
        f" ({ratio:.2f}x)",
        "",
        f"MCP server processes started during the run: bare stack {bare_starts}, Countersign {bot_starts}"
        f" (for {turns + warmup} calls each)",
    ]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.mcp_turns", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--turns", type=int, default=100, help="kept turns per series")
    parser.add_argument("--warmup", type=int, default=10, help="warm-up turns per series")
    return parser.parse_args(argv)


async def run(args: argparse.Namespace) -> list[str]:
    """Start PostgreSQL and the stand-ins, run both sides, return the report's lines."""
    begun = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="countersign-bench-") as tmp:
        async with open_stage(Path(tmp), mcp_script) as stage:
            version = await pg_version(stage)
            bare, whole, bare_starts, bot_starts = await bench_mcp(stage, Path(tmp), args.turns, args.warmup)
    lines = [*machine_lines(version), "", *mcp_lines(bare, whole, bare_starts, bot_starts, args.turns, args.warmup)]
    return [*lines, "", f"total run time {time.perf_counter() - begun:.1f} s"]


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: run both sides and print the report."""
    args = parse_args(argv)
    report_main(lambda: run(args))


if __name__ == "__main__":
    main()
