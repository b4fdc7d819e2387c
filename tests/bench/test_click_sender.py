"""The benchmark's click sender: a burst's answers, in order, and the ways a burst fails."""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from aiohttp import web

from bench.click_sender import BURST_TIMEOUT_S, Answer, Endpoint, burst, request_bytes
from bench.common.harness import REPO_ROOT


@pytest.fixture
async def bot() -> AsyncIterator[Endpoint]:
    """An HTTP server that answers each POST with the status its body names, from worker "w<status>"."""

    async def answer(request: web.Request) -> web.Response:
        status = int(await request.text())
        return web.Response(status=status, text="ok", headers={"X-Countersign-Worker": f"w{status}"})

    app = web.Application()
    app.router.add_post("/slack/events", answer)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield Endpoint("127.0.0.1", port, "/slack/events")
    finally:
        await runner.cleanup()


async def test_a_burst_gets_every_answer_in_the_order_sent(bot: Endpoint) -> None:
    statuses = [200, 401, 200, 404, 200] * 10
    requests = [request_bytes(bot, str(status).encode(), {"Content-Type": "text/plain"}) for status in statuses]

    answers = await asyncio.to_thread(burst, bot, requests)

    assert [a.status for a in answers] == statuses
    assert [a.worker for a in answers] == [f"w{status}" for status in statuses]
    assert all(a.ms > 0 for a in answers)


async def test_a_refused_connection_fails_the_burst() -> None:
    with socket.socket() as bound_not_listening:
        bound_not_listening.bind(("127.0.0.1", 0))
        endpoint = Endpoint("127.0.0.1", bound_not_listening.getsockname()[1], "/slack/events")
        request = request_bytes(endpoint, b"200", {})

        with pytest.raises(ConnectionError):
            await asyncio.to_thread(burst, endpoint, [request])


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def one_click_against(handler: Handler, timeout_s: float = BURST_TIMEOUT_S) -> Answer:
    """One click's answer from a raw server whose connections `handler` serves."""
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    async with server:
        endpoint = Endpoint("127.0.0.1", server.sockets[0].getsockname()[1], "/slack/events")
        [answer] = await asyncio.to_thread(burst, endpoint, [request_bytes(endpoint, b"200", {})], timeout_s)
    return answer


async def test_a_connection_closed_without_an_answer_fails_the_burst() -> None:
    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.close()
        await writer.wait_closed()

    with pytest.raises(ConnectionError, match="before answering"):
        await one_click_against(hang_up)


async def test_a_burst_left_unanswered_times_out() -> None:
    async def never_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # until the sender gives up and closes
        writer.close()
        await writer.wait_closed()

    with pytest.raises(TimeoutError, match="1 of 1 clicks unanswered"):
        await one_click_against(never_answer, 0.2)


async def test_a_click_is_timed_to_its_response_not_to_the_connection_closing() -> None:
    hold_s = 2.0

    async def answer_then_hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Countersign-Worker: 0\r\n\r\nok")
        await writer.drain()
        await asyncio.sleep(hold_s)  # the bot closing late: not part of what Slack waits for
        writer.close()
        await writer.wait_closed()

    started = time.perf_counter()
    answer = await one_click_against(answer_then_hold)
    whole_ms = (time.perf_counter() - started) * 1000

    assert (answer.status, answer.worker) == (200, "0")
    # The burst lasted until the close; the click's time ended at the response, before the hold.
    assert whole_ms >= hold_s * 1000
    assert answer.ms < whole_ms - hold_s * 1000 / 2


async def test_the_sender_process_answers_a_failed_burst_with_its_error() -> None:
    with socket.socket() as bound_not_listening:
        bound_not_listening.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{bound_not_listening.getsockname()[1]}/slack/events"
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bench.click_sender",
            url,
            "secret",
            "T1",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            cwd=REPO_ROOT,
        )
        job = {
            "user": "U1",
            "channel": "C1",
            "ts": "1.000001",
            "thread_ts": "1.000000",
            "action_id": "approve",
            "value": "a1",
            "trigger_id": "t1",
        }
        assert process.stdin is not None and process.stdout is not None
        ready = json.loads(await asyncio.wait_for(process.stdout.readline(), 60))
        process.stdin.write(json.dumps([job]).encode() + b"\n")
        await process.stdin.drain()
        answer = json.loads(await asyncio.wait_for(process.stdout.readline(), 60))
        process.stdin.write(b"\n")
        process.stdin.close()
        assert await asyncio.wait_for(process.wait(), 60) == 0

    assert ready == {"ready": True}
    assert answer["error"].startswith("ConnectionRefusedError") or "ECONNREFUSED" in answer["error"], answer
