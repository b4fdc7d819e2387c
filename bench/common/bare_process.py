"""The bare stack's columns of `bench.throughput`: `python -m bench.bare_server` as a child process.

The child (`bench.bare_server`) runs the template's graph on `AsyncPostgresSaver` (pool of 10) with
the bot's model client and tools, on the side's database and against the benchmark's Gemini
stand-in and HTTP target; it reads the same environment as Countersign's processes
(`bench.common.stack_process.child_env`). A message is one `POST /turn` over the client's pool of
kept-alive connections (aiohttp, as the Slack event sender), done when its answer comes back:
the server answers once `ainvoke` has returned, so nothing of the message's work is left then.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp

from bench.common.children import READY_PATH, TURN_PATH
from bench.common.harness import WAIT_S, Conversation, Stage
from bench.common.meter import PgMeter
from bench.common.stack_process import START_WAIT_S, StackProcess, child_env, wait_for
from tests.support.bot_process import free_port


def side_name(loop: str) -> str:
    """The column's name: "bare stack" on the default loop, "bare stack on uvloop" on uvloop."""
    return "bare stack" if loop == "asyncio" else f"bare stack on {loop}"


class BareStackProcess:
    """The bare server seen from the benchmark; open it with `bare_stack_process`.

    Args:
        name: the column's name.
        meter: the meter on the side's database.
        url: the server's base URL (`http://127.0.0.1:PORT`).
        stack: the child process.
        client: the HTTP client messages are posted with.
    """

    def __init__(self, name: str, meter: PgMeter, url: str, stack: StackProcess, client: aiohttp.ClientSession) -> None:
        self.name = name
        self.meter = meter
        self.url = url
        self.stack = stack
        self._client = client

    async def open_conversation(self) -> Conversation:
        """A new thread id (nothing is stored before its first message)."""
        return Conversation(thread_id=f"bench:{uuid.uuid4().hex}")

    async def send(self, conversation: Conversation, text: str, answer: str) -> float:
        """`POST /turn` with the message -> its answer; return the ms in between.

        Raises:
            RuntimeError: the server answered with a status other than 200, or an answer not
                starting with `answer`.
        """
        body = {"thread_id": conversation.thread_id, "text": text}
        started = time.perf_counter()
        async with self._client.post(self.url + TURN_PATH, json=body) as response:
            status = response.status
            said = await response.json() if status == 200 else {"error": await response.text()}
        elapsed = time.perf_counter() - started
        if status != 200:
            raise RuntimeError(f"{self.name}: /turn answered HTTP {status}: {str(said)[:200]}")
        if not str(said.get("answer", "")).startswith(answer):
            raise RuntimeError(f"{self.name}: unexpected answer {str(said)[:80]!r}")
        conversation.turns += 1
        return elapsed * 1000

    async def settle(self) -> None:
        """Nothing to wait for: the answer comes once all of the message's work is done."""

    async def idle(self) -> None:
        """Nothing to wait for: the template's stack does no work after `ainvoke` returns (it never prunes)."""

    def cpu_s(self) -> float:
        """CPU seconds so far of the server process."""
        return self.stack.cpu_s()


@contextlib.asynccontextmanager
async def bare_stack_process(
    stage: Stage, *, loop: str = "asyncio", profile: Path | None = None
) -> AsyncIterator[BareStackProcess]:
    """Start `python -m bench.bare_server --loop LOOP` on a fresh database; stop it (SIGTERM) on exit.

    Args:
        stage: the stand-ins.
        loop: `asyncio` (the default loop, the reference) or `uvloop`.
        profile: run it under `bench.profiled --paused`, writing its profile there.

    Raises:
        RuntimeError: the server exited before it was ready.
        TimeoutError: it did not answer `GET /ready` within `START_WAIT_S` seconds.
    """
    port = free_port()
    name = side_name(loop)
    url = f"http://127.0.0.1:{port}"
    client = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=WAIT_S), skip_auto_headers=("Accept-Encoding",))
    async with client, stage.database() as database_url, PgMeter.open(database_url) as meter:
        env = child_env(stage, database_url, port)
        async with StackProcess.running(name, "bench.bare_server", ["--loop", loop], env, profile=profile) as stack:
            side = BareStackProcess(name, meter, url, stack, client)

            async def ready() -> bool:
                stack.check_alive()
                with contextlib.suppress(aiohttp.ClientError):
                    async with client.get(url + READY_PATH) as response:
                        return response.status == 200
                return False

            await wait_for(ready, f"{name}: GET /ready did not answer 200", START_WAIT_S)
            yield side
