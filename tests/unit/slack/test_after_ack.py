"""`AfterAck`: the work after an ack waits while other requests wait for theirs (decision 0029)."""

from __future__ import annotations

import asyncio
import inspect

from adapters.slack.after_ack import AfterAck
from bot.tasks import TaskTracker

WAIT_S = 30.0


async def one_requests_work_runs(after_ack: AfterAck) -> None:
    """Hand work over within one request's ack; return once it ran (fails after `WAIT_S`)."""
    ran = asyncio.Event()

    async def work() -> None:
        ran.set()

    with after_ack.acking():
        after_ack.run(work(), "Approve")
    await asyncio.wait_for(ran.wait(), WAIT_S)


async def test_a_lone_requests_work_runs_once_it_is_acked() -> None:
    tasks = TaskTracker()
    await one_requests_work_runs(AfterAck(tasks, quiet_s=0.01, max_defer_s=60))
    await asyncio.wait_for(tasks.join(), WAIT_S)


async def test_work_waits_while_another_request_is_in_hand() -> None:
    tasks = TaskTracker()
    after_ack = AfterAck(tasks, quiet_s=0.01, max_defer_s=60)
    order: list[str] = []
    ran = asyncio.Event()

    async def work() -> None:
        order.append("work")
        ran.set()

    with after_ack.acking():  # a second click, still being handled
        with after_ack.acking():
            after_ack.run(work(), "Approve")
        for _ in range(10):  # ten quiet periods: time enough for the work to start if it would
            await asyncio.sleep(0.01)
        order.append("second click acked")
    await asyncio.wait_for(ran.wait(), WAIT_S)
    assert order == ["second click acked", "work"]


async def test_a_steady_stream_of_requests_delays_work_by_at_most_max_defer() -> None:
    tasks = TaskTracker()
    after_ack = AfterAck(tasks, quiet_s=WAIT_S, max_defer_s=0.05)
    ran = asyncio.Event()

    async def work() -> None:
        ran.set()

    async def stream() -> None:
        while True:
            with after_ack.acking():
                await asyncio.sleep(0)
            await asyncio.sleep(0.001)

    streaming = asyncio.create_task(stream())
    try:
        with after_ack.acking():
            after_ack.run(work(), "Approve")
        await asyncio.wait_for(ran.wait(), WAIT_S)  # never quiet for quiet_s: max_defer_s let it go
    finally:
        streaming.cancel()


async def test_work_cancelled_before_it_began_is_closed_not_run() -> None:
    tasks = TaskTracker()
    after_ack = AfterAck(tasks, quiet_s=0.01, max_defer_s=60)
    ran = False

    async def work() -> None:
        nonlocal ran
        ran = True

    coroutine = work()
    with after_ack.acking():
        with after_ack.acking():
            after_ack.run(coroutine, "Approve")
        await tasks.drain(0)  # a drain past its grace cancels the waiting work
    assert not ran
    assert inspect.getcoroutinestate(coroutine) == inspect.CORO_CLOSED
