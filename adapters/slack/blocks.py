"""Block Kit for approval cards, the All arguments view and the Edit / Reject modals.

Limits from Slack's Block Kit reference: section text 3,000 characters, header 150, button
value 2,000, modal title and button labels 24, plain_text_input initial_value 3,000, 100 blocks
in a modal. Buttons carry only the approval id (docs/development.md, convention 10); everything else is
read from PostgreSQL.

A card lists every argument, in the tool's order, long values shortened visibly; *All arguments*
opens a modal with the whole arguments across up to `VIEW_PARTS` sections: code blocks when they
fit, else plain text (which Slack shows as it is, without escaping, so `VIEW_CHARS` characters of
any kind fit). What does not fit there cannot be approved in Slack (`unshowable`;
docs/decisions/0034-arguments-approvers-can-see.md).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from adapters.arguments_view import ZERO_WIDTH, drawn, fence_safe, parts
from adapters.slack import messages as msg
from adapters.slack.text import escape, to_mrkdwn
from adapters.words.cards import BUTTON_TRUST, CARD_OUTCOME_TRUSTED, REJECT_INTRO
from adapters.words.display import duration_words, reveal_invisible
from adapters.words.mcp import origin_line
from bot.ports import ApprovalCard, BatchOffer
from bot.reviews.escalation.rules import EscalationTarget, TargetKind
from bot.reviews.lifecycle import ApprovalStatus, EscalationStatus
from bot.reviews.records import ApprovalRecord
from bot.reviews.shown import LEAST_SHOWN, Arguments, Shortfall, ShownLine, Unshowable, shorten

ACTION_APPROVE = "countersign_approve"
ACTION_TRUST = "countersign_trust"
"""Approve and trust (docs/decisions/0022): shown only on a card that offers trust."""
ACTION_EDIT = "countersign_edit"
ACTION_REJECT = "countersign_reject"
ACTION_SHOW_ARGS = "countersign_show_args"
"""All arguments: opens the modal with the whole arguments (any viewer of the card may)."""
ACTION_STOP = "countersign_stop"
"""The progress message's Stop button; its `value` is the turn id (docs/decisions/0021)."""
STOP_BLOCK = "countersign_stop"
ACTION_APPROVE_ALL = "countersign_approve_all"
ACTION_REJECT_ALL = "countersign_reject_all"
VIEW_EDIT = "countersign_edit_view"
VIEW_REJECT = "countersign_reject_view"
VIEW_REJECT_ALL = "countersign_reject_all_view"
EDIT_BLOCK = "args"
EDIT_INPUT = "json"
REASON_BLOCK = "reason"
REASON_INPUT = "text"

SECTION_CHARS = 3000
INPUT_CHARS = 3000
REASON_CHARS = 2000
MODAL_BLOCKS = 100
_WHY_CHARS = 600
_TALLY_CHARS = 600
"""Escaped characters of the voters' names on a card: with the why line, the section stays far
within its 3,000 (escaping makes a name of `<` or `&` four or five times as long)."""
ARGS_ROOM = SECTION_CHARS - 300
"""What a card's lines of arguments may take of their section (escaped): room for the title,
the fences and the note below them."""
PART_CHARS = SECTION_CHARS - 8
"""Escaped characters of the arguments in one code block of the All arguments modal: the rest of
3,000 holds its fences and the zero-width spaces that keep them apart from a backtick."""
VIEW_PARTS = MODAL_BLOCKS - 1
"""Sections of arguments in the All arguments modal (the first block says what it shows)."""
VIEW_CHARS = VIEW_PARTS * SECTION_CHARS
"""Characters of arguments the modal holds: as plain text, a section holds 3,000 of any kind."""


def args_json(args: dict[str, Any]) -> str:
    """Arguments as people edit them: indented JSON, non-ASCII kept, in the order given (the Edit form's prefill)."""
    return json.dumps(args, indent=2, ensure_ascii=False, sort_keys=False)


