"""The bare stack in a process of its own, behind one HTTP endpoint: `python -m bench.bare_server`.

`bench.throughput` runs it as the reference every side is compared with, so that the bare stack,
like Countersign, runs in its own process and the network emulation (stand-ins, senders) stays
in the benchmark's. It builds exactly what `bench.context.bare_side` builds
(`bench.common.seeds.open_seeds_stack`: the template's ReAct graph on the bot's `open_database(...)
.savers[0]`, the bot's model client, tools and system prompt) from the settings in the
environment, the same variables `countersign run` reads: `DATABASE_URL` (migrated already),
`DATABASE_POOL_SIZE` (10 in the bench), `GOOGLE_API_KEY`, `GEMINI_BASE_URL`,
`GEMINI_MAX_ATTEMPTS`, `GEMINI_RETRY_INITIAL_DELAY`, `HTTP_REQUEST_ALLOWED_HOSTS`,
`COUNTERSIGN_RECURSION_LIMIT`, `LOG_LEVEL`, and `HOST` / `PORT` for its listener.

It listens only once the stack is open, and serves:

- `POST /turn` with `{"thread_id": str, "text": str}`: one `ainvoke` of the graph on that
  thread with one `HumanMessage`; answers 200 `{"answer": <the last message's text>}` once
  the invocation has returned (all of its work, last checkpoint included, is done then). A
  body of another shape gets 400; a failed turn 500 (aiohttp logs the exception).
- `GET /ready`: 200.

SIGTERM or SIGINT stop it: the listener closes (requests under way get up to 5 s), the pools and
the model client close, and the process exits with status 0.

`--loop asyncio` (the default) runs it with `asyncio.run`, the default event loop, as the template's
stack runs; `--loop uvloop` with `uvloop.run`, to see how much of a difference the event loop
makes.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from aiohttp import web
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig

from bench.common.children import LOOPS, READY_PATH, TURN_PATH
from bench.common.seeds import SeedsStack, open_seeds_stack
from bot.settings import Settings

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def turn_handler(stack: SeedsStack) -> Handler:
    """`POST /turn`: one `ainvoke` with the message on the thread, its last message's text as the answer."""

    async def turn(request: web.Request) -> web.Response:
        body: Any = await request.json()
        if (
            not isinstance(body, dict)
            or not isinstance(body.get("thread_id"), str)
            or not isinstance(body.get("text"), str)
        ):
            return web.json_response({"error": 'expected {"thread_id": str, "text": str}'}, status=400)
        config: RunnableConfig = {
            "configurable": {"thread_id": body["thread_id"]},
            "recursion_limit": stack.recursion_limit,
        }
        graph_input: Any = {"messages": [HumanMessage(content=body["text"])]}
        result = await stack.graph.ainvoke(graph_input, config)
        return web.json_response({"answer": result["messages"][-1].text})

    return turn


async def _ready(_request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def serve(settings: Settings) -> None:
    """Open the bare stack, serve it on `settings.server.host:port` until SIGTERM or SIGINT, then close it.

    Raises:
        DatabaseUnavailableError: the database cannot be reached.
        OSError: the listener cannot bind its address.
    """
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with open_seeds_stack(settings) as stack:
        app = web.Application()
        app.router.add_post(TURN_PATH, turn_handler(stack))
        app.router.add_get(READY_PATH, _ready)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=5)
        await runner.setup()
        try:
            await web.TCPSite(runner, settings.server.host, settings.server.port).start()
            await stop.wait()
        finally:
            await runner.cleanup()


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: read the settings from the environment and serve on the chosen event loop."""
    parser = argparse.ArgumentParser(prog="python -m bench.bare_server", description=__doc__)
    parser.add_argument("--loop", choices=LOOPS, default="asyncio", help="the event loop (default: asyncio's)")
    args = parser.parse_args(argv)
    settings = Settings()
    logging.basicConfig(level=settings.server.log_level, format="bare_server %(levelname)s %(name)s: %(message)s")
    if args.loop == "uvloop":
        import uvloop

        uvloop.run(serve(settings))
    else:
        asyncio.run(serve(settings))


if __name__ == "__main__":
    main()
