"""An MCP server's question in Slack: its card in the thread, the answer modal, and reading the answer.

The card names the requester, the server and the tool, quotes the server's message, and offers
*Answer…* (a form) or *Open link…* (a link), *Decline* and *Cancel*; every button carries only
the question id in `value`, with a fixed `action_id`
(docs/decisions/0004-slack-conversations-and-cards.md). *Answer…* opens
`question_modal`, one input block per field; its `view_submission` is read by `raw_answers` into
what `bot.tools.mcp.elicitation.forms.read_answer` takes, and an `AnswerError` goes back to the
modal at its field (`field_errors`, Slack's `response_action: errors`). *Open link…* shows the
link to the requester alone, in an ephemeral message (`link_blocks`).

Fields map to Block Kit elements as docs/decisions/0050-elicitation-forms-on-slack-and-discord.md
says. Limits from Slack's Block Kit reference: modal title, submit and close 24 characters, input
label and hint 2,000, option text 75, 100 options in a select, 10 in radio buttons, 100 blocks
in a view, plain_text_input 3,000 characters, section text 3,000, button URL 3,000. Longer text
is cut with "…" rather than make a view Slack refuses.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal

from adapters import form_values as fv
from adapters.slack import messages as msg
from adapters.slack.blocks import when_token
from adapters.slack.text import escape
from adapters.words.display import reveal_invisible
from adapters.words.questions import QUESTION_ASKS, QUESTION_LINK
from bot.tools.mcp.elicitation.forms import Action, AnswerError, FieldKind, Form, FormField, LinkRequest, Question

VIEW_QUESTION = "countersign_question_view"
"""The answer modal's `callback_id`; its `private_metadata` is the question id."""
ACTION_ANSWER = "countersign_question_answer"
"""*Answer…* on a form's card: opens `question_modal` (for the requester)."""
ACTION_OPEN_LINK = "countersign_question_link"
"""*Open link…* on a link's card: accepts, and shows the requester the link (`link_blocks`)."""
ACTION_DECLINE = "countersign_question_decline"
ACTION_CANCEL = "countersign_question_cancel"
ACTION_FOLLOW_LINK = "countersign_question_follow"
"""The URL button of `link_blocks`: Slack sends its click too, which only needs an ack."""
QUESTION_BLOCK = "countersign_question"
"""The `block_id` of the card's buttons."""
INPUT_ACTION = "answer"
"""Every input element's `action_id`; the block id names the field (`field_block_id`)."""

Outcome = Action | Literal["expired"]
"""How a question ended: the person's action, or "expired" (nobody answered in time)."""

TITLE_CHARS = 24
LABEL_CHARS = 2000
HINT_CHARS = 2000
OPTION_CHARS = 75
TEXT_INPUT_CHARS = 3000
SECTION_CHARS = 3000
URL_CHARS = 3000
PLACEHOLDER_CHARS = 150
RADIO_OPTIONS = 5
"""A choice of at most this many options shows as radio buttons (all visible), more as a select."""
MULTILINE_FROM = 150
"""A text field whose `maxLength` is absent or above this gets a multi-line box."""
_MESSAGE_CHARS = 2500
_BLOCK_ID_CHARS = 200


def field_block_id(name: str) -> str:
    """The `block_id` of a field's input block: `field:<name>`, or a digest of a long name.

    Slack allows 255 characters; the digest keeps a long name within them and unique.
    """
    if len(name) <= _BLOCK_ID_CHARS:
        return f"field:{name}"
    return "field#" + hashlib.sha256(name.encode()).hexdigest()


def question_modal(form: Form, *, question_id: str, title: str) -> dict[str, Any]:
    """The answer modal: the server's message, then one input block per field.

    Args:
        form: the question.
        question_id: travels in `private_metadata` (Slack keeps it and signs the submission).
        title: the modal's title (the server's name, say), cut to 24 characters.

    Returns:
        A `views.open` view (`type: modal`, `callback_id` `VIEW_QUESTION`), submit "Send".
    """
    message = fv.clip(escape(reveal_invisible(form.message)), SECTION_CHARS)
    return {
        "type": "modal",
        "callback_id": VIEW_QUESTION,
        "private_metadata": question_id,
        "title": _plain(fv.clip(" ".join(title.split()), TITLE_CHARS) or "Question"),
        "submit": _plain(msg.QUESTION_MODAL_SUBMIT),
        "close": _plain(msg.CANCEL),
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": message}},
            *(_input_block(spec) for spec in form.fields),
        ],
    }


