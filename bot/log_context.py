"""Which conversation (and subagent) a log line is about, without passing ids to every call.

`TurnRunner` marks a run with `about(thread_id)`; the delegate node adds its subagent. A log
handler's `ConversationFilter` (set up at the entry point) appends them to every line logged
inside, so a tool's own log line carries its `thread_id` too (README: "the thread_id in every
line about a conversation"). Context variables follow asyncio tasks, so LangGraph's tasks
inherit the marks of the run that started them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_THREAD: ContextVar[str | None] = ContextVar("countersign_thread_id", default=None)
_SUBAGENT: ContextVar[str | None] = ContextVar("countersign_subagent", default=None)


@contextmanager
def about(thread_id: str | None = None, *, subagent: str | None = None) -> Iterator[None]:
    """Mark the log lines of the block with `thread_id` and/or `subagent` (None keeps the outer one)."""
    tokens = []
    if thread_id is not None:
        tokens.append((_THREAD, _THREAD.set(thread_id)))
    if subagent is not None:
        tokens.append((_SUBAGENT, _SUBAGENT.set(subagent)))
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


class ConversationFilter(logging.Filter):
    """Sets `record.conversation` to ` (thread_id=... subagent=...)`, or "" outside a run.

    A line that already names its `thread_id` gets only the subagent.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """Add the `conversation` attribute; never drops a record."""
        thread_id, subagent = _THREAD.get(), _SUBAGENT.get()
        parts = []
        if thread_id and "thread_id=" not in record.getMessage():
            parts.append(f"thread_id={thread_id}")
        if subagent:
            parts.append(f"subagent={subagent}")
        record.conversation = f" ({' '.join(parts)})" if parts else ""
        return True
