"""An MCP server's question in Slack: the modal per field kind, its answers read back, Block Kit's limits, the cards."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from slack_sdk.models.blocks import Block
from slack_sdk.models.views import View

from adapters.slack import forms
from adapters.slack.forms import (
    ACTION_ANSWER,
    ACTION_CANCEL,
    ACTION_DECLINE,
    ACTION_FOLLOW_LINK,
    ACTION_OPEN_LINK,
    INPUT_ACTION,
    VIEW_QUESTION,
    field_block_id,
    field_errors,
    finished_question_blocks,
    link_blocks,
    question_blocks,
    question_modal,
    question_text,
    raw_answers,
)
from bot.tools.mcp.elicitation.forms import Action, AnswerError, Form, LinkRequest, form_of, read_answer

QUESTION_ID = "9f1c2d3e4b5a69788796a5b4c3d2e1f0"

EVERY_KIND: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reason": {"type": "string", "title": "Reason", "description": "Why now", "minLength": 3, "maxLength": 50},
        "notes": {"type": "string", "title": "Notes", "default": "none"},
        "owner": {"type": "string", "format": "email", "title": "Owner"},
        "page": {"type": "string", "format": "uri", "title": "Page"},
        "day": {"type": "string", "format": "date", "title": "Day", "default": "2026-12-24"},
        "at": {"type": "string", "format": "date-time", "title": "At"},
        "count": {"type": "integer", "title": "Replicas", "minimum": 1, "maximum": 10, "default": 2},
        "ratio": {"type": "number", "minimum": 0.00001, "maximum": 1.5},
        "notify": {"type": "boolean", "title": "Notify the team", "default": True},
        "confirm": {"type": "boolean", "title": "Confirm"},
        "region": {"type": "string", "enum": ["eu", "us"], "enumNames": ["Europe", "United States"]},
        "size": {"type": "string", "enum": [f"s{i}" for i in range(8)], "default": "s3"},
        "zones": {
            "type": "array",
            "title": "Zones",
            "items": {"type": "string", "enum": ["a", "b", "c"]},
            "minItems": 1,
            "maxItems": 2,
            "default": ["b"],
        },
    },
    "required": ["reason", "count", "region", "confirm", "zones"],
}

# Block Kit reference limits.
TITLE_MAX = 24
LABEL_MAX = 2000
HINT_MAX = 2000
OPTION_TEXT_MAX = 75
OPTION_VALUE_MAX = 150
SELECT_OPTIONS_MAX = 100
RADIO_OPTIONS_MAX = 10
MODAL_BLOCKS_MAX = 100
SECTION_TEXT_MAX = 3000
HEADER_TEXT_MAX = 150
BLOCK_ID_MAX = 255
BUTTON_TEXT_MAX = 75
PLACEHOLDER_MAX = 150
TEXT_INPUT_MAX = 3000


def every_kind() -> Form:
    return form_of("Deploy the release?", EVERY_KIND)


def elements(view: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The input elements of a modal by block id."""
    return {block["block_id"]: block["element"] for block in view["blocks"] if block["type"] == "input"}


def strictly_valid(view: dict[str, Any]) -> None:
    """Assert the documented Block Kit limits on a modal, beyond what slack_sdk's models check."""
    assert View(**view).to_dict()  # slack_sdk's own validation (raises on what it knows is wrong)
    assert 1 <= len(view["title"]["text"]) <= TITLE_MAX
    assert len(view["submit"]["text"]) <= TITLE_MAX and len(view["close"]["text"]) <= TITLE_MAX
    assert len(view["blocks"]) <= MODAL_BLOCKS_MAX
    block_ids = [block["block_id"] for block in view["blocks"] if "block_id" in block]
    assert len(block_ids) == len(set(block_ids))
    for block in view["blocks"]:
        if block["type"] == "section":
            assert len(block["text"]["text"]) <= SECTION_TEXT_MAX
            continue
        assert len(block["block_id"]) <= BLOCK_ID_MAX
        assert 1 <= len(block["label"]["text"]) <= LABEL_MAX
        assert len(block.get("hint", {}).get("text", "")) <= HINT_MAX
        element = block["element"]
        options = element.get("options", [])
        limit = RADIO_OPTIONS_MAX if element["type"] in ("radio_buttons", "checkboxes") else SELECT_OPTIONS_MAX
        assert len(options) <= limit
        for option in options:
            assert 1 <= len(option["text"]["text"]) <= OPTION_TEXT_MAX
            assert len(option["value"]) <= OPTION_VALUE_MAX
        for chosen in [element.get("initial_option"), *element.get("initial_options", [])]:
            assert chosen is None or chosen in options
        assert len(element.get("placeholder", {}).get("text", "")) <= PLACEHOLDER_MAX
        if element["type"] == "plain_text_input":
            assert element.get("max_length", TEXT_INPUT_MAX) <= TEXT_INPUT_MAX
            assert element.get("min_length", 0) <= element.get("max_length", TEXT_INPUT_MAX)
            assert len(element.get("initial_value", "")) <= element.get("max_length", TEXT_INPUT_MAX)


