"""Core errors to Discord text: the one place this adapter words them (CONVENTIONS.md 6)."""

from __future__ import annotations

from adapters.discord import messages as msg
from bot.errors import (
    AlreadyDecidedError,
    ApprovalNotFoundError,
    InvalidDecisionError,
    NotPermittedError,
)
from bot.service import ShuttingDownError


def error_text(error: Exception) -> str:
    """What the clicker reads about `error` (ephemeral); never a traceback."""
    if isinstance(error, AlreadyDecidedError):
        if error.decided_by_id is None:
            return msg.ALREADY_DECIDED_NOBODY.format(outcome=error.outcome)
        when = f" <t:{int(error.decided_at.timestamp())}:R>" if error.decided_at else ""
        return msg.ALREADY_DECIDED.format(outcome=error.outcome, user=error.decided_by_id, when=when)
    if isinstance(error, NotPermittedError):
        return msg.REFUSED_OTHER_WORKSPACE if error.reason == "other_workspace" else msg.REFUSED_NOT_PERMITTED
    if isinstance(error, ApprovalNotFoundError):
        return msg.UNKNOWN_APPROVAL
    if isinstance(error, InvalidDecisionError):
        return msg.INVALID_DECISION.format(problem=error.message)
    if isinstance(error, ShuttingDownError):
        return msg.SHUTTING_DOWN
    return msg.DECISION_FAILED
