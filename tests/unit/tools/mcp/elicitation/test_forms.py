"""A server's question read into a form, and a person's answer read and checked against it."""

from __future__ import annotations

from typing import Any

import mcp_types
import pytest

from bot.tools.mcp.elicitation.forms import (
    MAX_FIELDS,
    Action,
    Answer,
    AnswerError,
    FieldKind,
    Form,
    LinkRequest,
    Option,
    UnusableQuestionError,
    check_answer,
    form_of,
    question_of,
    read_answer,
)

DEPLOY: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reason": {"type": "string", "title": "Reason", "description": "Why now", "minLength": 3, "maxLength": 50},
        "count": {"type": "integer", "title": "Replicas", "minimum": 1, "maximum": 10, "default": 2},
        "ratio": {"type": "number", "maximum": 1.5},
        "notify": {"type": "boolean", "title": "Notify the team", "default": True},
        "region": {"type": "string", "enum": ["eu", "us"], "enumNames": ["Europe", "United States"]},
        "tier": {"type": "string", "oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}]},
        "zones": {
            "type": "array",
            "title": "Zones",
            "items": {"type": "string", "enum": ["a", "b", "c"]},
            "minItems": 1,
            "maxItems": 2,
        },
        "owner": {"type": "string", "format": "email"},
        "when": {"type": "string", "format": "date"},
    },
    "required": ["reason", "count", "region"],
}


def ask(schema: dict[str, Any], message: str = "Deploy?") -> mcp_types.ElicitRequest:
    return mcp_types.ElicitRequest(params=mcp_types.ElicitRequestFormParams(message=message, requested_schema=schema))


def deploy_form() -> Form:
    form = question_of(ask(DEPLOY))
    assert isinstance(form, Form)
    return form


def test_a_form_lists_each_field_with_its_kind_label_and_limits():
    """Every property becomes a field in schema order, with its kind, label, options and limits."""
    form = deploy_form()
    kinds = {f.name: f.kind for f in form.fields}
    assert [f.name for f in form.fields] == list(DEPLOY["properties"])
    assert kinds == {
        "reason": FieldKind.TEXT,
        "count": FieldKind.INTEGER,
        "ratio": FieldKind.NUMBER,
        "notify": FieldKind.BOOLEAN,
        "region": FieldKind.CHOICE,
        "tier": FieldKind.CHOICE,
        "zones": FieldKind.CHOICES,
        "owner": FieldKind.TEXT,
        "when": FieldKind.TEXT,
    }
    by_name = {f.name: f for f in form.fields}
    assert by_name["reason"].label == "Reason" and by_name["reason"].description == "Why now"
    assert (by_name["reason"].min_length, by_name["reason"].max_length, by_name["reason"].required) == (3, 50, True)
    assert (by_name["count"].minimum, by_name["count"].maximum, by_name["count"].default) == (1, 10, 2)
    assert by_name["ratio"].label == "ratio" and not by_name["ratio"].required
    assert by_name["region"].options == (Option(value="eu", label="Europe"), Option(value="us", label="United States"))
    assert by_name["tier"].options == (Option(value="s", label="Small"), Option(value="l", label="Large"))
    assert (by_name["zones"].min_items, by_name["zones"].max_items) == (1, 2)
    assert by_name["owner"].format == "email" and by_name["notify"].default is True
    assert form.message == "Deploy?"


def test_text_from_inputs_is_read_in_the_schemas_types():
    """Text boxes give strings: numbers, yes/no, option labels and comma lists become the schema's types."""
    content = read_answer(
        deploy_form(),
        {
            "reason": "hotfix",
            "count": " 3 ",
            "ratio": "0.5",
            "notify": "no",
            "region": "united states",
            "tier": "Large",
            "zones": "a, C",
            "owner": "ana@example.com",
            "when": "2026-12-08",
        },
    )
    assert content == {
        "reason": "hotfix",
        "count": 3,
        "ratio": 0.5,
        "notify": False,
        "region": "us",
        "tier": "l",
        "zones": ["a", "c"],
        "owner": "ana@example.com",
        "when": "2026-12-08",
    }


def test_empty_optional_fields_are_left_out_and_typed_inputs_pass():
    """A checkbox's bool and a multi-select's list are taken as they are; empty optional fields are not sent."""
    content = read_answer(
        deploy_form(), {"reason": "fix", "count": "1", "region": "eu", "notify": True, "zones": ["b"], "owner": ""}
    )
    assert content == {"reason": "fix", "count": 1, "region": "eu", "notify": True, "zones": ["b"]}


