"""Deciding a pause at once: *Approve all* / *Reject all* on its first card.

A batch is no decision of its own: it is one decision per pending call of the pause, each taken
through the same path as a single click (`Decider.decide`: validation, authorisation, the policy
again, quorum votes, self-approval, exactly once), one after the other. A call the clicker may
not decide stays pending and is reported with the reason, and so does a call whose arguments
the clicker's platform cannot show in full, which Approve all never approves
(`bot.base.errors.UnshowableError`; docs/decisions/0034-arguments-approvers-can-see.md), and a call
whose own card has not been posted (its post failed and is tried again), which nobody has seen
(`bot.base.errors.CardNotPostedError`; docs/decisions/0041-no-card-no-approval.md); a call
decided before (by someone else, or by a double click) is skipped. Each decision is its own
transaction, so a batch cut short (a crash, a database error) leaves every call either decided
or pending, never half of one; the pause resumes once, claimed by whichever decision was its
last, as for single clicks.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass

from bot.base.conversation import Actor
from bot.base.errors import AlreadyDecidedError, CountersignError
from bot.reviews.decide import Decider
from bot.reviews.decisions import Approve, Reject
from bot.reviews.records import ApprovalRecord, DecideResult

log = logging.getLogger(__name__)

_REVIEW_ID = re.compile(r"[0-9a-f]{32}")


def is_review_id(value: object) -> bool:
    """Whether `value` has the shape the batch buttons give a review id (a UUID as 32 hex digits)."""
    return isinstance(value, str) and _REVIEW_ID.fullmatch(value) is not None


@dataclass(frozen=True, slots=True, kw_only=True)
class Left:
    """A call the batch left pending, and why (the error a single click would have met)."""

    approval: ApprovalRecord
    error: Exception


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchOutcome:
    """What one Approve all / Reject all did, call by call (each in the pause's order).

    Attributes:
        decided: calls this click decided (approved or rejected, as stored now).
        voted: calls whose approval was counted while a quorum still waits for others.
        left: calls left pending: the clicker may not decide them, their arguments changed,
            the platform cannot show their arguments in full, or (Approve all) their own card
            has not been posted.
        skipped: calls decided before the click got to them.
    """

    decided: tuple[ApprovalRecord, ...] = ()
    voted: tuple[ApprovalRecord, ...] = ()
    left: tuple[Left, ...] = ()
    skipped: tuple[ApprovalRecord, ...] = ()


async def decide_each(
    decider: Decider, rows: Sequence[ApprovalRecord], actor: Actor, decision: Approve | Reject
) -> tuple[BatchOutcome, list[DecideResult]]:
    """Take `decision` on every pending call of a pause, one at a time, through `Decider.decide`.

    Args:
        decider: the single-click decision path.
        rows: the pause's approvals as read when the click arrived, in order.
        actor: the authenticated clicker.
        decision: `Approve()` (each call at the version of its arguments read here: an edit
            made meanwhile leaves that call pending) or `Reject(message=...)` for all.

    Returns:
        The outcome, and the results of the votes recorded (for their follow-ups: redraws, and
        the resume claimed by the last decision of the pause).
    """
    decided: list[ApprovalRecord] = []
    voted: list[ApprovalRecord] = []
    left: list[Left] = []
    skipped: list[ApprovalRecord] = []
    results: list[DecideResult] = []
    for row in rows:
        if not row.is_pending:
            skipped.append(row)
            continue
        seen = row.version if isinstance(decision, Approve) else None
        try:
            result = await decider.decide(row.id, actor, decision, seen_version=seen, batch=True)
        except AlreadyDecidedError:
            skipped.append(row)
            continue
        except Exception as exc:
            if not isinstance(exc, CountersignError):
                log.exception("a batch decision on approval %s failed (thread_id=%s)", row.id, row.thread_id)
            left.append(Left(approval=row, error=exc))
            continue
        results.append(result)
        (decided if result.decided else voted).append(result.approval)
    outcome = BatchOutcome(decided=tuple(decided), voted=tuple(voted), left=tuple(left), skipped=tuple(skipped))
    return outcome, results
