"""A local stand-in for the Gemini API ``generateContent`` endpoints.

The real ``langchain_google_genai.ChatGoogleGenerativeAI`` client (``google-genai`` SDK
underneath) is pointed at it with ``base_url=gemini.base_url``. What the client sends, as
read from the installed SDK (google-genai 3.6, langchain-google-genai 4.4) and observed:

* ``POST {base_url}/v1/models/{model}:generateContent`` for ``invoke``/``ainvoke`` and
  ``POST {base_url}/v1/models/{model}:streamGenerateContent?alt=sse`` for
  ``stream``/``astream``, and for ``invoke``/``ainvoke`` too when ``streaming=True`` is set
  or a streaming callback handler is attached (LangGraph ``stream_mode="messages"``,
  ``astream_events``). The SDK's default API version for the Gemini Developer API is
  ``v1``; ``GOOGLE_GENAI_API_VERSION=beta`` or ``api_version=`` switch it, so ``v1beta``
  and ``v1alpha`` are served too.
* The key travels in the ``x-goog-api-key`` header (``?key=`` is accepted as well, as the
  real API does).
* The body is camelCase JSON: ``contents``, ``systemInstruction``, ``tools`` (with
  ``functionDeclarations``), ``toolConfig``, ``safetySettings``, ``generationConfig``.

Replies follow Google's public response and error shapes (including the answers without
text: an empty part, a blocked prompt without candidates, a candidate without content that
only gives its finish reason), and requests are checked the way the real API checks them:
function call / function response pairing, empty parts, function declarations (at most 512), and Gemini 3
thought signatures (`tests.standins.gemini_signatures`), so a broken history fails here as it
would in production.

Example:
    ```python
    responder = ScriptedResponder([call("lookup", {"q": "x"}), text("done")])
    async with GeminiStandIn(responder, api_key="test-key") as gemini:
        llm = ChatGoogleGenerativeAI(
            model="gemini-3.8-flash", google_api_key="test-key", base_url=gemini.base_url
        )
        ...
        await llm.aclose()
    ```
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import itertools
import json
import math
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

from aiohttp import web

from tests.standins.gemini_signatures import SignatureLedger

__all__ = [
    "GeminiReply",
    "GeminiRequest",
    "GeminiStandIn",
    "Responder",
    "Rule",
    "ScriptExhaustedError",
    "ScriptedResponder",
    "blocked",
    "call",
    "calls",
    "declaration_problem",
    "empty",
    "error",
    "malformed_call",
    "parts",
    "schema_problem",
    "stopped",
    "text",
]

_PATH_RE = re.compile(r"^/(?P<version>v1(?:alpha|beta)?)/models/(?P<model>[^/:]+):(?P<method>[A-Za-z]+)$")
_SERVED_METHODS = frozenset({"generateContent", "streamGenerateContent"})
_DEFAULT_MODEL_RE = re.compile(r"^(gemini|gemma)-[A-Za-z0-9.\-]+$")

_STATUS_BY_CODE: dict[int, str] = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    408: "DEADLINE_EXCEEDED",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "NOT_IMPLEMENTED",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
_MESSAGE_BY_CODE: dict[int, str] = {
    400: "Request contains an invalid argument.",
    403: "The caller does not have permission",
    404: "Requested entity was not found.",
    429: (
        "You exceeded your current quota, please check your plan and billing details. "
        "For more information on this error, head to: "
        "https://ai.google.dev/gemini-api/docs/rate-limits."
    ),
    500: (
        "An internal error has occurred. Please retry or report in "
        "https://developers.generativeai.google/guide/troubleshooting"
    ),
    503: "The model is overloaded. Please try again later.",
    504: "Deadline expired before operation could complete.",
}

_API_KEY_INVALID = "API key not valid. Please pass a valid API key."
_UNREGISTERED_CALLER = (
    "Method doesn't allow unregistered callers (callers without established identity). "
    "Please use API Key or other form of API consumer identity to call this API."
)
_CALL_AFTER_USER = (
    "Please ensure that function call turn comes immediately after a user turn or after a function response turn."
)
_RESPONSE_AFTER_CALL = "Please ensure that function response turn comes immediately after a function call turn."
_RESPONSE_COUNT = (
    "Please ensure that the number of function response parts is equal to the number of "
    "function call parts of the function call turn."
)
_VALID_ROLES = ("user", "model")
_PART_DATA = frozenset(
    {
        "inlineData",
        "fileData",
        "functionCall",
        "functionResponse",
        "executableCode",
        "codeExecutionResult",
        "thoughtSignature",
    }
)
"""Part fields that make a part non-empty besides a non-empty ``text`` (a signature counts, as
langchain-google-genai assumes when it replays a signature-only part)."""
_FUNCTION_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:\-]{0,63}$")
_PARAMETER_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_SAFETY_RATINGS = (
    {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": True},
    {"category": "HARM_CATEGORY_HARASSMENT", "probability": "NEGLIGIBLE"},
)


# --------------------------------------------------------------------------------------
# Replies
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GeminiReply:
    """One scripted answer of the stand-in: model output parts or an API error.

    Build replies with `text`, `call`, `calls`, `parts` and `error` rather than directly.

    Attributes:
        parts: Gemini ``Part`` dicts of the model turn (``{"text": ...}``,
            ``{"functionCall": {...}}``); empty for an error.
        finish_reason: The candidate's ``finishReason``.
        status_code: HTTP status; 200 for model output.
        error_body: The full ``{"error": {...}}`` JSON when ``status_code`` is not 200.
        delay_seconds: Extra time to wait before answering with this reply.
        block_reason: When set, the prompt was blocked: the response has no candidates, only
            ``promptFeedback.blockReason`` (``"SAFETY"``, ``"PROHIBITED_CONTENT"``, ...).
        has_content: False for a candidate without ``content`` (how the API answers a
            ``MALFORMED_FUNCTION_CALL`` or a ``SAFETY`` stop).
        finish_message: The candidate's ``finishMessage``, if any.
    """

    parts: tuple[dict[str, Any], ...] = ()
    finish_reason: str = "STOP"
    status_code: int = 200
    error_body: dict[str, Any] | None = None
    delay_seconds: float = 0.0
    block_reason: str | None = None
    has_content: bool = True
    finish_message: str | None = None

    @property
    def is_error(self) -> bool:
        """Whether this reply is an HTTP error rather than model output."""
        return self.status_code != 200

    @property
    def function_call_names(self) -> list[str]:
        """Names of the function calls in this reply, in order."""
        return [p["functionCall"]["name"] for p in self.parts if "functionCall" in p]


def text(content: str, *, finish_reason: str = "STOP", delay_seconds: float = 0.0) -> GeminiReply:
    """A model turn with a single text part.

    Args:
        content: The text the model answers.
        finish_reason: The candidate's ``finishReason`` (e.g. ``"MAX_TOKENS"``).
        delay_seconds: Extra time to wait before answering.

    Returns:
        The reply.
    """
    return GeminiReply(parts=({"text": content},), finish_reason=finish_reason, delay_seconds=delay_seconds)


def call(
    name: str,
    args: Mapping[str, Any] | None = None,
    *,
    call_id: str | None = None,
    delay_seconds: float = 0.0,
) -> GeminiReply:
    """A model turn with one function call.

    The Gemini Developer API usually omits the call ``id``; langchain then makes up a
    tool call id. Pass ``call_id`` to send one anyway.

    Args:
        name: The declared function's name.
        args: The call's arguments (a JSON object).
        call_id: Optional ``functionCall.id``.
        delay_seconds: Extra time to wait before answering.

    Returns:
        The reply.
    """
    return GeminiReply(parts=(_function_call_part(name, args, call_id),), delay_seconds=delay_seconds)


def calls(items: Iterable[tuple[str, Mapping[str, Any] | None]], *, delay_seconds: float = 0.0) -> GeminiReply:
    """A model turn with several function calls made in parallel.

    Args:
        items: ``(name, args)`` pairs, in the order the model emits them.
        delay_seconds: Extra time to wait before answering.

    Returns:
        The reply.

    Raises:
        ValueError: If ``items`` is empty.
    """
    call_parts = tuple(_function_call_part(name, args, None) for name, args in items)
    if not call_parts:
        msg = "calls() needs at least one (name, args) pair"
        raise ValueError(msg)
    return GeminiReply(parts=call_parts, delay_seconds=delay_seconds)


def parts(
    raw_parts: Iterable[Mapping[str, Any]],
    *,
    finish_reason: str = "STOP",
    delay_seconds: float = 0.0,
) -> GeminiReply:
    """A model turn made of raw Gemini ``Part`` dicts, e.g. text followed by a call.

    Args:
        raw_parts: Part dicts as the API returns them (camelCase keys).
        finish_reason: The candidate's ``finishReason``.
        delay_seconds: Extra time to wait before answering.

    Returns:
        The reply.
    """
    return GeminiReply(
        parts=tuple(dict(p) for p in raw_parts),
        finish_reason=finish_reason,
        delay_seconds=delay_seconds,
    )


def empty(*, finish_reason: str = "STOP", delay_seconds: float = 0.0) -> GeminiReply:
    """A model turn whose only part is an empty text, as Gemini sometimes answers after tool results.

    Args:
        finish_reason: The candidate's ``finishReason`` (``"MAX_TOKENS"`` when thinking used it up).
        delay_seconds: Extra time to wait before answering.

    Returns:
        The reply.
    """
    return GeminiReply(parts=({"text": ""},), finish_reason=finish_reason, delay_seconds=delay_seconds)


def stopped(finish_reason: str, *, message: str | None = None, delay_seconds: float = 0.0) -> GeminiReply:
    """A candidate without content that only says why it stopped (``SAFETY``, ``RECITATION``, ...).

    A ``SAFETY`` stop carries safety ratings with a blocked category, as the API sends them.

    Args:
        finish_reason: The candidate's ``finishReason``.
        message: The candidate's ``finishMessage``.
        delay_seconds: Extra time to wait before answering.

    Returns:
        The reply.
    """
    return GeminiReply(
        finish_reason=finish_reason, has_content=False, finish_message=message, delay_seconds=delay_seconds
    )


def malformed_call(message: str = "Malformed function call: print(default_api.lookup(q=1))") -> GeminiReply:
    """The API's answer when the model wrote a function call it could not parse.

    Args:
        message: The ``finishMessage`` (Gemini quotes the code the model wrote).

    Returns:
        The reply: no content, ``finishReason`` ``MALFORMED_FUNCTION_CALL``.
    """
    return stopped("MALFORMED_FUNCTION_CALL", message=message)


def blocked(reason: str = "SAFETY", *, delay_seconds: float = 0.0) -> GeminiReply:
    """A blocked prompt: no candidates at all, only ``promptFeedback.blockReason``.

    Args:
        reason: The ``BlockedReason`` (``SAFETY``, ``OTHER``, ``BLOCKLIST``, ``PROHIBITED_CONTENT``, ...).
        delay_seconds: Extra time to wait before answering.

    Returns:
        The reply.
    """
    return GeminiReply(block_reason=reason, has_content=False, delay_seconds=delay_seconds)


def error(
    status_code: int,
    status: str | None = None,
    message: str | None = None,
    *,
    details: Sequence[Mapping[str, Any]] | None = None,
    delay_seconds: float = 0.0,
) -> GeminiReply:
    """An API error shaped like Google's: ``{"error": {"code", "message", "status"}}``.

    Args:
        status_code: The HTTP status (429, 500, 503, ...).
        status: The ``google.rpc`` status name; derived from the code when omitted
            (429 RESOURCE_EXHAUSTED, 500 INTERNAL, 503 UNAVAILABLE, 400
            INVALID_ARGUMENT, 404 NOT_FOUND, ...; UNAVAILABLE when unknown).
        message: The error message; a realistic default for the code when omitted.
        details: ``error.details`` entries; a 429 gets a ``RetryInfo`` by default.
        delay_seconds: Extra time to wait before answering.

    Returns:
        The reply.

    Raises:
        ValueError: If ``status_code`` is below 400.
    """
    if status_code < 400:
        msg = f"an error needs an HTTP status of 400 or more, not {status_code}"
        raise ValueError(msg)
    if details is None and status_code == 429:
        details = [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1s"}]
    return GeminiReply(
        status_code=status_code,
        error_body=_error_json(status_code, status, message, details),
        delay_seconds=delay_seconds,
    )


def _function_call_part(name: str, args: Mapping[str, Any] | None, call_id: str | None) -> dict[str, Any]:
    function_call: dict[str, Any] = {"name": name, "args": dict(args or {})}
    if call_id is not None:
        function_call["id"] = call_id
    return {"functionCall": function_call}


def _error_json(
    code: int,
    status: str | None = None,
    message: str | None = None,
    details: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "code": code,
        "message": message if message is not None else _MESSAGE_BY_CODE.get(code, "Error"),
        "status": status or _STATUS_BY_CODE.get(code, "UNAVAILABLE"),
    }
    if details:
        body["details"] = [dict(d) for d in details]
    return {"error": body}


# --------------------------------------------------------------------------------------
# Requests
# --------------------------------------------------------------------------------------


@dataclass
class GeminiRequest:
    """One request the stand-in received, as the responder and the test see it.

    Attributes:
        model: The model name from the URL, without the ``models/`` prefix.
        method: ``"generateContent"`` or ``"streamGenerateContent"``.
        api_version: The URL's version segment (``"v1"``, ``"v1beta"``, ...).
        headers: The HTTP request headers.
        query: The URL query parameters.
        body: The parsed JSON body (``{}`` if it was not JSON).
        status_code: The HTTP status the stand-in answered with; ``None`` until answered.
    """

    model: str
    method: str
    api_version: str
    headers: dict[str, str]
    query: dict[str, str]
    body: dict[str, Any]
    status_code: int | None = None

    @property
    def stream(self) -> bool:
        """Whether this is a ``streamGenerateContent`` request."""
        return self.method == "streamGenerateContent"

    @property
    def contents(self) -> list[dict[str, Any]]:
        """The raw ``contents`` list (the conversation turns)."""
        contents = self.body.get("contents")
        return contents if isinstance(contents, list) else []

    @property
    def system_instruction(self) -> str | None:
        """Text of ``systemInstruction`` (parts joined by newlines), or ``None``."""
        instruction = self.body.get("systemInstruction") or self.body.get("system_instruction")
        if not isinstance(instruction, dict):
            return None
        return "\n".join(_texts(instruction)) or None

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The raw ``tools`` list."""
        tools = self.body.get("tools")
        return tools if isinstance(tools, list) else []

    @property
    def function_declarations(self) -> list[dict[str, Any]]:
        """All ``functionDeclarations`` across ``tools``, raw."""
        return [
            declaration
            for tool in self.tools
            for declaration in (tool.get("functionDeclarations") or tool.get("function_declarations") or [])
        ]

    @property
    def declared_function_names(self) -> list[str]:
        """Names of the declared functions, in order."""
        return [d.get("name", "") for d in self.function_declarations]

    def function_declaration(self, name: str) -> dict[str, Any] | None:
        """The raw declaration of the function called ``name``.

        Args:
            name: The function name.

        Returns:
            The declaration dict, or ``None`` if no such function is declared.
        """
        return next((d for d in self.function_declarations if d.get("name") == name), None)

    @property
    def generation_config(self) -> dict[str, Any]:
        """The raw ``generationConfig`` (``{}`` when absent)."""
        config = self.body.get("generationConfig")
        return config if isinstance(config, dict) else {}

    @property
    def tool_config(self) -> dict[str, Any] | None:
        """The raw ``toolConfig``, or ``None``."""
        config = self.body.get("toolConfig")
        return config if isinstance(config, dict) else None

    @property
    def last_user_text(self) -> str | None:
        """Text of the most recent user turn that has text parts, or ``None``."""
        for content in reversed(self.contents):
            if _role(content) == "user" and (texts := _texts(content)):
                return "\n".join(texts)
        return None

    @property
    def function_responses(self) -> list[tuple[str, dict[str, Any]]]:
        """``(name, response)`` of each function response in the last turn, in order.

        Empty unless the last turn is a user turn carrying ``functionResponse`` parts.
        langchain wraps a non-dict tool output as ``{"output": ...}``.
        """
        if not self.contents or _role(self.contents[-1]) != "user":
            return []
        return [
            (p["functionResponse"].get("name", ""), p["functionResponse"].get("response", {}))
            for p in _parts(self.contents[-1])
            if "functionResponse" in p
        ]

    @property
    def function_calls(self) -> list[tuple[str, dict[str, Any]]]:
        """``(name, args)`` of every function call in the history's model turns, in order."""
        return [
            (p["functionCall"].get("name", ""), p["functionCall"].get("args", {}))
            for content in self.contents
            if _role(content) == "model"
            for p in _parts(content)
            if "functionCall" in p
        ]

    @property
    def signed_calls(self) -> list[tuple[str, str | None]]:
        """``(name, thoughtSignature or None)`` of every function call in the history, in order."""
        return [
            (p["functionCall"].get("name", ""), p.get("thoughtSignature"))
            for content in self.contents
            if _role(content) == "model"
            for p in _parts(content)
            if "functionCall" in p
        ]


