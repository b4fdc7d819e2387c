"""Delegation overhead: a ReAct turn against a supervisor turn with one delegation, same tool call.

The phase `python -m bench.delegation` runs alone and `python -m bench.turns` runs among its own
(`bench_delegation`, then `delegation_lines` for the report); `bench.delegation` says what is
measured. The agents are the graphs `countersign.wiring.assemble_core` compiles, with one
`ScriptedChatModel` (`delegation_model`) as every agent's model.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig

from bench.common.counting import ASYNCPG, SAVER_CALLS, Stored, count_calls, stored
from bench.common.harness import (
    TOOL_ANSWER,
    TOOL_PROMPT,
    Milestones,
    Series,
    Stage,
    interleave,
)
from bench.common.report import milestone_lines, table
from bot.agents.delegation import DelegationEvent
from bot.agents.model import call_options
from bot.agents.pool import AgentPool
from bot.agents.prompts import SYSTEM_PROMPT
from bot.agents.review_agent import ReviewAgent
from bot.agents.subagent_specs import load_subagents
from bot.base.agent_kind import AgentKind
from bot.settings import Settings
from bot.storage.database import Database, open_database
from bot.tools.operator import build_registry
from countersign.wiring import assemble_core
from tests.support.scripted_model import ScriptedChatModel, calls, tool_call

SUPERVISOR_PROMPT = "research get"
SUBAGENT = "researcher"
QUERY = "GET the things and report what came back"
REPORT = "Fetched: "
COUNTED_TURNS = 3
"""Untimed turns per agent with the database counters installed (the counts do not vary)."""


def delegation_model(target_url: str) -> ScriptedChatModel:
    """One scripted model for the ReAct agent, the supervisor and the researcher.

    `assemble_core` gives a subagent without a model of its own the supervisor's, so one model
    serves all three; the first human message says whose call it is (a subagent sees only its
    query). Every answer carries the tool's result, so a turn that skipped the tool shows.
    """
    get = {"method": "GET", "url": target_url}

    def script(messages: list[BaseMessage]) -> AIMessage:
        asked = next((str(m.content).strip() for m in messages if isinstance(m, HumanMessage)), "")
        last = messages[-1]
        answered = isinstance(last, ToolMessage)
        if asked in (TOOL_PROMPT, QUERY):  # the ReAct agent, or the researcher: one GET, then its result
            if not answered:
                return calls(tool_call("http_request", get))
            return AIMessage(content=f"{TOOL_ANSWER if asked == TOOL_PROMPT else REPORT}{last.content}")
        if asked == SUPERVISOR_PROMPT:  # one delegation, then the researcher's report
            if not answered:
                return calls(tool_call(SUBAGENT, {"query": QUERY}))
            return AIMessage(content=f"{TOOL_ANSWER}{last.content}")
        raise AssertionError(f"the delegation script got an unexpected message: {asked!r}")

    return ScriptedChatModel(script=script)


@contextlib.asynccontextmanager
async def core_agents(settings: Settings, model: ScriptedChatModel) -> AsyncIterator[tuple[Database, AgentPool]]:
    """Both agents as `open_runtime` has `assemble_core` build them, on `settings.database`.

    Only the model differs: `model` is every agent's, as a subagent naming no model gets the
    supervisor's (the default subagents name none).
    """
    registry = build_registry(settings.tools, settings.agent.tools_module)
    subagents = load_subagents(settings.agent.subagents_file, registry)
    async with open_database(settings.database, run_migrations=False) as database:
        core = assemble_core(
            database,
            model,
            registry,
            {},
            recursion_limit=settings.agent.recursion_limit,
            system_prompt=settings.agent.system_prompt or SYSTEM_PROMPT,
            context_tokens=settings.agent.context_tokens,
            model_kwargs=call_options(settings.gemini),
            subagents=subagents,
            default_agent=settings.agent.agent,
        )
        yield database, core.agents


def describe(state: Mapping[str, Any]) -> str:
    """A milestone label for a streamed state: what its last message is."""
    messages = state.get("messages") or []
    last = messages[-1] if messages else None
    if isinstance(last, HumanMessage):
        return "input stored (human message)"
    if isinstance(last, ToolMessage):
        return f"{last.name} result in state"
    if isinstance(last, AIMessage) and last.tool_calls:
        return "model asked for " + ", ".join(call["name"] for call in last.tool_calls)
    return "answer in state"


async def run_turn(graph: ReviewAgent, prompt: str, config: RunnableConfig, marks: list[tuple[float, str]]) -> Any:
    """One turn streamed as `TurnRunner._stream` streams it; `marks` get each chunk's arrival."""
    latest: dict[str, Any] = {}
    graph_input: Any = {"messages": [HumanMessage(content=prompt)]}
    stream = graph.astream(graph_input, config, stream_mode=["values", "custom"], version="v2")
    async for part in stream:
        chunk = cast(Mapping[str, Any], part)
        now = time.perf_counter()
        if chunk["type"] == "values":
            latest = dict(chunk["data"])
            marks.append((now, describe(latest)))
        elif chunk["type"] == "custom" and isinstance(chunk["data"], DelegationEvent):
            event: DelegationEvent = chunk["data"]
            marks.append((now, f"{event.subagent} {'started' if event.started else 'reported'} (custom event)"))
    return latest


