"""Core errors to Slack text: the one place the Slack adapter words them (CONVENTIONS.md 6)."""

from __future__ import annotations

from adapters.slack import messages as msg
from adapters.slack.blocks import when_token
from bot.errors import (
    AlreadyDecidedError,
    AlreadyVotedError,
    ApprovalNotFoundError,
    CountersignError,
    InvalidDecisionError,
    NotPermittedError,
    StaleVoteError,
)
from bot.service import ShuttingDownError


def error_text(error: Exception) -> str:
    """What the person who clicked or typed reads about `error`; never a traceback."""
    if isinstance(error, AlreadyDecidedError):
        if error.decided_by_id is None:
            return msg.ALREADY_DECIDED_NOBODY.format(outcome=error.outcome)
        when = f" at {when_token(error.decided_at)}" if error.decided_at else ""
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
    if isinstance(error, CountersignError):
        return msg.DECISION_FAILED
    return msg.DECISION_FAILED
