"""The benchmarks' command line: one parser shape, and the options several of them share.

Every benchmark's parser comes from `parser` (`python -m bench.<name> --help` shows its
module docstring as written); the benchmarks that time series turn by turn (`bench.turns`,
`bench.delegation`, `bench.mcp_turns`, `bench.context`) take their kept and warm-up turns from
`add_turns`. Options of one benchmark only stay in that benchmark's module.
"""

from __future__ import annotations

import argparse


def parser(module: str, description: str | None) -> argparse.ArgumentParser:
    """A parser for `python -m <module>`.

    Args:
        module: the module's dotted name (`bench.turns`), shown in the usage line.
        description: shown above the options with its line breaks kept (usually the module's
            docstring).
    """
    return argparse.ArgumentParser(
        prog=f"python -m {module}",
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def add_turns(
    parser: argparse.ArgumentParser,
    *,
    turns: int = 100,
    warmup: int = 10,
    turns_help: str = "kept turns per series",
    warmup_help: str = "warm-up turns per series",
) -> None:
    """Add `--turns` (kept samples per series) and `--warmup` (discarded samples per series first).

    Both are whole numbers, read as `args.turns` and `args.warmup`; a benchmark that needs
    bounds checks them after parsing (`bench.context`).

    Args:
        parser: the benchmark's parser.
        turns: `--turns`' default.
        warmup: `--warmup`'s default.
        turns_help: `--turns`' help, when a benchmark's samples are not plain turns.
        warmup_help: `--warmup`'s help.
    """
    parser.add_argument("--turns", type=int, default=turns, help=turns_help)
    parser.add_argument("--warmup", type=int, default=warmup, help=warmup_help)
