"""Properties of the Edit form's text: parsed or refused in words, and only storable arguments pass.

The end-to-end properties send a few forms through each platform; these run the same parsing
and validation on hundreds of texts in milliseconds.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from adapters.discord import messages as discord_msg
from adapters.slack import messages as slack_msg
from adapters.words.decisions import parse_edited_args
from bot.reviews.decisions import InvalidDecisionError, storable_problem, validate_tool_args
from bot.settings import ToolSettings
from bot.tools.calculator import make_calculator_tool
from bot.tools.http_request import make_http_request_tool
from tests.adversarial.hostile import edit_form_text, hostile_text, json_values, looks_like_a_trace

TOOLS = [make_http_request_tool(ToolSettings(http_allowed_hosts=("allowed.example",))), make_calculator_tool()]


@settings(max_examples=400, deadline=None)
@given(raw=edit_form_text())
@example(raw="[" * 100_000)
@example(raw="1" * 5000)
@example(raw='{"a": ' + "1" * 5000 + "}")
@example(raw="\ufeff{}")
@example(raw='{"a": NaN}')
@pytest.mark.parametrize("messages", [slack_msg, discord_msg], ids=["slack", "discord"])
def test_property_any_form_text_is_an_object_or_a_sentence(messages, raw):
    """Any typed text: a JSON object, or the adapter's sentence saying what is wrong; never an exception."""
    args, problem = parse_edited_args(raw, messages)
    assert (args is None) != (problem is None)
    if args is None:
        assert problem and not looks_like_a_trace(problem), problem
    else:
        assert isinstance(args, dict)


@st.composite
def near_valid_http_args(draw: st.DrawFn) -> dict[str, Any]:
    """`http_request` arguments that may pass: allowed and other hosts, odd headers and bodies."""
    args: dict[str, Any] = {
        "method": draw(st.sampled_from(["GET", "POST", "DELETE", "get", "TRACE", "POST\r\n"])),
        "url": draw(st.sampled_from(["http://allowed.example/", "https://allowed.example/x", "http://other.example/"]))
        + draw(hostile_text(max_atoms=3)),
    }
    if draw(st.booleans()):
        args["headers"] = draw(st.dictionaries(hostile_text(max_atoms=2), hostile_text(max_atoms=2), max_size=3))
    if draw(st.booleans()):
        args["body"] = draw(json_values())
    if draw(st.booleans()):
        args[draw(hostile_text(max_atoms=2))] = draw(json_values(max_leaves=2))
    return args


def _arguments(raw: str) -> dict[str, Any] | None:
    return parse_edited_args(raw, slack_msg)[0]


@settings(max_examples=200, deadline=None)
@given(args=st.one_of(near_valid_http_args(), edit_form_text().map(_arguments).filter(lambda a: a is not None)))
@example(args={"method": "POST", "url": "http://allowed.example/", "body": float("nan")})
@example(args={"method": "POST", "url": "http://allowed.example/", "body": {"n": 2**64}})
@example(args={"method": "POST", "url": "http://allowed.example/\x00"})
@example(args={"method": "POST", "url": "http://allowed.example/", "headers": {"X": "a\r\nInjected: 1"}})
@example(args={"expression": "\ud800"})
def test_property_only_valid_storable_arguments_pass_an_edit(args):
    """Edited arguments either pass the tool's schema and checks and can be stored exactly, or are refused in words."""
    for tool in TOOLS:
        try:
            checked = validate_tool_args(tool, args)
        except InvalidDecisionError as exc:
            refusal = exc.message
        else:
            refusal = None
        if refusal is not None:
            assert not looks_like_a_trace(refusal), refusal
            continue
        assert storable_problem(checked) is None
        text = json.dumps(checked, allow_nan=False, ensure_ascii=False)  # no NaN or Infinity
        text.encode("utf-8")  # no lone surrogate
        assert "\x00" not in text
        assert json.loads(text) == checked
