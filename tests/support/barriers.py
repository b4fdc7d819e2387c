"""Waiting for something to happen, instead of sleeping and hoping it did.

A fixed sleep is a guess about how fast a busy machine is: too short and a test fails by
chance, too long and it wastes minutes, and a test that sleeps before asserting that nothing
happened passes by chance when the bot was merely slow. These wait for the event itself, with
timeouts generous enough for a loaded two-core machine (they only matter when the event never
comes).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from adapters.slack.after_ack import WORK_TASK_PREFIX

GENEROUS_S = 60.0
"""How long to wait for something that goes through PostgreSQL, a subprocess or a stand-in."""


async def wait_until(condition: Callable[[], bool], what: str, timeout: float = GENEROUS_S) -> None:
    """Poll `condition` (every 10 ms) until it holds; fail naming `what` after `timeout` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout:.0f}s")
        await asyncio.sleep(0.01)


async def wait_until_async(condition: Callable[[], Awaitable[bool]], what: str, timeout: float = GENEROUS_S) -> None:
    """Like `wait_until` for a condition that must be awaited (a database query, say); every 50 ms."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await condition():
        if loop.time() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout:.0f}s")
        await asyncio.sleep(0.05)


async def another_session_waits_for_a_lock(connection: Any) -> bool:
    """Whether a session of `connection`'s database other than its own waits for a lock (asyncpg).

    `connection` may be in a transaction (the one holding the lock): PostgreSQL keeps the
    activity it first read in a transaction, so the snapshot is cleared before each look.
    """
    await connection.execute("SELECT pg_stat_clear_snapshot()")
    return bool(
        await connection.fetchval(
            """SELECT EXISTS (SELECT 1 FROM pg_stat_activity
               WHERE datname = current_database() AND pid <> pg_backend_pid() AND wait_event_type = 'Lock')"""
        )
    )


def _is_slack_listener_work(task: asyncio.Task[Any]) -> bool:
    return task.get_name().startswith(WORK_TASK_PREFIX)


async def slack_listeners_done(timeout: float = GENEROUS_S) -> None:
    """Wait until the work of every Slack listener started so far has finished (in-process bots only).

    A listener acks and hands the rest of its work to the service's background tasks
    (`adapters.slack.after_ack`), named with `WORK_TASK_PREFIX`; so once a request got its
    response, this waits for everything that request set off in the adapter (the core's own
    background work, a turn or a resume, is `service.tasks.join()`).
    """
    await wait_until(
        lambda: not any(_is_slack_listener_work(t) and not t.done() for t in asyncio.all_tasks()),
        "the Slack listeners' work finishing",
        timeout,
    )
