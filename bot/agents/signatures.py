"""Gemini 3 thought signatures on stored tool calls: where langchain-google-genai keeps them.

A Gemini 3 model signs the first function call of each answer (`thoughtSignature`) and, per
https://ai.google.dev/gemini-api/docs/thought-signatures, must get every signature of the
current turn back on the call it came with; a call of the current turn without one is refused
with 400. langchain-google-genai 4.4 (`_parse_response_candidate`, `_parse_chat_history`) keeps
them in `AIMessage.additional_kwargs[SIGNATURES_KEY]`, a map from tool call id to signature, and
sends a call's signature back only if its id is still in that map. For a call of the current
turn without one it sends a placeholder that skips validation, which keeps the request valid but
drops the model's reasoning: whoever changes a tool call id must move its signature along.
"""

from __future__ import annotations

from collections.abc import Mapping

from langchain_core.messages import AIMessage

SIGNATURES_KEY = "__gemini_function_call_thought_signatures__"
"""langchain-google-genai's `_FUNCTION_CALL_THOUGHT_SIGNATURES_MAP_KEY` (a private name, so a
unit test checks that both still agree)."""


def with_renamed_calls(message: AIMessage, renamed: Mapping[int, str]) -> AIMessage:
    """`message` with the tool calls at the given positions renamed, their signatures moved along.

    Args:
        message: an AI message with tool calls.
        renamed: new id by position in `message.tool_calls`.

    When two calls shared an id (and so one signature), the signature stays with the first of
    them: Gemini signs only the first function call of an answer.
    """
    if not renamed:
        return message
    calls = [
        {**call, "id": renamed[position]} if position in renamed else call
        for position, call in enumerate(message.tool_calls)
    ]
    update: dict[str, object] = {"tool_calls": calls}
    signatures = message.additional_kwargs.get(SIGNATURES_KEY)
    if isinstance(signatures, Mapping) and signatures:
        moved = dict(signatures)
        claimed: set[str] = set()
        for position, call in enumerate(message.tool_calls):
            old = str(call.get("id") or "")
            if old in claimed or old not in signatures:
                continue
            claimed.add(old)  # the first call with this id owns its signature
            new = renamed.get(position)
            if new is not None:
                moved[new] = moved.pop(old)
        update["additional_kwargs"] = {**message.additional_kwargs, SIGNATURES_KEY: moved}
    return message.model_copy(update=update)