Responder = Callable[[GeminiRequest], "GeminiReply | str | Awaitable[GeminiReply | str]"]
"""Answers a request: returns a reply (or plain text), sync or async."""

Rule = Callable[[GeminiRequest], "GeminiReply | str | Awaitable[GeminiReply | str | None] | None"]
"""A `ScriptedResponder` rule: a reply for requests it recognises, ``None`` otherwise."""


def _role(content: Mapping[str, Any]) -> str:
    return str(content.get("role") or "user")


def _parts(content: Mapping[str, Any]) -> list[dict[str, Any]]:
    raw = content.get("parts")
    return [p for p in raw if isinstance(p, dict)] if isinstance(raw, list) else []


def _texts(content: Mapping[str, Any]) -> list[str]:
    return [p["text"] for p in _parts(content) if isinstance(p.get("text"), str) and p["text"]]


def _count(content: Mapping[str, Any] | None, key: str) -> int:
    return 0 if content is None else sum(1 for p in _parts(content) if key in p)


# --------------------------------------------------------------------------------------
# Scripted responder
# --------------------------------------------------------------------------------------


class ScriptExhaustedError(AssertionError):
    """A `ScriptedResponder` was asked for more replies than it was given."""


class ScriptedResponder:
    """Answers from rules first, then from a list of replies in order.

    Each rule is called with the request; the first one that returns a reply (not
    ``None``) answers. Otherwise the next scripted reply is used, then ``default``.
    With nothing left it raises `ScriptExhaustedError`, which the stand-in answers with
    a 500 and re-raises when its ``async with`` block ends.

    Args:
        replies: Replies (or plain strings, meaning `text`) in the order to give them.
        rules: Rule functions (sync or async), tried in order before the script.
        default: Reply used once the script is exhausted, instead of failing.

    Example:
        ```python
        responder = ScriptedResponder([call("http_request", {"method": "GET", "url": u})])
        responder.add_rule(lambda r: text("done") if r.function_responses else None)
        ```
    """

    def __init__(
        self,
        replies: Iterable[GeminiReply | str] = (),
        *,
        rules: Iterable[Rule] = (),
        default: GeminiReply | str | None = None,
    ) -> None:
        self._replies: list[GeminiReply] = [_as_reply(r) for r in replies]
        self._rules: list[Rule] = list(rules)
        self._default = None if default is None else _as_reply(default)
        self.handled: list[GeminiRequest] = []

    @property
    def remaining(self) -> int:
        """How many scripted replies are left."""
        return len(self._replies)

    def add(self, *replies: GeminiReply | str) -> Self:
        """Append replies to the script.

        Args:
            *replies: Replies or plain strings (meaning `text`).

        Returns:
            This responder, for chaining.
        """
        self._replies.extend(_as_reply(r) for r in replies)
        return self

    def add_rule(self, rule: Rule) -> Rule:
        """Append a rule; usable as a decorator.

        Args:
            rule: A function of the request returning a reply, or ``None`` to pass.

        Returns:
            The rule, unchanged.
        """
        self._rules.append(rule)
        return rule

    async def __call__(self, request: GeminiRequest) -> GeminiReply:
        """Answer ``request`` from the rules, the script or the default.

        Args:
            request: The request to answer.

        Returns:
            The reply.

        Raises:
            ScriptExhaustedError: If no rule matched and no reply is left.
        """
        self.handled.append(request)
        for rule in self._rules:
            outcome = rule(request)
            if inspect.isawaitable(outcome):
                outcome = await outcome
            if outcome is not None:
                return _as_reply(outcome)
        if self._replies:
            return self._replies.pop(0)
        if self._default is not None:
            return self._default
        msg = (
            f"ScriptedResponder has no reply left for request #{len(self.handled)} "
            f"(last user text: {request.last_user_text!r}, "
            f"function responses: {request.function_responses!r})"
        )
        raise ScriptExhaustedError(msg)