def blocks_valid(blocks: list[dict[str, Any]]) -> None:
    """Assert a card's blocks parse in slack_sdk and keep the section, header and button limits."""
    assert [block.to_dict() for block in Block.parse_all(blocks)]
    for block in blocks:
        if block["type"] == "header":
            assert len(block["text"]["text"]) <= HEADER_TEXT_MAX
        if block["type"] == "section":
            assert len(block["text"]["text"]) <= SECTION_TEXT_MAX
        for element in block.get("elements", []):
            if element["type"] == "button":
                assert len(element["text"]["text"]) <= BUTTON_TEXT_MAX


def option(element: dict[str, Any], label: str) -> dict[str, Any]:
    """The option of a select or radio element shown as `label`."""
    return next(o for o in element["options"] if o["text"]["text"] == label)


def test_each_field_kind_gets_its_block_kit_element():
    """Text, formats, numbers, yes / no, choices and multi-choices each get the element that fits them."""
    view = question_modal(every_kind(), question_id=QUESTION_ID, title="deploy-server")
    found = elements(view)
    kinds = {block_id.removeprefix("field:"): element["type"] for block_id, element in found.items()}
    assert kinds == {
        "reason": "plain_text_input",
        "notes": "plain_text_input",
        "owner": "email_text_input",
        "page": "url_text_input",
        "day": "datepicker",
        "at": "datetimepicker",
        "count": "number_input",
        "ratio": "number_input",
        "notify": "radio_buttons",
        "confirm": "radio_buttons",
        "region": "radio_buttons",
        "size": "static_select",
        "zones": "multi_static_select",
    }
    assert all(element["action_id"] == INPUT_ACTION for element in found.values())
    assert view["callback_id"] == VIEW_QUESTION
    assert view["private_metadata"] == QUESTION_ID
    assert view["submit"]["text"] == "Send"
    strictly_valid(view)


def test_limits_labels_hints_defaults_and_optional_follow_the_schema():
    """Lengths, bounds, defaults, hints and `optional` come from the schema; short text is one line."""
    view = question_modal(every_kind(), question_id=QUESTION_ID, title="deploy")
    found = elements(view)
    by_id = {block["block_id"]: block for block in view["blocks"] if block["type"] == "input"}
    reason = found["field:reason"]
    assert (reason["min_length"], reason["max_length"], reason["multiline"]) == (3, 50, False)
    assert found["field:notes"]["multiline"] is True and found["field:notes"]["initial_value"] == "none"
    assert by_id["field:reason"]["hint"]["text"] == "Why now"
    assert by_id["field:reason"]["optional"] is False and by_id["field:notes"]["optional"] is True
    count = found["field:count"]
    assert (count["is_decimal_allowed"], count["min_value"], count["max_value"], count["initial_value"]) == (
        False,
        "1",
        "10",
        "2",
    )
    ratio = found["field:ratio"]
    assert (ratio["is_decimal_allowed"], ratio["min_value"], ratio["max_value"]) == (True, "0.00001", "1.5")
    assert found["field:day"]["initial_date"] == "2026-12-24"
    assert found["field:notify"]["initial_option"]["text"]["text"] == "Yes"
    assert "initial_option" not in found["field:confirm"]
    assert found["field:size"]["initial_option"]["text"]["text"] == "s3"
    zones = found["field:zones"]
    assert zones["max_selected_items"] == 2
    assert [o["text"]["text"] for o in zones["initial_options"]] == ["b"]
    assert by_id["field:region"]["label"]["text"] == "region"


