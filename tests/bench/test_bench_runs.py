"""The benchmark still runs and prints its figures (it asserts no time; this checks it works)."""

from __future__ import annotations

import asyncio
import os
import sys

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(480)]

DELEGATION_SERIES = ("react: http_request GET", "subagents: researcher -> http_request GET", "Ratio supervisor / ReAct")


async def run_bench(pg_server, module: str, *args: str) -> str:
    env = {**os.environ, "TEST_DATABASE_URL": pg_server.admin_url}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        module,
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await asyncio.wait_for(process.communicate(), timeout=420)
    text = output.decode()
    assert process.returncode == 0, text[-3000:]
    assert "Log records at WARNING and above (counted, not printed): 0" in text, text[-3000:]
    return text


async def test_the_turn_benchmark_prints_every_series(pg_server):
    """A tiny run of `python -m bench.turns` on the test server exits 0 with each table filled."""
    text = await run_bench(
        pg_server,
        "bench.turns",
        "--turns",
        "2",
        "--warmup",
        "1",
        "--conversations",
        "3",
        "--rounds",
        "1",
        "--sequential-clicks",
        "2",
        "--click-workers",
        "2",
    )
    clicks = ("click ack, 3 at once (pool", "click ack, 3 at once (run --workers 2)")
    for series in ("whole Slack path, tool", "bare graph, gemini, tool", *clicks, *DELEGATION_SERIES):
        assert series in text, text[-3000:]
    assert "run --workers 2, burst 1: p99 " in text, text[-3000:]


async def test_the_delegation_benchmark_prints_both_agents_side_by_side(pg_server):
    """A tiny run of `python -m bench.delegation` prints the ReAct and supervisor rows and their ratio."""
    text = await run_bench(pg_server, "bench.delegation", "--turns", "2", "--warmup", "1")
    for series in (*DELEGATION_SERIES, "checkpoints stored, subagent namespace", "researcher reported (custom event)"):
        assert series in text, text[-3000:]


async def test_the_context_benchmark_prints_every_side_at_each_prior(pg_server):
    """A tiny run of `python -m bench.context --delta` prints every table with the three sides at each prior,
    the ratios and the prune checks."""
    text = await run_bench(
        pg_server, "bench.context", "--prior", "4,8", "--turns", "2", "--warmup", "0", "--delta", "--grow", "2"
    )
    for line in (
        "One more text turn: latency, and CPU ms per turn",
        "Bytes (KiB, mean over samples)",
        "Sent to the model",
        "Turn at 8 / turn at 4 prior messages",
        "Pruned to the latest checkpoint (--delta)",
    ):
        assert line in text, text[-3000:]
    for side in (
        "bare graph (seeds, add_messages)",
        "bare graph (seeds, DeltaChannel)",
        "Countersign (whole Slack path)",
    ):
        for prior in (4, 8):
            assert text.count(f"{side} @ {prior} ") == 3, text[-3000:]
    for check in ("add_messages), pruned ", "DeltaChannel), pruned ", "DeltaChannel), snapshot, then pruned "):
        assert check in text, text[-3000:]


# Four stacks start as child processes (one of them a supervisor with two workers), and
# Countersign's blocks wait for its upkeep's pruning passes (10 s apart): about 45 s on an idle
# 2-core machine, twice that beside other benchmarks.
async def test_the_throughput_benchmark_prints_every_side_side_by_side(pg_server):
    """A tiny run of `python -m bench.throughput` starts every side in its own process(es) and prints the
    new-thread latency phase, msg/s per block, the side-by-side summary with the harness row, and the profile
    of the bare stack's and Countersign's processes."""
    text = await run_bench(
        pg_server,
        "bench.throughput",
        "--latency-turns",
        "2",
        "--latency-warmup",
        "1",
        "--conversations",
        "3",
        "--messages",
        "2",
        "--concurrency",
        "2",
        "--blocks",
        "1",
        "--warmup",
        "0",
        "--profile",
        "1",
    )
    sides = ("bare stack", "bare stack on uvloop", "Countersign", "Countersign, 2 workers")
    for line in (
        "A message in a new thread, one at a time",
        "Messages per second, per block",
        "Countersign / bare stack",
        "Countersign, 2 workers / bare stack",
        "bare stack on uvloop / bare stack",
        "Side by side (reference: bare stack)",
        "msg/s, median of 1 block(s)",
        "latency p95 ms, all messages",
        "CPU ms/msg, the stack's processes",
        "CPU ms/msg, harness (stand-ins, sender)",
        "own ms per message by package",
        "Countersign - bare stack",
        "Top 25 functions by own CPU time",
    ):
        assert line in text, text[-3000:]
    latency = text[text.index("A message in a new thread") :].splitlines()
    for n, side in enumerate(sides, 2):
        assert latency[n].lstrip().startswith(side), text[-3000:]
    table = text[text.index("Side by side") :].splitlines()
    for side in sides:
        assert side in table[1], text[-3000:]
    processes = next(line for line in table if line.lstrip().startswith("the stack's processes"))
    assert processes.split()[-4:] == ["1", "1", "1", "3"], processes


async def test_the_mcp_benchmark_prints_both_sides_and_one_server_process_each(pg_server):
    """A tiny run of `python -m bench.mcp_turns` prints the MCP, plain and built-in tool rows of both sides, their ratios, and one server start per side."""
    text = await run_bench(pg_server, "bench.mcp_turns", "--turns", "2", "--warmup", "1")
    rows = ("one MCP call (auto)", "plain message", "one http_request (auto)")
    for side in ("bare stack", "whole Slack path"):
        for row in rows:
            assert f"{side}, {row}" in text, text[-3000:]
    for label in ("one MCP call", "plain message", "built-in tool call"):
        assert f"  {label:<46}p50 " in text, text[-3000:]
    assert "p50 target" in text, text[-3000:]
    assert "the MCP call's extra at p50 beyond the built-in tool call's: " in text, text[-3000:]
    assert "MCP server processes started during the run: bare stack 1, Countersign 1 (for 3 calls each)" in text, text
