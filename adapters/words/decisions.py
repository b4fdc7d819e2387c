"""Which sentence answers which refused decision, for every adapter, and the sentences Slack and Discord share.

The sentences below are said alike on Slack and Discord; a platform's `messages` module defines
a sentence of the same name only when its words differ (the terminal's, a platform's limits), and
then that one is said. This module chooses among them, so no two adapters can disagree about what
a refusal means (docs/decisions/0060-words-in-one-place.md).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from types import ModuleType
from typing import Any

from adapters.words.conversation import SHUTTING_DOWN
from bot.base.errors import (
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

ALREADY_DECIDED = "This was already {outcome} by <@{user}>{when}. Nothing was changed."
ALREADY_DECIDED_NOBODY = "This was already {outcome}. Nothing was changed."
UNKNOWN_APPROVAL = "I can't find this approval any more. Nothing was changed."
INVALID_DECISION = "That decision was refused: {problem}"
DECISION_FAILED = "Something went wrong while recording your decision; nothing was changed. Please try again."
ALREADY_VOTED = "You already approved this; each person counts once, so it now needs other approvers."
STALE_VOTE = "The arguments changed while you clicked; look at the card again."
CARD_NOT_POSTED = (
    "Its card has not been posted yet (posting it failed; the bot tries again), so nobody has seen its "
    "arguments and Approve all did not approve it. Decide it on its own card once it shows."
)
"""Why Approve all left a call pending: its own card is missing (`bot.base.errors.CardNotPostedError`)."""
REFUSED_SELF_APPROVAL = (
    "You asked for this call, and self-approval is off for this tool, so someone else must approve it."
)
REFUSED_NOT_AN_APPROVER = "You can't decide this approval: you are not on the approvers list for this tool."
REFUSED_ESCALATION_EDIT = (
    "This card was escalated to you, so you may approve or reject it, but not edit it: only its "
    "approvers, admins and the person who asked can change the arguments. Nothing was changed."
)
TRUST_REFUSED = {
    "not_offered": (
        "Trust is not enabled for this tool here any more, so nothing was changed. You can still approve the call once."
    ),
    "quorum": (
        "This call now needs more than one approval, so one click cannot trust it. Nothing was changed; approve "
        "it once instead."
    ),
    "not_approve": "Trust goes only with an approval. Nothing was changed.",
    "escalation": (
        "This card was escalated to you, which lets you decide this call but not the tool's later ones, so you "
        "cannot trust it. Nothing was changed; approve it once instead."
    ),
}
"""By `bot.base.errors.TrustRefusedError.reason`."""
VOTE_RECORDED = "Your approval is recorded ({count} of {quorum}); the call runs once {quorum} people approved it."
"""What a click says once it counted but the call needs more approvals."""

_REFUSALS = {
    "other_workspace": "REFUSED_OTHER_WORKSPACE",
    "other_dm": "REFUSED_OTHER_DM",
    "self_approval_off": "REFUSED_SELF_APPROVAL",
    "not_an_approver": "REFUSED_NOT_AN_APPROVER",
    "escalation_no_edit": "REFUSED_ESCALATION_EDIT",
}

_SHARED_REFUSALS = {
    "REFUSED_SELF_APPROVAL": REFUSED_SELF_APPROVAL,
    "REFUSED_NOT_AN_APPROVER": REFUSED_NOT_AN_APPROVER,
    "REFUSED_ESCALATION_EDIT": REFUSED_ESCALATION_EDIT,
}


def said(msg: ModuleType, name: str, shared: Any) -> Any:
    """The platform's own words for `name` when its messages module `msg` has them, else `shared`."""
    return getattr(msg, name, shared)


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
        msg: the adapter's messages module: its own sentences, where they differ from the shared ones above.
        when: how the platform writes a moment (e.g. a date token).
    """
    if isinstance(error, AlreadyDecidedError):
        if error.decided_by_id is None:
            return str(said(msg, "ALREADY_DECIDED_NOBODY", ALREADY_DECIDED_NOBODY).format(outcome=error.outcome))
        moment = when(error.decided_at) if error.decided_at else ""
        return str(
            said(msg, "ALREADY_DECIDED", ALREADY_DECIDED).format(
                outcome=error.outcome, user=error.decided_by_id, when=moment
            )
        )
    if isinstance(error, NotPermittedError):
        # A platform without the reason's own sentence (Slack has no DM outside a workspace)
        # says the general one.
        name = _REFUSALS.get(error.reason, "")
        return str(said(msg, name, _SHARED_REFUSALS.get(name, msg.REFUSED_NOT_PERMITTED)))
    if isinstance(error, AlreadyVotedError):
        return str(said(msg, "ALREADY_VOTED", ALREADY_VOTED))
    if isinstance(error, StaleVoteError):
        return str(said(msg, "STALE_VOTE", STALE_VOTE))
    if isinstance(error, TrustRefusedError):
        refusals = said(msg, "TRUST_REFUSED", TRUST_REFUSED)
        return str(refusals.get(error.reason, refusals["not_offered"]))
    if isinstance(error, UnshowableError):
        words = msg.REFUSED_TOO_MANY_KEYS if error.keys else msg.REFUSED_TOO_LONG
        return str(words.format(size=f"{error.size:,}", limit=f"{error.limit:,}"))
    if isinstance(error, CardNotPostedError):
        return str(said(msg, "CARD_NOT_POSTED", CARD_NOT_POSTED))
    if isinstance(error, ApprovalNotFoundError):
        return str(said(msg, "UNKNOWN_APPROVAL", UNKNOWN_APPROVAL))
    if isinstance(error, InvalidDecisionError):
        return str(said(msg, "INVALID_DECISION", INVALID_DECISION).format(problem=as_sentence(error.message)))
    if isinstance(error, ShuttingDownError):
        return str(said(msg, "SHUTTING_DOWN", SHUTTING_DOWN))
    return str(said(msg, "DECISION_FAILED", DECISION_FAILED))


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