def unshowable(arguments: Arguments) -> Unshowable | None:
    """Why Slack cannot show `arguments` in full (`bot.ports.Platform.unshowable`); None when it can.

    The card must list every key (`shorten` within `ARGS_ROOM`), and the All arguments modal
    must hold the whole text: at most `VIEW_CHARS` characters, which its `VIEW_PARTS` sections
    hold as plain text whatever they are (`arguments_view`).
    """
    if shorten(arguments, ARGS_ROOM, _line_cost) is None:
        least = _line_cost(ShownLine("x" * LEAST_SHOWN, hidden=10_000))
        return Unshowable(
            platform="slack", shortfall=Shortfall.KEYS, size=len(arguments.items), limit=ARGS_ROOM // least
        )
    size = len(arguments.text())
    if size > VIEW_CHARS:
        return Unshowable(platform="slack", shortfall=Shortfall.CHARACTERS, size=size, limit=VIEW_CHARS)
    return None


def arguments_view(approval: ApprovalRecord, arguments: Arguments) -> dict[str, Any] | None:
    """The All arguments modal: every key and value, in order, across sections; None when it cannot hold them.

    Args:
        approval: the approval (its tool and state are named at the top).
        arguments: the arguments to show (`bot.service.Countersign.shown_arguments`).
    """
    text = arguments.text()
    code = parts(fence_safe(text), PART_CHARS, _escaped_length)
    sections: list[dict[str, Any]]
    if len(code) <= VIEW_PARTS:
        sections = [{"type": "mrkdwn", "text": _fenced(piece)} for piece in code]
        words = msg.ARGS_VIEW_PENDING if approval.is_pending else msg.ARGS_VIEW_DECIDED
    else:
        # Escaping makes `&`, `<` and `>` five or four characters long in mrkdwn; plain text
        # needs none, so the same sections hold up to `VIEW_CHARS` characters of any kind.
        plain = parts(text, SECTION_CHARS, len)
        if len(plain) > VIEW_PARTS:
            plain = parts(text, SECTION_CHARS, len, at_lines=False)
        if len(plain) > VIEW_PARTS:
            return None
        sections = [{"type": "plain_text", "text": piece, "emoji": False} for piece in plain]
        words = msg.ARGS_VIEW_PLAIN
    intro = words.format(tool=escape(approval.tool_name), keys=len(arguments.items), parts=len(sections))
    return {
        "type": "modal",
        "title": {"type": "plain_text", "text": msg.ARGS_VIEW_TITLE},
        "close": {"type": "plain_text", "text": msg.CLOSE},
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": intro}},
            *({"type": "section", "text": section} for section in sections),
        ],
    }


