"""Any requested schema, sloppy or hostile, renders as a Slack modal Slack accepts, and its answers read back."""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, given, settings

from adapters.slack.forms import (
    INPUT_ACTION,
    field_block_id,
    field_errors,
    question_blocks,
    question_modal,
    raw_answers,
)
from bot.tools.mcp.elicitation.forms import AnswerError, Form, UnusableQuestionError, form_of, read_answer
from tests.unit.slack.test_forms import blocks_valid, strictly_valid
from tests.unit.tools.mcp.elicitation.schemas import TEXT, filled_schemas, requested_schemas

SETTINGS = settings(
    max_examples=int(os.environ.get("FORM_MAX_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
"""Examples per property; explore more with e.g. `FORM_MAX_EXAMPLES=1000`."""
ERROR_MAX = 500
"""The longest problem shown at a field: a hostile label must not make a wall of text."""


def left_alone(view: dict[str, Any]) -> dict[str, Any]:
    """The `state.values` Slack submits for `view` when every input keeps its initial value."""
    values: dict[str, Any] = {}
    for block in view["blocks"]:
        if block["type"] != "input":
            continue
        element = block["element"]
        kind = element["type"]
        if kind in ("radio_buttons", "static_select"):
            state = {"selected_option": element.get("initial_option")}
        elif kind == "multi_static_select":
            state = {"selected_options": element.get("initial_options", [])}
        elif kind == "datepicker":
            state = {"selected_date": element.get("initial_date")}
        elif kind == "datetimepicker":
            state = {"selected_date_time": element.get("initial_date_time")}
        else:
            state = {"value": element.get("initial_value")}
        values[block["block_id"]] = {INPUT_ACTION: {"type": kind, **state}}
    return values


def refusal(form: Form, raw: dict[str, object]) -> AnswerError | None:
    """`read_answer`'s refusal of `raw`, else None (any other exception fails the test)."""
    try:
        read_answer(form, raw)
    except AnswerError as error:
        return error
    return None


def number_within(element: dict[str, Any]) -> None:
    """A number input's initial value lies within its min / max."""
    if element["type"] != "number_input" or "initial_value" not in element:
        return
    value = float(element["initial_value"])
    assert float(element.get("min_value", value)) <= value <= float(element.get("max_value", value))


@SETTINGS
@given(requested_schemas(), TEXT)
def test_any_requested_schema_renders_a_modal_slack_accepts(schema, message):
    """Every schema read into a form gives a view within Block Kit's limits, and its untouched answer reads or is refused in words."""
    try:
        form = form_of(message or "m", schema)
    except UnusableQuestionError:
        return
    view = question_modal(form, question_id="q1", title=message)
    strictly_valid(view)
    assert len(view["private_metadata"]) <= 3000
    for block in view["blocks"]:
        if block["type"] == "input":
            number_within(block["element"])
            element = block["element"]
            if element["type"] == "multi_static_select" and "max_selected_items" in element:
                assert len(element.get("initial_options", [])) <= element["max_selected_items"]
    blocks_valid(question_blocks(form, question_id="q1", requester_id="U1", server="srv", tool="t"))
    error = refusal(form, raw_answers(form, left_alone(view)))
    if error is not None:
        assert len(error.message) <= ERROR_MAX
        errors = field_errors(form, error)
        assert all(len(words) <= ERROR_MAX for words in errors.values())
        assert set(errors) <= {field_block_id(spec.name) for spec in form.fields}


@SETTINGS
@given(filled_schemas())
def test_the_defaults_of_a_modal_read_back_as_the_same_content(filled):
    """A form whose defaults are valid content, submitted untouched, reads back as that content."""
    schema, content = filled
    form = form_of("m", schema)
    view = question_modal(form, question_id="q1", title="t")
    strictly_valid(view)
    assert read_answer(form, raw_answers(form, left_alone(view))) == content
