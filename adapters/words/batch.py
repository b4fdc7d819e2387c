"""What an Approve all / Reject all did, in the clicker's words, for every adapter.

The sentences below are said alike on Slack and Discord; a platform's `messages` module defines a
`BATCH_*` sentence only where its words differ (the marks of approved and rejected calls, the
terminal's), and then that one is said. This module puts them together, so every adapter reports
a batch alike: what was decided, what waits for more approvers, what was left pending and why
(the sentence a single click would have got), and what was decided before.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from types import ModuleType

from adapters.words.decisions import decision_error_text, said
from bot.reviews.batch import BatchOutcome
from bot.reviews.lifecycle import ApprovalStatus
from bot.reviews.records import ApprovalRecord

BATCH_CALL = "`{tool}` (call {position})"
BATCH_VOTED = "Your approval is recorded for {calls}; they run once enough people approved them."
BATCH_LEFT = "Left pending: {call}. {why}"
BATCH_SKIPPED = "Already decided before your click: {calls}."
BATCH_NOTHING = "Nothing in this request was left to decide. Nothing was changed."


def batch_summary(
    outcome: BatchOutcome, msg: ModuleType, when: Callable[[datetime], str], escape: Callable[[str], str] = str
) -> str:
    """The clicker's private answer to a batch, one line per kind of result.

    Args:
        outcome: what the batch did.
        msg: the adapter's messages module (`BATCH_APPROVED`, `BATCH_REJECTED`, and its own
            words for the shared sentences above, where they differ).
        when: how the platform writes a moment (for "already decided" refusals).
        escape: how the platform escapes a tool name.
    """

    def calls(rows: Iterable[ApprovalRecord]) -> str:
        return ", ".join(_call(row, msg, escape) for row in rows)

    lines = []
    approved = [row for row in outcome.decided if row.status in (ApprovalStatus.APPROVED, ApprovalStatus.EDITED)]
    rejected = [row for row in outcome.decided if row.status is ApprovalStatus.REJECTED]
    if approved:
        lines.append(str(msg.BATCH_APPROVED.format(calls=calls(approved))))
    if rejected:
        lines.append(str(msg.BATCH_REJECTED.format(calls=calls(rejected))))
    if outcome.voted:
        lines.append(str(said(msg, "BATCH_VOTED", BATCH_VOTED).format(calls=calls(outcome.voted))))
    for left in outcome.left:
        why = decision_error_text(left.error, msg, when)
        lines.append(str(said(msg, "BATCH_LEFT", BATCH_LEFT).format(call=_call(left.approval, msg, escape), why=why)))
    if outcome.skipped:
        lines.append(str(said(msg, "BATCH_SKIPPED", BATCH_SKIPPED).format(calls=calls(outcome.skipped))))
    return "\n".join(lines) or str(said(msg, "BATCH_NOTHING", BATCH_NOTHING))


def _call(row: ApprovalRecord, msg: ModuleType, escape: Callable[[str], str]) -> str:
    return str(said(msg, "BATCH_CALL", BATCH_CALL).format(tool=escape(row.tool_name), position=row.position + 1))