def card_blocks(card: ApprovalCard) -> list[dict[str, Any]]:
    """The card for an approval: pending (with buttons) or decided (outcome, who, when)."""
    approval = card.approval
    pending = approval.status is ApprovalStatus.PENDING
    position = msg.CARD_POSITION.format(position=card.position, total=card.total) if card.total > 1 else ""
    tool_line = (
        msg.CARD_SUBAGENT_LINE.format(
            subagent=escape(approval.source), tool=escape(approval.tool_name), position=position
        )
        if approval.source
        else msg.CARD_TOOL_LINE.format(tool=escape(approval.tool_name), position=position)
    )
    lines = [tool_line]
    if card.origin is not None:
        lines.append(escape(reveal_invisible(origin_line(card.origin))))
    lines.append(msg.CARD_REQUESTER_LINE.format(user=approval.requester_id))
    if approval.description:
        lines.append(msg.CARD_WHY_LINE.format(why=_clip(to_mrkdwn(reveal_invisible(approval.description)), _WHY_CHARS)))
    if pending and approval.quorum > 1:
        voters = _clip(escape(reveal_invisible(", ".join(approval.votes))), _TALLY_CHARS)
        names = f" ({voters})" if approval.votes else ""
        lines.append(msg.CARD_TALLY.format(count=len(approval.votes), quorum=approval.quorum, names=names))
    header = msg.CARD_HEADER_PENDING if pending else msg.CARD_HEADER[approval.status.value]
    edited = pending and approval.current_args is not None and approval.current_args != approval.proposed_args
    proposed = card.arranged(approval.proposed_args)
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": header, "emoji": True}},
        {"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(lines)}},
    ]
    shortened = False
    if pending:
        # The arguments an Approve approves get the note that says where the rest is.
        if edited:
            blocks.append(_args_section(msg.CARD_ARGS_TITLE, proposed)[0])
        section, shortened = _args_section(
            msg.CARD_EDITED_ARGS_TITLE if edited else msg.CARD_ARGS_TITLE, card.under_vote, under_vote=True
        )
        blocks.append(section)
    else:
        blocks.append(_args_section(msg.CARD_ARGS_TITLE, proposed)[0])
    escalated = _escalated_line(approval)
    if escalated:
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": escalated}]})
    if pending:
        shortfall = unshowable(card.under_vote)
        if shortfall is not None:
            blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": unshowable_text(shortfall)}})
        trust_s = approval.trust_offer_s if shortfall is None else None
        if trust_s and card.trust_leaves_free:
            blocks.append(_trust_context(msg.CARD_TRUST_FREE, card))
        blocks.append(
            _buttons(
                approval.id,
                approval.version,
                trust_s,
                approve=shortfall is None,
                show_all=shortened and (shortfall is None or shortfall.shortfall is Shortfall.KEYS),
            )
        )
        return blocks + _batch_blocks(card.batch)
    if approval.status is ApprovalStatus.EDITED and approval.final_args is not None:
        blocks.append(_args_section(msg.CARD_FINAL_ARGS_TITLE, card.arranged(approval.final_args))[0])
    if approval.reason:
        blocks.append(
            {
                "type": "section",
                "text": {
                    "type": "mrkdwn",
                    "text": msg.CARD_REASON.format(reason=_clip(to_mrkdwn(reveal_invisible(approval.reason)), 2500)),
                },
            }
        )
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": _decided_line(approval)}]})
    if approval.trust_id is not None and card.trust_leaves_free:
        blocks.append(_trust_context(msg.CARD_TRUSTED_FREE, card))
    if approval.outcome_unknown:
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": msg.CARD_OUTCOME_UNKNOWN}})
    elif approval.not_run:
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": msg.CARD_NOT_RUN}})
    elif approval.definition_changed:
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": msg.CARD_DEFINITION_CHANGED}})
    return blocks + _batch_blocks(card.batch)


def card_text(card: ApprovalCard) -> str:
    """The notification / fallback text of a card (Slack requires `text` beside blocks)."""
    approval = card.approval
    if approval.status is ApprovalStatus.PENDING and approval.source:
        return msg.CARD_FALLBACK_SUBAGENT.format(
            subagent=escape(approval.source), tool=escape(approval.tool_name), requester=escape(approval.requester_name)
        )
    if approval.status is ApprovalStatus.PENDING:
        return msg.CARD_FALLBACK.format(tool=escape(approval.tool_name), requester=escape(approval.requester_name))
    return f"{msg.CARD_HEADER[approval.status.value]}: {escape(approval.tool_name)}"


def progress_blocks(text: str, stop_turn_id: str | None) -> list[dict[str, Any]]:
    """The progress message: its line, and a Stop button naming the turn when one is offered.

    The button is the section's accessory (not an actions block, which cards use), and carries
    only the turn id; who may stop it is checked when it is clicked.
    """
    section: dict[str, Any] = {"type": "section", "block_id": STOP_BLOCK, "text": {"type": "mrkdwn", "text": text}}
    if stop_turn_id is not None:
        section["accessory"] = {
            "type": "button",
            "action_id": ACTION_STOP,
            "value": stop_turn_id,
            "style": "danger",
            "text": {"type": "plain_text", "text": msg.BUTTON_STOP},
        }
    return [section]