def test_a_submitted_modal_reads_back_into_typed_content():
    """What Slack submits for each element reads, through read_answer, into the schema's types."""
    form = every_kind()
    found = elements(question_modal(form, question_id=QUESTION_ID, title="deploy"))
    moment = datetime(2026, 12, 7, 20, 40, tzinfo=UTC)
    state = {
        "field:reason": {INPUT_ACTION: {"type": "plain_text_input", "value": "hotfix"}},
        "field:notes": {INPUT_ACTION: {"type": "plain_text_input", "value": None}},
        "field:owner": {INPUT_ACTION: {"type": "email_text_input", "value": "ann@example.com"}},
        "field:page": {INPUT_ACTION: {"type": "url_text_input", "value": "https://example.com/x"}},
        "field:day": {INPUT_ACTION: {"type": "datepicker", "selected_date": "2026-12-24"}},
        "field:at": {INPUT_ACTION: {"type": "datetimepicker", "selected_date_time": int(moment.timestamp())}},
        "field:count": {INPUT_ACTION: {"type": "number_input", "value": "3"}},
        "field:ratio": {INPUT_ACTION: {"type": "number_input", "value": "0.25"}},
        "field:notify": {
            INPUT_ACTION: {"type": "radio_buttons", "selected_option": option(found["field:notify"], "No")}
        },
        "field:confirm": {
            INPUT_ACTION: {"type": "radio_buttons", "selected_option": option(found["field:confirm"], "No")}
        },
        "field:region": {
            INPUT_ACTION: {"type": "radio_buttons", "selected_option": option(found["field:region"], "United States")}
        },
        "field:size": {INPUT_ACTION: {"type": "static_select", "selected_option": option(found["field:size"], "s5")}},
        "field:zones": {
            INPUT_ACTION: {
                "type": "multi_static_select",
                "selected_options": [option(found["field:zones"], "a"), option(found["field:zones"], "c")],
            }
        },
    }
    raw = raw_answers(form, state)
    assert raw["at"] == "2026-12-07T20:40:00Z"
    assert read_answer(form, raw) == {
        "reason": "hotfix",
        "owner": "ann@example.com",
        "page": "https://example.com/x",
        "day": "2026-12-24",
        "at": "2026-12-07T20:40:00Z",
        "count": 3,
        "ratio": 0.25,
        "notify": False,
        "confirm": False,
        "region": "us",
        "size": "s5",
        "zones": ["a", "c"],
    }


def test_a_required_yes_no_can_be_answered_no_and_an_optional_one_left_out():
    """A required boolean answered No sends false; an optional one left empty is not sent."""
    form = form_of(
        "Go?",
        {
            "type": "object",
            "properties": {"sure": {"type": "boolean"}, "loud": {"type": "boolean"}},
            "required": ["sure"],
        },
    )
    found = elements(question_modal(form, question_id=QUESTION_ID, title="x"))
    state = {
        "field:sure": {INPUT_ACTION: {"type": "radio_buttons", "selected_option": option(found["field:sure"], "No")}},
        "field:loud": {INPUT_ACTION: {"type": "radio_buttons", "selected_option": None}},
    }
    assert read_answer(form, raw_answers(form, state)) == {"sure": False}


def test_a_wrong_answer_goes_back_to_its_field_in_the_modal():
    """read_answer's error names the field, and field_errors puts it at that field's input block."""
    form = form_of("Why?", {"type": "object", "properties": {"reason": EVERY_KIND["properties"]["reason"]}})
    view = question_modal(form, question_id=QUESTION_ID, title="deploy")
    state = {"field:reason": {INPUT_ACTION: {"type": "plain_text_input", "value": "x"}}}
    with pytest.raises(AnswerError) as caught:
        read_answer(form, raw_answers(form, state))
    errors = field_errors(form, caught.value)
    assert list(errors) == [field_block_id(caught.value.field or "")]
    assert set(errors) <= set(elements(view))
    assert next(iter(errors.values())) == "Reason: enter at least 3 characters."
    assert list(field_errors(every_kind(), AnswerError("Something is off."))) == ["field:reason"]