def _as_reply(value: object) -> GeminiReply:
    if isinstance(value, GeminiReply):
        return value
    if isinstance(value, str):
        return text(value)
    msg = f"a responder must return a GeminiReply or str, not {type(value).__name__}"
    raise TypeError(msg)


# --------------------------------------------------------------------------------------
# Validation the real API does
# --------------------------------------------------------------------------------------


def _validate_contents(body: Mapping[str, Any]) -> str | None:
    """Returns the real API's INVALID_ARGUMENT message for a broken history, if any."""
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        return "* GenerateContentRequest.contents: contents is not specified\n"
    for index, content in enumerate(contents):
        if not isinstance(content, dict) or not _parts(content):
            return f"* GenerateContentRequest.contents[{index}].parts: contents.parts must not be empty.\n"
        if _role(content) not in _VALID_ROLES:
            return "Please use a valid role: user, model."
        for position, part in enumerate(_parts(content)):
            if not part.get("text") and not _PART_DATA.intersection(part):
                # proto3 JSON drops an empty string, so `{"text": ""}` sets no field of the oneof.
                return (
                    f"* GenerateContentRequest.contents[{index}].parts[{position}].data: "
                    "required oneof field 'data' must have one initialized field\n"
                )
    for index, content in enumerate(contents):
        previous = contents[index - 1] if index > 0 else None
        following = contents[index + 1] if index + 1 < len(contents) else None
        if _role(content) == "model" and (call_count := _count(content, "functionCall")):
            if previous is None or _role(previous) != "user":
                return _CALL_AFTER_USER
            answered = (
                _count(following, "functionResponse") if following is not None and _role(following) == "user" else 0
            )
            if answered != call_count:
                return _RESPONSE_COUNT
        if _count(content, "functionResponse") and (
            previous is None or _role(previous) != "model" or not _count(previous, "functionCall")
        ):
            return _RESPONSE_AFTER_CALL
    return None


