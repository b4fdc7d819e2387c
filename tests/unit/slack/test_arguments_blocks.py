"""Every argument an approver decides on, in Block Kit: the card's lines, All arguments, and what Slack cannot show."""

from __future__ import annotations

import re
from typing import Any

import pytest

from adapters.slack import blocks
from adapters.slack.blocks import (
    ACTION_APPROVE,
    ACTION_SHOW_ARGS,
    ACTION_TRUST,
    PART_CHARS,
    VIEW_CHARS,
    VIEW_PARTS,
    arguments_view,
    card_blocks,
    unshowable,
)
from adapters.slack.text import unescape
from bot.ports import ApprovalCard
from bot.reviews.shown import Shortfall, arrange
from tests.unit.slack.test_card_blocks import all_text, assert_within_limits, buttons, record

HTTP_ORDER = ("method", "url", "headers", "body")


def http_card(args: dict[str, Any], **changes: Any) -> ApprovalCard:
    approval = record(tool_name="http_request", proposed_args=args, **changes)
    return ApprovalCard(approval=approval, position=1, total=1, key_order=HTTP_ORDER)


def code_lines(section: dict[str, Any]) -> list[str]:
    return unescape(section["text"]["text"].split("```")[1]).splitlines()


def view_text(view: dict[str, Any]) -> str:
    """The arguments a modal shows, its sections put back together (fences and escapes removed)."""
    shown = []
    for block in view["blocks"][1:]:
        text = block["text"]
        if text["type"] == "plain_text":
            assert text["emoji"] is False  # `:smile:` stays as typed
            shown.append(text["text"])
        else:
            assert text["text"].startswith("```") and text["text"].endswith("```")
            shown.append(unescape(text["text"][3:-3].strip("\u200b")).replace("\u200b", ""))
    return "".join(shown)


def test_a_long_body_comes_after_method_and_headers_on_the_card():
    """Stored in jsonb's order (url, body, method, headers), the card still lists method, url, headers, then body."""
    args = {"url": "https://a.example/pay", "body": "x" * 20_000, "method": "POST", "headers": {"X-Pay-To": "eve"}}
    rendered = card_blocks(http_card(args))
    lines = code_lines(rendered[2])
    assert [line.split(":")[0] for line in lines] == ['"method"', '"url"', '"headers"', '"body"']
    assert lines[:3] == ['"method": "POST"', '"url": "https://a.example/pay"', '"headers": {"X-Pay-To": "eve"}']
    assert re.fullmatch(r'"body": "x+… \(\+[\d,]+ characters\)', lines[3])
    assert_within_limits(rendered)


def test_every_key_is_on_the_card_however_long_the_values():
    """Thirty long values: thirty lines, each shortened visibly, within Block Kit's limits."""
    args = {f"cc{i:02}": ["someone@example.com"] * 50 for i in range(30)}
    rendered = card_blocks(http_card(args))
    lines = code_lines(rendered[2])
    assert [line.split('"')[1] for line in lines] == sorted(args)
    assert all(line.endswith("characters)") for line in lines)
    assert ACTION_SHOW_ARGS in [b["action_id"] for b in buttons(rendered)]
    assert_within_limits(rendered)


def test_all_arguments_shows_every_character_in_order_within_a_modal():
    """The modal holds the whole arguments, the address at the end of a long list included."""
    cc = [f"person{i}@example.com" for i in range(3_000)] + ["evil@attacker.example"]
    args = {"body": "hello <team> & co " * 500, "method": "POST", "url": "https://a.example/", "cc": cc}
    arguments = arrange(args, HTTP_ORDER)
    view = arguments_view(record(tool_name="http_request", proposed_args=args), arguments)
    assert view is not None
    assert len(view["blocks"]) <= blocks.MODAL_BLOCKS
    assert all(len(b["text"]["text"]) <= 3_000 for b in view["blocks"])
    assert len(view["title"]["text"]) <= 24
    assert view_text(view) == arguments.text()
    assert view_text(view).rstrip().endswith('"evil@attacker.example"\n  ]\n}')
    assert view_text(view).index('"method"') < view_text(view).index('"body"')


def test_a_fence_in_a_value_cannot_close_a_code_block_on_the_card_or_in_the_modal():
    """Runs of backticks (three, four, many) never leave a ``` inside a section."""
    args = {"note": "````\n*Approved by the CEO*\n```" + "`" * 50, "body": "y" * 9_000 + "`" * 7}
    card = http_card(args)
    for section in [b for b in card_blocks(card) if b["type"] == "section"]:
        assert section["text"]["text"].count("```") in (0, 2)
    view = arguments_view(card.approval, card.under_vote)
    assert view is not None
    for section in view["blocks"][1:]:
        assert section["text"]["text"].count("```") == 2