def test_long_text_and_many_options_are_cut_into_a_view_slack_accepts():
    """Labels, hints, option texts, the title and 100 options stay within Block Kit's limits, cut with an ellipsis."""
    long = "word " * 1000
    schema = {
        "type": "object",
        "properties": {
            "pick": {
                "type": "string",
                "title": long,
                "description": long,
                "oneOf": [{"const": "v" * 400 + str(i), "title": f"{i} {long}"} for i in range(100)],
            },
            "many": {
                "type": "array",
                "items": {"type": "string", "enum": [f"option {i} " + "x" * 200 for i in range(100)]},
            },
            "essay": {"type": "string", "maxLength": 100_000, "minLength": 10, "default": "y" * 5000},
            "n" * 300: {"type": "integer", "minimum": 0.5, "maximum": 1e300},
        },
    }
    form = form_of(long, schema)
    view = question_modal(form, question_id=QUESTION_ID, title="a very long server name indeed")
    strictly_valid(view)
    assert view["title"]["text"].endswith("…")
    found = elements(view)
    pick = found["field:pick"]
    assert len(pick["options"]) == 100 and pick["options"][0]["text"]["text"].endswith("…")
    assert found["field:essay"]["max_length"] == TEXT_INPUT_MAX and "initial_value" not in found["field:essay"]
    big = found[field_block_id("n" * 300)]
    assert big["min_value"] == "1" and "max_value" not in big
    state = {
        "field:pick": {INPUT_ACTION: {"type": "static_select", "selected_option": pick["options"][42]}},
        "field:many": {
            INPUT_ACTION: {"type": "multi_static_select", "selected_options": found["field:many"]["options"][:2]}
        },
    }
    content = read_answer(form, raw_answers(form, state))
    assert content == {"pick": "v" * 400 + "42", "many": [f"option {i} " + "x" * 200 for i in range(2)]}


def test_the_card_asks_the_requester_with_buttons_carrying_only_the_question_id():
    """An open form's card mentions the requester, names server and tool, quotes the message, and offers Answer / Decline / Cancel."""
    blocks = question_blocks(
        every_kind(), question_id=QUESTION_ID, requester_id="U_ANN", server="deploy", tool="release"
    )
    blocks_valid(blocks)
    text = str(blocks)
    assert "<@U_ANN>" in text and "`deploy`" in text and "`release`" in text and "Deploy the release?" in text
    actions = next(block for block in blocks if block["type"] == "actions")
    assert [(b["action_id"], b["value"], b["text"]["text"]) for b in actions["elements"]] == [
        (ACTION_ANSWER, QUESTION_ID, "Answer…"),
        (ACTION_DECLINE, QUESTION_ID, "Decline"),
        (ACTION_CANCEL, QUESTION_ID, "Cancel"),
    ]
    assert "deploy" in question_text(server="deploy", tool="release")


def test_a_link_is_on_the_card_only_as_a_button_and_shown_to_the_requester_alone():
    """A link's card offers Open link… without the URL; the requester's ephemeral message holds it."""
    link = LinkRequest(message="Sign in to continue", url="https://auth.example.com/x?token=secret")
    card = question_blocks(link, question_id=QUESTION_ID, requester_id="U_ANN", server="auth", tool="login")
    blocks_valid(card)
    assert "secret" not in str(card)
    actions = next(block for block in card if block["type"] == "actions")
    assert actions["elements"][0]["action_id"] == ACTION_OPEN_LINK
    shown = link_blocks(link, question_id=QUESTION_ID, server="auth")
    blocks_valid(shown)
    button = shown[1]["elements"][0]
    assert (button["url"], button["action_id"], button["value"]) == (link.url, ACTION_FOLLOW_LINK, QUESTION_ID)
    too_long = LinkRequest(message="m", url="https://example.com/" + "a" * 4000)
    assert all(
        "url" not in element
        for block in link_blocks(too_long, question_id="q", server="s")
        for element in block.get("elements", [])
    )


@pytest.mark.parametrize(
    ("outcome", "by_id", "words"),
    [
        (Action.ACCEPT, "U_ANN", "Answered by <@U_ANN>"),
        (Action.DECLINE, "U_ANN", "Declined by <@U_ANN>"),
        (Action.CANCEL, None, "Cancelled ·"),
        ("expired", None, "Expired unanswered"),
    ],
)
def test_a_finished_card_says_what_happened_by_whom_and_when_without_buttons(outcome, by_id, words):
    """Answered, declined, cancelled or expired: the card says so, with who and when, and has no buttons."""
    at = datetime(2026, 12, 7, 21, 0, tzinfo=UTC)
    blocks = finished_question_blocks(
        every_kind(), requester_id="U_ANN", server="deploy", tool="release", outcome=outcome, by_id=by_id, at=at
    )
    blocks_valid(blocks)
    assert not [block for block in blocks if block["type"] == "actions"]
    assert words in str(blocks) and "<!date^" in str(blocks)
    assert question_text(server="deploy", tool="release", outcome=outcome)


