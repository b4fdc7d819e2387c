"""Any requested schema, sloppy or hostile, renders as Discord modal pages Discord accepts, and its answers read back."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from hypothesis import HealthCheck, given, settings

from adapters.discord.forms import QuestionModal, form_pages, page_problem, question_embed, raw_answers
from bot.tools.mcp.elicitation.forms import AnswerError, Form, UnusableQuestionError, form_of, read_answer
from tests.unit.discord.test_forms import (
    EMBED_FIELD_MAX,
    EMBED_MAX,
    LABEL,
    STRING_SELECT,
    TEXT_INPUT,
    strictly_valid,
)
from tests.unit.tools.mcp.elicitation.schemas import TEXT, filled_schemas, requested_schemas

SETTINGS = settings(
    max_examples=int(os.environ.get("FORM_MAX_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
"""Examples per property; explore more with e.g. `FORM_MAX_EXAMPLES=1000`."""
ERROR_MAX = 500
"""The longest problem the ephemeral reply quotes: a hostile label must not make a wall of text."""
MIN_LENGTH_MAX = 4000


def pages(form: Form, title: str) -> list[dict[str, Any]]:
    """Every page of `form` as the payload discord.py sends (modals need a running event loop)."""

    async def build() -> list[dict[str, Any]]:
        return [
            QuestionModal(form, question_id="q1", page=page, title=title).to_dict()
            for page in range(1, len(form_pages(form)) + 1)
        ]

    return asyncio.run(build())


def refusal(form: Form, raw: dict[str, object]) -> AnswerError | None:
    """`read_answer`'s refusal of `raw`, else None (any other exception fails the test)."""
    try:
        read_answer(form, raw)
    except AnswerError as error:
        return error
    return None


def within_limits(payload: dict[str, Any]) -> None:
    """Discord's limits beyond `strictly_valid`: min_length bounds, and defaults a select can hold."""
    strictly_valid(payload)
    for component in payload["components"]:
        inner = component.get("component", {})
        if inner.get("type") == TEXT_INPUT:
            assert 0 <= inner.get("min_length", 0) <= MIN_LENGTH_MAX
        if inner.get("type") == STRING_SELECT:
            assert len([o for o in inner["options"] if o.get("default")]) <= inner["max_values"]


def untouched(payload: dict[str, Any]) -> dict[str, Any]:
    """The MODAL_SUBMIT `data` for a page left as shown: default text, and the options marked default."""
    components = []
    for component in payload["components"]:
        inner = component.get("component")
        if inner is None:
            continue
        if inner["type"] == TEXT_INPUT:
            data = {"type": TEXT_INPUT, "custom_id": inner["custom_id"], "value": inner.get("value", "")}
        else:
            values = [o["value"] for o in inner["options"] if o.get("default")]
            data = {"type": STRING_SELECT, "custom_id": inner["custom_id"], "values": values}
        components.append({"type": LABEL, "id": 1, "component": data})
    return {"custom_id": payload["custom_id"], "components": components}


def left_alone(form: Form, payloads: list[dict[str, Any]]) -> dict[str, object]:
    """The raw values of every page submitted untouched, merged as the adapter merges them."""
    entered: dict[str, object] = {}
    for payload in payloads:
        entered |= raw_answers(form, untouched(payload))
    return entered


@SETTINGS
@given(requested_schemas(), TEXT)
def test_any_requested_schema_renders_pages_discord_accepts(schema, message):
    """Every schema read into a form gives pages within Discord's limits, and its untouched answer reads or is refused in words."""
    try:
        form = form_of(message or "m", schema)
    except UnusableQuestionError:
        return
    payloads = pages(form, message)
    for payload in payloads:
        within_limits(payload)
    embed = question_embed(form, requester_id="1", server="srv", tool="t")
    assert len(embed) <= EMBED_MAX and all(len(field.value or "") <= EMBED_FIELD_MAX for field in embed.fields)
    entered = left_alone(form, payloads)
    problem = page_problem(form, entered, 1)
    assert problem is None or len(problem.message) <= ERROR_MAX
    error = refusal(form, entered)
    assert error is None or len(error.message) <= ERROR_MAX


@SETTINGS
@given(filled_schemas())
def test_the_defaults_of_the_pages_read_back_as_the_same_content(filled):
    """A form whose defaults are valid content, every page submitted untouched, reads back as that content."""
    schema, content = filled
    form = form_of("m", schema)
    payloads = pages(form, "t")
    for payload in payloads:
        within_limits(payload)
    assert read_answer(form, left_alone(form, payloads)) == content
