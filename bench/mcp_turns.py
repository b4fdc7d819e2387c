"""One ungated MCP call: the whole Slack path against the bare LangGraph ReAct graph, side by side.

Run it with::

    uv run --frozen python -m bench.mcp_turns [--turns 100] [--warmup 10] [--model-ms 0]

It prints figures; nothing here asserts a time. A message whose answer needs one call of the
example notes server's `search_notes` (`examples/mcp/`, over stdio), in a new thread each time,
on two sides:

- **bare stack**: the template's ReAct graph (`bench.common.seeds.seeds_graph`: `llm_call` <-> LangGraph's
  `ToolNode`, on the bot's `AsyncPostgresSaver` and model client) offering the bot's built-in
  tools and every tool of the server, each calling it through fastmcp's client on one session
  held open for the whole run (what a LangGraph app with MCP tools does at best); a turn is one
  `ainvoke`.
- **whole Slack path**: the real bot (`BotServer`, Bolt over HTTP, as `bench.turns` runs it) with
  `COUNTERSIGN_MCP_CONFIG` naming the same server and an admin rule `policy notes__search_notes
  auto` (set with `/countersign` through Slack before the run), so the call runs without a card,
  through the policy, the tool-run ledger and the bot's supervised session; a turn is a signed
  `app_mention` until the stand-in records its answer's `chat.postMessage`.

Both sides offer the model the same tools, ask the same Gemini stand-in (the bot's model client
over HTTP) with the same script, and reach the same server code (`bench.mcp_server`, which counts
its starts): the report says how many server processes each side started during the run (one
each: a session per process, never a process per call). The target is a p50 within 1.3x of the
bare stack's, as for plain messages.

The stand-in answers every model call at once by default, so the ratio weighs the bot's own cost
against a bare stack that does almost nothing else. `--model-ms 500` makes it answer each call
that late on both sides, as a real model does: the ratio then says what a person waiting for the
answer feels of the bot's cost (the target line is left out; it is set for a model that answers
at once).

Two reference pairs run on the same two sides, interleaved with the MCP pair turn by turn
(`bench.common.harness.interleave`, same warm-up), so that all six series see the same load: a plain
message (one model call, no tool) and a message answered with one call of the built-in
`http_request` (a GET to a local target; two model calls and a tool round, as for the MCP call).
The MCP pair's ratio against the plain pair's says whether the gap is the Slack path's in general;
the difference of the MCP and built-in tool pairs' extra time at p50 is what an MCP call costs the
bot beyond any ungated tool call.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mcp_types
from fastmcp import Client
from fastmcp.client.transports import StdioTransport
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool

from bench.common import args as cli
from bench.common.harness import (
    REPO_ROOT,
    TEXT_ANSWER,
    TEXT_PROMPT,
    TOOL_ANSWER,
    TOOL_PROMPT,
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
from bench.common.report import machine_lines, ratio_lines, table
from bench.common.seeds import SeedsGraph, seeds_graph
from bench.common.slack_path import SlackTurns
from bot.agents.model import build_chat_model, call_options
from bot.agents.prompts import SYSTEM_PROMPT
from bot.settings import Settings
from bot.storage.database import open_database
from bot.tools.mcp.config import registry_name
from bot.tools.mcp.tools import result_text
from bot.tools.operator import build_registry
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


def mcp_script(target_url: str, *, model_s: float = 0.0) -> ScriptedResponder:
    """The Gemini stand-in's script for the three kinds of message.

    `PROMPT` -> one `TOOL` call, its result -> `ANSWER` + the result; `TOOL_PROMPT` -> one
    `http_request` GET of `target_url`, its result -> `TOOL_ANSWER` + the result; `TEXT_PROMPT`
    -> `TEXT_ANSWER`. Each reply comes `model_s` seconds late (0: at once), for both sides alike.
    """

    def rule(request: GeminiRequest) -> GeminiReply | None:
        if request.function_responses:
            said = json.dumps([response for _, response in request.function_responses])
            if request.function_responses[0][0] == "http_request":
                return text(TOOL_ANSWER + said, delay_seconds=model_s)
            return text(ANSWER + said if FOUND in said else "the search found nothing", delay_seconds=model_s)
        asked = (request.last_user_text or "").strip()
        if asked == PROMPT:
            return call(TOOL, {"query": "wifi"}, delay_seconds=model_s)
        if asked == TOOL_PROMPT:
            return call("http_request", {"method": "GET", "url": target_url}, delay_seconds=model_s)
        if asked == TEXT_PROMPT:
            return text(TEXT_ANSWER, delay_seconds=model_s)
        return text(f"unexpected: {request.last_user_text!r}")

    return ScriptedResponder(rules=[rule])


def server_command(starts: Path) -> tuple[str, list[str]]:
    """The command and arguments that start the example server, each start noted in `starts`."""
    return sys.executable, ["-m", "bench.mcp_server", str(starts)]


def started(starts: Path) -> int:
    """How many server processes were started so far with `starts`."""
    return len(starts.read_text(encoding="utf-8").splitlines()) if starts.exists() else 0


def server_tool(client: Client[Any], listed: mcp_types.Tool) -> BaseTool:
    """The bare stack's tool for the server's tool `listed`, named as the bot names it.

    Its arguments are checked against the server's input schema by LangChain, and a call is one
    `call_tool_mcp` on `client`'s session, its result in the words the bot gives the model.
    """

    async def invoke(**arguments: Any) -> str:
        return result_text(await client.call_tool_mcp(listed.name, arguments))

    return StructuredTool(
        name=registry_name(SERVER, listed.name),
        description=listed.description or "",
        args_schema=listed.input_schema,
        coroutine=invoke,
    )


@contextlib.asynccontextmanager
async def bare_stack(settings: Settings, starts: Path) -> AsyncIterator[SeedsGraph]:
    """The template's graph offering the bot's built-in tools and every tool of the server (one held fastmcp session).

    The bot offers the model the same tools (its registry's and the server's), so both sides'
    model calls carry the same function declarations.
    """
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
            built_in = build_registry(settings.tools, settings.agent.tools_module).tools()
            served = [server_tool(client, listed) for listed in await client.list_tools()]
            yield seeds_graph(
                model=model,
                tools=[*built_in, *served],
                checkpointer=database.savers[0],
                system_prompt=settings.agent.system_prompt or SYSTEM_PROMPT,
                model_kwargs=call_options(settings.gemini),
            )
    finally:
        await model.aclose()


class SeedsTurns:
    """`ainvoke` of the template's graph for one new message, each turn on a fresh thread id.

    Args:
        name: the series' name in the report.
        prompt: the message.
        answer: how its answer starts (any other answer stops the run).
        graph: the bare stack.
        limit: LangGraph steps per invocation.
    """

    def __init__(self, name: str, prompt: str, answer: str, graph: SeedsGraph, limit: int) -> None:
        self.series = Series(name)
        self._prompt = prompt
        self._answer = answer
        self._graph = graph
        self._limit = limit

    async def sample(self, *, keep: bool) -> None:
        """Run and time one turn; keep the figure unless it is a warm-up turn."""
        config: RunnableConfig = {
            "configurable": {"thread_id": f"bench:mcp:{uuid.uuid4().hex}"},
            "recursion_limit": self._limit,
        }
        graph_input: Any = {"messages": [HumanMessage(content=self._prompt)]}
        begun = time.perf_counter()
        result = await self._graph.ainvoke(graph_input, config)
        elapsed = time.perf_counter() - begun
        answer = result["messages"][-1].text
        if not answer.startswith(self._answer):
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


KINDS = (
    ("one MCP call", "one MCP call (auto)", PROMPT, ANSWER),
    ("plain message", "plain message", TEXT_PROMPT, TEXT_ANSWER),
    ("built-in tool call", "one http_request (auto)", TOOL_PROMPT, TOOL_ANSWER),
)
"""Each pair of series: its label in the ratios, its rows' suffix, its message and how its answer starts."""


