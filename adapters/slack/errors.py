"""Core errors to Slack text: the one place the Slack adapter words them (CONVENTIONS.md 6)."""

from __future__ import annotations

from adapters.decision_errors import decision_error_text, edit_error_text
from adapters.slack import messages as msg
from adapters.slack.blocks import when_token


def error_text(error: Exception) -> str:
    """What the person who clicked or typed reads about `error`; never a traceback."""
    return decision_error_text(error, msg, lambda moment: f" at {when_token(moment)}")


def edit_refusal_text(error: Exception) -> str:
    """What the editor reads in the edit form about `error`: a refused edit in words about the edit."""
    return edit_error_text(error, msg, lambda moment: f" at {when_token(moment)}")
