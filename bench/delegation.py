"""Delegation overhead: a ReAct turn against a supervisor turn with one delegation, same tool call.

Run it alone with::

    uv run --frozen python -m bench.delegation [--turns 100] [--warmup 10]

`python -m bench.turns` runs it too, as one of its phases. Both agents are the graphs
`countersign.wiring.assemble_core` compiles for `countersign run` (four savers over one psycopg
pool on a fresh database, the default subagents, the settings' prompts, window and limits), with
one `ScriptedChatModel` as every agent's model (no HTTP, no google-genai), so the figures are the
graphs on AsyncPostgresSaver alone. Each turn is a new thread, streamed as `TurnRunner` streams
it (`astream`, values + custom). The two series alternate turn by turn after the same warm-up::

    react      llm_call: http_request GET -> human_review (ungated) -> tool_node -> llm_call: answer
    subagents  llm_call: researcher(query) -> human_review -> delegate [researcher: llm_call:
               http_request GET -> human_review -> tool_node -> llm_call: report] -> llm_call: answer
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from bench.common import args as cli
from bench.common.delegation import bench_delegation, delegation_lines
from bench.common.harness import open_stage, pg_version, report_main
from bench.common.report import machine_lines


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    parser = cli.parser("bench.delegation", __doc__)
    cli.add_turns(parser)
    return parser.parse_args(argv)


async def run(args: argparse.Namespace) -> list[str]:
    """Start PostgreSQL and the stand-ins, run the phase, return the report's lines."""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="countersign-bench-") as tmp:
        async with open_stage(Path(tmp)) as stage:
            version = await pg_version(stage)
            results = await bench_delegation(stage, args.turns, args.warmup)
    lines = [*machine_lines(version), "", *delegation_lines(results, args.turns, args.warmup)]
    return [*lines, "", f"total run time {time.perf_counter() - started:.1f} s"]


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: run the phase and print its report."""
    args = parse_args(argv)
    report_main(lambda: run(args))


if __name__ == "__main__":
    main()