def test_a_call_slack_cannot_show_in_full_offers_no_approve_and_says_why():
    """Over the modal's capacity: no Approve, no Approve and trust, a line saying why; Edit and Reject stay."""
    args = {"method": "POST", "url": "https://a.example/", "body": "z" * VIEW_CHARS}
    card = http_card(args, trust_offer_s=1800, trust_offer_matching=("url",))
    shortfall = unshowable(card.under_vote)
    assert shortfall is not None and shortfall.shortfall is Shortfall.CHARACTERS
    assert shortfall.size > shortfall.limit == VIEW_CHARS
    rendered = card_blocks(card)
    actions = [b["action_id"] for b in buttons(rendered)]
    assert ACTION_APPROVE not in actions and ACTION_TRUST not in actions
    assert actions == [blocks.ACTION_EDIT, blocks.ACTION_REJECT]
    text = all_text(rendered)
    assert "Too long to review in Slack" in text and f"{shortfall.size:,} characters" in text
    assert "binds only" not in text  # no trust is offered, so none is explained
    assert arguments_view(card.approval, card.under_vote) is None
    assert_within_limits(rendered)


@pytest.mark.parametrize("filler", ["z", "&", "<", "`"])
def test_what_the_card_offers_and_what_the_modal_holds_agree(filler):
    """Near the limit, with text Slack escapes to five times its length or backticks: showable iff the modal holds all of it."""
    for size in (VIEW_CHARS // 4, VIEW_CHARS - 100, VIEW_CHARS + 100):
        arguments = arrange({"body": filler * size})
        view = arguments_view(record(), arguments)
        assert (unshowable(arguments) is None) == (view is not None)
        if view is not None:
            assert len(view["blocks"]) <= VIEW_PARTS + 1
            assert all(len(b["text"]["text"]) <= 3_000 for b in view["blocks"])
            assert view_text(view) == arguments.text()
    assert PART_CHARS + 8 == 3_000


def test_too_many_keys_for_the_card_cannot_be_approved_in_slack():
    """More keys than the card can list, even shortened: no Approve, and the card says so."""
    args = {f"key{i:03}": "v" * 200 for i in range(150)}
    card = http_card(args)
    shortfall = unshowable(card.under_vote)
    assert shortfall is not None and shortfall.shortfall is Shortfall.KEYS and shortfall.size == 150
    rendered = card_blocks(card)
    assert ACTION_APPROVE not in [b["action_id"] for b in buttons(rendered)]
    assert "Too many arguments to review in Slack" in all_text(rendered)
    assert_within_limits(rendered)


def test_invisible_characters_stay_revealed_on_the_card_and_in_the_modal():
    """A right-to-left override and a zero-width joiner show as escapes in both places."""
    args = {"pay_to": "ACME-\u202e9876-5432", "body": "w\u200d" * 3_000}
    card = http_card(args)
    for text in (all_text(card_blocks(card)), view_text(arguments_view(card.approval, card.under_vote) or {})):
        assert "\u202e" not in text and "\\u202e" in text
        assert "\u200d" not in text


def test_a_value_with_a_line_separator_draws_no_line_of_its_own():
    """A subject holding U+2028 cannot forge a `"cc": []` line above the real `cc`: one line per key, the separator an escape."""
    args = {"to": ["boss@corp.example"], "subject": 'Q3 report\u2028"cc": []', "body": "see", "cc": ["x@evil.example"]}
    approval = record(tool_name="send_email", proposed_args=args)
    card = ApprovalCard(approval=approval, position=1, total=1, key_order=("to", "subject", "body", "cc"))
    [section] = [b for b in card_blocks(card) if "```" in b.get("text", {}).get("text", "")]
    lines = code_lines(section)
    assert [line.split(":")[0] for line in lines] == ['"to"', '"subject"', '"body"', '"cc"']
    assert '"subject": "Q3 report\\u2028\\"cc\\": []"' in lines[1]
    view = view_text(arguments_view(card.approval, card.under_vote) or {})
    assert "\u2028" not in view and "\\u2028" in view


def test_a_card_offering_a_partial_trust_names_the_arguments_it_leaves_free():
    """Trust matching `method`, `url`: the card says `headers` and `body` stay free."""
    args = {"method": "POST", "url": "https://a.example/", "body": {"n": 1}}
    card = http_card(args, trust_offer_s=1800, trust_offer_matching=("url", "method"))
    text = all_text(card_blocks(card))
    assert "binds only `url`, `method`" in text
    assert "*any* `headers`, `body`" in text
    whole = http_card(args, trust_offer_s=1800, trust_offer_matching=())
    assert "binds only" not in all_text(card_blocks(whole))
