"""A server's question read into a form, and a person's answer read and checked against it."""

from __future__ import annotations

import math
from typing import Any

import mcp_types
import pytest

from bot.tools.mcp.elicitation.forms import (
    LABEL_IN_ERROR_CHARS,
    MAX_FIELDS,
    UNNAMED,
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
    option_text,
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


@pytest.mark.parametrize(
    ("spec", "keyword"),
    [
        ({"type": "string", "$ref": "https://evil.example/schema"}, "$ref"),
        ({"type": "string", "allOf": [{"pattern": "^(a+)+$"}]}, "pattern"),
        ({"type": "string", "anyOf": [{"$dynamicRef": "#x"}]}, "$dynamicRef"),
    ],
)
def test_a_schema_that_would_look_up_a_reference_or_run_a_regular_expression_is_refused(spec, keyword):
    """A reference (looked up when checking) or a pattern (minutes on a crafted answer) is outside MCP's subset: refused."""
    with pytest.raises(UnusableQuestionError) as refused:
        form_of("m", {"type": "object", "properties": {"a": spec}})
    assert repr(keyword) in refused.value.reason
    named = form_of("m", {"type": "object", "properties": {"pattern": {"type": "string", "default": "$ref"}}})
    assert [f.name for f in named.fields] == ["pattern"]


@pytest.mark.parametrize(
    "link",
    [
        "http://[::1",
        "https://a.example/x y",
        "https://a.example/\nx",
        "https://a.example/\x00",
        "https:///x",
        "https://:443/x",
        "https://evil.example/\u202egpj.elif",
    ],
)
def test_a_link_that_cannot_be_read_or_holds_spaces_is_refused(link):
    """A link urlsplit cannot read, or with spaces or control characters, is refused in words, never raised as ValueError."""
    request = mcp_types.ElicitRequest(params=mcp_types.ElicitRequestURLParams(message="m", url=link))
    with pytest.raises(UnusableQuestionError, match="not an http or https URL"):
        question_of(request)


def test_a_link_with_a_user_name_before_its_host_is_refused():
    """Credentials in a link (MCP forbids them) and "https://good.example@evil.example" are refused, naming the real host."""
    for link in ("https://user:secret@auth.example/x", "https://good.example@evil.example/login"):
        request = mcp_types.ElicitRequest(params=mcp_types.ElicitRequestURLParams(message="m", url=link))
        with pytest.raises(UnusableQuestionError, match="user name before its host") as refused:
            question_of(request)
        assert "secret" not in refused.value.reason
    assert refused.value.reason.endswith("'evil.example'")


def test_a_field_without_a_readable_name_or_title_is_labelled():
    """A property named "" or only spaces, without a title, still has a label a person can read."""
    form = form_of("m", {"type": "object", "properties": {"": {"type": "string"}, " ": {"type": "boolean"}}})
    assert [f.label for f in form.fields] == [UNNAMED, UNNAMED]


def test_a_refusal_quotes_a_huge_label_cut():
    """A 10,000-character label or option label makes a refusal of a few hundred characters, not 10,000."""
    huge = "L" * 10_000
    form = form_of(
        "m",
        {
            "type": "object",
            "properties": {
                "a": {"type": "string", "title": huge, "minLength": 3},
                "b": {"type": "string", "title": huge, "enum": [f"{i}{huge}" for i in range(20)]},
            },
            "required": ["a"],
        },
    )
    for raw in ({}, {"a": "x"}, {"a": "xyz", "b": "nope" * 1000}):
        with pytest.raises(AnswerError) as refused:
            read_answer(form, raw)
        assert len(refused.value.message) <= 2 * LABEL_IN_ERROR_CHARS + 10 * 32 + 100
        assert refused.value.message.startswith("L" * 50)


def test_options_are_read_by_value_then_label_then_loosely_and_commas_inside_an_option_are_kept():
    """An exact value wins over a label, an exact label over a loose match; an option holding commas is read whole."""
    form = form_of(
        "m",
        {
            "type": "object",
            "properties": {
                "one": {
                    "type": "string",
                    "oneOf": [
                        {"const": " a ", "title": "Spaced"},
                        {"const": "A", "title": "a"},
                        {"const": "x", "title": "Red, green"},
                    ],
                },
                "many": {
                    "type": "array",
                    "items": {"type": "string", "oneOf": [{"const": "x", "title": "Red, green"}, {"const": "b"}]},
                },
            },
        },
    )
    assert read_answer(form, {"one": " a "}) == {"one": " a "}
    assert read_answer(form, {"one": "a"}) == {"one": "A"}
    assert read_answer(form, {"one": "spaced"}) == {"one": " a "}
    assert read_answer(form, {"one": option_text(form.fields[0], form.fields[0].options[1])}) == {"one": "A"}
    assert read_answer(form, {"many": "red, green, b"}) == {"many": ["x", "b"]}
    assert read_answer(form, {"many": "b,Red, Green"}) == {"many": ["b", "x"]}
    with pytest.raises(AnswerError, match="'Red' is not one of the options"):
        read_answer(form, {"many": "Red"})
    spaced = form_of("m", {"type": "object", "properties": {"m": {"type": "array", "items": {"enum": ["a", " a "]}}}})
    assert read_answer(spaced, {"m": "a,  a "}) == {"m": ["a", " a "]}


def test_a_blank_option_picked_in_a_select_is_an_answer():
    """An option whose value is "" picked in a select (given as the Option) is sent; an Option of no field's options is refused."""
    form = form_of(
        "m",
        {
            "type": "object",
            "properties": {
                "one": {"type": "string", "enum": ["", "x"]},
                "many": {"type": "array", "items": {"type": "string", "enum": ["", " "]}},
            },
            "required": ["one"],
        },
    )
    blank, space = form.fields[1].options
    assert read_answer(form, {"one": form.fields[0].options[0], "many": [blank, space]}) == {
        "one": "",
        "many": ["", " "],
    }
    with pytest.raises(AnswerError, match="one is required"):
        read_answer(form, {"one": ""})
    with pytest.raises(AnswerError, match="choose one of the options"):
        read_answer(form, {"one": Option(value="y", label="y")})


def test_a_number_too_large_to_compare_is_refused_in_words():
    """A 400-digit integer is refused at its field; typed content that jsonschema cannot compare is refused, not raised."""
    form = form_of("m", {"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 0.1}}})
    with pytest.raises(AnswerError, match="n: this number is too large"):
        read_answer(form, {"n": "9" * 400})
    with pytest.raises(AnswerError, match="cannot be checked"):
        check_answer(form, Answer(action=Action.ACCEPT, content={"n": 10**400}))
    for odd in (math.nan, math.inf):
        with pytest.raises(AnswerError, match="ratio: enter a number"):
            check_answer(deploy_form(), Answer(action=Action.ACCEPT, content={"ratio": odd}))
