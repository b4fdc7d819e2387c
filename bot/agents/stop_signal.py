"""A turn's stop as the graph's nodes see it (issue 12, "Stop"; docs/decisions/0021).

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

The signal is set in-process by the stop itself (`bot.stop_watch.StopWatch`), whether the
stop was pressed here or on another replica. Objects in `configurable` never reach the
checkpoint's metadata (LangGraph keeps only strings and numbers there).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import Any, TypeVar, cast

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool

from bot.conversation import storable_text
from bot.tools.registry import CANCELLABLE

STOP_KEY = "countersign_stop"
"""The run config key (`configurable`) holding the run's `StopSignal`."""

STOPPED_BY_KEY = "countersign_stopped_by"
"""Key in the closing AI message's `additional_kwargs`: `{"user_id", "name"}` of who stopped the
turn. It tells the runner to post a "stopped" notice instead of an answer; it is never sent to
the model (as the requester stored with a human message is not)."""

T = TypeVar("T")


class StopSignal:
    """Whether the turn of one run was stopped, and by whom; set once."""

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self._user_id = ""
        self._name = ""

    @property
    def is_set(self) -> bool:
        """Whether the turn was stopped."""
        return self._event.is_set()

    @property
    def stopped_by(self) -> str:
        """The display name of whoever stopped the turn ("" before)."""
        return self._name

    @property
    def stopped_by_id(self) -> str:
        """The platform user id of whoever stopped the turn ("" before)."""
        return self._user_id

    def set(self, *, user_id: str, name: str) -> None:
        """Stop the turn (the first call wins; later ones change nothing)."""
        if self._event.is_set():
            return
        self._user_id, self._name = user_id, name
        self._event.set()

    async def wait(self) -> None:
        """Return once the turn is stopped."""
        await self._event.wait()


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

    Args:
        signal: the run's signal (None: `work` is simply awaited).
        work: a coroutine or future; it runs in its own task, which keeps this task's context.

    Returns:
        `(False, result)` when `work` finished first (also when both finished at once: a
        result in hand is kept), `(True, None)` when the stop came first and `work` was
        cancelled.
    """
    if signal is None:
        return False, await work
    if signal.is_set:
        if asyncio.iscoroutine(work):
            work.close()
        return True, None
    task: asyncio.Future[T] = asyncio.ensure_future(work)
    waiter: asyncio.Future[Any] = asyncio.ensure_future(signal.wait())
    try:
        await asyncio.wait({cast("asyncio.Future[Any]", task), waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
        if not task.done():
            task.cancel()
            # Let the work see its cancellation through (close connections, ...); a work that
            # ignores it is not waited for forever here.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(_settled(task)), timeout=5)
    if task.cancelled():
        return True, None
    return False, task.result()


async def _settled(task: asyncio.Future[Any]) -> None:
    await asyncio.wait({task})


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
