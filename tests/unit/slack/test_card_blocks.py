"""Approval cards and modals as Block Kit: content, outcome, escaping and Slack's limits."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from adapters.slack import blocks
from adapters.slack.blocks import (
    ACTION_APPROVE,
    ACTION_EDIT,
    ACTION_REJECT,
    VIEW_EDIT,
    VIEW_REJECT,
    args_json,
    card_blocks,
    card_text,
    edit_modal,
    reject_modal,
    when_token,
)
from bot.ports import ApprovalCard, ToolOrigin
from bot.reviews.lifecycle import ApprovalStatus
from bot.reviews.records import ApprovalRecord

APPROVAL_ID = "0b5c9f3e-7d0e-4a51-9a7f-3c2f8f1d2e44"
DECIDED_AT = datetime(2024, 5, 17, 9, 30, tzinfo=UTC)

# Block Kit reference limits.
SECTION_TEXT_MAX = 3000
HEADER_TEXT_MAX = 150
BUTTON_VALUE_MAX = 2000
ACTION_ID_MAX = 255
BLOCK_ID_MAX = 255
BLOCKS_MAX = 50
CONTEXT_TEXT_MAX = 3000
MODAL_TEXT_MAX = 24
BUTTON_TEXT_MAX = 75


def record(**changes: Any) -> ApprovalRecord:
    """A pending approval for `send`; keyword arguments replace fields."""
    fields: dict[str, Any] = {
        "id": APPROVAL_ID,
        "review_id": "review-1",
        "position": 1,
        "thread_id": "slack:T1:C1:1715938200.000100",
        "workspace_id": "T1",
        "tool_call_id": "call-1",
        "tool_name": "send_email",
        "description": "The user asked me to email the report.",
        "proposed_args": {"to": "ops@example.com", "subject": "Report"},
        "requester_id": "U_ASKER",
        "requester_name": "Ann",
        "card_ref": None,
        "status": ApprovalStatus.PENDING,
        "decided_by_id": None,
        "decided_by_name": None,
        "decided_at": None,
        "final_args": None,
        "reason": None,
        "created_at": datetime(2024, 5, 17, 9, 0, tzinfo=UTC),
    }
    fields.update(changes)
    return ApprovalRecord(**fields)


def card(approval: ApprovalRecord | None = None, *, position: int = 1, total: int = 1):
    """An ApprovalCard around `approval` (a default pending one when omitted)."""
    return ApprovalCard(approval=approval or record(), position=position, total=total)


def decided(status: ApprovalStatus, **changes: Any) -> ApprovalRecord:
    """An approval decided by U_BOSS at DECIDED_AT with `status`."""
    fields: dict[str, Any] = {
        "status": status,
        "decided_by_id": "U_BOSS",
        "decided_by_name": "Boss",
        "decided_at": DECIDED_AT,
    }
    fields.update(changes)
    return record(**fields)


def texts(block: dict[str, Any]) -> list[str]:
    """Every text string inside a block."""
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            text = node.get("text")
            if isinstance(text, str):
                found.append(text)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(block)
    return found


def all_text(rendered: list[dict[str, Any]]) -> str:
    """All text of a card joined, for content assertions."""
    return "\n".join(t for block in rendered for t in texts(block))


def buttons(rendered: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """All button elements of a card."""
    return [
        element
        for block in rendered
        if block["type"] == "actions"
        for element in block["elements"]
        if element["type"] == "button"
    ]


def assert_within_limits(rendered: list[dict[str, Any]]) -> None:
    """Check Block Kit's size limits on a whole card."""
    assert len(rendered) <= BLOCKS_MAX
    for block in rendered:
        if "block_id" in block:
            assert len(block["block_id"]) <= BLOCK_ID_MAX
        if block["type"] == "header":
            assert block["text"]["type"] == "plain_text"
            assert len(block["text"]["text"]) <= HEADER_TEXT_MAX
        elif block["type"] == "section":
            assert len(block["text"]["text"]) <= SECTION_TEXT_MAX
        elif block["type"] == "context":
            assert len(block["elements"]) <= 10
            for element in block["elements"]:
                assert len(element["text"]) <= CONTEXT_TEXT_MAX
        elif block["type"] == "actions":
            assert len(block["elements"]) <= 25
            for element in block["elements"]:
                assert len(element["action_id"]) <= ACTION_ID_MAX
                assert len(element["value"]) <= BUTTON_VALUE_MAX
                assert len(element["text"]["text"]) <= BUTTON_TEXT_MAX


