"""Core errors to Discord text: the one place this adapter words them (CONVENTIONS.md 6)."""

from __future__ import annotations

from adapters.discord import messages as msg
from bot.errors import (
    AlreadyDecidedError,
    AlreadyVotedError,
    ApprovalNotFoundError,
    InvalidDecisionError,
    NotPermittedError,
    StaleVoteError,
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
        return {
            "other_workspace": msg.REFUSED_OTHER_WORKSPACE,
            "self_approval_off": msg.REFUSED_SELF_APPROVAL,
            "not_an_approver": msg.REFUSED_NOT_AN_APPROVER,
        }.get(error.reason, msg.REFUSED_NOT_PERMITTED)
    if isinstance(error, AlreadyVotedError):
        return msg.ALREADY_VOTED
    if isinstance(error, StaleVoteError):
        return msg.STALE_VOTE
    if isinstance(error, ApprovalNotFoundError):
        return msg.UNKNOWN_APPROVAL
    if isinstance(error, InvalidDecisionError):
        return msg.INVALID_DECISION.format(problem=error.message)
    if isinstance(error, ShuttingDownError):
        return msg.SHUTTING_DOWN
    return msg.DECISION_FAILED