def _validate_object_schemas(body: Mapping[str, Any]) -> str | None:
    """Reports an OBJECT schema without properties, as the API has been seen to reject."""
    tools = body.get("tools")
    for tool_index, tool in enumerate(tools if isinstance(tools, list) else []):
        declarations = tool.get("functionDeclarations") or []
        for decl_index, declaration in enumerate(declarations):
            parameters = declaration.get("parameters")
            if not isinstance(parameters, dict):
                continue
            where = f"GenerateContentRequest.tools[{tool_index}].function_declarations[{decl_index}].parameters"
            if problem := _empty_object_schema(parameters, where):
                return f"* {problem}.properties: should be non-empty for OBJECT type\n"
    return None


MAX_FUNCTION_DECLARATIONS = 512
"""Function declarations one request may carry: Google refuses the whole request with more."""


def _validate_declarations(body: Mapping[str, Any]) -> str | None:
    """Too many declarations (Google's message, as Gemini CLI users saw it), else the first `declaration_problem`."""
    tools = body.get("tools")
    for tool_index, tool in enumerate(tools if isinstance(tools, list) else []):
        declarations = _field(tool, "functionDeclarations", "function_declarations") if isinstance(tool, dict) else None
        if isinstance(declarations, list) and len(declarations) > MAX_FUNCTION_DECLARATIONS:
            return (
                f"* GenerateContentRequest.tools[{tool_index}].function_declarations: [FIELD_INVALID] At most "
                f"{MAX_FUNCTION_DECLARATIONS} function declarations can be specified.\n"
            )
        for decl_index, declaration in enumerate(declarations if isinstance(declarations, list) else []):
            where = f"GenerateContentRequest.tools[{tool_index}].function_declarations[{decl_index}]"
            if problem := declaration_problem(declaration, where):
                return problem
    return None