def target_mention(target: EscalationTarget) -> str:
    """An escalation target as Slack writes it: a user, user group or channel mention."""
    if target.kind is TargetKind.USER:
        return f"<@{target.subject_id}>"
    if target.kind is TargetKind.GROUP:
        return f"<!subteam^{target.subject_id}>"
    if target.kind is TargetKind.CHANNEL:
        return f"<#{target.subject_id}>"
    return escape(f"role {target.subject_id}")  # a Discord role; Slack has none


def _escalated_line(approval: ApprovalRecord) -> str | None:
    """The escalation line ("Escalated to X · when") once the card escalated (claimed or posted), else None."""
    if approval.escalate_to is None or approval.escalated_at is None:
        return None
    if approval.escalation not in {EscalationStatus.CLAIMED, EscalationStatus.ESCALATED}:
        return None
    return msg.CARD_ESCALATED.format(
        target=target_mention(approval.escalate_to), when=when_token(approval.escalated_at)
    )


def form_metadata(subject_id: str, clicked_in: str | None) -> str:
    """A modal's `private_metadata`: what it decides, and the channel of the click that opened it.

    A view submission names no channel, and a card escalated to a channel may be decided by
    whoever clicks there; the channel of the click travels with the form. Slack keeps a view's
    `private_metadata` on its side and signs the submission, so nobody can change it.
    """
    return f"{subject_id}|{clicked_in}" if clicked_in else subject_id


def parse_form_metadata(metadata: str) -> tuple[str, str | None]:
    """`(subject id, channel of the click or None)` from `form_metadata`'s text."""
    subject, _, clicked_in = metadata.partition("|")
    return subject, clicked_in or None


def edit_modal(approval: ApprovalRecord, prefill: str, *, clicked_in: str | None = None) -> dict[str, Any]:
    """The Edit modal, prefilled with the current arguments as JSON.

    Args:
        approval: the pending approval (its id travels in `private_metadata`).
        prefill: the JSON text; callers check it fits `INPUT_CHARS` first.
        clicked_in: the channel of the Edit click (see `form_metadata`).
    """
    return {
        "type": "modal",
        "callback_id": VIEW_EDIT,
        "private_metadata": form_metadata(approval.id, clicked_in),
        "title": {"type": "plain_text", "text": msg.EDIT_TITLE},
        "submit": {"type": "plain_text", "text": msg.EDIT_SUBMIT},
        "close": {"type": "plain_text", "text": msg.CANCEL},
        "blocks": [
            {
                "type": "section",
                "text": {
                    "type": "mrkdwn",
                    "text": msg.EDIT_INTRO.format(tool=escape(approval.tool_name)),
                },
            },
            {
                "type": "input",
                "block_id": EDIT_BLOCK,
                "label": {"type": "plain_text", "text": msg.EDIT_LABEL},
                "element": {
                    "type": "plain_text_input",
                    "action_id": EDIT_INPUT,
                    "multiline": True,
                    "initial_value": prefill,
                    "max_length": INPUT_CHARS,
                },
            },
        ],
    }


def reject_modal(approval: ApprovalRecord, *, clicked_in: str | None = None) -> dict[str, Any]:
    """The Reject modal with an optional reason (`clicked_in`: the channel of the click, see `form_metadata`)."""
    return {
        "type": "modal",
        "callback_id": VIEW_REJECT,
        "private_metadata": form_metadata(approval.id, clicked_in),
        "title": {"type": "plain_text", "text": msg.REJECT_TITLE},
        "submit": {"type": "plain_text", "text": msg.REJECT_SUBMIT},
        "close": {"type": "plain_text", "text": msg.CANCEL},
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": REJECT_INTRO}},
            {
                "type": "input",
                "block_id": REASON_BLOCK,
                "optional": True,
                "label": {"type": "plain_text", "text": msg.REJECT_LABEL},
                "element": {
                    "type": "plain_text_input",
                    "action_id": REASON_INPUT,
                    "multiline": True,
                    "max_length": REASON_CHARS,
                },
            },
        ],
    }


