"""Approval cards as Discord embeds with Approve / Edit / Reject buttons, and the All arguments pages.

Embed limits from Discord's docs: title 256, description 4,096, field value 1,024, 25 fields,
6,000 characters in all. The arguments an Approve would approve go in the description, one
line per key in the tool's order, long values shortened visibly; *All arguments* shows them
whole, as JSON, a page at a time (`arguments_page`). What those pages cannot hold cannot be
approved in Discord (`unshowable`; docs/decisions/0034-arguments-approvers-can-see.md). Buttons
carry only the approval id in their `custom_id` (at most 100 characters), so they keep working
after a restart and after any view timeout (docs/development.md, convention 10).
"""

from __future__ import annotations

import json
from typing import Any

import discord

from adapters.arguments_view import drawn, fence_safe, parts
from adapters.discord import messages as msg
from adapters.words.cards import CARD_OUTCOME_TRUSTED
from adapters.words.display import duration_words, reveal_invisible
from adapters.words.mcp import DEFINITION_CHANGED, origin_line
from bot.ports import ApprovalCard
from bot.reviews.escalation.rules import EscalationTarget, TargetKind
from bot.reviews.lifecycle import ApprovalStatus, EscalationStatus
from bot.reviews.records import ApprovalRecord
from bot.reviews.shown import LEAST_SHOWN, Arguments, Shortfall, ShownLine, Unshowable, shorten

DESCRIPTION_CHARS = 4096
FIELD_CHARS = 1024
ARGS_ROOM = 3000
"""What a card's lines of arguments may take of its description."""
FIELD_ARGS_ROOM = FIELD_CHARS - 150
"""What the lines of the agent's proposal may take of their field, once it was edited."""
PAGE_CHARS = 4000
"""Characters of the arguments on one page of All arguments (a description holds 4,096)."""
MAX_PAGES = 50
"""Pages of All arguments: 200,000 characters, more than anyone reviews in a chat
(docs/decisions/0034-arguments-approvers-can-see.md); longer arguments cannot be approved here."""
_PENDING_COLOUR = discord.Colour.gold()
_COLOURS = {
    ApprovalStatus.APPROVED: discord.Colour.green(),
    ApprovalStatus.EDITED: discord.Colour.green(),
    ApprovalStatus.REJECTED: discord.Colour.red(),
    ApprovalStatus.EXPIRED: discord.Colour.dark_grey(),
    ApprovalStatus.STOPPED: discord.Colour.dark_grey(),
}


def args_json(args: dict[str, Any]) -> str:
    """Arguments as people read and edit them: indented JSON, non-ASCII kept, in the order given."""
    return json.dumps(args, indent=2, ensure_ascii=False)


EMBED_CHARS = 6000
"""Discord's limit for all text of one embed together."""
_WHY_CHARS = 600
_REASON_CHARS = 600
_TALLY_CHARS = 280
"""Characters of the voters' names in the tally field (its words and counts add a few more)."""
_TOOL_CHARS = 200
_TRUST_CHARS = 400
"""Fields are clipped so that an embed stays within `EMBED_CHARS` with the arguments' full room."""


def unshowable(arguments: Arguments) -> Unshowable | None:
    """Why Discord cannot show `arguments` in full (`bot.ports.Platform.unshowable`); None when it can.

    The card must list every key (`shorten` within `ARGS_ROOM`), and All arguments must hold the
    whole text in `MAX_PAGES` pages.
    """
    if shorten(arguments, ARGS_ROOM, _line_cost) is None:
        least = _line_cost(ShownLine("x" * LEAST_SHOWN, hidden=10_000))
        return Unshowable(
            platform="discord", shortfall=Shortfall.KEYS, size=len(arguments.items), limit=ARGS_ROOM // least
        )
    text = fence_safe(arguments.text())
    if len(text) > MAX_PAGES * PAGE_CHARS:
        return Unshowable(
            platform="discord", shortfall=Shortfall.CHARACTERS, size=len(text), limit=MAX_PAGES * PAGE_CHARS
        )
    return None


def arguments_pages(arguments: Arguments) -> list[str]:
    """The pages of All arguments: the whole arguments as JSON, `PAGE_CHARS` at most each, cut after a line."""
    text = fence_safe(arguments.text())
    pages = parts(text, PAGE_CHARS, len)
    return pages if len(pages) <= MAX_PAGES else parts(text, PAGE_CHARS, len, at_lines=False)


def arguments_page(approval: ApprovalRecord, pages: list[str], page: int) -> discord.Embed:
    """One page of All arguments (1-based `page`, within `pages`) as an embed."""
    title = msg.ARGS_PAGE_TITLE.format(tool=approval.tool_name, page=page, pages=len(pages))
    return discord.Embed(
        title=_clip(title, 256),
        description=f"```json\n{pages[page - 1]}\n```",
        colour=_PENDING_COLOUR if approval.is_pending else _COLOURS[approval.status],
    )