def declaration_problem(declaration: Mapping[str, Any], where: str = "function_declarations[0]") -> str | None:
    """The rules of ``FunctionDeclaration`` the API enforces, as its INVALID_ARGUMENT message.

    A name starts with a letter or an underscore and has at most 64 letters, digits,
    underscores, dots, colons and dashes (the API's own error text says 64; google-genai's
    docstring now says 128, and the lower figure is the one that is safe). ``parametersJsonSchema``
    "must describe an object where the properties are the parameters" and excludes ``parameters``;
    a parameter name starts with a letter or an underscore and has at most 64 letters, digits
    and underscores. Inside either schema field, what `schema_problem` refuses fails the request.

    Args:
        declaration: One entry of ``functionDeclarations``, as sent (camelCase or snake_case).
        where: The declaration's path, for the message.

    Returns:
        The message, or ``None`` when the declaration passes.
    """
    name = declaration.get("name")
    if not isinstance(name, str) or not _FUNCTION_NAME_RE.match(name):
        return (
            f"* {where}.name: Invalid function name. Must start with a letter or an underscore. Must be "
            "alphameric (a-z, A-Z, 0-9), underscores (_), dots (.), colons (:) or dashes (-), with a "
            "maximum length of 64.\n"
        )
    schema = _field(declaration, "parametersJsonSchema", "parameters_json_schema")
    schema_field = "parameters_json_schema"
    if schema is None:
        schema, schema_field = declaration.get("parameters"), "parameters"
    elif "parameters" in declaration:
        return f"* {where}: parameters and parameters_json_schema are mutually exclusive.\n"
    if schema is None:
        return None
    if not isinstance(schema, dict) or str(schema.get("type", "")).lower() != "object":
        return f"* {where}.parameters_json_schema: the schema must describe an object.\n"
    for parameter in schema.get("properties") or {}:
        if not _PARAMETER_NAME_RE.match(str(parameter)):
            return f"* {where}.parameters.properties[{parameter}]: Invalid parameter name.\n"
    return schema_problem(schema, f"{where}.{schema_field}")


_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "defs")
_SCHEMA_LISTS = ("anyOf", "any_of", "oneOf", "allOf", "prefixItems")
_SCHEMA_VALUES = (
    "items",
    "additionalProperties",
    "additional_properties",
    "additionalItems",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
)
_REF_SIBLINGS = frozenset({"$ref", "description", "default"})