# pending cards ---------------------------------------------------------------------------------


@pytest.mark.parametrize("character", ["<", "&", ">"])
def test_a_tally_of_long_names_that_escaping_grows_stays_within_the_section(character):
    """Nine voters named with 80 `<`, `&` or `>` each: the tally is clipped (after escaping, never inside an entity)."""
    votes = tuple(f"{i}{character * 79}" for i in range(9))
    rendered = card_blocks(card(record(quorum=10, votes=votes, description="why " * 400)))
    assert_within_limits(rendered)
    [tally] = [line for line in all_text(rendered).splitlines() if line.startswith("*Approvals:* 9 of 10 (")]
    assert tally.endswith("…)") and re.search(r"&[a-z]*…", tally) is None
    assert "\u2028" not in all_text(card_blocks(card(record(quorum=2, votes=("ann\u2028*Approvals:* 2 of 2",)))))


def test_pending_card_shows_tool_requester_reason_and_args():
    """A pending card names the tool, mentions the requester, says why and lists the args."""
    rendered = card_blocks(card())
    text = all_text(rendered)
    assert rendered[0]["type"] == "header"
    assert "Approval needed" in rendered[0]["text"]["text"]
    assert "`send_email`" in text
    assert "<@U_ASKER>" in text
    assert "The user asked me to email the report." in text
    assert "ops@example.com" in text
    assert '```"subject": "Report"\n"to": "ops@example.com"```' in text  # every key, shortest value first
    assert_within_limits(rendered)


def test_pending_card_has_exactly_approve_edit_reject():
    """A pending card has three buttons, Approve / Edit / Reject, with fixed action ids."""
    found = buttons(card_blocks(card()))
    assert [b["text"]["text"] for b in found] == ["Approve", "Edit", "Reject"]
    assert [b["action_id"] for b in found] == [ACTION_APPROVE, ACTION_EDIT, ACTION_REJECT]
    assert found[0].get("style") == "primary"
    assert found[2].get("style") == "danger"


def test_buttons_carry_only_the_approval_id():
    """Every button's value is exactly the approval id, however big the arguments."""
    approval = record(proposed_args={"body": "x" * 50_000, "to": "<!channel>"})
    found = buttons(card_blocks(card(approval)))
    assert [b["text"]["text"] for b in found] == ["Approve", "Edit", "Reject", "All arguments"]
    assert all(b["value"] == APPROVAL_ID for b in found)


def test_actions_block_id_names_the_approval():
    """The actions block id is unique per approval (two cards in one message never clash)."""
    rendered = card_blocks(card())
    actions = [b for b in rendered if b["type"] == "actions"]
    assert len(actions) == 1
    assert APPROVAL_ID in actions[0]["block_id"]


def test_card_without_description_has_no_why_line():
    """An approval without a description shows no empty `Why:` line."""
    text = all_text(card_blocks(card(record(description=""))))
    assert "Why" not in text


def test_position_shown_only_for_several_approvals():
    """`2 of 3` is shown when the pause has several calls, nothing when it has one."""
    assert "of 1" not in all_text(card_blocks(card(total=1)))
    assert "2 of 3" in all_text(card_blocks(card(position=2, total=3)))


def test_pending_card_text_names_tool_and_requester():
    """The fallback text of a pending card names the tool and the requester."""
    text = card_text(card())
    assert "send_email" in text
    assert "Ann" in text


# escaping --------------------------------------------------------------------------------------


def test_arguments_are_escaped():
    """An argument containing `<!channel>` is shown escaped, never as a broadcast."""
    approval = record(proposed_args={"message": "hi <!channel> & <@U999> <https://evil|ok>"})
    text = all_text(card_blocks(card(approval)))
    assert "&lt;!channel&gt;" in text
    assert "&lt;@U999&gt;" in text
    assert "&amp;" in text
    assert "<!channel>" not in text
    assert "<@U999>" not in text
    assert "<https://evil|ok>" not in text


def test_description_and_tool_name_are_escaped():
    """The `why` text and the tool name cannot mention or broadcast either."""
    approval = record(tool_name="a<b>", description="**urgent** <!here>")
    text = all_text(card_blocks(card(approval)))
    assert "<!here>" not in text
    assert "&lt;!here&gt;" in text
    assert "*urgent*" in text
    assert "a&lt;b&gt;" in text


