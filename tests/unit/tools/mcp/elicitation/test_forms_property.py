"""Whatever a person (or a forged submission) gives for any requested schema, reading it either succeeds or is refused in words."""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.tools.mcp.elicitation.forms import (
    Action,
    Answer,
    AnswerError,
    Form,
    UnusableQuestionError,
    check_answer,
    form_of,
    read_answer,
)
from tests.adversarial.hostile import json_values
from tests.unit.tools.mcp.elicitation.schemas import requested_schemas

SETTINGS = settings(
    max_examples=int(os.environ.get("FORM_MAX_EXAMPLES", "200")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
"""Examples per property; explore more with e.g. `FORM_MAX_EXAMPLES=1000`."""
ERROR_MAX = 500
"""The longest refusal: a hostile label or value must not make a wall of text."""


def refusal(read: Any) -> AnswerError | None:
    """The `AnswerError` `read()` raises, else None (any other exception fails the test)."""
    try:
        read()
    except AnswerError as error:
        return error
    return None


@SETTINGS
@given(requested_schemas(), st.data())
def test_any_raw_answer_is_read_or_refused_in_a_few_words(schema, data):
    """Hostile raw values for any form give content that validates, or an AnswerError of bounded length."""
    try:
        form = form_of("m", schema)
    except UnusableQuestionError:
        return
    names = [spec.name for spec in form.fields]
    keys = st.sampled_from(names) if names else st.text(max_size=3)
    numbers = st.sampled_from(["9" * 400, "-" + "9" * 5000, "1e400", "-0", "NaN", "0x10", "1_000", "٣"])
    values = st.one_of(json_values(max_leaves=6, surrogates=False), numbers, st.integers(-(10**400), 10**400))
    raw = data.draw(st.dictionaries(keys, values, max_size=len(names) + 1))
    error = refusal(lambda: read_answer(form, raw))
    assert error is None or len(error.message) <= ERROR_MAX
    error = refusal(lambda: check_answer(form, Answer(action=Action.ACCEPT, content=raw)))
    assert error is None or len(error.message) <= ERROR_MAX


def test_a_form_read_is_a_form():
    """The strategies' schemas read into forms (a sanity check of the generator)."""
    assert isinstance(form_of("m", {"type": "object", "properties": {}}), Form)