def schema_problem(schema: object, where: str = "parameters_json_schema") -> str | None:
    """What Google refuses in a function declaration's schema, as its INVALID_ARGUMENT message.

    The refusals reported from the real API (docs/decisions/0047-gemini-schemas-for-mcp-tools.md):
    the ``$schema`` keyword anywhere; a ``$ref`` beside keywords other than ``description``
    and ``default``, or one that points outside the declaration's own schema (a URL, an anchor,
    a missing ``$defs`` entry); an ``enum`` value that is not a string; and an array without
    ``items``. A schema where none of them occurs passes (``None``).

    Args:
        schema: The declaration's ``parametersJsonSchema`` (or ``parameters``), as sent.
        where: The field's path, for the message.
    """
    stack: list[tuple[object, str]] = [(schema, where)]
    while stack:
        node, at = stack.pop()
        if not isinstance(node, dict):
            continue  # a boolean schema
        if "$schema" in node:
            return (
                f"Invalid JSON payload received. Unknown name \"$schema\" at '{_payload_path(at)}': Cannot find field."
            )
        if "$ref" in node:
            if set(node) - _REF_SIBLINGS:
                return (
                    f"* {at}: $ref was set alongside unsupported fields. If a schema node has $ref set, then only "
                    "description and default can be set alongside it.\n"
                )
            if not _resolves(schema, node["$ref"]):
                return f"* {at}: reference to undefined schema at {at}\n"
        enum = node.get("enum")
        for index, value in enumerate(enum if isinstance(enum, list) else []):
            if not isinstance(value, str):
                return f"Invalid value at '{_payload_path(at)}.enum[{index}]' (TYPE_STRING), {json.dumps(value)}"
        kind = node.get("type")
        if isinstance(kind, str) and kind.lower() == "array" and "items" not in node and "prefixItems" not in node:
            return f"* {at}.items: missing field.\n"
        for key in _SCHEMA_MAPS:
            children = node.get(key)
            if isinstance(children, dict):
                stack.extend((child, f"{at}.{key}[{name}]") for name, child in children.items())
        for key in _SCHEMA_LISTS:
            children = node.get(key)
            if isinstance(children, list):
                stack.extend((child, f"{at}.{key}[{index}]") for index, child in enumerate(children))
        for key in _SCHEMA_VALUES:
            child = node.get(key)
            if isinstance(child, list):  # draft-04 tuple items
                stack.extend((item, f"{at}.{key}[{index}]") for index, item in enumerate(child))
            elif child is not None:
                stack.append((child, f"{at}.{key}"))
    return None


def _payload_path(where: str) -> str:
    """A field path as the API's JSON parser names it (without the request message's name)."""
    return where.removeprefix("GenerateContentRequest.")


def _resolves(document: object, ref: object) -> bool:
    """Whether ``ref`` is a JSON pointer into ``document`` that points at something."""
    if not isinstance(ref, str) or not ref.startswith("#") or (len(ref) > 1 and not ref.startswith("#/")):
        return False
    node = document
    for token in ref[2:].split("/") if len(ref) > 1 else []:
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdecimal() and int(token) < len(node):
            node = node[int(token)]
        else:
            return False
    return True


def _field(message: Mapping[str, Any], camel: str, snake: str) -> Any:
    """A field under either of its JSON names: proto3's JSON parser accepts both, and google-genai
    sends some fields (``parameters_json_schema``) in snake case."""
    return message.get(camel, message.get(snake))


def _empty_object_schema(schema: Mapping[str, Any], where: str) -> str | None:
    if str(schema.get("type", "")).upper() == "OBJECT" and not schema.get("properties"):
        return where
    for name, sub in (schema.get("properties") or {}).items():
        if isinstance(sub, dict) and (found := _empty_object_schema(sub, f"{where}.properties[{name}]")):
            return found
    items = schema.get("items")
    if isinstance(items, dict) and (found := _empty_object_schema(items, f"{where}.items")):
        return found
    for index, sub in enumerate(schema.get("anyOf") or []):
        if isinstance(sub, dict) and (found := _empty_object_schema(sub, f"{where}.any_of[{index}]")):
            return found
    return None


# --------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------