@pytest.mark.parametrize(
    ("raw", "field", "words"),
    [
        ({"count": "1", "region": "eu"}, "reason", "Reason is required."),
        ({"reason": "fix", "count": "1.5", "region": "eu"}, "count", "Replicas: enter a whole number."),
        ({"reason": "fix", "count": "11", "region": "eu"}, "count", "Replicas: must be at most 10."),
        ({"reason": "no", "count": "1", "region": "eu"}, "reason", "Reason: enter at least 3 characters."),
        (
            {"reason": "fix", "count": "1", "region": "asia"},
            "region",
            "'asia' is not one of the options (Europe, United States)",
        ),
        ({"reason": "fix", "count": "1", "region": "eu", "notify": "maybe"}, "notify", "answer yes or no"),
        ({"reason": "fix", "count": "1", "region": "eu", "zones": "a,b,c"}, "zones", "Zones: choose at most 2."),
        ({"reason": "fix", "count": "1", "region": "eu", "owner": "not-an-address"}, "owner", "not a valid email"),
        ({"reason": "fix", "count": "1", "region": "eu", "when": "tomorrow"}, "when", "not a valid date"),
        ({"reason": "fix", "count": "1", "region": "eu", "ratio": "nan"}, "ratio", "ratio: enter a number."),
    ],
)
def test_a_wrong_answer_is_refused_in_words_naming_its_field(raw, field, words):
    """Each kind of wrong value is refused with the field's label and what would fit."""
    with pytest.raises(AnswerError) as refused:
        read_answer(deploy_form(), raw)
    assert refused.value.field == field
    assert words in refused.value.message


def test_a_typed_answer_is_checked_and_only_an_accepted_form_carries_content():
    """`check_answer` validates an accepted form's content; decline and cancel carry none."""
    form = deploy_form()
    good = Answer(action=Action.ACCEPT, content={"reason": "fix", "count": 2, "region": "eu"})
    assert check_answer(form, good) == good
    assert check_answer(form, Answer(action=Action.DECLINE, content={"x": 1})) == Answer(action=Action.DECLINE)
    with pytest.raises(AnswerError, match="has no field 'x'"):
        check_answer(form, Answer(action=Action.ACCEPT, content={"x": 1}))
    with pytest.raises(AnswerError, match="needs its fields"):
        check_answer(form, Answer(action=Action.ACCEPT))
    assert good.as_result() == mcp_types.ElicitResult(
        action="accept", content={"reason": "fix", "count": 2, "region": "eu"}
    )
    assert Answer(action=Action.CANCEL).as_result().content is None


def test_a_url_request_is_a_link_and_only_http_links_are_taken():
    """URL mode becomes a link request; a link that is not http(s) cannot be shown."""

    def url(link: str) -> mcp_types.ElicitRequest:
        return mcp_types.ElicitRequest(params=mcp_types.ElicitRequestURLParams(message="Sign in", url=link))

    assert question_of(url("https://auth.example.com/x?t=1")) == LinkRequest(
        message="Sign in", url="https://auth.example.com/x?t=1"
    )
    accepted = check_answer(LinkRequest(message="m", url="https://e.x"), Answer(action=Action.ACCEPT, content={"a": 1}))
    assert accepted == Answer(action=Action.ACCEPT)
    with pytest.raises(UnusableQuestionError, match="not an http or https URL"):
        question_of(url("javascript:alert(1)"))


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        ({"type": "object", "properties": {"a": {"type": "object"}}}, "has the type 'object'"),
        ({"type": "object", "properties": {"a": {"type": "string", "format": "ipv4"}}}, "format 'ipv4'"),
        ({"type": "object", "properties": {"a": {"type": "string", "enum": [1, 2]}}}, "not text"),
        ({"type": "object", "properties": {"a": {"type": "array"}}}, "a list without options"),
        ({"type": "array"}, "not an object"),
        ({"type": "object", "properties": {"a": {"type": "string", "minLength": "x"}}}, "not valid JSON Schema"),
        (
            {"type": "object", "properties": {f"f{i}": {"type": "string"} for i in range(MAX_FIELDS + 1)}},
            f"over {MAX_FIELDS}",
        ),
    ],
)
def test_a_schema_outside_mcps_subset_is_refused_with_the_reason(schema, reason):
    """Nested objects, unknown formats, non-text options, too many fields: refused, never guessed at."""
    with pytest.raises(UnusableQuestionError) as refused:
        form_of("m", schema)
    assert reason in refused.value.reason
