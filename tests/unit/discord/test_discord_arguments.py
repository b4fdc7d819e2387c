"""Every argument an approver decides on, as Discord embeds: the card's lines, the pages, and what Discord cannot show."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from adapters.arguments_view import fence_safe
from adapters.discord import cards
from adapters.discord.buttons import PAGE_TEMPLATE, pages_view
from adapters.discord.cards import EMBED_CHARS, MAX_PAGES, PAGE_CHARS, arguments_page, arguments_pages, card_embed
from adapters.discord.platform import _card_view
from bot.ports import ApprovalCard, ToolOrigin
from bot.reviews.escalation.rules import EscalationTarget, TargetKind
from bot.reviews.lifecycle import EscalationStatus
from bot.reviews.shown import Shortfall, arrange
from tests.unit.slack.test_card_blocks import record

HTTP_ORDER = ("method", "url", "headers", "body")
APPROVAL_ID = "a" * 32


def http_card(args: dict[str, Any], **changes: Any) -> ApprovalCard:
    approval = record(id=APPROVAL_ID, tool_name="http_request", proposed_args=args, **changes)
    return ApprovalCard(approval=approval, position=1, total=1, key_order=HTTP_ORDER)


def code_lines(description: str) -> list[str]:
    return description.split("```")[1].strip("\n").splitlines()


def custom_ids(view: Any) -> list[str]:
    return [str(c["custom_id"]) for row in view.to_components() for c in row["components"]]


def test_a_long_body_comes_after_method_and_headers_in_the_embed():
    """Stored in jsonb's order, the description still lists method, url, headers, then the shortened body."""
    args = {"url": "https://a.example/pay", "body": "x" * 20_000, "method": "POST", "headers": {"X-Pay-To": "eve"}}
    embed = card_embed(http_card(args))
    lines = code_lines(embed.description or "")
    assert lines[:3] == ['"method": "POST"', '"url": "https://a.example/pay"', '"headers": {"X-Pay-To": "eve"}']
    assert re.fullmatch(r'"body": "x+… \(\+[\d,]+ characters\)', lines[3])
    assert "**All arguments** shows every key and value in full" in (embed.description or "")
    assert len(embed) <= EMBED_CHARS and len(embed.description or "") <= 4096


async def test_a_pending_card_keeps_all_its_argument_room_with_every_field_long():
    """Long why, an edited proposal, a tally and an escalation: the embed fits 6,000 and still lists every key."""
    current = {f"k{i:02}": "v" * 400 for i in range(40)}
    card = http_card(
        {"body": "p" * 9_000, "method": "GET"},
        description="why " * 2_000,
        current_args=current,
        quorum=3,
        votes=tuple(f"person{i}" for i in range(60)),
        escalate_to=EscalationTarget(kind=TargetKind.ROLE, subject_id="123"),
        escalated_at=datetime(2026, 1, 1, tzinfo=UTC),
        escalation=EscalationStatus.ESCALATED,
        expires_at=datetime(2026, 1, 1, tzinfo=UTC) + timedelta(hours=1),
    )
    embed = card_embed(card)
    assert len(embed) <= EMBED_CHARS
    lines = code_lines(embed.description or "")
    assert [line.split('"')[1] for line in lines] == sorted(current)
    assert "Edited arguments" in (embed.description or "")
    assert [field.name for field in embed.fields].count("Proposed by the agent") == 1


async def test_all_arguments_pages_hold_every_character_in_order():
    """Pages of at most 4,000 characters, put back together, are the whole arguments, the last address included."""
    cc = [f"person{i}@example.com" for i in range(3_000)] + ["evil@attacker.example"]
    arguments = arrange({"cc": cc, "method": "POST", "url": "https://a.example/"}, HTTP_ORDER)
    pages = arguments_pages(arguments)
    assert 1 < len(pages) <= MAX_PAGES
    assert "".join(pages) == fence_safe(arguments.text())
    assert all(len(page) <= PAGE_CHARS for page in pages)
    approval = record(id=APPROVAL_ID, tool_name="http_request", proposed_args={})
    last = arguments_page(approval, pages, len(pages))
    assert '"evil@attacker.example"' in (last.description or "")
    assert (last.title or "").endswith(f"page {len(pages)} of {len(pages)}")
    for number in range(1, len(pages) + 1):
        embed = arguments_page(approval, pages, number)
        assert len(embed.description or "") <= 4096 and (embed.description or "").count("```") == 2
    view = pages_view(APPROVAL_ID, "0123abcd", 2, len(pages))
    ids = custom_ids(view)
    assert ids == [f"cs:page:{APPROVAL_ID}:0123abcd:1", f"cs:page:{APPROVAL_ID}:0123abcd:3"]
    assert all(len(i) <= 100 and re.fullmatch(PAGE_TEMPLATE, i) for i in ids)


