"""Log lines about a conversation carry its thread_id and subagent (docs/operations.md, "Logs and tracing")."""

from __future__ import annotations

import asyncio
import logging

from bot.base.log_context import ConversationFilter, about


class _Keep(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.addFilter(ConversationFilter())
        self.setFormatter(logging.Formatter("%(message)s%(conversation)s"))
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


def _logger() -> tuple[logging.Logger, _Keep]:
    logger = logging.getLogger(f"test.log_context.{id(object())}")
    logger.propagate = False
    keep = _Keep()
    logger.addHandler(keep)
    logger.setLevel(logging.INFO)
    return logger, keep


async def test_lines_inside_a_run_name_the_thread_and_the_subagent():
    """Inside `about`, lines end with the thread id and subagent; a task started inside inherits them; outside, nothing."""
    logger, keep = _logger()

    async def in_a_task() -> None:
        logger.info("in a task")

    logger.info("before")
    with about("slack:T1:C1:1.2"):
        logger.info("in the run")
        with about(subagent="operator"):
            await asyncio.create_task(in_a_task())
            logger.info("already says thread_id=x")
        logger.info("after the delegation")
    logger.info("after")
    assert keep.lines == [
        "before",
        "in the run (thread_id=slack:T1:C1:1.2)",
        "in a task (thread_id=slack:T1:C1:1.2 subagent=operator)",
        "already says thread_id=x (subagent=operator)",
        "after the delegation (thread_id=slack:T1:C1:1.2)",
        "after",
    ]


def test_json_lines_carry_the_ids_as_fields():
    """LOG_FORMAT=json: one object per line, with thread, approval and event ids as fields; no text suffix."""
    import io
    import json

    from countersign.logs import _formatter

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(ConversationFilter())
    handler.setFormatter(_formatter("json"))
    logger = logging.getLogger(f"test.log_context.json.{id(object())}")
    logger.propagate = False
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)

    logger.info("outside")
    with about("slack:T1:C1:1.2", event_id="1.2"), about(approval_id="a" * 32):
        logger.warning("deciding %s", "now")
    first, second = (json.loads(line) for line in stream.getvalue().splitlines())
    assert first["message"] == "outside" and first["level"] == "INFO" and first["thread_id"] is None
    assert {k: second[k] for k in ("message", "level", "thread_id", "approval_id", "event_id", "subagent")} == {
        "message": "deciding now",
        "level": "WARNING",
        "thread_id": "slack:T1:C1:1.2",
        "approval_id": "a" * 32,
        "event_id": "1.2",
        "subagent": None,
    }
    assert "conversation" not in second and second["logger"] == logger.name and "time" in second


def test_json_lines_outside_a_run_carry_the_thread_id_their_message_names():
    """A line logged outside a run that names `thread_id=...` in its text (a decision, a card) has it as its field too."""
    import io
    import json

    from countersign.logs import _formatter

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(ConversationFilter())
    handler.setFormatter(_formatter("json"))
    logger = logging.getLogger(f"test.log_context.named.{id(object())}")
    logger.propagate = False
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)

    logger.info("approval %s: approved (thread_id=%s)", "a1", "slack:T1:C1:1.2")
    with about("discord:9:8"):
        logger.info("not re-running x (tool_call_id=c thread_id=%s)", "discord:9:8")
    logger.info("no conversation here")
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [line["thread_id"] for line in lines] == ["slack:T1:C1:1.2", "discord:9:8", None]