class GeminiStandIn:
    """An aiohttp server on 127.0.0.1 that answers like the Gemini API.

    Each request is checked in the order the real service does it: API key, model, then
    (after any injected `fail_next` errors) the conversation history; only a valid request
    reaches the responder. Every request that hits a served path is recorded in
    ``requests``, including refused ones.

    Args:
        responder: Called with each valid `GeminiRequest` (sync or async); returns a
            `GeminiReply` or a plain string.
        api_key: The only key accepted (``x-goog-api-key`` header or ``?key=``).
        models: Model names served (without ``models/``). ``None`` serves any name
            that looks like ``gemini-*`` or ``gemma-*``; others get 404 NOT_FOUND.
        delay_seconds: Latency added to every request before it is handled.
        thought_signatures: Attach a ``thoughtSignature`` to the first function call
            part of each reply, as Gemini 3 models do, and check them when they come back
            the way the API does (`tests.standins.gemini_signatures`): a call of the
            current turn without its signature, or a signature not issued here, gets 400.
        allow_signature_placeholders: Accept the documented placeholder signatures
            (``skip_thought_signature_validator``), as the API does. False treats them as
            missing, to prove that the client sends back the real ones.
        allow_undeclared_calls: Let replies call functions the request did not
            declare; by default that is treated as a responder error.
        strict_schemas: Refuse function declarations holding an OBJECT schema without
            ``properties`` (400, "should be non-empty for OBJECT type"), as the API
            has been reported to do. Off by default.
        raise_responder_errors: Re-raise the first responder error when the
            ``async with`` block exits (responder errors are answered with a 500).
        host: Interface to bind.
        port: Port to bind; 0 picks a free one.
    """

    def __init__(
        self,
        responder: Responder,
        *,
        api_key: str = "test-key",
        models: Iterable[str] | None = None,
        delay_seconds: float = 0.0,
        thought_signatures: bool = True,
        allow_signature_placeholders: bool = True,
        allow_undeclared_calls: bool = False,
        strict_schemas: bool = False,
        raise_responder_errors: bool = True,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.responder = responder
        self.api_key = api_key
        self.models = None if models is None else frozenset(m.removeprefix("models/") for m in models)
        self.delay_seconds = delay_seconds
        self.thought_signatures = thought_signatures
        self.signatures = SignatureLedger(allow_placeholders=allow_signature_placeholders)
        self.allow_undeclared_calls = allow_undeclared_calls
        self.strict_schemas = strict_schemas
        self.raise_responder_errors = raise_responder_errors
        self.requests: list[GeminiRequest] = []
        self.errors: list[BaseException] = []
        self._host = host
        self._port = port
        self._bound_port: int | None = None
        self._runner: web.AppRunner | None = None
        self._failures: list[GeminiReply] = []
        self._arrived: asyncio.Event | None = None
        self._counter = itertools.count(1)

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self) -> Self:
        """Start serving.

        Returns:
            This stand-in.

        Raises:
            RuntimeError: If it is already running.
        """
        if self._runner is not None:
            msg = "GeminiStandIn is already running"
            raise RuntimeError(msg)
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0, handler_cancellation=True)
        await runner.setup()
        site = web.TCPSite(runner, self._host, self._port)
        await site.start()
        self._runner = runner
        self._arrived = asyncio.Event()
        self._bound_port = int(runner.addresses[0][1])
        return self

    async def close(self) -> None:
        """Stop serving and drop open connections."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
        if exc is None and self.raise_responder_errors and self.errors:
            raise self.errors[0]

    # -- public helpers ----------------------------------------------------------------

    @property
    def port(self) -> int:
        """The bound TCP port."""
        if self._bound_port is None:
            msg = "GeminiStandIn is not running"
            raise RuntimeError(msg)
        return self._bound_port

    @property
    def base_url(self) -> str:
        """The URL to give the client as ``base_url`` (no trailing slash)."""
        return f"http://{self._host}:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        """Environment for a subprocess: ``GEMINI_BASE_URL`` and ``GOOGLE_API_KEY``."""
        return {"GEMINI_BASE_URL": self.base_url, "GOOGLE_API_KEY": self.api_key}

    def fail_next(
        self,
        n: int = 1,
        status: int = 503,
        *,
        message: str | None = None,
        grpc_status: str | None = None,
    ) -> None:
        """Answer the next ``n`` authorised requests with an error, skipping the responder.

        Args:
            n: How many requests fail.
            status: The HTTP status (503, 429, 500, ...).
            message: The error message; a realistic default when omitted.
            grpc_status: The ``error.status`` name; derived from ``status`` when omitted.
        """
        self._failures.extend(error(status, grpc_status, message) for _ in range(n))

    def clear_failures(self) -> None:
        """Forget the errors `fail_next` queued that no request has met yet."""
        self._failures.clear()

    async def wait_for_requests(
        self,
        n: int,
        timeout: float = 30,
    ) -> list[GeminiRequest]:
        """Wait until at least ``n`` requests have arrived.

        Args:
            n: The number of requests to wait for.
            timeout: Seconds to wait at most.

        Returns:
            The recorded requests (all of them, possibly more than ``n``).

        Raises:
            TimeoutError: If fewer than ``n`` arrived in time.
            RuntimeError: If the stand-in is not running.
        """
        if self._arrived is None:
            msg = "GeminiStandIn is not running"
            raise RuntimeError(msg)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while len(self.requests) < n:
            self._arrived.clear()
            remaining = deadline - loop.time()
            if remaining <= 0:
                msg = f"got {len(self.requests)} Gemini request(s) in {timeout}s, wanted {n}"
                raise TimeoutError(msg)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), remaining)
        return list(self.requests)

    # -- request handling --------------------------------------------------------------

    async def _handle(self, http_request: web.Request) -> web.StreamResponse:
        match = _PATH_RE.match(http_request.path)
        if http_request.method != "POST" or match is None or match["method"] not in _SERVED_METHODS:
            return _json(404, _error_json(404, message=f"Unknown path {http_request.path}"))
        raw = await http_request.read()
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = None
        request = GeminiRequest(
            model=match["model"].removeprefix("models/"),
            method=match["method"],
            api_version=match["version"],
            headers=dict(http_request.headers),
            query=dict(http_request.query),
            body=body if isinstance(body, dict) else {},
        )
        self.requests.append(request)
        if self._arrived is not None:
            self._arrived.set()
        if self.delay_seconds:
            await asyncio.sleep(self.delay_seconds)
        reply = await self._answer(request, body)
        if reply.delay_seconds:
            await asyncio.sleep(reply.delay_seconds)
        request.status_code = reply.status_code
        if reply.is_error:
            return _json(reply.status_code, reply.error_body or _error_json(reply.status_code))
        return await self._send_success(http_request, request, reply)

    async def _answer(self, request: GeminiRequest, body: object) -> GeminiReply:
        key = request.headers.get("x-goog-api-key") or request.query.get("key")
        if not key:
            return error(403, "PERMISSION_DENIED", _UNREGISTERED_CALLER)
        if key != self.api_key:
            return error(400, "INVALID_ARGUMENT", _API_KEY_INVALID, details=_api_key_details())
        if not self._serves(request.model):
            return error(
                404,
                "NOT_FOUND",
                f"models/{request.model} is not found for API version {request.api_version}, "
                f"or is not supported for {request.method}. Call ListModels to see the list "
                "of available models and their supported methods.",
            )
        if self._failures:
            return self._failures.pop(0)
        if not isinstance(body, dict):
            return error(400, "INVALID_ARGUMENT", "Invalid JSON payload received.")
        problem = _validate_contents(body) or _validate_declarations(body)
        if problem is None and self.thought_signatures:
            problem = self.signatures.problem(request.contents)
        if problem is None and self.strict_schemas:
            problem = _validate_object_schemas(body)
        if problem is not None:
            return error(400, "INVALID_ARGUMENT", problem)
        try:
            outcome = self.responder(request)
            if inspect.isawaitable(outcome):
                outcome = await outcome
            reply = _as_reply(outcome)
            self._check_calls(request, reply)
        except Exception as exc:  # surfaced through self.errors and __aexit__
            self.errors.append(exc)
            return error(500, "INTERNAL", f"Gemini stand-in responder failed: {exc!r}")
        return reply

    def _serves(self, model: str) -> bool:
        if self.models is None:
            return bool(_DEFAULT_MODEL_RE.match(model))
        return model in self.models

    def _check_calls(self, request: GeminiRequest, reply: GeminiReply) -> None:
        if self.allow_undeclared_calls or reply.is_error:
            return
        declared = set(request.declared_function_names)
        undeclared = [name for name in reply.function_call_names if name not in declared]
        if undeclared:
            msg = (
                f"reply calls undeclared function(s) {undeclared}; the request declared "
                f"{sorted(declared)} (pass allow_undeclared_calls=True to allow this)"
            )
            raise AssertionError(msg)

    async def _send_success(
        self, http_request: web.Request, request: GeminiRequest, reply: GeminiReply
    ) -> web.StreamResponse:
        number = next(self._counter)
        reply_parts = [dict(p) for p in reply.parts]
        if self.thought_signatures:
            self.signatures.sign(reply_parts, number)
        prompt_tokens = _estimate_tokens(request.body)
        envelope = {
            "modelVersion": request.model,
            "responseId": f"standin-{number:06d}",
        }
        if not reply.has_content:
            return await _send_without_content(http_request, request, reply, prompt_tokens, envelope)
        if not request.stream:
            output_tokens = _estimate_tokens(reply_parts)
            return _json(
                200,
                {
                    "candidates": [
                        {
                            "content": {"role": "model", "parts": reply_parts},
                            "finishReason": reply.finish_reason,
                            "index": 0,
                        }
                    ],
                    "usageMetadata": _usage(prompt_tokens, output_tokens),
                    **envelope,
                },
            )
        chunks = _stream_chunks(reply_parts, reply.finish_reason, prompt_tokens, envelope)
        if request.query.get("alt") != "sse":
            return _json(200, chunks)
        response = web.StreamResponse(status=200, headers={"Content-Type": "text/event-stream; charset=utf-8"})
        await response.prepare(http_request)
        for chunk in chunks:
            await response.write(b"data: " + json.dumps(chunk).encode() + b"\r\n\r\n")
        await response.write_eof()
        return response


def _api_key_details() -> list[dict[str, Any]]:
    return [
        {
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": "API_KEY_INVALID",
            "domain": "googleapis.com",
            "metadata": {"service": "generativelanguage.googleapis.com"},
        },
        {
            "@type": "type.googleapis.com/google.rpc.LocalizedMessage",
            "locale": "en-US",
            "message": _API_KEY_INVALID,
        },
    ]


def _json(status: int, payload: object) -> web.Response:
    return web.Response(
        status=status,
        text=json.dumps(payload, indent=2),
        content_type="application/json",
        charset="utf-8",
    )


async def _send_without_content(
    http_request: web.Request,
    request: GeminiRequest,
    reply: GeminiReply,
    prompt_tokens: int,
    envelope: Mapping[str, Any],
) -> web.StreamResponse:
    """A blocked prompt (no candidates) or a candidate without content, whole or as one SSE chunk."""
    body: dict[str, Any]
    if reply.block_reason is not None:
        body = {
            "promptFeedback": {"blockReason": reply.block_reason, "safetyRatings": list(_SAFETY_RATINGS)},
            "usageMetadata": {"promptTokenCount": prompt_tokens, "totalTokenCount": prompt_tokens},
            **envelope,
        }
    else:
        candidate: dict[str, Any] = {"finishReason": reply.finish_reason, "index": 0}
        if reply.finish_message is not None:
            candidate["finishMessage"] = reply.finish_message
        if reply.finish_reason == "SAFETY":
            candidate["safetyRatings"] = list(_SAFETY_RATINGS)
        body = {"candidates": [candidate], "usageMetadata": _usage(prompt_tokens, 0), **envelope}
    if not request.stream:
        return _json(200, body)
    if request.query.get("alt") != "sse":
        return _json(200, [body])
    response = web.StreamResponse(status=200, headers={"Content-Type": "text/event-stream; charset=utf-8"})
    await response.prepare(http_request)
    await response.write(b"data: " + json.dumps(body).encode() + b"\r\n\r\n")
    await response.write_eof()
    return response


def _estimate_tokens(value: object) -> int:
    """Roughly four characters a token over the text and arguments in ``value``."""
    return max(1, math.ceil(len(json.dumps(value, ensure_ascii=False)) / 4))


def _usage(prompt_tokens: int, output_tokens: int) -> dict[str, int]:
    return {
        "promptTokenCount": prompt_tokens,
        "candidatesTokenCount": output_tokens,
        "totalTokenCount": prompt_tokens + output_tokens,
    }


def _stream_chunks(
    reply_parts: list[dict[str, Any]],
    finish_reason: str,
    prompt_tokens: int,
    envelope: Mapping[str, Any],
) -> list[dict[str, Any]]:
    """Splits a reply like the streaming API: text in pieces, calls whole, usage cumulative."""
    pieces: list[list[dict[str, Any]]] = []
    for part in reply_parts:
        if set(part) == {"text"} and part["text"]:
            words = re.findall(r"\s*\S+\s*", part["text"]) or [part["text"]]
            size = max(1, math.ceil(len(words) / 3))
            pieces.extend([{"text": "".join(words[i : i + size])}] for i in range(0, len(words), size))
        elif pieces and all("functionCall" in p for p in pieces[-1]) and "functionCall" in part:
            pieces[-1].append(part)
        else:
            pieces.append([part])
    if not pieces:
        pieces.append([{"text": ""}])
    chunks: list[dict[str, Any]] = []
    output_tokens = 0
    for index, chunk_parts in enumerate(pieces):
        output_tokens += _estimate_tokens(chunk_parts)
        candidate: dict[str, Any] = {
            "content": {"role": "model", "parts": chunk_parts},
            "index": 0,
        }
        if index == len(pieces) - 1:
            candidate["finishReason"] = finish_reason
        chunks.append(
            {
                "candidates": [candidate],
                "usageMetadata": _usage(prompt_tokens, output_tokens),
                **envelope,
            }
        )
    return chunks