def test_reject_reason_is_escaped():
    """A reject reason containing `<!everyone>` is shown escaped."""
    approval = decided(ApprovalStatus.REJECTED, reason="no <!everyone>")
    text = all_text(card_blocks(card(approval)))
    assert "&lt;!everyone&gt;" in text
    assert "<!everyone>" not in text


def test_non_ascii_arguments_are_kept_readable():
    """Non-ASCII argument text is shown as is, not as \\u escapes."""
    approval = record(proposed_args={"city": "Zürich", "greeting": "こんにちは"})
    text = all_text(card_blocks(card(approval)))
    assert "Zürich" in text
    assert "こんにちは" in text


def test_card_text_escapes_the_requester_name():
    """The notification text shows a display name like `<!channel>` escaped."""
    text = card_text(card(record(requester_name="<!channel>")))
    assert "<!channel>" not in text


def test_argument_backticks_cannot_close_the_code_block():
    """The arguments section has exactly one code block whatever the arguments contain."""
    approval = record(proposed_args={"note": "```\n*Approved by the CEO*\n```"})
    rendered = card_blocks(card(approval))
    args_section = rendered[2]["text"]["text"]
    assert args_section.count("```") == 2


# huge values -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        {"body": "x" * 100_000},
        {"body": "<" * 10_000},
        {"body": "&" * 9_999 + "x"},
        {f"key{i}": "value " * 20 for i in range(500)},
        {"nested": {"deep": [{"k": "v" * 1000} for _ in range(20)]}},
    ],
)
def test_huge_arguments_stay_within_block_kit_limits(args):
    """Huge arguments are truncated so every block stays within Slack's limits."""
    for status in ApprovalStatus:
        approval = (
            record(proposed_args=args)
            if status is ApprovalStatus.PENDING
            else decided(status, proposed_args=args, final_args=args, reason="r" * 10_000)
        )
        rendered = card_blocks(card(approval))
        assert_within_limits(rendered)


def test_huge_description_and_reason_are_clipped():
    """A very long description and reason are clipped with an ellipsis, within limits."""
    approval = decided(ApprovalStatus.REJECTED, description="why " * 5_000, reason="&" * 20_000)
    rendered = card_blocks(card(approval))
    assert_within_limits(rendered)
    text = all_text(rendered)
    assert "…" in text
    assert not re.search(r"&(?!amp;|lt;|gt;)", text)


def test_a_shortened_value_says_how_many_characters_are_hidden():
    """A long value keeps its start and ends with "…" and the count of its characters not shown."""
    args = {"body": "x" * 10_000}
    section = card_blocks(card(record(proposed_args=args)))[2]["text"]["text"]
    [line] = section.split("```")[1].splitlines()
    match = re.fullmatch(r'("body": "x+)… \(\+([\d,]+) characters\)', line)
    assert match is not None, line
    assert len(match.group(1)) + int(match.group(2).replace(",", "")) == len('"body": "' + "x" * 10_000 + '"')
    assert "*All arguments* shows every key and value in full" in section


def test_small_arguments_have_no_shortening_note():
    """Arguments that fit are shown whole, without a note and without All arguments."""
    rendered = card_blocks(card())
    section = rendered[2]["text"]["text"]
    assert "shortened" not in section
    assert section.split("```")[1] == '"subject": "Report"\n"to": "ops@example.com"'
    assert [b["text"]["text"] for b in buttons(rendered)] == ["Approve", "Edit", "Reject"]


def test_shortening_never_cuts_an_entity():
    """Shortened escaped arguments never end in a partial `&amp;` / `&lt;` / `&gt;`."""
    for pad in range(6):
        args = {"body": "a" * pad + "<" * 5_000}
        section = card_blocks(card(record(proposed_args=args)))[2]["text"]["text"]
        shown = section.split("```")[1]
        assert not re.search(r"&(?!amp;|lt;|gt;)", shown), shown[-10:]


def test_the_hidden_count_is_in_characters_of_the_arguments():
    """The hidden count is in characters of the value as it runs (unescaped), not as Slack escapes it."""
    line = '"body": "' + "<" * 5_000 + '"'
    section = card_blocks(card(record(proposed_args={"body": "<" * 5_000})))[2]["text"]["text"]
    shown = section.split("```")[1].split("…")[0]
    unescaped = shown.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    hidden = int(re.search(r"\(\+([\d,]+) characters\)", section).group(1).replace(",", ""))
    assert hidden == len(line) - len(unescaped)


