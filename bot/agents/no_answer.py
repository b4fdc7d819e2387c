"""An answer with neither text nor a tool call: why Gemini gave none, and whether to ask again.

Gemini answers so in several shapes, all of which langchain-google-genai turns into an
`AIMessage` with empty content and no tool calls (read from langchain-google-genai 4.4's
`_response_to_result`, and seen through the Gemini stand-in):

- a blocked prompt: no candidates; `response_metadata["prompt_feedback"]["block_reason"]`;
- a candidate without content whose `finish_reason` says why: `MALFORMED_FUNCTION_CALL`,
  `SAFETY`, `RECITATION`, ...;
- an empty text part (or no parts) with `finish_reason` `STOP` or `MAX_TOKENS`.

Such a message must not be stored: the client would send it back as an empty text part, which
the API refuses ("required oneof field 'data' must have one initialized field") on every later
call of the conversation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.messages import AIMessage

from bot.base.errors import NoAnswerReason

ASK_AGAIN = frozenset({NoAnswerReason.MALFORMED_CALL, NoAnswerReason.EMPTY})
"""Reasons a second request can fix: a slip of the model. Filters, recitation and the output
limit give the same result for the same request, so asking again only costs time."""

_BY_FINISH_REASON = {
    "SAFETY": NoAnswerReason.SAFETY,
    "PROHIBITED_CONTENT": NoAnswerReason.SAFETY,
    "BLOCKLIST": NoAnswerReason.SAFETY,
    "SPII": NoAnswerReason.SAFETY,
    "IMAGE_SAFETY": NoAnswerReason.SAFETY,
    "IMAGE_PROHIBITED_CONTENT": NoAnswerReason.SAFETY,
    "RECITATION": NoAnswerReason.RECITATION,
    "IMAGE_RECITATION": NoAnswerReason.RECITATION,
    "MAX_TOKENS": NoAnswerReason.MAX_TOKENS,
    "MALFORMED_FUNCTION_CALL": NoAnswerReason.MALFORMED_CALL,
    "UNEXPECTED_TOOL_CALL": NoAnswerReason.MALFORMED_CALL,
    "MALFORMED_RESPONSE": NoAnswerReason.MALFORMED_CALL,
    "STOP": NoAnswerReason.EMPTY,
    "FINISH_REASON_UNSPECIFIED": NoAnswerReason.EMPTY,
}
"""Gemini's `FinishReason` values (google-genai `types.FinishReason`); any other is OTHER."""

_NOT_BLOCKED = {"", "0", "BLOCKED_REASON_UNSPECIFIED", "None"}


def no_answer_reason(message: AIMessage) -> NoAnswerReason | None:
    """Why `message` is no answer, or None when it has text or a tool call.

    Args:
        message: the model's reply as langchain-google-genai returns it (any chat model's
            reply works: without Gemini's metadata an empty one is `EMPTY`).
    """
    if message.tool_calls or message.text.strip():
        return None
    if _block_reason(message.response_metadata):
        return NoAnswerReason.BLOCKED
    if message.invalid_tool_calls:
        return NoAnswerReason.MALFORMED_CALL
    finish = _name(message.response_metadata.get("finish_reason"))
    if not finish:
        return NoAnswerReason.EMPTY
    return _BY_FINISH_REASON.get(finish, NoAnswerReason.OTHER)


def gemini_says(message: AIMessage) -> str:
    """What Gemini said about an answer without text, for the log: block and finish reasons, finish message."""
    metadata = message.response_metadata
    said = []
    if block := _block_reason(metadata):
        said.append(f"blockReason={block}")
    if finish := _name(metadata.get("finish_reason")):
        said.append(f"finishReason={finish}")
    if finish_message := metadata.get("finish_message"):
        said.append(f"finishMessage={finish_message!r}")
    if message.invalid_tool_calls:
        said.append(f"invalid tool calls: {', '.join(str(c.get('name')) for c in message.invalid_tool_calls)}")
    return "; ".join(said) or "an empty answer"


def _block_reason(metadata: Mapping[str, Any]) -> str:
    feedback = metadata.get("prompt_feedback")
    if not isinstance(feedback, Mapping):
        return ""
    reason = _name(feedback.get("block_reason"))
    return "" if reason in _NOT_BLOCKED else reason


def _name(value: object) -> str:
    """An enum member's value (google-genai's enums are `str` enums) or the value as text."""
    if value is None:
        return ""
    return str(getattr(value, "value", value))