def _input_block(spec: FormField) -> dict[str, Any]:
    block: dict[str, Any] = {
        "type": "input",
        "block_id": field_block_id(spec.name),
        "label": _plain(fv.clip(spec.label, LABEL_CHARS) or spec.name[:LABEL_CHARS]),
        "optional": not spec.required,
        "element": {"action_id": INPUT_ACTION, **_element(spec)},
    }
    if spec.description:
        block["hint"] = _plain(fv.clip(spec.description, HINT_CHARS))
    return block


def _element(spec: FormField) -> dict[str, Any]:
    """The input element of one field, without its `action_id`."""
    if spec.kind in (FieldKind.NUMBER, FieldKind.INTEGER):
        element: dict[str, Any] = {"type": "number_input", "is_decimal_allowed": spec.kind is FieldKind.NUMBER}
        low, high = fv.number_bounds(spec)
        _put(element, min_value=low, max_value=high, initial_value=fv.default_number(spec))
        return element
    if spec.kind is FieldKind.BOOLEAN:
        # Yes / No, not one checkbox: an unticked box cannot tell "no" from "not answered", and a
        # required field must be answerable "no" (Slack requires a choice in a required block).
        yes_no = [_option(fv.BOOLEAN_IDS[0], msg.QUESTION_YES), _option(fv.BOOLEAN_IDS[1], msg.QUESTION_NO)]
        element = {"type": "radio_buttons", "options": yes_no}
        if isinstance(spec.default, bool):
            element["initial_option"] = yes_no[0] if spec.default else yes_no[1]
        return element
    if spec.kind is FieldKind.CHOICE:
        options = [_option(fv.option_id(i), option.label) for i, option in enumerate(spec.options)]
        chosen = [options[int(i)] for i in fv.default_ids(spec)]
        if len(options) <= RADIO_OPTIONS:
            element = {"type": "radio_buttons", "options": options}
        else:
            element = {"type": "static_select", "options": options, "placeholder": _plain(msg.QUESTION_CHOOSE)}
        if chosen:
            element["initial_option"] = chosen[0]
        return element
    if spec.kind is FieldKind.CHOICES:
        options = [_option(fv.option_id(i), option.label) for i, option in enumerate(spec.options)]
        chosen = [options[int(i)] for i in fv.default_ids(spec)]
        limit = spec.max_items if spec.max_items is not None and spec.max_items >= 1 else None
        words = msg.QUESTION_CHOOSE_UP_TO.format(count=limit) if limit else msg.QUESTION_CHOOSE_SOME
        element = {"type": "multi_static_select", "options": options, "placeholder": _plain(words)}
        _put(element, max_selected_items=limit, initial_options=chosen or None)
        return element
    return _text_element(spec)


def _text_element(spec: FormField) -> dict[str, Any]:
    if spec.format == "email":
        element: dict[str, Any] = {"type": "email_text_input"}
        _put(element, initial_value=fv.default_text(spec, TEXT_INPUT_CHARS))
        return element
    if spec.format == "uri":
        element = {"type": "url_text_input"}
        _put(element, initial_value=fv.default_text(spec, TEXT_INPUT_CHARS))
        return element
    if spec.format == "date":
        day = fv.default_date(spec)
        return {"type": "datepicker", **({"initial_date": day.isoformat()} if day else {})}
    if spec.format == "date-time":
        moment = fv.default_moment(spec)
        return {"type": "datetimepicker", **({"initial_date_time": int(moment.timestamp())} if moment else {})}
    longest = min(spec.max_length, TEXT_INPUT_CHARS) if spec.max_length is not None else None
    element = {"type": "plain_text_input", "multiline": longest is None or longest > MULTILINE_FROM}
    shortest = min(spec.min_length, TEXT_INPUT_CHARS) if spec.min_length else None
    if longest is not None and shortest is not None and shortest > longest:
        shortest = None  # unanswerable as asked; the schema's check says why
    _put(
        element,
        min_length=shortest,
        max_length=max(longest, 1) if longest is not None else None,
        initial_value=fv.default_text(spec, TEXT_INPUT_CHARS),
    )
    return element