def unshowable_text(shortfall: Unshowable) -> str:
    """The card's line saying why Approve is not offered."""
    words = msg.TOO_MANY_KEYS if shortfall.shortfall is Shortfall.KEYS else msg.TOO_LONG_TO_REVIEW
    return words.format(size=f"{shortfall.size:,}", limit=f"{shortfall.limit:,}")


def card_embed(card: ApprovalCard) -> discord.Embed:
    """The embed for an approval, pending or decided, within Discord's 6,000-character total.

    The description lists the arguments an Approve would approve (once decided, those that
    ran), every key in the tool's order; after an edit, the agent's proposal is a field.
    """
    embed = _card_embed(card, ARGS_ROOM)
    excess = len(embed) - EMBED_CHARS
    if excess > 0 and not card.approval.is_pending:
        # A decided card with every field long: its arguments get less room. A pending card's
        # fields are clipped so that its arguments always have `ARGS_ROOM` (what `unshowable`
        # promises).
        embed = _card_embed(card, max(LEAST_SHOWN * 4, ARGS_ROOM - excess - 100))
    return embed


def _card_embed(card: ApprovalCard, room: int) -> discord.Embed:
    approval = card.approval
    pending = approval.status is ApprovalStatus.PENDING
    description, _ = _args_description(card, room)
    embed = discord.Embed(
        title=msg.CARD_TITLE_PENDING if pending else msg.CARD_TITLE[approval.status.value],
        description=description,
        colour=_PENDING_COLOUR if pending else _COLOURS[approval.status],
    )
    tool = f"`{approval.tool_name}`"
    if card.total > 1:
        tool += " · " + msg.CARD_POSITION.format(position=card.position, total=card.total)
    if card.origin is not None:
        tool += "\n" + discord.utils.escape_markdown(reveal_invisible(origin_line(card.origin)))
    field = msg.FIELD_SUBAGENT_TOOL.format(subagent=approval.source) if approval.source else msg.FIELD_TOOL
    embed.add_field(name=field, value=_clip(tool, _TOOL_CHARS), inline=True)
    embed.add_field(name=msg.FIELD_REQUESTER, value=f"<@{approval.requester_id}>", inline=True)
    if approval.description:
        embed.add_field(
            name=msg.FIELD_WHY, value=_clip(reveal_invisible(approval.description), _WHY_CHARS), inline=False
        )
    if card.arranged(approval.proposed_args) != card.shown:
        embed.add_field(
            name=msg.FIELD_PROPOSED_ARGS, value=_field_lines(card.arranged(approval.proposed_args)), inline=False
        )
    if pending and approval.quorum > 1:
        # Names are people's own display names: markdown in them is shown as typed, and clipping
        # keeps the closing parenthesis.
        voters = _clip(discord.utils.escape_markdown(reveal_invisible(", ".join(approval.votes))), _TALLY_CHARS)
        names = f" ({voters})" if approval.votes else ""
        tally = msg.CARD_TALLY.format(count=len(approval.votes), quorum=approval.quorum, names=names)
        embed.add_field(name=msg.FIELD_TALLY, value=tally, inline=False)
    escalated = _escalated_line(approval)
    if escalated:
        embed.add_field(name=msg.FIELD_ESCALATED, value=escalated, inline=False)
    if pending and card.approval.trust_offer_s and card.trust_leaves_free and unshowable(card.under_vote) is None:
        embed.add_field(name=msg.FIELD_TRUST, value=_trust_words(msg.CARD_TRUST_FREE, card), inline=False)
    if not pending:
        embed.add_field(name=msg.FIELD_DECIDED, value=decided_line(approval), inline=False)
        if approval.trust_id is not None and card.trust_leaves_free:
            embed.add_field(name=msg.FIELD_TRUST, value=_trust_words(msg.CARD_TRUSTED_FREE, card), inline=False)
        if approval.reason:
            embed.add_field(
                name=msg.FIELD_REASON, value=_clip(reveal_invisible(approval.reason), _REASON_CHARS), inline=False
            )
        if approval.outcome_unknown:
            embed.add_field(name=msg.FIELD_OUTCOME_UNKNOWN, value=msg.OUTCOME_UNKNOWN, inline=False)
        elif approval.not_run:
            embed.add_field(name=msg.FIELD_NOT_RUN, value=msg.NOT_RUN, inline=False)
        elif approval.definition_changed:
            embed.add_field(name=msg.FIELD_NOT_RUN, value=DEFINITION_CHANGED, inline=False)
    return embed


