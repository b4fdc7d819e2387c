"""Block Kit for the first card's Approve all / Reject all, and for an escalated card (docs/decisions/0023)."""

from __future__ import annotations

from datetime import UTC, datetime

from adapters.slack import blocks
from adapters.slack.blocks import (
    ACTION_APPROVE_ALL,
    ACTION_REJECT_ALL,
    VIEW_REJECT_ALL,
    batch_version_of,
    card_blocks,
    form_metadata,
    parse_form_metadata,
    reject_all_modal,
    version_of,
)
from bot.ports import ApprovalCard, BatchOffer
from bot.reviews.escalation.rules import EscalationTarget, TargetKind
from bot.reviews.lifecycle import ApprovalStatus, EscalationStatus
from tests.unit.slack.test_card_blocks import (
    BUTTON_TEXT_MAX,
    MODAL_TEXT_MAX,
    all_text,
    assert_within_limits,
    buttons,
    decided,
    record,
)

REVIEW = "0123456789abcdef0123456789abcdef"
BATCH = BatchOffer(review_id=REVIEW, pending=3, version="deadbeef")


def test_the_first_card_carries_approve_all_and_reject_all_naming_the_pause():
    """Approve all / Reject all: fixed action ids, the pause in the value, its version in the block id."""
    rendered = card_blocks(ApprovalCard(approval=record(position=0), position=1, total=3, batch=BATCH))
    assert_within_limits(rendered)
    batch = [b for b in buttons(rendered) if b["action_id"] in {ACTION_APPROVE_ALL, ACTION_REJECT_ALL}]
    assert [(b["action_id"], b["value"], b["text"]["text"]) for b in batch] == [
        (ACTION_APPROVE_ALL, REVIEW, "Approve all 3"),
        (ACTION_REJECT_ALL, REVIEW, "Reject all 3"),
    ]
    assert all(len(b["text"]["text"]) <= BUTTON_TEXT_MAX for b in batch)
    [block] = [b for b in rendered if b["type"] == "actions" and b["elements"][0]["action_id"] == ACTION_APPROVE_ALL]
    assert batch_version_of(block["block_id"]) == "deadbeef" and version_of(block["block_id"]) is None
    assert "3 calls of this request wait for a decision" in all_text(rendered)
    # The card's own buttons come first, unchanged.
    assert [b["action_id"] for b in buttons(rendered)][:3] == [
        blocks.ACTION_APPROVE,
        blocks.ACTION_EDIT,
        blocks.ACTION_REJECT,
    ]


def test_a_decided_first_card_keeps_the_batch_while_others_wait_and_other_cards_never_have_it():
    """A decided first card shows only the batch buttons; a card without an offer has no batch buttons."""
    first = card_blocks(
        ApprovalCard(approval=decided(ApprovalStatus.APPROVED, position=0), position=1, total=3, batch=BATCH)
    )
    assert [b["action_id"] for b in buttons(first)] == [ACTION_APPROVE_ALL, ACTION_REJECT_ALL]
    plain = card_blocks(ApprovalCard(approval=record(position=1), position=2, total=3))
    assert ACTION_APPROVE_ALL not in [b["action_id"] for b in buttons(plain)]


def test_the_reject_all_modal_asks_one_optional_reason_and_keeps_the_clicked_channel():
    """Reject all: one optional reason; the pause and the click's channel travel in private_metadata."""
    view = reject_all_modal(BATCH, clicked_in="C9")
    assert view["callback_id"] == VIEW_REJECT_ALL
    assert parse_form_metadata(view["private_metadata"]) == (REVIEW, "C9")
    assert len(view["title"]["text"]) <= MODAL_TEXT_MAX and len(view["submit"]["text"]) <= MODAL_TEXT_MAX
    [field] = [b for b in view["blocks"] if b["type"] == "input"]
    assert field["optional"] is True and field["block_id"] == blocks.REASON_BLOCK
    assert "3 waiting calls" in view["blocks"][0]["text"]["text"]
    assert form_metadata("abc", None) == "abc" and parse_form_metadata("abc") == ("abc", None)


def test_an_escalated_card_says_to_whom_and_when_on_every_copy():
    """Once claimed or posted, the card reads "Escalated to <mention> · <date>"; before, nothing."""
    at = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    target = EscalationTarget(kind=TargetKind.GROUP, subject_id="S42")
    waiting = record(escalation=EscalationStatus.WAITING, escalate_to=target, escalate_at=at)
    assert "Escalated" not in all_text(card_blocks(ApprovalCard(approval=waiting, position=1, total=1)))
    for status, approval in [
        (
            EscalationStatus.ESCALATED,
            record(escalation=EscalationStatus.ESCALATED, escalate_to=target, escalated_at=at),
        ),
        (
            EscalationStatus.ESCALATED,
            decided(
                ApprovalStatus.REJECTED, escalation=EscalationStatus.ESCALATED, escalate_to=target, escalated_at=at
            ),
        ),
    ]:
        text = all_text(card_blocks(ApprovalCard(approval=approval, position=1, total=1)))
        assert f"Escalated to <!subteam^S42> · <!date^{int(at.timestamp())}^" in text, status
    for kind, mention in [(TargetKind.USER, "<@U9>"), (TargetKind.CHANNEL, "<#U9>")]:
        approval = record(
            escalation=EscalationStatus.CLAIMED,
            escalate_to=EscalationTarget(kind=kind, subject_id="U9"),
            escalated_at=at,
        )
        assert f"Escalated to {mention}" in all_text(card_blocks(ApprovalCard(approval=approval, position=1, total=1)))