def raw_answers(form: Form, values: Mapping[str, Any]) -> dict[str, object]:
    """What each field's input gave, by field name, for `read_answer`.

    Args:
        form: the question the modal asked.
        values: the submitted view's `state.values` (block id -> action id -> element state).

    Returns:
        Text for text, number, date and date-time inputs (a date-time as RFC 3339 in UTC), a
        bool for a yes / no field, the `Option` picked for a choice, a list of them for a
        multi-select; None for a field left empty or missing from the submission.
    """
    raw: dict[str, object] = {}
    for spec in form.fields:
        block = values.get(field_block_id(spec.name))
        state = block.get(INPUT_ACTION) if isinstance(block, Mapping) else None
        raw[spec.name] = _state_value(spec, state) if isinstance(state, Mapping) else None
    return raw


def _state_value(spec: FormField, state: Mapping[str, Any]) -> object:
    if "selected_options" in state:
        picked = state.get("selected_options")
        options = [option for option in picked if isinstance(option, Mapping)] if isinstance(picked, list) else []
        return [fv.option_value(spec, str(option.get("value", ""))) for option in options]
    if "selected_option" in state:
        option = state.get("selected_option")
        if not isinstance(option, Mapping):
            return None
        submitted = str(option.get("value", ""))
        return fv.boolean_value(submitted) if spec.kind is FieldKind.BOOLEAN else fv.option_value(spec, submitted)
    if "selected_date_time" in state:
        moment = state.get("selected_date_time")
        return fv.moment_text(moment) if isinstance(moment, int | float) and not isinstance(moment, bool) else None
    if "selected_date" in state:
        return state.get("selected_date")
    return state.get("value")


def field_errors(form: Form, error: AnswerError) -> dict[str, str]:
    """The `errors` of a `response_action: errors` reply: the problem at its field's block.

    An error that names no field of the form is shown at the first field (Slack shows errors
    only at input blocks); a form without fields gets an empty map, and the caller says it another way.
    """
    names = [spec.name for spec in form.fields]
    if not names:
        return {}
    name = error.field if error.field in names else names[0]
    return {field_block_id(str(name)): fv.clip(error.message, HINT_CHARS)}


def question_blocks(
    question: Question, *, question_id: str, requester_id: str, server: str, tool: str
) -> list[dict[str, Any]]:
    """The card of an open question, posted in the thread of the call.

    Args:
        question: the form or link.
        question_id: the only thing its buttons carry (`value`).
        requester_id: the Slack user id of the person asked (mentioned on the card).
        server: the MCP server's name.
        tool: the tool whose call asks.

    Returns:
        Header, the ask line with the server's message, a note for a link, and *Answer…* or
        *Open link…*, *Decline*, *Cancel* (`ACTION_*` ids, value the question id).
    """
    blocks = _question_head(msg.QUESTION_HEADER, question, requester_id=requester_id, server=server, tool=tool)
    notes = [msg.QUESTION_ONLY_REQUESTER.format(user=requester_id)]
    if isinstance(question, LinkRequest):
        notes.insert(0, msg.QUESTION_LINK_NOTE)
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": " ".join(notes)}]})
    first = (
        _button(msg.BUTTON_OPEN_LINK, ACTION_OPEN_LINK, question_id, "primary")
        if isinstance(question, LinkRequest)
        else _button(msg.BUTTON_ANSWER, ACTION_ANSWER, question_id, "primary")
    )
    blocks.append(
        {
            "type": "actions",
            "block_id": QUESTION_BLOCK,
            "elements": [
                first,
                _button(msg.BUTTON_DECLINE, ACTION_DECLINE, question_id, "danger"),
                _button(msg.BUTTON_CANCEL_QUESTION, ACTION_CANCEL, question_id),
            ],
        }
    )
    return blocks


