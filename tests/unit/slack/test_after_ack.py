"""`AfterAck`: the work after an ack runs as a tracked task of its own, started right after the listener returns."""

from __future__ import annotations

import asyncio
import inspect

from adapters.slack.after_ack import WORK_TASK_PREFIX, AfterAck
from bot.base.tasks import TaskTracker

WAIT_S = 30.0


async def test_work_starts_after_the_listener_returns_as_a_named_tracked_task() -> None:
    """`run` returns before the work begins; the work then runs at once, tracked, with its name."""
    tasks = TaskTracker()
    ran = asyncio.Event()
    names: list[str] = []

    async def work() -> None:
        task = asyncio.current_task()
        assert task is not None
        names.append(task.get_name())
        ran.set()

    AfterAck(tasks).run(work(), "Approve")
    assert not ran.is_set()  # the listener returns (and Bolt acks) first
    await asyncio.wait_for(ran.wait(), WAIT_S)
    assert names == [f"{WORK_TASK_PREFIX}Approve"]
    await asyncio.wait_for(tasks.join(), WAIT_S)


async def test_work_cancelled_before_it_began_is_closed_not_run() -> None:
    """A drain past its grace that cancels work not yet begun closes its coroutine instead of running it."""
    tasks = TaskTracker()
    ran = False

    async def work() -> None:
        nonlocal ran
        ran = True

    coroutine = work()
    AfterAck(tasks).run(coroutine, "Approve")
    await tasks.drain(0)  # cancels the task before its first step
    assert not ran
    assert inspect.getcoroutinestate(coroutine) == inspect.CORO_CLOSED