@dataclass
class AgentTurns:
    """One agent's series: a new thread per turn, the answer checked, milestones noted."""

    name: str
    kind: AgentKind
    prompt: str
    answer: str
    agents: AgentPool
    limit: int
    series: Series = field(init=False)
    milestones: Milestones = field(init=False)
    threads: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.series = Series(self.name)
        self.milestones = Milestones(self.name)

    async def sample(self, *, keep: bool) -> None:
        """Run and time one turn; keep the figures unless it is a warm-up turn."""
        thread_id = f"bench:{self.kind.value}:{uuid.uuid4().hex}"
        self.threads.append(thread_id)
        graph = self.agents.for_thread(thread_id, self.kind)
        config: RunnableConfig = {"configurable": {"thread_id": thread_id}, "recursion_limit": self.limit}
        marks: list[tuple[float, str]] = []
        started = time.perf_counter()
        result = await run_turn(graph, self.prompt, config, marks)
        elapsed = time.perf_counter() - started
        text = result["messages"][-1].text
        if not text.startswith(self.answer) or '"ok": true' not in text:
            raise RuntimeError(f"{self.name}: unexpected answer {text!r}")
        if not keep:
            return
        self.series.samples_ms.append(elapsed * 1000)
        seen: dict[str, float] = {}
        for stamp, label in marks:
            seen.setdefault(label, stamp)
        for label, stamp in seen.items():
            self.milestones.add(label, (stamp - started) * 1000)
        self.milestones.add("astream finished", elapsed * 1000)


@dataclass
class DelegationResults:
    """Both series, and per agent what one turn asks of the model and the database."""

    react: AgentTurns
    supervisor: AgentTurns
    per_turn: dict[AgentKind, dict[str, float]] = field(default_factory=dict)


async def count_turns(sampler: AgentTurns, database: Database, model: ScriptedChatModel) -> dict[str, float]:
    """`COUNTED_TURNS` untimed turns with the counters installed: figures per turn, by label."""
    sampler.threads.clear()
    prompts_before = len(model.prompts)
    with count_calls(database) as counts:
        for _ in range(COUNTED_TURNS):
            await sampler.sample(keep=False)
    rows: Stored = await stored(database.pool, sampler.threads)
    totals = {
        "model calls": len(model.prompts) - prompts_before,
        **{f"saver {name} calls": counts[f"saver.{name}"] for name in SAVER_CALLS},
        f"{ASYNCPG} (ledger, policy; BEGIN/COMMIT, pool resets)": counts[ASYNCPG],
        "checkpoints stored, top level": rows.checkpoints_top,
        "checkpoints stored, subagent namespace": rows.checkpoints_nested,
        "checkpoint_writes rows": rows.writes,
        "checkpoint_blobs rows": rows.blobs,
        "stored KiB (checkpoints, blobs, writes)": rows.bytes / 1024,
    }
    return {label: total / COUNTED_TURNS for label, total in totals.items()}


async def bench_delegation(stage: Stage, turns: int, warmup: int) -> DelegationResults:
    """Both agents on one fresh database: interleaved timed turns, then counted turns."""
    async with stage.database() as url:
        settings = stage.settings(url)
        model = delegation_model(stage.target.url())
        async with core_agents(settings, model) as (database, agents):
            limit = settings.agent.recursion_limit
            results = DelegationResults(
                react=AgentTurns("react: http_request GET", AgentKind.REACT, TOOL_PROMPT, TOOL_ANSWER, agents, limit),
                supervisor=AgentTurns(
                    f"subagents: {SUBAGENT} -> http_request GET",
                    AgentKind.SUBAGENTS,
                    SUPERVISOR_PROMPT,
                    TOOL_ANSWER + REPORT,
                    agents,
                    limit,
                ),
            )
            await interleave([results.react, results.supervisor], turns, warmup)
            for sampler in (results.react, results.supervisor):
                results.per_turn[sampler.kind] = await count_turns(sampler, database, model)
            return results


def delegation_lines(results: DelegationResults, turns: int, warmup: int) -> list[str]:
    """The side-by-side table, the supervisor/ReAct ratios, database work and milestones."""
    react, supervisor = results.react.series, results.supervisor.series
    qs = (50, 90, 95, 99)
    lines = [
        "Delegation overhead: a ReAct turn vs a supervisor turn with one delegation, same tool call",
        "(graphs from assemble_core, one ScriptedChatModel, AsyncPostgresSaver; astream as TurnRunner runs it;",
        f" {turns} kept turns per series after {warmup} warm-up turns, alternating, a new thread per turn)",
        *table("Turn latency", [react, supervisor], qs),
        "Ratio supervisor / ReAct",
        "  "
        + "   ".join(f"p{q} {supervisor.p(q) / react.p(q):.2f}x" for q in qs)
        + f"   (extra at p50: {supervisor.p(50) - react.p(50):.1f} ms)",
    ]
    react_work, supervisor_work = results.per_turn[AgentKind.REACT], results.per_turn[AgentKind.SUBAGENTS]
    lines += ["", f"Per turn, over {COUNTED_TURNS} further untimed turns of each with counters installed"]
    lines += [f"  {'':<62}{'react':>9}{'subagents':>11}"]
    lines += [f"  {label:<62}{value:>9.1f}{supervisor_work[label]:>11.1f}" for label, value in react_work.items()]
    groups = [results.react.milestones, results.supervisor.milestones]
    lines += ["", "Where the time goes: median ms since astream was called", *milestone_lines(groups)[1:]]
    return lines
