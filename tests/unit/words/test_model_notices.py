"""How each adapter words a failed model call: the reason the model gave no answer, Google's wait."""

from __future__ import annotations

import pytest

from adapters.words import model as msg
from adapters.words.display import duration_words, model_failed_text
from bot.base.errors import ModelError, ModelErrorKind, NoAnswerError, NoAnswerReason
from bot.ports import ModelFailed


@pytest.mark.parametrize("reason", list(NoAnswerReason))
def test_every_reason_for_no_answer_has_its_own_clear_sentence(reason):
    """Slack and Discord say the model gave no answer and why; no two reasons share a sentence, none is empty."""
    text = model_failed_text(
        ModelFailed.of(NoAnswerError(reason, "finishReason=X")),
        by_kind=msg.MODEL_FAILED,
        no_answer=msg.MODEL_NO_ANSWER,
        busy_for=msg.MODEL_BUSY_FOR,
    )
    assert text.startswith("The model gave no answer")
    assert len(set(msg.MODEL_NO_ANSWER.values())) == len(NoAnswerReason)


def test_every_failure_kind_has_a_sentence_and_a_rate_limit_says_how_long():
    """All kinds but NO_ANSWER are worded; a 429 with Google's advice names the wait."""
    assert set(msg.MODEL_FAILED) == set(ModelErrorKind) - {ModelErrorKind.NO_ANSWER}
    busy = ModelFailed.of(ModelError(ModelErrorKind.BUSY, "429", retry_after_s=125.0))
    text = model_failed_text(busy, by_kind=msg.MODEL_FAILED, no_answer=msg.MODEL_NO_ANSWER, busy_for=msg.MODEL_BUSY_FOR)
    assert "about 3 minutes" in text
    plain = ModelFailed(kind=ModelErrorKind.BUSY)
    assert (
        model_failed_text(plain, by_kind=msg.MODEL_FAILED, no_answer=msg.MODEL_NO_ANSWER, busy_for=msg.MODEL_BUSY_FOR)
        == msg.MODEL_BUSY
    )


@pytest.mark.parametrize(
    ("seconds", "words"),
    [
        (0.2, "1 second"),
        (7.5, "8 seconds"),
        (89, "89 seconds"),
        (90, "2 minutes"),
        (3700, "62 minutes"),
        (7200, "2 hours"),
    ],
)
def test_durations_are_rounded_up_for_people(seconds, words):
    """Waits read as whole seconds, minutes from a minute and a half, hours from two hours."""
    assert duration_words(seconds) == words
