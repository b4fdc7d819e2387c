"""Thought signatures as the Gemini 3 API issues and checks them, for the Gemini stand-in.

What the public documentation (https://ai.google.dev/gemini-api/docs/thought-signatures)
says, and what this module does:

* A Gemini 3 model attaches an opaque ``thoughtSignature`` to the first ``functionCall`` part
  of each model turn that calls functions (only the first of parallel calls carries one).
* The client must send every signature back, unchanged, on the part it came with.
* Validation is strict for function calls of the *current turn*: every model step since the
  last user message with standard content (text, not a function response). A step whose first
  function call comes back without its signature is refused with 400 INVALID_ARGUMENT
  ("Function call is missing a thought_signature in functionCall parts ..."). Earlier turns
  are not validated.
* Two documented placeholders, ``skip_thought_signature_validator`` and
  ``context_engineering_is_the_way_to_go``, stand in for a call the model did not make (history
  moved from another model); langchain-google-genai sends the first one for any call of the
  current turn that lost its signature. `SignatureLedger(allow_placeholders=False)` treats
  them as missing, so a test can prove that our own calls come back with their real
  signatures rather than the placeholder.
* A signature the service did not issue is refused ("Corrupted thought signature."); so is
  one sent back on a call of another function (a signature moved to the wrong call).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any

PLACEHOLDERS = frozenset({"skip_thought_signature_validator", "context_engineering_is_the_way_to_go"})
"""The dummy signatures the documentation allows for calls the model did not make."""

_MISSING = (
    "Function call is missing a thought_signature in functionCall parts. This is required for tools to work "
    "correctly, and missing thought_signature may lead to degraded model performance. Additional data, function "
    "call `default_api:{name}` , position {position}. Please refer to "
    "https://ai.google.dev/gemini-api/docs/thought-signatures for more details."
)
_CORRUPTED = "Corrupted thought signature."


class SignatureLedger:
    """The signatures one stand-in issued, and the check of a request's history against them.

    Args:
        allow_placeholders: accept the documented placeholder signatures, as the API does.
    """

    def __init__(self, *, allow_placeholders: bool = True) -> None:
        self.allow_placeholders = allow_placeholders
        self._issued: dict[str, str] = {}

    def sign(self, reply_parts: Sequence[dict[str, Any]], number: int) -> None:
        """Attach a fresh signature to the first function call in `reply_parts`, in place.

        Args:
            reply_parts: the model turn's parts (camelCase dicts).
            number: the response's sequence number (makes the signature unique).
        """
        first_call = next((p for p in reply_parts if "functionCall" in p), None)
        if first_call is None:
            return
        signature = first_call.get("thoughtSignature")
        if signature is None:
            signature = base64.b64encode(f"gemini-standin-thought-{number}".encode()).decode()
            first_call["thoughtSignature"] = signature
        self._issued[str(signature)] = str(first_call["functionCall"].get("name", ""))

    def problem(self, contents: Sequence[Mapping[str, Any]]) -> str | None:
        """The API's INVALID_ARGUMENT message for the signatures in `contents`, if any.

        Args:
            contents: the request's ``contents`` (already checked for shape).
        """
        start = _current_turn_start(contents)
        for index, content in enumerate(contents):
            if content.get("role") != "model":
                continue
            parts = [p for p in content.get("parts") or [] if isinstance(p, dict)]
            for part in parts:
                signature = part.get("thoughtSignature")
                if signature is None or signature in PLACEHOLDERS:
                    continue
                issued_for = self._issued.get(str(signature))
                called = part.get("functionCall", {}).get("name") if "functionCall" in part else None
                if issued_for is None or (called is not None and called != issued_for):
                    return _CORRUPTED
            first_call = next((p for p in parts if "functionCall" in p), None)
            if index <= start or first_call is None:
                continue
            signature = first_call.get("thoughtSignature")
            if signature is None or (signature in PLACEHOLDERS and not self.allow_placeholders):
                name = first_call["functionCall"].get("name", "")
                return _MISSING.format(name=name, position=index + 1)
        return None


def _current_turn_start(contents: Sequence[Mapping[str, Any]]) -> int:
    """Index of the last user content with standard content (no function response); -1 if none."""
    for index in range(len(contents) - 1, -1, -1):
        content = contents[index]
        if content.get("role", "user") != "user":
            continue
        parts = [p for p in content.get("parts") or [] if isinstance(p, dict)]
        if any("functionResponse" in p for p in parts):
            continue
        if any(p.get("text") or "inlineData" in p or "fileData" in p for p in parts):
            return index
    return -1
