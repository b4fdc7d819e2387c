"""Why an answer without text or tool call is no answer, from what langchain-google-genai reports."""

from __future__ import annotations

from typing import Any

import pytest
from google.genai import types as genai_types
from langchain_core.messages import AIMessage

from bot.agents.no_answer import ASK_AGAIN, gemini_says, no_answer_reason
from bot.base.errors import NoAnswerReason


def empty(**metadata: Any) -> AIMessage:
    return AIMessage(content=[], response_metadata={"model_provider": "google_genai", **metadata})


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (empty(prompt_feedback={"block_reason": genai_types.BlockedReason.SAFETY}), NoAnswerReason.BLOCKED),
        (empty(prompt_feedback={"block_reason": "PROHIBITED_CONTENT"}), NoAnswerReason.BLOCKED),
        (empty(prompt_feedback={"block_reason": 0}, finish_reason="STOP"), NoAnswerReason.EMPTY),
        (empty(finish_reason="MALFORMED_FUNCTION_CALL"), NoAnswerReason.MALFORMED_CALL),
        (empty(finish_reason="UNEXPECTED_TOOL_CALL"), NoAnswerReason.MALFORMED_CALL),
        (empty(finish_reason="SAFETY"), NoAnswerReason.SAFETY),
        (empty(finish_reason="PROHIBITED_CONTENT"), NoAnswerReason.SAFETY),
        (empty(finish_reason="RECITATION"), NoAnswerReason.RECITATION),
        (empty(finish_reason="MAX_TOKENS"), NoAnswerReason.MAX_TOKENS),
        (empty(finish_reason="STOP"), NoAnswerReason.EMPTY),
        (empty(finish_reason="LANGUAGE"), NoAnswerReason.OTHER),
        (AIMessage(""), NoAnswerReason.EMPTY),
        (AIMessage("   \n"), NoAnswerReason.EMPTY),
        (
            AIMessage("", invalid_tool_calls=[{"name": "f", "args": "{", "id": "1", "error": "bad", "type": "x"}]),
            NoAnswerReason.MALFORMED_CALL,
        ),
    ],
)
def test_each_shape_of_no_answer_gets_its_reason(message, reason):
    """Blocked prompt, each finish reason, an empty part and an unparsable call map to their reason."""
    assert no_answer_reason(message) is reason


def test_text_or_a_tool_call_is_an_answer():
    """A reply with text, or with only a tool call, is an answer whatever the finish reason."""
    assert no_answer_reason(AIMessage("hi", response_metadata={"finish_reason": "MAX_TOKENS"})) is None
    call = {"name": "f", "args": {}, "id": "c1", "type": "tool_call"}
    assert no_answer_reason(AIMessage("", tool_calls=[call])) is None


def test_only_slips_of_the_model_are_asked_again():
    """A malformed call or an empty reply may go away when asked again; filters and limits do not."""
    assert {NoAnswerReason.MALFORMED_CALL, NoAnswerReason.EMPTY} == ASK_AGAIN


def test_what_gemini_says_is_kept_for_the_log():
    """The log line names the block reason, the finish reason and Gemini's finish message."""
    blocked = empty(prompt_feedback={"block_reason": genai_types.BlockedReason.SAFETY})
    assert gemini_says(blocked) == "blockReason=SAFETY"
    malformed = empty(finish_reason="MALFORMED_FUNCTION_CALL", finish_message="Malformed function call: x(")
    assert gemini_says(malformed) == "finishReason=MALFORMED_FUNCTION_CALL; finishMessage='Malformed function call: x('"
    assert gemini_says(AIMessage("")) == "an empty answer"