# decided cards ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "header", "outcome"),
    [
        (ApprovalStatus.APPROVED, "Approved", "Approved by <@U_BOSS>"),
        (ApprovalStatus.EDITED, "Approved with edits", "Edited and approved by <@U_BOSS>"),
        (ApprovalStatus.REJECTED, "Rejected", "Rejected by <@U_BOSS>"),
    ],
)
def test_decided_card_shows_outcome_decider_and_time_without_buttons(status, header, outcome):
    """A decided card has the outcome header, `<outcome> by <@decider>`, a date and no buttons."""
    rendered = card_blocks(card(decided(status, final_args={"to": "x"})))
    assert header in rendered[0]["text"]["text"]
    assert buttons(rendered) == []
    assert all(b["type"] != "actions" for b in rendered)
    context = rendered[-1]
    assert context["type"] == "context"
    line = context["elements"][0]["text"]
    assert line.startswith(outcome)
    assert f"<!date^{int(DECIDED_AT.timestamp())}^" in line
    assert_within_limits(rendered)


def test_approved_card_has_no_final_args_section():
    """A plain approval shows the proposed arguments only."""
    text = all_text(card_blocks(card(decided(ApprovalStatus.APPROVED))))
    assert "Arguments used" not in text


def test_an_approved_call_the_bot_gave_up_on_says_it_did_not_run():
    """An approved call whose pause was given up before it started says it did not run; one that started says its outcome is unknown."""
    not_run = all_text(card_blocks(card(decided(ApprovalStatus.APPROVED, not_run=True))))
    assert "the call did not run" in not_run and "may or may not" not in not_run
    started = all_text(card_blocks(card(decided(ApprovalStatus.APPROVED, outcome_unknown=True))))
    assert "may or may not have taken effect" in started and "did not run" not in started
    assert "did not run" not in all_text(card_blocks(card(decided(ApprovalStatus.APPROVED))))


def test_edited_card_shows_final_arguments():
    """An edited approval shows the proposed and the final arguments."""
    approval = decided(
        ApprovalStatus.EDITED,
        proposed_args={"to": "everyone@example.com"},
        final_args={"to": "ops@example.com"},
    )
    rendered = card_blocks(card(approval))
    sections = [b["text"]["text"] for b in rendered if b["type"] == "section"]
    proposed = next(s for s in sections if s.startswith("*Arguments*"))
    final = next(s for s in sections if s.startswith("*Arguments used*"))
    assert "everyone@example.com" in proposed
    assert "ops@example.com" in final
    assert "everyone@example.com" not in final


def test_rejected_card_shows_reason():
    """A rejected card shows the reason given."""
    approval = decided(ApprovalStatus.REJECTED, reason="Not during the freeze.")
    text = all_text(card_blocks(card(approval)))
    assert "*Reason:* Not during the freeze." in text


def test_rejected_without_reason_has_no_reason_line():
    """A rejection without a reason shows no `Reason:` line."""
    text = all_text(card_blocks(card(decided(ApprovalStatus.REJECTED, reason=None))))
    assert "Reason" not in text


def test_expired_card_has_no_decider():
    """An expiry has no decider: the line says Expired and the time, with no mention."""
    approval = record(status=ApprovalStatus.EXPIRED, decided_at=DECIDED_AT)
    rendered = card_blocks(card(approval))
    assert "Expired" in rendered[0]["text"]["text"]
    assert buttons(rendered) == []
    line = rendered[-1]["elements"][0]["text"]
    assert line.startswith("Expired · <!date^")
    assert "<@" not in line


@pytest.mark.parametrize(
    ("status", "word"),
    [
        (ApprovalStatus.APPROVED, "Approved"),
        (ApprovalStatus.EDITED, "Approved with edits"),
        (ApprovalStatus.REJECTED, "Rejected"),
        (ApprovalStatus.EXPIRED, "Expired"),
    ],
)
def test_decided_card_text_names_outcome_and_tool(status, word):
    """The fallback text of a decided card names the outcome and the tool."""
    text = card_text(card(decided(status)))
    assert word in text
    assert text.endswith(": send_email")


# when_token ------------------------------------------------------------------------------------


