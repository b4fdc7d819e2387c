"""A turn's stop as the graph's nodes see it (docs/decisions/0021).

The runner puts one `StopSignal` per run in the run config (`configurable[STOP_KEY]`); it
reaches every node at every depth, subagents included (a subgraph gets its parent's config).
Each node looks at it at its step boundary:

- `llm_call`: no model call once the turn is stopped; the answer is a closing message
  saying who stopped it, marked with `STOPPED_BY_KEY`. A model call under way when the stop
  arrives is abandoned (it has no side effects; its answer would be discarded anyway).
- `human_review`: no card once the turn is stopped; every call of the answer is answered
  as stopped, so the history keeps one result per call (Gemini pairs them by position).
- `tool_node` and the supervisor's `delegate`: no new tool call or delegation; a tool
  already running finishes, or is cancelled if it declares it may be
  (`bot.tools.registry.CANCELLABLE`).

The signal is set in-process by the stop itself (`bot.turns.stop.watch.StopWatch`), whether the
stop was pressed here or on another replica; a node that waits (a model call, a cancellable
tool) is cancelled by it through `unless_stopped`, which costs no task of its own. Objects in
`configurable` never reach the checkpoint's metadata (LangGraph keeps only strings and numbers
there).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TypeVar

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool

from bot.base.conversation import storable_text
from bot.tools.registry import CANCELLABLE

STOP_KEY = "countersign_stop"
"""The run config key (`configurable`) holding the run's `StopSignal`."""

STOPPED_BY_KEY = "countersign_stopped_by"
"""Key in the closing AI message's `additional_kwargs`: `{"user_id", "name"}` of who stopped the
turn. It tells the runner to post a "stopped" notice instead of an answer; it is never sent to
the model (as the requester stored with a human message is not)."""

T = TypeVar("T")


class StopSignal:
    """Whether the turn of one run was stopped, and by whom; set once.

    Listeners (`add_listener`) are called when it is set, in the task that sets it: they must
    not block (they cancel a task, queue an indicator update).
    """

    def __init__(self) -> None:
        self._set = False
        self._user_id = ""
        self._name = ""
        self._listeners: list[Callable[[], None]] = []

    @property
    def is_set(self) -> bool:
        """Whether the turn was stopped."""
        return self._set

    @property
    def stopped_by(self) -> str:
        """The display name of whoever stopped the turn ("" before)."""
        return self._name

    @property
    def stopped_by_id(self) -> str:
        """The platform user id of whoever stopped the turn ("" before)."""
        return self._user_id

    def set(self, *, user_id: str, name: str) -> None:
        """Stop the turn (the first call wins; later ones change nothing) and tell the listeners."""
        if self._set:
            return
        self._set, self._user_id, self._name = True, user_id, name
        for listener in list(self._listeners):
            listener()

    def add_listener(self, listener: Callable[[], None]) -> None:
        """Call `listener` when the signal is set (not when it is set already: check `is_set`)."""
        self._listeners.append(listener)

    def remove_listener(self, listener: Callable[[], None]) -> None:
        """Forget a listener (a no-op when it is not registered)."""
        with contextlib.suppress(ValueError):
            self._listeners.remove(listener)


def stop_signal(config: RunnableConfig) -> StopSignal | None:
    """The run's `StopSignal`, or None when the graph runs without one (graph tests)."""
    found = (config.get("configurable") or {}).get(STOP_KEY)
    return found if isinstance(found, StopSignal) else None


def is_stopped(config: RunnableConfig) -> bool:
    """Whether the run's turn was stopped."""
    signal = stop_signal(config)
    return signal is not None and signal.is_set


async def unless_stopped(signal: StopSignal | None, work: Awaitable[T]) -> tuple[bool, T | None]:
    """Await `work`, or cancel it when the turn is stopped first.

    `work` runs in the current task (no task of its own, so it costs nothing when nobody stops
    and keeps its context); a stop cancels the current task, and that one cancellation is taken
    back here, as `asyncio.timeout` does with its own: any other cancellation (a shutdown)
    goes on.

    Args:
        signal: the run's signal (None: `work` is simply awaited).
        work: a coroutine (or other awaitable) to await.

    Returns:
        `(False, result)` when `work` finished (also when the stop came while it returned: a
        result in hand is kept), `(True, None)` when the stop cancelled it or came before it
        started (it is then not started).

    Raises:
        Exception: whatever `work` raises.
    """
    if signal is None:
        return False, await work
    if signal.is_set:
        if asyncio.iscoroutine(work):
            work.close()
        return True, None
    task = asyncio.current_task()
    if task is None:  # pragma: no cover - always awaited inside a task
        return False, await work
    cancelled = False

    def cancel() -> None:
        nonlocal cancelled
        if asyncio.current_task() is task:
            return  # set by the work itself: it goes on, and its result is kept
        cancelled = True
        task.cancel()

    signal.add_listener(cancel)
    try:
        result = await work
    except asyncio.CancelledError:
        if cancelled and task.uncancel() == 0:
            return True, None
        raise
    finally:
        signal.remove_listener(cancel)
    if cancelled:
        task.uncancel()  # the work swallowed the cancellation; do not leave it pending
    return False, result


def is_cancellable(tool: BaseTool) -> bool:
    """Whether `tool` declared that a stop may cancel it while it runs (`CANCELLABLE`)."""
    return bool((tool.metadata or {}).get(CANCELLABLE))


def stopped_answer(signal: StopSignal, text: str) -> AIMessage:
    """The closing AI message of a stopped turn: `text` for the model, the stopper for the runner."""
    return AIMessage(
        content=storable_text(text),
        additional_kwargs={STOPPED_BY_KEY: {"user_id": signal.stopped_by_id, "name": signal.stopped_by}},
    )


def stopped_by(message: BaseMessage | None) -> dict[str, str] | None:
    """Who stopped the turn, when `message` is a stopped turn's closing message; else None."""
    if not isinstance(message, AIMessage):
        return None
    found = message.additional_kwargs.get(STOPPED_BY_KEY)
    if not isinstance(found, dict):
        return None
    return {"user_id": str(found.get("user_id") or ""), "name": str(found.get("name") or "")}