def reject_all_modal(batch: BatchOffer, *, clicked_in: str | None = None) -> dict[str, Any]:
    """The Reject all modal: one optional reason for every call of the pause the clicker may reject."""
    return {
        "type": "modal",
        "callback_id": VIEW_REJECT_ALL,
        "private_metadata": form_metadata(batch.review_id, clicked_in),
        "title": {"type": "plain_text", "text": msg.REJECT_ALL_TITLE},
        "submit": {"type": "plain_text", "text": msg.REJECT_ALL_SUBMIT},
        "close": {"type": "plain_text", "text": msg.CANCEL},
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": msg.REJECT_ALL_INTRO.format(count=batch.pending)}},
            {
                "type": "input",
                "block_id": REASON_BLOCK,
                "optional": True,
                "label": {"type": "plain_text", "text": msg.REJECT_LABEL},
                "element": {
                    "type": "plain_text_input",
                    "action_id": REASON_INPUT,
                    "multiline": True,
                    "max_length": REASON_CHARS,
                },
            },
        ],
    }


def batch_done_view(summary: str) -> dict[str, Any]:
    """What the Reject all modal shows once submitted: what was rejected, left and skipped."""
    return {
        "type": "modal",
        "title": {"type": "plain_text", "text": msg.BATCH_DONE_TITLE},
        "close": {"type": "plain_text", "text": msg.CLOSE},
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": _clip(summary, SECTION_CHARS)}}],
    }


def batch_version_of(block_id: str | None) -> str | None:
    """The pause's version a first card's batch block was drawn for (see `_batch_blocks`); None if not one."""
    if block_id is None:
        return None
    parts = block_id.split("_")
    return parts[2] if len(parts) == 3 and parts[0] == "countersignall" else None


def version_of(block_id: str | None) -> str | None:
    """The arguments' version a card's button block was drawn for (see `_buttons`); None if not one of ours."""
    if block_id is None:
        return None
    parts = block_id.split("_")
    return parts[2] if len(parts) == 3 and parts[0] == "countersign" else None


def unshowable_text(shortfall: Unshowable) -> str:
    """The card's line saying why Approve is not offered (and the clicker's, for a refused approval)."""
    words = msg.TOO_MANY_KEYS if shortfall.shortfall is Shortfall.KEYS else msg.TOO_LONG_TO_REVIEW
    return words.format(size=f"{shortfall.size:,}", limit=f"{shortfall.limit:,}")


def _trust_context(words: str, card: ApprovalCard) -> dict[str, Any]:
    """The line naming what a trust grant binds and which arguments it leaves free."""

    def names(keys: tuple[str, ...]) -> str:
        return ", ".join(f"`{escape(reveal_invisible(key))}`" for key in keys)

    text = words.format(bound=names(card.trust_binds), free=names(card.trust_leaves_free))
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": _clip(text, SECTION_CHARS)}]}


def _buttons(
    approval_id: str,
    version: str,
    trust_s: int | None = None,
    *,
    approve: bool = True,
    show_all: bool = False,
) -> dict[str, Any]:
    def button(text: str, action_id: str, style: str | None = None) -> dict[str, Any]:
        element: dict[str, Any] = {
            "type": "button",
            "text": {"type": "plain_text", "text": text},
            "action_id": action_id,
            "value": approval_id,
        }
        if style:
            element["style"] = style
        return element

    return {
        "type": "actions",
        # The button carries only the approval id; the block id names the version of the
        # arguments the card showed, so a click on an outdated card cannot approve an edit.
        "block_id": f"countersign_{approval_id}_{version}",
        "elements": [
            *([button(msg.BUTTON_APPROVE, ACTION_APPROVE, "primary")] if approve else []),
            *([button(BUTTON_TRUST.format(duration=duration_words(trust_s)), ACTION_TRUST)] if trust_s else []),
            button(msg.BUTTON_EDIT, ACTION_EDIT),
            button(msg.BUTTON_REJECT, ACTION_REJECT, "danger"),
            *([button(msg.BUTTON_SHOW_ARGS, ACTION_SHOW_ARGS)] if show_all else []),
        ],
    }


