"""Which sentence answers which refused decision, for every adapter.

The sentences live in each adapter's `messages` module (docs/development.md, convention 15); this module
only chooses among them, so Slack and Discord can never disagree about what a refusal means.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from types import ModuleType
from typing import Any

from bot.errors import (
    AlreadyDecidedError,
    AlreadyVotedError,
    ApprovalNotFoundError,
    CardNotPostedError,
    InvalidDecisionError,
    NotPermittedError,
    StaleVoteError,
    TrustRefusedError,
    UnshowableError,
)
from bot.service import ShuttingDownError

_REFUSALS = {
    "other_workspace": "REFUSED_OTHER_WORKSPACE",
    "other_dm": "REFUSED_OTHER_DM",
    "self_approval_off": "REFUSED_SELF_APPROVAL",
    "not_an_approver": "REFUSED_NOT_AN_APPROVER",
    "escalation_no_edit": "REFUSED_ESCALATION_EDIT",
}


def as_sentence(text: str) -> str:
    """`text` ending as a sentence: with a final `.` unless it already ends in `.`, `!`, `?` or `…`.

    The core's refusals are clauses that are also built into longer messages (`http_request
    would refuse these arguments: the URL path '//a' has an empty segment ...; remove the extra
    `/``), and some end in a period of their own (the tool's `ARGS_CHECK`); a sentence shown to
    a person ends once, whichever it was.
    """
    text = text.rstrip()
    return text if text.endswith((".", "!", "?", "…")) else f"{text}."


def decision_error_text(error: Exception, msg: ModuleType, when: Callable[[datetime], str]) -> str:
    """The adapter's sentence for `error` (never a traceback).

    Args:
        error: what `submit_decision` or `check_decider` raised.
        msg: the adapter's messages module.
        when: how the platform writes a moment (e.g. a date token).
    """
    if isinstance(error, AlreadyDecidedError):
        if error.decided_by_id is None:
            return str(msg.ALREADY_DECIDED_NOBODY.format(outcome=error.outcome))
        moment = when(error.decided_at) if error.decided_at else ""
        return str(msg.ALREADY_DECIDED.format(outcome=error.outcome, user=error.decided_by_id, when=moment))
    if isinstance(error, NotPermittedError):
        # A platform without the reason's own sentence (Slack has no DM outside a workspace)
        # says the general one.
        return str(getattr(msg, _REFUSALS.get(error.reason, ""), msg.REFUSED_NOT_PERMITTED))
    if isinstance(error, AlreadyVotedError):
        return str(msg.ALREADY_VOTED)
    if isinstance(error, StaleVoteError):
        return str(msg.STALE_VOTE)
    if isinstance(error, TrustRefusedError):
        return str(msg.TRUST_REFUSED.get(error.reason, msg.TRUST_REFUSED["not_offered"]))
    if isinstance(error, UnshowableError):
        words = msg.REFUSED_TOO_MANY_KEYS if error.keys else msg.REFUSED_TOO_LONG
        return str(words.format(size=f"{error.size:,}", limit=f"{error.limit:,}"))
    if isinstance(error, CardNotPostedError):
        return str(msg.CARD_NOT_POSTED)
    if isinstance(error, ApprovalNotFoundError):
        return str(msg.UNKNOWN_APPROVAL)
    if isinstance(error, InvalidDecisionError):
        return str(msg.INVALID_DECISION.format(problem=as_sentence(error.message)))
    if isinstance(error, ShuttingDownError):
        return str(msg.SHUTTING_DOWN)
    return str(msg.DECISION_FAILED)


def edit_error_text(error: Exception, msg: ModuleType, when: Callable[[datetime], str]) -> str:
    """The adapter's sentence for `error` when it refused an edit: about the edit, never "that decision".

    An edit's arguments that its tool refuses (`InvalidDecisionError`: the tool's own input
    schema, an argument it does not have, its server down) are `msg.EDIT_REFUSED`; any other
    refusal reads as for any decision (`decision_error_text`).
    """
    if isinstance(error, InvalidDecisionError):
        return str(msg.EDIT_REFUSED.format(problem=as_sentence(error.message)))
    return decision_error_text(error, msg, when)


def parse_edited_args(raw: str, msg: ModuleType) -> tuple[dict[str, Any] | None, str | None]:
    """The arguments typed into an Edit form, or the adapter's sentence saying what is wrong.

    Returns:
        `(args, None)` for a JSON object, else `(None, problem text)`; deeply nested input and
        huge numbers (which `json` refuses with other errors than JSONDecodeError) are refused
        too.
    """
    try:
        args = json.loads(raw)
    except json.JSONDecodeError as exc:
        return None, str(msg.EDIT_NOT_JSON.format(problem=f"{exc.msg} (line {exc.lineno}, column {exc.colno})"))
    except (RecursionError, ValueError):
        return None, str(msg.EDIT_NOT_JSON.format(problem="it is nested too deeply or holds a number too large"))
    if not isinstance(args, dict):
        return None, str(msg.EDIT_NOT_OBJECT)
    return args, None
