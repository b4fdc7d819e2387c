"""What a Slack listener does once Slack has its ack: tracked work, started right after the ack.

The app runs with Bolt's `process_before_response=True` (`adapters.slack.app`): Bolt answers
Slack when a listener returns, instead of running the listener as a task of its own and polling
every 10 ms for its `ack()`. So a listener acks, hands the rest to `AfterAck.run` and returns:
the ack goes out first, and the work (a click's decision, the resumed turn, the card redraws)
starts as a task of its own right after. The service's task tracker logs a failure and waits for
the work when the bot stops: the HTTP listener (or the Socket Mode connection) stops first, so
the work of every acked request is tracked before the drain begins (docs/decisions/0028).
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any

from bot.base.tasks import TaskTracker

WORK_TASK_PREFIX = "slack: "
"""The start of the name of every task `AfterAck.run` starts (tests wait for them by name)."""


class AfterAck:
    """Runs the work that follows a listener's ack as a task of the service's task tracker.

    Args:
        tasks: the service's task tracker (`Countersign.tasks`).
    """

    def __init__(self, tasks: TaskTracker) -> None:
        self._tasks = tasks

    def run(self, work: Coroutine[Any, Any, None], what: str) -> None:
        """Start `work` under the service's tracker, as a task named `WORK_TASK_PREFIX + what`.

        The task begins once the listener has returned (so after Bolt sent the ack), not within
        this call.

        Args:
            work: what the listener does after its ack (a coroutine not yet started).
            what: the kind of request, for the task's name and its failure log ("Approve").
        """
        task = self._tasks.spawn(work, name=f"{WORK_TASK_PREFIX}{what}")
        # Cancelled before it began (a drain past its grace): close it, or Python warns it was
        # never awaited. Closing a coroutine that ran is a no-op.
        task.add_done_callback(lambda _: work.close())
