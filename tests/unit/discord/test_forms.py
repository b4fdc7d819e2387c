"""An MCP server's question in Discord: pages of five fields, real discord.py components, answers read back, the cards.

discord.py's views and modals need a running event loop, so the tests that build them are async.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import discord
import pytest

from adapters.discord.forms import (
    BUTTON_TEMPLATE,
    CONTINUE_TEMPLATE,
    PAGE_FIELDS,
    ContinueButton,
    QuestionButton,
    QuestionModal,
    continue_view,
    finished_question_embed,
    form_pages,
    link_message,
    page_of,
    page_problem,
    parse_modal_id,
    question_embed,
    question_view,
    raw_answers,
)
from bot.tools.mcp.elicitation.forms import Action, AnswerError, Form, LinkRequest, Option, form_of, read_answer

QUESTION_ID = "9f1c2d3e4b5a69788796a5b4c3d2e1f0"

EVERY_KIND: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reason": {"type": "string", "title": "Reason", "description": "Why now", "minLength": 3, "maxLength": 50},
        "notes": {"type": "string", "title": "Notes", "default": "none"},
        "owner": {"type": "string", "format": "email", "title": "Owner"},
        "day": {"type": "string", "format": "date", "title": "Day", "default": "2026-12-24"},
        "at": {"type": "string", "format": "date-time", "title": "At"},
        "count": {"type": "integer", "title": "Replicas", "minimum": 1, "maximum": 10, "default": 2},
        "ratio": {"type": "number", "minimum": 0.00001, "maximum": 1.5},
        "notify": {"type": "boolean", "title": "Notify the team", "default": True},
        "confirm": {"type": "boolean", "title": "Confirm"},
        "region": {"type": "string", "enum": ["eu", "us"], "enumNames": ["Europe", "United States"]},
        "size": {"type": "string", "enum": [f"s{i}" for i in range(30)], "default": "s3"},
        "zones": {
            "type": "array",
            "title": "Zones",
            "items": {"type": "string", "enum": ["a", "b", "c"]},
            "minItems": 1,
            "maxItems": 2,
            "default": ["b"],
        },
        "tags": {"type": "array", "items": {"type": "string", "enum": [f"t{i}" for i in range(40)]}},
    },
    "required": ["reason", "count", "region", "confirm", "zones"],
}

# Discord's documented limits.
MODAL_TITLE_MAX = 45
MODAL_COMPONENTS_MAX = 5
LABEL_MAX = 45
LABEL_DESCRIPTION_MAX = 100
TEXT_PLACEHOLDER_MAX = 100
SELECT_PLACEHOLDER_MAX = 150
TEXT_VALUE_MAX = 4000
SELECT_OPTIONS_MAX = 25
OPTION_MAX = 100
CUSTOM_ID_MAX = 100
EMBED_MAX = 6000
EMBED_FIELD_MAX = 1024
MESSAGE_MAX = 2000
LABEL = 18
TEXT_INPUT = 4
STRING_SELECT = 3
TEXT_DISPLAY = 10


def every_kind() -> Form:
    return form_of("Deploy the release?", EVERY_KIND)


def strictly_valid(payload: dict[str, Any]) -> None:
    """Assert Discord's documented limits on a modal payload (discord.py checks only the count of components)."""
    assert 1 <= len(payload["title"]) <= MODAL_TITLE_MAX
    assert len(payload["custom_id"]) <= CUSTOM_ID_MAX
    assert 1 <= len(payload["components"]) <= MODAL_COMPONENTS_MAX
    for component in payload["components"]:
        if component["type"] == TEXT_DISPLAY:
            assert len(component["content"]) <= TEXT_VALUE_MAX
            continue
        assert component["type"] == LABEL
        assert 1 <= len(component["label"]) <= LABEL_MAX
        assert len(component.get("description", "")) <= LABEL_DESCRIPTION_MAX
        inner = component["component"]
        assert len(inner["custom_id"]) <= CUSTOM_ID_MAX
        if inner["type"] == TEXT_INPUT:
            assert len(inner.get("placeholder", "")) <= TEXT_PLACEHOLDER_MAX
            assert 1 <= inner["max_length"] <= TEXT_VALUE_MAX
            assert inner.get("min_length", 0) <= inner["max_length"]
            assert len(inner.get("value", "")) <= inner["max_length"]
        else:
            assert inner["type"] == STRING_SELECT
            assert len(inner.get("placeholder", "")) <= SELECT_PLACEHOLDER_MAX
            assert 1 <= len(inner["options"]) <= SELECT_OPTIONS_MAX
            assert inner["min_values"] <= inner["max_values"] <= len(inner["options"])
            for option in inner["options"]:
                assert 1 <= len(option["label"]) <= OPTION_MAX and len(option["value"]) <= OPTION_MAX