def finished_question_blocks(
    question: Question,
    *,
    requester_id: str,
    server: str,
    tool: str,
    outcome: Outcome,
    by_id: str | None,
    at: datetime,
) -> list[dict[str, Any]]:
    """The card once the question ended: what happened, by whom, when; no buttons.

    Args:
        question: the form or link.
        requester_id: the Slack user id of the person who was asked.
        server: the MCP server's name.
        tool: the tool whose call asked.
        outcome: the person's action, or "expired".
        by_id: the Slack user id of who answered, declined or cancelled; None when nobody did
            (expired, or cancelled by the bot).
        at: when it ended (aware).
    """
    key = outcome.value if isinstance(outcome, Action) else outcome
    blocks = _question_head(
        msg.QUESTION_HEADER_DONE[key], question, requester_id=requester_id, server=server, tool=tool
    )
    words = msg.QUESTION_DONE[key] if by_id is not None else msg.QUESTION_DONE_NOBODY[key]
    blocks.append(
        {"type": "context", "elements": [{"type": "mrkdwn", "text": words.format(user=by_id, when=when_token(at))}]}
    )
    return blocks


def question_text(*, server: str, tool: str, outcome: Outcome | None = None) -> str:
    """The notification / fallback `text` beside a card's blocks (None outcome: still open)."""
    if outcome is None:
        return msg.QUESTION_FALLBACK.format(server=escape(server), tool=escape(tool))
    key = outcome.value if isinstance(outcome, Action) else outcome
    return msg.QUESTION_DONE_FALLBACK.format(
        outcome=msg.QUESTION_HEADER_DONE[key].split(" ", 1)[1], server=escape(server), tool=escape(tool)
    )


def link_blocks(link: LinkRequest, *, question_id: str, server: str) -> list[dict[str, Any]]:
    """The requester's ephemeral message with the link: the URL in words and as a button.

    A link longer than a button's 3,000 characters is shown in words only; one longer than a
    section holds is cut there (a server asking to open such a link is unusual enough to fail).
    """
    text = QUESTION_LINK.format(server=escape(server), link=escape(link.url))
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": fv.clip(text, SECTION_CHARS)}}
    ]
    if len(link.url) <= URL_CHARS:
        button = _button(msg.BUTTON_LINK, ACTION_FOLLOW_LINK, question_id, "primary")
        button["url"] = link.url
        blocks.append({"type": "actions", "elements": [button]})
    else:
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": msg.QUESTION_LINK_TOO_LONG}]})
    return blocks


def question_notice_view(text: str) -> dict[str, Any]:
    """A modal that only says `text`: the answer form's submission was refused and cannot be corrected there."""
    return {
        "type": "modal",
        "title": _plain(msg.QUESTION_MODAL_TITLE),
        "close": _plain(msg.CLOSE),
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": fv.clip(text, SECTION_CHARS)}}],
    }


def _question_head(
    header: str, question: Question, *, requester_id: str, server: str, tool: str
) -> list[dict[str, Any]]:
    asks = QUESTION_ASKS.format(user=requester_id, server=escape(server), tool=escape(tool))
    message = fv.clip(escape(reveal_invisible(question.message)), _MESSAGE_CHARS).replace("\n", "\n>")
    return [
        {"type": "header", "text": {"type": "plain_text", "text": header, "emoji": True}},
        {
            "type": "section",
            "text": {"type": "mrkdwn", "text": f"{asks}\n{msg.QUESTION_MESSAGE.format(message=message)}"},
        },
    ]


def _button(text: str, action_id: str, value: str, style: str | None = None) -> dict[str, Any]:
    button: dict[str, Any] = {"type": "button", "text": _plain(text), "action_id": action_id, "value": value}
    if style:
        button["style"] = style
    return button


def _option(value: str, text: str) -> dict[str, Any]:
    return {"text": _plain(fv.clip(text, OPTION_CHARS) or value), "value": value}


def _plain(text: str) -> dict[str, Any]:
    return {"type": "plain_text", "text": text}


def _put(element: dict[str, Any], **values: object) -> None:
    """Set each of `values` that is not None on `element`."""
    element.update({key: value for key, value in values.items() if value is not None})
