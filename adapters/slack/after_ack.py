"""What a Slack listener does once Slack has its ack: tracked work that lets the acks owed go first.

The app runs with Bolt's `process_before_response=True` (`adapters.slack.app`): Bolt answers
Slack when a listener returns, instead of running the listener as a task of its own and polling
every 10 ms for its `ack()`. So a listener acks, hands the rest to `AfterAck.run` and returns.
The service's task tracker logs a failure and waits for the work when the bot stops: the HTTP
listener (or the Socket Mode connection) stops first, so the work of every acked request is
tracked before the drain begins (docs/decisions/0028).

Slack shows the clicker an error when an interaction is not acked within three seconds; the
decision behind the click has no such limit. So the work waits while requests keep arriving
(until `QUIET_S` has passed with none in hand, at most `MAX_DEFER_S`): in a burst of clicks the
acks do not queue in the event loop behind the decisions, resumed turns and database round trips
of the clicks before them (docs/decisions/0029). Workers on one machine share its cores, so with
an `AckBoard` the work waits until no worker of the machine has a request in hand
(docs/decisions/0032).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Coroutine, Iterator
from typing import Any

from adapters.slack.ack_board import AckBoard
from bot.tasks import TaskTracker

WORK_TASK_PREFIX = "slack: "
"""The start of the name of every task `AfterAck.run` starts (tests wait for them by name)."""

QUIET_S = 0.02
"""Seconds with no Slack request in hand (in this process, and with an `AckBoard` in any worker
of the machine) after which the work of acked requests starts: longer than the gaps between the
requests of a burst as one process sees them (an ack takes about half a millisecond of CPU),
short enough that a lone click's decision is not noticeably later."""

CONFIRM_S = 0.001
"""After `QUIET_S`, the gate opens only if no request arrived in one more poll for I/O this long."""

MAX_DEFER_S = 0.5
"""The longest, in seconds, that work waits for a quiet moment after its ack, so that a steady
stream of requests delays decisions by at most this much instead of starving them."""


class AfterAck:
    """Runs the work that follows acks once no request is waiting for its own ack.

    The adapter wraps Bolt's handling of every request, from the moment its body is in to its
    ack, in `acking()` (HTTP: `SlackAdapter.handle_http`, after reading the body, so that a
    sender slow to send one holds nothing back; Socket Mode: the connection's handler); the
    listeners hand their follow-up work to `run`.

    Args:
        tasks: the service's task tracker (`Countersign.tasks`).
        quiet_s: see `QUIET_S` (None: that constant, as it is when the adapter is built).
        max_defer_s: see `MAX_DEFER_S` (None: likewise).
        board: the machine's board with `countersign run --workers N` (this worker's slot is
            kept up to date, and the work also waits for the other workers' requests); None
            for a lone process.
    """

    def __init__(
        self,
        tasks: TaskTracker,
        *,
        quiet_s: float | None = None,
        max_defer_s: float | None = None,
        board: AckBoard | None = None,
    ) -> None:
        self._tasks = tasks
        self._quiet_s = QUIET_S if quiet_s is None else quiet_s
        self._max_defer_s = MAX_DEFER_S if max_defer_s is None else max_defer_s
        self._board = board
        self._in_hand = 0
        self._arrivals = 0
        self._last_ack = 0.0
        self._quiet = asyncio.Event()
        self._quiet.set()
        self._timer: asyncio.TimerHandle | None = None

    @contextlib.contextmanager
    def acking(self) -> Iterator[None]:
        """Around Bolt's handling of one request whose body is in, until its ack is ready."""
        self._in_hand += 1
        self._arrivals += 1
        self._quiet.clear()
        if self._board is not None:
            self._board.publish(self._in_hand)
        try:
            yield
        finally:
            self._in_hand -= 1
            self._last_ack = time.monotonic()
            if self._board is not None:
                self._board.publish(self._in_hand)
            if self._in_hand == 0 and self._timer is None:
                self._timer = asyncio.get_running_loop().call_later(self._quiet_s, self._check)

    def _check(self) -> None:
        """The timer: once `quiet_s` passed since the last ack with nothing in hand, confirm it.

        With a board, "nothing in hand" and "the last ack" are the machine's: no worker has a
        request in hand, and `quiet_s` passed since any worker's count last changed.
        """
        self._timer = None
        if self._in_hand:
            return  # the request in hand sets the timer again when it is acked
        loop = asyncio.get_running_loop()
        due = self._last_ack + self._quiet_s
        if self._board is not None:
            busy, latest = self._board.others()
            if busy:
                # Another worker's requests: it does not wake this one, so look again later.
                self._timer = loop.call_later(self._quiet_s, self._check)
                return
            due = max(due, latest + self._quiet_s)
        wait = due - time.monotonic()
        if wait > 0:
            self._timer = loop.call_later(wait, self._check)
            return
        # The quiet may only be this process having been off the CPU, with requests waiting in
        # its sockets (timers run before the loop polls for I/O): open only if another poll
        # brings none.
        self._timer = loop.call_later(CONFIRM_S, self._confirm, self._arrivals)

    def _confirm(self, arrivals: int) -> None:
        self._timer = None
        if self._in_hand or self._arrivals != arrivals or (self._board is not None and self._board.others()[0]):
            self._check()
        else:
            self._quiet.set()

    def close(self) -> None:
        """Stop looking for quiet and let any waiting work go (the adapter closes, after the drain)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._board = None
        self._quiet.set()

    def run(self, work: Coroutine[Any, Any, None], what: str) -> None:
        """Run `work` under the service's tracker once the acks in hand are sent, named `WORK_TASK_PREFIX + what`.

        Args:
            work: what the listener does after its ack (a coroutine not yet started).
            what: the kind of request, for the task's name and its failure log ("Approve").
        """
        task = self._tasks.spawn(self._after_quiet(work), name=f"{WORK_TASK_PREFIX}{what}")
        # Cancelled before it began (a drain past its grace): close it, or Python warns it was
        # never awaited. Closing a coroutine that ran is a no-op.
        task.add_done_callback(lambda _: work.close())

    async def _after_quiet(self, work: Coroutine[Any, Any, None]) -> None:
        if not self._quiet.is_set():
            try:
                async with asyncio.timeout(self._max_defer_s):
                    await self._quiet.wait()
            except TimeoutError:
                pass  # a steady stream of requests: go now, or decisions would starve
        await work