def labels(payload: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A modal payload's inputs by their label text."""
    return {c["label"]: c["component"] for c in payload["components"] if c["type"] == LABEL}


def submitted(payload: dict[str, Any], answers: dict[str, Any]) -> dict[str, Any]:
    """The MODAL_SUBMIT `data` Discord sends for `payload` filled in with `answers` (by label).

    A text input's answer is its text; a select's is the labels of the options picked. Inputs
    not in `answers` are sent as Discord sends them left alone: their default text, or the
    options marked default.
    """
    components = []
    for label, inner in labels(payload).items():
        if inner["type"] == TEXT_INPUT:
            data = {
                "type": TEXT_INPUT,
                "custom_id": inner["custom_id"],
                "value": answers.get(label, inner.get("value", "")),
            }
        else:
            picked = answers.get(label)
            values = (
                [o["value"] for o in inner["options"] if o.get("default")]
                if picked is None
                else [o["value"] for o in inner["options"] if o["label"] in picked]
            )
            data = {"type": STRING_SELECT, "custom_id": inner["custom_id"], "values": values}
        components.append({"type": LABEL, "id": 1, "component": data})
    return {"custom_id": payload["custom_id"], "components": components}


def test_a_form_is_cut_into_pages_of_five_fields():
    """Thirteen fields make pages of 5, 5 and 3, in order; a form without fields is one empty page."""
    form = every_kind()
    pages = form_pages(form)
    assert [len(page) for page in pages] == [5, 5, 3]
    assert [spec for page in pages for spec in page] == list(form.fields)
    assert PAGE_FIELDS == MODAL_COMPONENTS_MAX
    assert form_pages(form_of("Just confirm", {"type": "object", "properties": {}})) == [()]
    assert page_of(form, "count") == 2 and page_of(form, "tags") == 3 and page_of(form, None) == 1


async def test_each_page_builds_as_a_real_discord_modal_within_discords_limits():
    """Every page is a real QuestionModal: labelled text inputs and selects, within Discord's limits."""
    form = every_kind()
    kinds: dict[str, int] = {}
    for page in (1, 2, 3):
        modal = QuestionModal(form, question_id=QUESTION_ID, page=page, title="deploy-server")
        payload = modal.to_dict()
        strictly_valid(payload)
        assert parse_modal_id(payload["custom_id"]) == (QUESTION_ID, page)
        assert payload["title"] == f"deploy-server ({page}/3)"
        kinds |= {label: inner["type"] for label, inner in labels(payload).items()}
    assert kinds == {
        "Reason": TEXT_INPUT,
        "Notes": TEXT_INPUT,
        "Owner": TEXT_INPUT,
        "Day": TEXT_INPUT,
        "At": TEXT_INPUT,
        "Replicas": TEXT_INPUT,
        "ratio": TEXT_INPUT,
        "Notify the team": STRING_SELECT,
        "Confirm": STRING_SELECT,
        "region": STRING_SELECT,
        "size": TEXT_INPUT,  # 30 options: more than a select holds
        "Zones": STRING_SELECT,
        "tags": TEXT_INPUT,
    }
    with pytest.raises(ValueError, match="page 4"):
        QuestionModal(form, question_id=QUESTION_ID, page=4, title="x")


async def test_inputs_carry_the_schemas_limits_defaults_and_hints():
    """Lengths, defaults, required, placeholders for formats and ranges, and select bounds come from the schema."""
    form = every_kind()
    first = labels(QuestionModal(form, question_id=QUESTION_ID, page=1, title="d").to_dict())
    assert (first["Reason"]["min_length"], first["Reason"]["max_length"], first["Reason"]["style"]) == (3, 50, 1)
    assert first["Reason"]["required"] is True and first["Notes"]["required"] is False
    assert first["Notes"]["value"] == "none" and first["Notes"]["style"] == 2
    assert first["Owner"]["placeholder"] == "name@example.com"
    assert first["Day"]["value"] == "2026-12-24"
    second = labels(QuestionModal(form, question_id=QUESTION_ID, page=2, title="d").to_dict())
    assert second["Replicas"]["placeholder"] == "A whole number from 1 up to 10" and second["Replicas"]["value"] == "2"
    assert second["ratio"]["placeholder"] == "A number from 0.00001 up to 1.5"
    assert [o["label"] for o in second["Notify the team"]["options"] if o.get("default")] == ["Yes"]
    assert not [o for o in second["Confirm"]["options"] if o.get("default")]
    third = labels(QuestionModal(form, question_id=QUESTION_ID, page=3, title="d").to_dict())
    assert (third["Zones"]["min_values"], third["Zones"]["max_values"]) == (1, 2)
    assert [o["label"] for o in third["Zones"]["options"] if o.get("default")] == ["b"]
    assert third["size"]["value"] == "s3" and third["size"]["placeholder"].startswith("Type one of: s0, s1")


async def test_the_pages_submitted_read_back_into_typed_content():
    """What Discord submits for each page, merged, reads through read_answer into the schema's types."""
    form = every_kind()
    answers = {
        "Reason": "hotfix",
        "Notes": "",
        "Owner": "ann@example.com",
        "At": "2026-12-07T20:40:00Z",
        "Replicas": "3",
        "ratio": "0.25",
        "Notify the team": ["No"],
        "Confirm": ["No"],
        "region": ["United States"],
        "size": "S5",
        "Zones": ["a", "c"],
        "tags": "t1, t7",
    }
    entered: dict[str, object] = {}
    for page in (1, 2, 3):
        modal = QuestionModal(form, question_id=QUESTION_ID, page=page, title="d")
        data = submitted(modal.to_dict(), answers)
        modal._refresh(None, data["components"], {})  # discord.py's own reading of the same payload
        raw = raw_answers(form, data)
        assert set(raw) == {spec.name for spec in form_pages(form)[page - 1]}
        entered |= raw
        assert page_problem(form, entered, page) is None
    assert read_answer(form, entered) == {
        "reason": "hotfix",
        "owner": "ann@example.com",
        "day": "2026-12-24",
        "at": "2026-12-07T20:40:00Z",
        "count": 3,
        "ratio": 0.25,
        "notify": False,
        "confirm": False,
        "region": "us",
        "size": "s5",
        "zones": ["a", "c"],
        "tags": ["t1", "t7"],
    }


async def test_discord_py_reads_the_same_values_from_a_submission():
    """The payload the tests submit is one discord.py itself reads: its components get the typed text and picks."""
    form = every_kind()
    modal = QuestionModal(form, question_id=QUESTION_ID, page=1, title="d")
    modal._refresh(None, submitted(modal.to_dict(), {"Reason": "hotfix"})["components"], {})
    inputs = {item.custom_id: item for item in modal.walk_children() if isinstance(item, discord.ui.TextInput)}
    assert inputs["f0"].value == "hotfix"
    second = QuestionModal(form, question_id=QUESTION_ID, page=2, title="d")
    second._refresh(None, submitted(second.to_dict(), {"region": ["Europe"]})["components"], {})
    selects = {item.custom_id: item for item in second.walk_children() if isinstance(item, discord.ui.Select)}
    assert selects["f9"].values == ["0"]
    assert raw_answers(form, submitted(second.to_dict(), {"region": ["Europe"]}))["region"] == Option(
        value="eu", label="Europe"
    )


async def test_a_problem_on_a_page_is_caught_there_and_later_pages_wait():
    """A wrong value on the submitted page is reported; a required field of a later page is not, yet."""
    form = every_kind()
    modal = QuestionModal(form, question_id=QUESTION_ID, page=1, title="d")
    short = raw_answers(form, submitted(modal.to_dict(), {"Reason": "x"}))
    problem = page_problem(form, short, 1)
    assert (
        problem is not None and problem.field == "reason" and problem.message == "Reason: enter at least 3 characters."
    )
    fine = raw_answers(form, submitted(modal.to_dict(), {"Reason": "hotfix"}))
    assert page_problem(form, fine, 1) is None
    missing = page_problem(form, fine, 2)
    assert missing is not None and page_of(form, missing.field) == 2


async def test_coming_back_to_a_page_shows_what_was_entered():
    """A page reopened with earlier values shows them as its defaults (text, picks, yes / no)."""
    form = every_kind()
    entered = {"count": "7", "notify": False, "region": "us"}
    second = labels(QuestionModal(form, question_id=QUESTION_ID, page=2, title="d", entered=entered).to_dict())
    assert second["Replicas"]["value"] == "7"
    assert [o["label"] for o in second["Notify the team"]["options"] if o.get("default")] == ["No"]
    assert [o["label"] for o in second["region"]["options"] if o.get("default")] == ["United States"]


async def test_a_short_form_shows_the_message_above_its_fields():
    """A one-page form with room to spare shows the server's message as text above its fields; a form without fields only it."""
    form = form_of("Ship *it*?", {"type": "object", "properties": {"ok": {"type": "boolean"}}})
    payload = QuestionModal(form, question_id=QUESTION_ID, title="srv").to_dict()
    strictly_valid(payload)
    assert payload["components"][0] == {"type": TEXT_DISPLAY, "content": "Ship \\*it\\*?"}
    assert payload["title"] == "srv"
    empty = QuestionModal(form_of("Just confirm", {"type": "object", "properties": {}}), question_id="q", title="s")
    assert [c["type"] for c in empty.to_dict()["components"]] == [TEXT_DISPLAY]


async def test_long_labels_and_many_options_are_cut_within_discords_limits():
    """Labels, descriptions, option labels, placeholders and the title are cut with an ellipsis, and 25 options still select."""
    long = "word " * 1000
    form = form_of(
        long,
        {
            "type": "object",
            "properties": {
                "pick": {
                    "type": "string",
                    "title": long,
                    "description": long,
                    "oneOf": [{"const": "v" * 400 + str(i), "title": f"{i} {long}"} for i in range(25)],
                },
                "many": {
                    "type": "array",
                    "items": {"type": "string", "enum": [f"{i} " + "x" * 200 for i in range(99)]},
                },
                "essay": {"type": "string", "maxLength": 100_000, "minLength": 5000, "default": "y" * 5000},
            },
        },
    )
    payload = QuestionModal(form, question_id=QUESTION_ID, title=long).to_dict()
    strictly_valid(payload)
    assert payload["title"].endswith("…")
    pick = next(c for c in payload["components"] if c["type"] == LABEL)
    assert pick["label"].endswith("…") and pick["description"].endswith("…")
    assert len(pick["component"]["options"]) == 25 and pick["component"]["options"][0]["label"].endswith("…")
    data = submitted(payload, {pick["label"]: [pick["component"]["options"][24]["label"]]})
    assert raw_answers(form, data)["pick"] == form.fields[0].options[24]


async def test_card_buttons_carry_only_the_question_id_and_survive_a_restart():
    """Answer / Decline / Cancel (or Open link) have custom ids of the question id alone, parsed back by their templates."""
    form_buttons = [item for item in question_view(every_kind(), QUESTION_ID).children]
    assert [item.item.custom_id for item in form_buttons] == [  # type: ignore[attr-defined]
        f"cs:q-answer:{QUESTION_ID}",
        f"cs:q-decline:{QUESTION_ID}",
        f"cs:q-cancel:{QUESTION_ID}",
    ]
    assert [item.item.label for item in form_buttons] == ["Answer…", "Decline", "Cancel"]  # type: ignore[attr-defined]
    link = LinkRequest(message="Sign in", url="https://auth.example.com/x?token=secret")
    first = question_view(link, QUESTION_ID).children[0]
    assert isinstance(first, QuestionButton) and first.item.custom_id == f"cs:q-link:{QUESTION_ID}"
    for custom_id in (f"cs:q-cancel:{QUESTION_ID}", f"cs:q-page:{QUESTION_ID}:2"):
        assert len(custom_id) <= CUSTOM_ID_MAX
    match = QuestionButton.__discord_ui_compiled_template__.fullmatch(f"cs:q-decline:{QUESTION_ID}")
    rebuilt = await QuestionButton.from_custom_id(None, None, match)  # type: ignore[arg-type]
    assert (rebuilt.action, rebuilt.question_id) == ("decline", QUESTION_ID)
    page = continue_view(QUESTION_ID, 2, 3).children[0]
    assert isinstance(page, ContinueButton) and page.item.label == "Continue (2/3)"
    fix = continue_view(QUESTION_ID, 1, 3, label="Fix the answer…").children[0]
    assert isinstance(fix, ContinueButton) and fix.item.label == "Fix the answer…" and fix.page == 1
    again = await ContinueButton.from_custom_id(
        None,
        None,
        ContinueButton.__discord_ui_compiled_template__.fullmatch(page.item.custom_id),  # type: ignore[arg-type]
    )
    assert (again.question_id, again.page) == (QUESTION_ID, 2)
    assert BUTTON_TEMPLATE != CONTINUE_TEMPLATE


async def test_the_card_names_who_is_asked_and_what_and_a_link_only_in_the_requesters_reply():
    """The card mentions the requester, names server and tool, quotes the message, lists the fields; a link's URL is not on it."""
    embed = question_embed(every_kind(), requester_id="111", server="deploy", tool="release")
    text = str(embed.to_dict())
    assert "<@111>" in text and "`deploy`" in text and "`release`" in text and "Deploy the release?" in text
    assert "Reason (required)" in text and "3 pages" in text
    assert len(embed) <= EMBED_MAX and all(len(field.value or "") <= EMBED_FIELD_MAX for field in embed.fields)
    link = LinkRequest(message="Sign in", url="https://auth.example.com/x?token=secret")
    card = question_embed(link, requester_id="111", server="auth", tool="login")
    assert "secret" not in str(card.to_dict()) and "Open link…" in (card.description or "")
    content, view = link_message(link, server="auth")
    assert link.url in content and len(content) <= MESSAGE_MAX
    button = view.children[0]
    assert isinstance(button, discord.ui.Button) and button.url == link.url and button.style is discord.ButtonStyle.link
    _, no_button = link_message(LinkRequest(message="m", url="https://example.com/" + "a" * 600), server="s")
    assert not no_button.children


@pytest.mark.parametrize(
    ("outcome", "by_id", "words"),
    [
        (Action.ACCEPT, "111", "Answered by <@111>"),
        (Action.DECLINE, "111", "Declined by <@111>"),
        (Action.CANCEL, None, "Cancelled <t:"),
        ("expired", None, "Expired unanswered <t:"),
    ],
)
def test_a_finished_card_says_what_happened_by_whom_and_when(outcome, by_id, words):
    """Answered, declined, cancelled or expired: the finished card says so, with who and when."""
    at = datetime(2026, 12, 7, 21, 0, tzinfo=UTC)
    embed = finished_question_embed(
        every_kind(), requester_id="111", server="deploy", tool="release", outcome=outcome, by_id=by_id, at=at
    )
    assert words in str(embed.to_dict()) and str(int(at.timestamp())) in str(embed.to_dict())


async def test_server_text_cannot_disguise_a_link_in_the_card_or_the_modal():
    """Every masked link and mention in the server's message or labels shows as typed: brackets and `<` escaped, not only the first."""
    hostile = (
        "see [a](https://good.example) [https://good.example](https://evil.example) [c[d](https://evil.example)"
        " <@111> <@&222> \\<@333>"
    )
    form = form_of(hostile, {"type": "object", "properties": {"x": {"type": "string", "title": hostile}}})
    embed = question_embed(form, requester_id="111", server="s", tool="t")
    shown = [(embed.description or "").split("\n", 1)[1], embed.fields[0].value or ""]  # after the asks line
    shown.append(QuestionModal(form, question_id=QUESTION_ID, title="s").to_dict()["components"][0]["content"])
    for text in shown:
        for char in "[]<":
            assert re.search(rf"(?<!\\)(\\\\)*{re.escape(char)}", text) is None, (char, text)


async def test_a_choice_typed_in_a_text_box_is_prefilled_with_words_that_read_back_as_its_default():
    """Over 25 options: a label that names another option first is shown as the value; labels too long as values; picks read back."""
    values = [f"v{i}" for i in range(30)]
    form = form_of(
        "m",
        {
            "type": "object",
            "properties": {
                "one": {
                    "type": "string",
                    "oneOf": [{"const": v, "title": "v0" if v == "v5" else f"L{v}"} for v in values],
                    "default": "v5",
                },
                "many": {
                    "type": "array",
                    "items": {"type": "string", "oneOf": [{"const": v, "title": v + "x" * 300} for v in values]},
                    "default": values[:20],
                },
                "pick": {"type": "string", "enum": ["", "a", "a"], "default": "a"},
            },
        },
    )
    payload = QuestionModal(form, question_id=QUESTION_ID, title="s").to_dict()
    strictly_valid(payload)
    inputs = labels(payload)
    assert inputs["one"]["value"] == "v5" and inputs["many"]["value"] == ", ".join(values[:20])
    assert [o["value"] for o in inputs["pick"]["options"] if o.get("default")] == ["1"]
    raw = raw_answers(form, submitted(payload, {"pick": [""]}))
    assert read_answer(form, raw) == {"one": "v5", "many": values[:20]}
    picked_blank = raw_answers(form, submitted(payload, {"pick": ["0"]}))
    assert read_answer(form, picked_blank)["pick"] == ""


def test_a_rule_about_the_whole_form_waits_for_the_last_page():
    """`minProperties` or `dependentRequired` naming a later page's field does not hold page 1 back; the last page checks them."""
    properties = {f"f{i}": {"type": "string"} for i in range(7)}
    form = form_of(
        "m",
        {
            "type": "object",
            "properties": properties,
            "required": ["f0"],
            "minProperties": 7,
            "dependentRequired": {"f0": ["f6"]},
        },
    )
    entered: dict[str, object] = {f"f{i}": "x" for i in range(5)}
    assert page_problem(form, entered, 1) is None
    assert page_problem(form, {**entered, "f0": ""}, 1) is not None
    with pytest.raises(AnswerError):
        read_answer(form, {**entered, "f5": "x"})
    assert read_answer(form, {**entered, "f5": "x", "f6": "x"}) == {f"f{i}": "x" for i in range(7)}


def test_an_odd_select_submission_reads_as_nothing_picked():
    """A select whose submitted `values` is not a list reads as no pick, not a crash."""
    form = every_kind()
    data = {"components": [{"type": LABEL, "component": {"type": STRING_SELECT, "custom_id": "f9", "values": 5}}]}
    assert raw_answers(form, data) == {"region": None}
