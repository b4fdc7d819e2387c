"""Core errors to Discord text: the one place this adapter words them (CONVENTIONS.md 6)."""

from __future__ import annotations

from datetime import datetime

from adapters.decision_errors import decision_error_text
from adapters.discord import messages as msg


def when(moment: datetime) -> str:
    """A moment as Discord shows it to each reader (relative), after a space."""
    return f" <t:{int(moment.timestamp())}:R>"


def error_text(error: Exception) -> str:
    """What the clicker reads about `error` (ephemeral); never a traceback."""
    return decision_error_text(error, msg, when)
