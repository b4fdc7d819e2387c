"""What a benchmark and the child programs it starts agree on; imports nothing of the benchmark's.

`bench.bare_server` and `bench.profiled` run in the processes being measured, so they import
this module rather than the benchmark's side (`bench.common.bare_process`,
`bench.common.stack_process`), which would load the bot, the stand-ins and the test support into
a measured process (more to import, a larger heap to collect).
"""

from __future__ import annotations

from pathlib import Path

TURN_PATH = "/turn"
"""`bench.bare_server`: `POST` one message, answered once its turn is done."""
READY_PATH = "/ready"
"""`bench.bare_server`: `GET` answers 200 once the stack is open."""
LOOPS = ("asyncio", "uvloop")
"""`bench.bare_server --loop`: the event loops it can run on, the default first."""


def enabled_marker(out: Path) -> Path:
    """The file that exists while a `--paused` profile of `out` is being taken (`bench.profiled`)."""
    return out.with_name(out.name + ".enabled")