def test_the_module_names_its_ids_once():
    """The modal's callback id and the card's action ids are distinct constants."""
    ids = {forms.VIEW_QUESTION, ACTION_ANSWER, ACTION_OPEN_LINK, ACTION_DECLINE, ACTION_CANCEL, ACTION_FOLLOW_LINK}
    assert len(ids) == 6


def test_defaults_an_input_cannot_hold_are_left_out():
    """A default longer than `maxLength: 0`, a number outside its bounds, a moment before 1970, more picks than allowed: not prefilled."""
    form = form_of(
        "m",
        {
            "type": "object",
            "properties": {
                "none": {"type": "string", "maxLength": 0, "default": "abc"},
                "low": {"type": "integer", "minimum": 5, "maximum": 9, "default": 1},
                "old": {"type": "string", "format": "date-time", "default": "0001-01-01T00:00:00Z"},
                "one": {"type": "string", "enum": ["a", "a", "b"], "default": "a"},
                "few": {
                    "type": "array",
                    "items": {"type": "string", "enum": ["a", "b", "c"]},
                    "maxItems": 1,
                    "default": ["a", "b"],
                },
            },
        },
    )
    view = question_modal(form, question_id=QUESTION_ID, title="t")
    strictly_valid(view)
    found = elements(view)
    assert "initial_value" not in found["field:none"] and "initial_value" not in found["field:low"]
    assert "initial_date_time" not in found["field:old"]
    assert found["field:one"]["initial_option"] == found["field:one"]["options"][0]
    assert [o["text"]["text"] for o in found["field:few"]["initial_options"]] == ["a"]


def test_a_blank_option_and_an_unreadable_moment_read_back_without_a_crash():
    """An option whose value is "" picked reads as "", and a date-time no calendar holds is refused in words."""
    form = form_of(
        "m",
        {
            "type": "object",
            "properties": {
                "pick": {"type": "string", "enum": ["", "x"]},
                "at": {"type": "string", "format": "date-time"},
            },
            "required": ["pick"],
        },
    )
    found = elements(question_modal(form, question_id=QUESTION_ID, title="t"))
    state = {
        "field:pick": {INPUT_ACTION: {"type": "radio_buttons", "selected_option": found["field:pick"]["options"][0]}}
    }
    assert read_answer(form, raw_answers(form, state)) == {"pick": ""}
    state["field:at"] = {INPUT_ACTION: {"type": "datetimepicker", "selected_date_time": 10**20}}
    with pytest.raises(AnswerError, match="at: this is not a valid date-time"):
        read_answer(form, raw_answers(form, state))


def test_server_text_cannot_ping_or_disguise_a_link_in_the_card_or_the_modal():
    """`<!channel>`, `<@U123>` and `<https://evil|click>` from the server show as typed: escaped in mrkdwn, plain text elsewhere."""
    hostile = "<!channel> <@U123> <https://evil.example|click> &"
    form = form_of(
        hostile, {"type": "object", "properties": {"a": {"type": "string", "title": hostile, "description": hostile}}}
    )
    card = str(question_blocks(form, question_id=QUESTION_ID, requester_id="U_ANN", server=hostile, tool=hostile))
    view = question_modal(form, question_id=QUESTION_ID, title=hostile)
    assert "<!channel>" not in card and "<@U123>" not in card and "<https://evil" not in card
    assert "&lt;!channel&gt;" in card and "&amp;" in card
    assert "&lt;!channel&gt;" in view["blocks"][0]["text"]["text"]
    input_block = view["blocks"][1]
    assert input_block["label"]["type"] == "plain_text" and input_block["hint"]["type"] == "plain_text"
    assert "<" not in question_text(server=hostile, tool=hostile)


def test_an_odd_submission_state_reads_as_nothing_picked():
    """A multi-select state whose `selected_options` is not a list reads as no pick, not a crash."""
    form = form_of("m", {"type": "object", "properties": {"z": EVERY_KIND["properties"]["zones"]}})
    state = {"field:z": {INPUT_ACTION: {"type": "multi_static_select", "selected_options": 5}}}
    assert raw_answers(form, state) == {"z": []}
