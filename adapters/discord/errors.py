"""Core errors to Discord text: the one place this adapter words them (CONVENTIONS.md 6)."""

from __future__ import annotations

from datetime import datetime

from adapters.decision_errors import decision_error_text, edit_error_text
from adapters.discord import messages as msg
from bot.errors import InvalidDecisionError


def when(moment: datetime) -> str:
    """A moment as Discord shows it to each reader (relative), after a space."""
    return f" <t:{int(moment.timestamp())}:R>"


def error_text(error: Exception) -> str:
    """What the clicker reads about `error` (ephemeral); never a traceback."""
    return decision_error_text(error, msg, when)


def edit_refusal_text(error: InvalidDecisionError) -> str:
    """What the editor reads (ephemeral, with **Edit again**) when an edit's arguments are refused."""
    return edit_error_text(error, msg, when)
