"""What a Slack listener does once Slack has its ack: the service's tracked background work.

The app runs with Bolt's `process_before_response=True` (`adapters.slack.app`): Bolt answers
Slack when a listener returns, instead of running the listener as a task of its own and polling
every 10 ms for its `ack()`. So a listener acks, hands the rest to `after_ack` and returns. The
service's task tracker logs a failure and waits for the work when the bot stops: the HTTP
listener (or the Socket Mode connection) stops first, so the work of every acked request is
tracked before the drain begins (docs/decisions/0028).
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any

from bot.tasks import TaskTracker

WORK_TASK_PREFIX = "slack: "
"""The start of the name of every task `after_ack` starts (tests wait for them by name)."""


def after_ack(tasks: TaskTracker, work: Coroutine[Any, Any, None], what: str) -> None:
    """Run `work` in the background under the service's tracker, named `WORK_TASK_PREFIX + what`.

    Args:
        tasks: the service's task tracker (`Countersign.tasks`).
        work: what the listener does after its ack (a coroutine not yet started).
        what: the kind of request, for the task's name and its failure log ("Approve").
    """
    tasks.spawn(work, name=f"{WORK_TASK_PREFIX}{what}")