@dataclass(frozen=True, slots=True)
class McpResults:
    """What a run measured.

    Attributes:
        bare: the bare stack's series, in `KINDS` order.
        whole: the whole Slack path's series, in `KINDS` order.
        bare_starts: server processes the bare stack started.
        bot_starts: server processes the bot started.
    """

    bare: list[Series]
    whole: list[Series]
    bare_starts: int
    bot_starts: int


async def bench_mcp(stage: Stage, tmp: Path, turns: int, warmup: int) -> McpResults:
    """Both sides on their own fresh databases, the three pairs of series interleaved."""
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
        limit = bare_settings.agent.recursion_limit
        bare = [SeedsTurns(f"bare stack, {row}", prompt, answer, graph, limit) for _, row, prompt, answer in KINDS]
        whole = [
            SlackTurns(f"whole Slack path, {row}", prompt, answer, bot, events, stage)
            for _, row, prompt, answer in KINDS
        ]
        await interleave([side for pair in zip(bare, whole, strict=True) for side in pair], turns, warmup)
        return McpResults(
            bare=[turn.series for turn in bare],
            whole=[turn.series for turn in whole],
            bare_starts=started(bare_starts),
            bot_starts=started(bot_starts),
        )


def mcp_lines(results: McpResults, turns: int, warmup: int, model_ms: float = 0.0) -> list[str]:
    """The side-by-side table, the ratios (the MCP one against the target), MCP's own cost, the server processes.

    With `model_ms` > 0 the stand-in answered each model call that late; the target line is
    then left out (it is set for a model that answers at once) and the ratio is what a person
    waiting for the answer feels of the bot's own cost beside a model of that speed.
    """
    (mcp_bare, _, tool_bare), (mcp_whole, _, tool_whole) = results.bare, results.whole
    ratio = mcp_whole.p(50) / mcp_bare.p(50)
    own = (mcp_whole.p(50) - mcp_bare.p(50)) - (tool_whole.p(50) - tool_bare.p(50))
    pairs = [(label, whole, bare) for (label, *_), whole, bare in zip(KINDS, results.whole, results.bare, strict=True)]
    return [
        "One ungated MCP call (notes__search_notes, stdio): whole Slack path vs bare LangGraph ReAct graph",
        "(bare stack: the template's graph, its MCP tools on one held fastmcp session; same Gemini stand-in, server",
        f" and offered tools; {turns} kept turns per series after {warmup} warm-up turns, the six series",
        " alternating, a new thread per turn; a plain message and one built-in tool call as references)",
        f"(the Gemini stand-in answers each model call {'at once' if not model_ms else f'after {model_ms:g} ms'})",
        *table("Turn latency", [*results.bare, *results.whole], (50, 95, 99)),
        "",
        *ratio_lines(pairs),
        *(
            [
                f"  p50 target: within {TARGET_RATIO:g}x of the bare stack:"
                f" {'met' if ratio <= TARGET_RATIO else 'NOT met'} ({ratio:.2f}x)"
            ]
            if not model_ms
            else [f"  with a model this slow, the MCP call's whole Slack path takes {ratio:.2f}x the bare stack's"]
        ),
        f"  the MCP call's extra at p50 beyond the built-in tool call's: {own:.1f} ms",
        "",
        f"MCP server processes started during the run: bare stack {results.bare_starts}, Countersign"
        f" {results.bot_starts} (for {turns + warmup} calls each)",
    ]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    parser = cli.parser("bench.mcp_turns", __doc__)
    cli.add_turns(parser)
    parser.add_argument(
        "--model-ms",
        type=float,
        default=0.0,
        help="how late the Gemini stand-in answers each model call, in ms, on both sides (default 0: at once;"
        " e.g. 500 for what a person waiting on a real model feels)",
    )
    return parser.parse_args(argv)


async def run(args: argparse.Namespace) -> list[str]:
    """Start PostgreSQL and the stand-ins, run both sides, return the report's lines."""
    begun = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="countersign-bench-") as tmp:
        script = functools.partial(mcp_script, model_s=args.model_ms / 1000)
        async with open_stage(Path(tmp), script) as stage:
            version = await pg_version(stage)
            results = await bench_mcp(stage, Path(tmp), args.turns, args.warmup)
    lines = [*machine_lines(version), "", *mcp_lines(results, args.turns, args.warmup, args.model_ms)]
    return [*lines, "", f"total run time {time.perf_counter() - begun:.1f} s"]


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: run both sides and print the report."""
    args = parse_args(argv)
    report_main(lambda: run(args))


if __name__ == "__main__":
    main()
