"""Which conversation (and subagent) a log line is about, without passing ids to every call.

`TurnRunner` marks a run with `about(thread_id)`; the delegate node adds its subagent. A log
handler's `ConversationFilter` (set up at the entry point) appends them to every line logged
inside, so a tool's own log line carries its `thread_id` too (docs/operations.md, "What the bot
guarantees": "the thread_id in every line about a conversation"). Context variables follow
asyncio tasks, so LangGraph's tasks inherit the marks of the run that started them. An MCP
tool's call marks its lines with the server's key and the tool's name (`mcp_server`, `tool`),
and so does a stdio server's stderr (its key).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_THREAD: ContextVar[str | None] = ContextVar("countersign_thread_id", default=None)
_SUBAGENT: ContextVar[str | None] = ContextVar("countersign_subagent", default=None)
_APPROVAL: ContextVar[str | None] = ContextVar("countersign_approval_id", default=None)
_EVENT: ContextVar[str | None] = ContextVar("countersign_event_id", default=None)
_MCP_SERVER: ContextVar[str | None] = ContextVar("countersign_mcp_server", default=None)
_TOOL: ContextVar[str | None] = ContextVar("countersign_tool", default=None)

_NAMED_THREAD = re.compile(r"\bthread_id=([^\s)]+)")
"""A `thread_id=...` a message names itself (many lines logged outside a run do)."""

FIELDS = ("thread_id", "subagent", "approval_id", "event_id", "mcp_server", "tool")
"""The record attributes `ConversationFilter` sets (None outside a mark); `LOG_FORMAT=json`
writes them as fields."""


@contextmanager
def about(
    thread_id: str | None = None,
    *,
    subagent: str | None = None,
    approval_id: str | None = None,
    event_id: str | None = None,
    mcp_server: str | None = None,
    tool: str | None = None,
) -> Iterator[None]:
    """Mark the log lines of the block (None keeps the outer mark).

    Args:
        thread_id: the conversation's LangGraph thread id.
        subagent: the subagent at work.
        approval_id: the approval a decision is about.
        event_id: the platform's id of the message being handled (Slack `ts`, Discord id).
        mcp_server: the MCP server's key in `COUNTERSIGN_MCP_CONFIG` a line is about.
        tool: the tool being called (`<server>__<tool>` for an MCP tool).
    """
    tokens = []
    marks = (
        (_THREAD, thread_id),
        (_SUBAGENT, subagent),
        (_APPROVAL, approval_id),
        (_EVENT, event_id),
        (_MCP_SERVER, mcp_server),
        (_TOOL, tool),
    )
    for var, value in marks:
        if value is not None:
            tokens.append((var, var.set(value)))
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


class ConversationFilter(logging.Filter):
    """Sets `record.conversation` to ` (thread_id=... subagent=...)`, or "" outside a run.

    A line that already names its `thread_id` gets only the subagent. Also sets each of
    `FIELDS` as a record attribute, for structured output; outside a run, `thread_id` is the
    one the message names, if any.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """Add the `conversation` attribute and `FIELDS`; never drops a record."""
        thread_id, subagent = _THREAD.get(), _SUBAGENT.get()
        message = record.getMessage()
        named = _NAMED_THREAD.search(message) if "thread_id=" in message else None
        record.thread_id = thread_id or (named.group(1) if named else None)
        record.subagent = subagent
        record.approval_id = _APPROVAL.get()
        record.event_id = _EVENT.get()
        record.mcp_server = _MCP_SERVER.get()
        record.tool = _TOOL.get()
        parts = []
        if thread_id and named is None:
            parts.append(f"thread_id={thread_id}")
        if subagent:
            parts.append(f"subagent={subagent}")
        record.conversation = f" ({' '.join(parts)})" if parts else ""
        return True