def shows_all_button(card: ApprovalCard) -> bool:
    """Whether the pending card offers All arguments: a value is shortened and the pages can hold them."""
    if not card.approval.is_pending:
        return False
    _, shortened = _args_description(card, ARGS_ROOM)
    shortfall = unshowable(card.under_vote)
    return shortened and (shortfall is None or shortfall.shortfall is Shortfall.KEYS)


def _args_description(card: ApprovalCard, room: int) -> tuple[str, bool]:
    """The description, and whether a value in it was shortened.

    The arguments under vote (once decided, those that ran), a note on shortened values, and
    why Approve is not offered when it is not.
    """
    approval = card.approval
    pending = approval.is_pending
    edited = approval.current_args is not None and approval.current_args != approval.proposed_args
    lines = shorten(card.shown, room, _line_cost)
    pieces: list[str] = []
    if pending and edited:
        pieces.append(msg.EDITED_ARGS_TITLE)
    elif not pending and approval.status is ApprovalStatus.EDITED:
        pieces.append(msg.FINAL_ARGS_TITLE)
    shortened = lines is None or any(line.hidden for line in lines)
    if lines is None:
        pieces.append(msg.CARD_KEYS_NOT_LISTED)
    elif not lines:
        pieces.append(msg.CARD_NO_ARGUMENTS)
    else:
        pieces.append(_code_block(lines))
        if shortened:
            pieces.append(msg.CARD_SHORTENED_SEE_ALL if pending else msg.CARD_SHORTENED)
    if pending:
        shortfall = unshowable(card.under_vote)
        if shortfall is not None:
            pieces.append(unshowable_text(shortfall))
    return "\n".join(pieces), shortened


def target_mention(target: EscalationTarget) -> str:
    """An escalation target as Discord writes it: a user, role or channel mention."""
    if target.kind is TargetKind.USER:
        return f"<@{target.subject_id}>"
    if target.kind is TargetKind.ROLE:
        return f"<@&{target.subject_id}>"
    if target.kind is TargetKind.CHANNEL:
        return f"<#{target.subject_id}>"
    return f"group {target.subject_id}"  # a Slack user group; Discord has none


def _escalated_line(approval: ApprovalRecord) -> str | None:
    """The escalation line ("to X <time>") once the card escalated (claimed or posted), else None."""
    if approval.escalate_to is None or approval.escalated_at is None:
        return None
    if approval.escalation not in {EscalationStatus.CLAIMED, EscalationStatus.ESCALATED}:
        return None
    return msg.CARD_ESCALATED.format(
        target=target_mention(approval.escalate_to), ts=int(approval.escalated_at.timestamp())
    )


def decided_line(approval: ApprovalRecord) -> str:
    """The decision line: "Approved by @x <timestamp>" (shown in each reader's time zone).

    A card approved with "Approve and trust" says so: "Approved and trusted for 30 minutes by @x".
    """
    outcome = msg.CARD_OUTCOME_WORD[approval.status.value]
    if approval.trust_id is not None and approval.trust_s:
        outcome = CARD_OUTCOME_TRUSTED.format(outcome=outcome, duration=duration_words(approval.trust_s))
    ts = int(approval.decided_at.timestamp()) if approval.decided_at else 0
    if approval.decided_by_id is None:
        return msg.CARD_DECIDED_NOBODY.format(outcome=outcome, ts=ts)
    return msg.CARD_DECIDED.format(outcome=outcome, user=approval.decided_by_id, ts=ts)


def _trust_words(words: str, card: ApprovalCard) -> str:
    """What a trust grant binds and which arguments it leaves free, in a field."""

    def names(keys: tuple[str, ...]) -> str:
        return ", ".join(f"`{reveal_invisible(key).replace('`', '')}`" for key in keys)

    return _clip(words.format(bound=names(card.trust_binds), free=names(card.trust_leaves_free)), _TRUST_CHARS)


def _field_lines(arguments: Arguments) -> str:
    """The agent's proposal in a field: every key if they fit, long values shortened."""
    lines = shorten(arguments, FIELD_ARGS_ROOM, _line_cost)
    if lines is None:
        return msg.CARD_KEYS_NOT_LISTED
    if not lines:
        return msg.CARD_NO_ARGUMENTS
    note = "\n" + msg.CARD_SHORTENED if any(line.hidden for line in lines) else ""
    return _code_block(lines) + note


def _line_cost(line: ShownLine) -> int:
    return len(drawn(line)) + 1  # and its line break


def _code_block(lines: tuple[ShownLine, ...]) -> str:
    # A line never starts or ends with a backtick next to the fences: it starts with the key's
    # quote and ends with a value's last character or the cut's mark.
    return "```\n" + "\n".join(drawn(line) for line in lines) + "\n```"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