async def test_a_call_discord_cannot_show_in_full_offers_no_approve_and_says_why():
    """Beyond the pages' capacity: no Approve or Approve and trust on the card, a line saying why; Edit and Reject stay."""
    card = http_card(
        {"method": "POST", "url": "u", "body": "z" * (MAX_PAGES * PAGE_CHARS)},
        trust_offer_s=1800,
        trust_offer_matching=("url",),
    )
    shortfall = cards.unshowable(card.under_vote)
    assert shortfall is not None and shortfall.shortfall is Shortfall.CHARACTERS
    assert shortfall.size > shortfall.limit == MAX_PAGES * PAGE_CHARS
    ids = custom_ids(_card_view(card))
    assert [i.split(":")[1] for i in ids] == ["edit", "reject"]
    embed = card_embed(card)
    assert "Too long to review in Discord" in (embed.description or "")
    assert f"{shortfall.size:,} characters" in (embed.description or "")
    assert "Trust" not in json.dumps(embed.to_dict())
    fits = http_card({"body": "z" * (MAX_PAGES * PAGE_CHARS - 20)})
    assert cards.unshowable(fits.under_vote) is None
    assert len(arguments_pages(fits.under_vote)) <= MAX_PAGES


async def test_the_card_offers_all_arguments_only_when_a_value_is_shortened():
    """Short arguments: Approve, Edit, Reject; a long value adds All arguments at the end of the row."""
    assert [i.split(":")[1] for i in custom_ids(_card_view(http_card({"url": "u"})))] == ["approve", "edit", "reject"]
    ids = custom_ids(_card_view(http_card({"url": "u", "body": "b" * 5_000}, trust_offer_s=60)))
    assert [i.split(":")[1] for i in ids] == ["approve", "trust", "edit", "reject", "args"]
    assert ids[-1] == f"cs:args:{APPROVAL_ID}"


def test_a_tally_of_long_names_is_clipped_within_its_field_and_shows_names_as_typed():
    """Forty 32-character names fit one field, clipped, its parenthesis closed; markdown and line separators show as typed."""
    votes = ("**ann**\u2028[x](https://evil.example)", *(f"{i:02}" + "n" * 30 for i in range(40)))
    card = http_card({"method": "POST"}, quorum=50, votes=votes)
    [tally] = [f.value or "" for f in card_embed(card).fields if f.name == "Approvals"]
    assert len(tally) <= 320 and tally.endswith("…)")
    assert "\\*\\*ann\\*\\*\\\\u2028\\[x](https://evil.example)" in tally  # `\\` draws one backslash


def test_invisible_characters_stay_revealed_in_the_embed_and_the_pages():
    """A right-to-left override shows as an escape on the card and on every page."""
    card = http_card({"pay_to": "ACME-\u202e9876", "body": "w\u200d" * 3_000})
    texts = [card_embed(card).description or "", *arguments_pages(card.under_vote)]
    assert all("\u202e" not in text and "\u200d" not in text for text in texts)
    assert "\\u202e" in texts[0] and "\\u202e" in "".join(texts[1:])


def test_a_value_with_a_line_separator_draws_no_line_of_its_own():
    """A subject holding U+2028 cannot forge a `"cc": []` line above the real `cc`: one line per key, on the card and the pages."""
    args = {"to": ["boss@corp.example"], "subject": 'Q3 report\u2028"cc": []', "body": "see", "cc": ["x@evil.example"]}
    approval = record(id=APPROVAL_ID, tool_name="send_email", proposed_args=args)
    card = ApprovalCard(approval=approval, position=1, total=1, key_order=("to", "subject", "body", "cc"))
    lines = code_lines(card_embed(card).description or "")
    assert [line.split(":")[0] for line in lines] == ['"to"', '"subject"', '"body"', '"cc"']
    [page] = arguments_pages(card.under_vote)
    assert "\u2028" not in page and "\\u2028" in page and len(page.splitlines()) == 10


def test_a_card_offering_a_partial_trust_names_the_arguments_it_leaves_free():
    """Trust matching `url`: the card's Trust field says `method`, `headers`, `body` stay free."""
    card = http_card({"method": "POST", "url": "u", "body": 1}, trust_offer_s=1800, trust_offer_matching=("url",))
    [field] = [f for f in card_embed(card).fields if f.name == "🔓 Trust"]
    assert "binds only `url`" in (field.value or "")
    assert "**any** `method`, `headers`, `body`" in (field.value or "")


def test_a_card_of_an_mcp_tool_names_its_server_and_shows_its_hints_as_hints():
    """An MCP tool's embed says which server and tool, and the server's hints as the server's."""
    origin = ToolOrigin(server="notes", tool="create_note", hints=("read-only",))
    approval = http_card({"url": "https://x"}).approval
    embed = card_embed(ApprovalCard(approval=approval, position=1, total=1, origin=origin))
    tool_field = next(field for field in embed.fields if "`" in str(field.value))
    assert str(tool_field.value).endswith("MCP server notes, tool create\\_note · the server's hints: read-only")
