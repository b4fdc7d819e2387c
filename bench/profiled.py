"""Run a module under a CPU-time profiler: `python -m bench.profiled [--paused] OUT -m MODULE [ARGS...]`.

The module runs as `python -m MODULE ARGS...` would (as `__main__`, `sys.argv` set), under
`cProfile.Profile(time.process_time)`: CPU time, so that time spent waiting in epoll does not
top the list. The profile is written to OUT (pstats' format, `pstats.Stats(OUT)` reads it) when
the module ends, whichever way it ends: a return, `SystemExit` (`countersign run` stopped by
SIGTERM returns normally and exits with its status), an exception, or Ctrl-C.

To profile only part of a long-running process (`bench.throughput` profiles one block of a
warm server), start it with `--paused`, then:

- SIGUSR1 starts (or resumes) profiling and then creates `OUT.enabled`, so the sender knows
  when the profiler runs;
- SIGUSR2 stops profiling, writes everything profiled so far to OUT (atomically: a reader never
  sees half a file) and removes `OUT.enabled`.

Python runs signal handlers in the main thread between bytecodes, which is the event loop's
thread for asyncio and uvloop alike (both wake up for a signal; uvloop hands Python its pending
signals); threads other than the main one are not profiled.
"""

from __future__ import annotations

import contextlib
import cProfile
import os
import runpy
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from bench.common.children import enabled_marker

USAGE = "python -m bench.profiled [--paused] OUT -m MODULE [ARGS...]"


class _Switch:
    """The profiler and what the signals do to it."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.profiler = cProfile.Profile(time.process_time)

    def start(self, _signum: int = 0, _frame: FrameType | None = None) -> None:
        self.profiler.enable()
        enabled_marker(self.out).touch()

    def stop(self, _signum: int = 0, _frame: FrameType | None = None) -> None:
        self.profiler.disable()
        self.dump()
        enabled_marker(self.out).unlink(missing_ok=True)

    def dump(self) -> None:
        partial = self.out.with_name(self.out.name + ".partial")
        self.profiler.dump_stats(partial)
        os.replace(partial, self.out)


@dataclass(frozen=True, slots=True)
class Command:
    """A parsed command line.

    Attributes:
        paused: profile only between SIGUSR1 and SIGUSR2.
        out: where the profile is written.
        module: the module to run as `__main__`.
        args: its arguments.
    """

    paused: bool
    out: Path
    module: str
    args: list[str]


def parse_args(argv: Sequence[str]) -> Command:
    """`[--paused] OUT -m MODULE [ARGS...]`: everything after MODULE is the module's.

    Raises:
        SystemExit: with status 2 and the usage, for a command line of another shape.
    """
    rest = list(argv)
    paused = bool(rest) and rest[0] == "--paused"
    if paused:
        rest = rest[1:]
    if len(rest) < 3 or rest[1] != "-m" or rest[0].startswith("-"):
        print(f"usage: {USAGE}", file=sys.stderr)
        raise SystemExit(2)
    return Command(paused=paused, out=Path(rest[0]), module=rest[2], args=rest[3:])


def main(argv: Sequence[str] | None = None) -> None:
    """Run the module under the profiler and write the profile when it ends.

    Raises:
        SystemExit: the module's own exit (its status is kept).
    """
    args = parse_args(sys.argv[1:] if argv is None else argv)
    switch = _Switch(args.out.resolve())
    signal.signal(signal.SIGUSR1, switch.start)
    signal.signal(signal.SIGUSR2, switch.stop)
    sys.argv = [args.module, *args.args]
    if not args.paused:
        switch.profiler.enable()
    try:
        runpy.run_module(args.module, run_name="__main__", alter_sys=True)
    finally:
        switch.profiler.disable()
        switch.dump()
        with contextlib.suppress(OSError):
            enabled_marker(switch.out).unlink(missing_ok=True)


if __name__ == "__main__":
    main()
