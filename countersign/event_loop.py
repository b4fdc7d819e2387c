"""Which asyncio event loop a `countersign` command runs on, and the heap's garbage collector.

uvloop (libuv under asyncio's API, by the authors of asyncpg) runs the bot's many small
sockets, tasks and callbacks at a fraction of the default loop's CPU: with the real model client
the whole Slack path costs about a fifth less CPU per message on it (docs/decisions/0025). Every
library the bot uses (aiohttp, asyncpg, psycopg, discord.py, slack-bolt) supports it.
`COUNTERSIGN_EVENT_LOOP=asyncio` falls back to the standard loop (for a debugger, or a platform
uvloop does not build on; uvloop is not installed on Windows).
"""

from __future__ import annotations

import asyncio
import gc
import importlib.util
import logging
from collections.abc import Callable, Coroutine
from typing import Any, Literal, TypeVar

from bot.base.errors import ConfigurationError

T = TypeVar("T")

log = logging.getLogger(__name__)

EventLoopName = Literal["auto", "uvloop", "asyncio"]

GC_THRESHOLDS = (10_000, 20, 100)
"""`gc.set_threshold` once the bot has started: a young-generation collection every 10,000 net
allocations instead of 700, an older one every 20 of those, a full one every 100 of those. A
turn allocates tens of thousands of short-lived objects (messages, pydantic models, checkpoint
blobs) that reference counting frees; the default thresholds ran the cycle collector many times
per turn for little garbage. A young collection costs about a microsecond per object it holds,
and it holds up everything else in the process meanwhile: 50,000 (before docs/decisions/0025)
stopped a worker for 40-80 ms every few seconds under load, in the middle of a burst of click
acks, where 10,000 stops it for 3-10 ms at no measurable cost in messages per second
(docs/decisions/0025). The cost is at most that many cyclic objects waiting a little longer to
be freed."""


def loop_factory(name: EventLoopName) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The event loop factory for `asyncio.Runner` (None: asyncio's default loop).

    Args:
        name: `COUNTERSIGN_EVENT_LOOP`: `auto` (uvloop when it is installed, else asyncio's),
            `uvloop`, or `asyncio`.

    Raises:
        ConfigurationError: `uvloop` was asked for and is not installed.
    """
    if name == "asyncio":
        return None
    if importlib.util.find_spec("uvloop") is None:
        if name == "uvloop":
            raise ConfigurationError("COUNTERSIGN_EVENT_LOOP=uvloop, but uvloop is not installed here")
        return None
    import uvloop

    return uvloop.new_event_loop


def run(main: Coroutine[Any, Any, T], name: EventLoopName) -> T:
    """Run `main` to its end on the chosen event loop (as `asyncio.run` does; see `loop_factory`).

    Raises:
        ConfigurationError: as `loop_factory`; whatever `main` raises.
    """
    try:
        factory = loop_factory(name)
    except BaseException:
        main.close()
        raise
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)


def running_loop_name() -> str:
    """`uvloop` or `asyncio`: the loop this coroutine runs on, for the start-up line."""
    return "uvloop" if type(asyncio.get_running_loop()).__module__.startswith("uvloop") else "asyncio"


def settle_heap() -> None:
    """Tune the garbage collector once start-up is over (imports done, graphs compiled, pools open).

    Everything alive now lives as long as the process: `gc.freeze` moves it out of the cycle
    collector's view, so no later collection walks the hundreds of thousands of objects that
    the libraries' modules and the compiled graphs hold; `GC_THRESHOLDS` then makes collections
    of the young generations rarer. Objects are still freed by reference counting as before.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    log.debug("heap settled: %d objects frozen, collector thresholds %s", gc.get_freeze_count(), GC_THRESHOLDS)
