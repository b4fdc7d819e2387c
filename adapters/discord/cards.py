"""Approval cards as Discord embeds with Approve / Edit / Reject buttons.

Embed limits from Discord's docs: title 256, description 4,096, field value 1,024, 25 fields,
6,000 characters in all. The arguments go in the description as a JSON code block. Buttons
carry only the approval id in their `custom_id` (at most 100 characters), so they keep working
after a restart and after any view timeout (CONVENTIONS.md item 10).
"""

from __future__ import annotations

import json
from typing import Any

import discord

from adapters.discord import messages as msg
from adapters.display import duration_words, reveal_invisible
from bot.approvals.escalation import EscalationTarget, TargetKind
from bot.approvals.lifecycle import ApprovalStatus, EscalationStatus
from bot.approvals.records import ApprovalRecord
from bot.ports import ApprovalCard

DESCRIPTION_CHARS = 4096
FIELD_CHARS = 1024
_ARGS_CHARS = 3800
_PENDING_COLOUR = discord.Colour.gold()
_COLOURS = {
    ApprovalStatus.APPROVED: discord.Colour.green(),
    ApprovalStatus.EDITED: discord.Colour.green(),
    ApprovalStatus.REJECTED: discord.Colour.red(),
    ApprovalStatus.EXPIRED: discord.Colour.dark_grey(),
    ApprovalStatus.STOPPED: discord.Colour.dark_grey(),
}


def args_json(args: dict[str, Any]) -> str:
    """Arguments as people read and edit them: indented JSON, non-ASCII kept."""
    return json.dumps(args, indent=2, ensure_ascii=False)


EMBED_CHARS = 6000
"""Discord's limit for all text of one embed together."""


def card_embed(card: ApprovalCard) -> discord.Embed:
    """The embed for an approval, pending or decided, within Discord's 6,000-character total."""
    embed = _card_embed(card, _ARGS_CHARS)
    excess = len(embed) - EMBED_CHARS
    if excess > 0:  # long reason, edited and final arguments: give the proposal less room
        embed = _card_embed(card, max(200, _ARGS_CHARS - excess - 100))
    return embed


def _card_embed(card: ApprovalCard, args_chars: int) -> discord.Embed:
    approval = card.approval
    pending = approval.status is ApprovalStatus.PENDING
    embed = discord.Embed(
        title=msg.CARD_TITLE_PENDING if pending else msg.CARD_TITLE[approval.status.value],
        description=_code_block(approval.proposed_args, args_chars),
        colour=_PENDING_COLOUR if pending else _COLOURS[approval.status],
    )
    tool = f"`{approval.tool_name}`"
    if card.total > 1:
        tool += " · " + msg.CARD_POSITION.format(position=card.position, total=card.total)
    field = msg.FIELD_SUBAGENT_TOOL.format(subagent=approval.source) if approval.source else msg.FIELD_TOOL
    embed.add_field(name=field, value=_clip(tool, FIELD_CHARS), inline=True)
    embed.add_field(name=msg.FIELD_REQUESTER, value=f"<@{approval.requester_id}>", inline=True)
    if approval.description:
        embed.add_field(
            name=msg.FIELD_WHY, value=_clip(reveal_invisible(approval.description), FIELD_CHARS), inline=False
        )
    if pending and approval.current_args is not None and approval.current_args != approval.proposed_args:
        embed.add_field(
            name=msg.FIELD_EDITED_ARGS, value=_code_block(approval.current_args, FIELD_CHARS - 60), inline=False
        )
    if pending and approval.quorum > 1:
        names = f" ({', '.join(approval.votes)})" if approval.votes else ""
        tally = msg.CARD_TALLY.format(count=len(approval.votes), quorum=approval.quorum, names=names)
        embed.add_field(name=msg.FIELD_TALLY, value=_clip(tally, FIELD_CHARS), inline=False)
    escalated = _escalated_line(approval)
    if escalated:
        embed.add_field(name=msg.FIELD_ESCALATED, value=escalated, inline=False)
    if not pending:
        embed.add_field(name=msg.FIELD_DECIDED, value=decided_line(approval), inline=False)
        if approval.status is ApprovalStatus.EDITED and approval.final_args is not None:
            embed.add_field(
                name=msg.FIELD_FINAL_ARGS,
                value=_code_block(approval.final_args, FIELD_CHARS - 60),
                inline=False,
            )
        if approval.reason:
            embed.add_field(
                name=msg.FIELD_REASON, value=_clip(reveal_invisible(approval.reason), FIELD_CHARS), inline=False
            )
        if approval.outcome_unknown:
            embed.add_field(name=msg.FIELD_OUTCOME_UNKNOWN, value=msg.OUTCOME_UNKNOWN, inline=False)
    return embed


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
        outcome = msg.CARD_OUTCOME_TRUSTED.format(outcome=outcome, duration=duration_words(approval.trust_s))
    ts = int(approval.decided_at.timestamp()) if approval.decided_at else 0
    if approval.decided_by_id is None:
        return msg.CARD_DECIDED_NOBODY.format(outcome=outcome, ts=ts)
    return msg.CARD_DECIDED.format(outcome=outcome, user=approval.decided_by_id, ts=ts)


def _code_block(args: dict[str, Any], limit: int) -> str:
    # Invisible characters shown as escapes; a fence inside a value must not close ours.
    text = reveal_invisible(args_json(args)).replace("```", "`\u200b``")
    if len(text) > limit:
        hidden = len(text) - limit
        return f"```json\n{text[:limit]}\n```\n" + msg.CARD_TRUNCATED.format(hidden=hidden)
    return f"```json\n{text}\n```"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