def test_when_token_is_a_slack_date_with_utc_fallback():
    """A time becomes `<!date^epoch^...|YYYY-MM-DD HH:MM UTC>`."""
    token = when_token(DECIDED_AT)
    assert token == (f"<!date^{int(DECIDED_AT.timestamp())}^{{date_short_pretty}} {{time}}|2024-05-17 09:30 UTC>")


def test_when_token_of_none_is_empty():
    """No time gives an empty string."""
    assert when_token(None) == ""


def test_when_token_fallback_is_converted_to_utc():
    """The `UTC` fallback of a time in another zone shows the UTC wall-clock time."""
    moment = datetime(2024, 5, 17, 11, 30, tzinfo=timezone(timedelta(hours=2)))
    assert when_token(moment).endswith("|2024-05-17 09:30 UTC>")


# modals ----------------------------------------------------------------------------------------


def _assert_modal_texts_fit(view: dict[str, Any]) -> None:
    for key in ("title", "submit", "close"):
        assert view[key]["type"] == "plain_text"
        assert 0 < len(view[key]["text"]) <= MODAL_TEXT_MAX


def test_edit_modal_shape():
    """The Edit modal carries the approval id and prefills the given JSON."""
    prefill = json.dumps({"to": "ops@example.com"}, indent=2)
    view = edit_modal(record(), prefill)
    assert view["type"] == "modal"
    assert view["callback_id"] == VIEW_EDIT
    assert view["private_metadata"] == APPROVAL_ID
    _assert_modal_texts_fit(view)
    inputs = [b for b in view["blocks"] if b["type"] == "input"]
    assert len(inputs) == 1
    element = inputs[0]["element"]
    assert inputs[0]["block_id"] == blocks.EDIT_BLOCK
    assert element["type"] == "plain_text_input"
    assert element["action_id"] == blocks.EDIT_INPUT
    assert element["initial_value"] == prefill
    assert element["multiline"] is True
    assert element["max_length"] == 3000
    assert not inputs[0].get("optional", False)


def test_edit_modal_escapes_the_tool_name():
    """The Edit modal's intro shows the tool name escaped."""
    view = edit_modal(record(tool_name="<!here>"), "{}")
    intro = view["blocks"][0]["text"]["text"]
    assert "&lt;!here&gt;" in intro
    assert "<!here>" not in intro


def test_reject_modal_shape():
    """The Reject modal carries the approval id and an optional reason of at most 2000 chars."""
    view = reject_modal(record())
    assert view["type"] == "modal"
    assert view["callback_id"] == VIEW_REJECT
    assert view["private_metadata"] == APPROVAL_ID
    _assert_modal_texts_fit(view)
    inputs = [b for b in view["blocks"] if b["type"] == "input"]
    assert len(inputs) == 1
    assert inputs[0]["optional"] is True
    assert inputs[0]["block_id"] == blocks.REASON_BLOCK
    element = inputs[0]["element"]
    assert element["action_id"] == blocks.REASON_INPUT
    assert element["max_length"] == 2000
    assert "initial_value" not in element


def test_modal_label_texts_fit():
    """Input labels stay within Slack's 2000-character label limit and are plain text."""
    for view in (edit_modal(record(), "{}"), reject_modal(record())):
        for block in view["blocks"]:
            if block["type"] == "input":
                assert block["label"]["type"] == "plain_text"
                assert 0 < len(block["label"]["text"]) <= 2000


# args_json -------------------------------------------------------------------------------------


def test_args_json_is_indented_and_keeps_order_and_unicode():
    """args_json is two-space indented JSON, key order kept, non-ASCII kept, round-trippable."""
    args = {"z": 1, "a": "ü", "m": [1, {"k": None}]}
    text = args_json(args)
    assert json.loads(text) == args
    assert list(json.loads(text)) == ["z", "a", "m"]
    assert "ü" in text
    assert '\n  "z": 1' in text


def test_a_card_of_an_mcp_tool_names_its_server_and_shows_its_hints_as_hints():
    """An MCP tool's card says which server and tool, and the server's hints as the server's."""
    origin = ToolOrigin(server="notes", tool="create_note", hints=("destructive", "open world"))
    rendered = card_blocks(ApprovalCard(approval=record(), position=1, total=1, origin=origin))
    assert "MCP server notes, tool create_note · the server's hints: destructive, open world" in all_text(rendered)
    assert "MCP server" not in all_text(card_blocks(card()))