def _batch_blocks(batch: BatchOffer | None) -> list[dict[str, Any]]:
    """Approve all / Reject all with a line saying what they do; none without a batch offer."""
    if batch is None:
        return []

    def button(text: str, action_id: str, style: str) -> dict[str, Any]:
        return {
            "type": "button",
            "text": {"type": "plain_text", "text": text.format(count=batch.pending)},
            "action_id": action_id,
            "value": batch.review_id,
            "style": style,
        }

    return [
        {"type": "section", "text": {"type": "mrkdwn", "text": msg.BATCH_LINE.format(count=batch.pending)}},
        {
            "type": "actions",
            # The value names the pause; the block id its arguments' version, so an Approve all
            # from a card drawn before an edit cannot approve arguments nobody looked at.
            "block_id": f"countersignall_{batch.review_id}_{batch.version}",
            "elements": [
                button(msg.BUTTON_APPROVE_ALL, ACTION_APPROVE_ALL, "primary"),
                button(msg.BUTTON_REJECT_ALL, ACTION_REJECT_ALL, "danger"),
            ],
        },
    ]


def _args_section(title: str, arguments: Arguments, *, under_vote: bool = False) -> tuple[dict[str, Any], bool]:
    """A section listing every argument (`bot.reviews.shown.shorten`), and whether a value was shortened.

    Each key on its line in one code block; a shortened line ends with "…" and how many
    characters are hidden. The arguments under vote say where the rest is (All arguments).
    """
    lines = shorten(arguments, ARGS_ROOM, _line_cost)
    if lines is None:
        return {"type": "section", "text": {"type": "mrkdwn", "text": f"{title}\n{msg.CARD_KEYS_NOT_LISTED}"}}, True
    body = "\n".join(drawn(line) for line in lines)
    shortened = any(line.hidden for line in lines)
    note = ""
    if shortened:
        note = "\n" + (msg.CARD_SHORTENED_SEE_ALL if under_vote else msg.CARD_SHORTENED)
    text = f"{title}\n{_fenced(body)}{note}" if lines else f"{title}\n{msg.CARD_NO_ARGUMENTS}"
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}, shortened


def _line_cost(line: ShownLine) -> int:
    return _escaped_length(drawn(line)) + 1  # and its line break


def _escaped_length(text: str) -> int:
    return len(text) + 4 * text.count("&") + 3 * (text.count("<") + text.count(">"))


def _fenced(text: str) -> str:
    """`text` (fence-safe) escaped in a code block; a backtick at either end is kept apart from the fence."""
    start = ZERO_WIDTH if text.startswith("`") else ""
    end = ZERO_WIDTH if text.endswith("`") else ""
    return f"```{start}{escape(text)}{end}```"


def _decided_line(approval: ApprovalRecord) -> str:
    outcome = msg.CARD_OUTCOME_WORD[approval.status.value]
    if approval.trust_id is not None and approval.trust_s:
        outcome = CARD_OUTCOME_TRUSTED.format(outcome=outcome, duration=duration_words(approval.trust_s))
    if approval.decided_by_id is None:
        return f"{outcome} · {when_token(approval.decided_at)}"
    return msg.CARD_DECIDED.format(outcome=outcome, user=approval.decided_by_id, when=when_token(approval.decided_at))


def when_token(moment: datetime | None) -> str:
    """A Slack date token: shown in each reader's own time zone, with a UTC fallback."""
    if moment is None:
        return ""
    fallback = moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"<!date^{int(moment.timestamp())}^{{date_short_pretty}} {{time}}|{fallback}>"


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    clipped = text[: limit - 1]
    cut = clipped.rfind("&", len(clipped) - 5)
    if cut != -1 and ";" not in clipped[cut:]:
        clipped = clipped[:cut]
    return clipped + "…"
