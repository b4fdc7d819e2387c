"""to_model_error: a failed model call becomes busy, unavailable or rejected; bugs stay loud."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from google.genai import errors as genai_errors
from langchain_core import exceptions as lc
from langchain_google_genai.chat_models import (
    ChatGoogleGenerativeAIError,
    GoogleAPIError,
    GoogleContextOverflowError,
    GoogleInvalidRequestError,
    GoogleRateLimitError,
)

from bot.agents.model_errors import retry_advice, to_model_error
from bot.base.errors import ModelError, ModelErrorKind

BUSY = ModelErrorKind.BUSY
UNAVAILABLE = ModelErrorKind.UNAVAILABLE
REJECTED = ModelErrorKind.REJECTED
AUTH = ModelErrorKind.AUTH
NOT_FOUND = ModelErrorKind.NOT_FOUND

STATUS = {
    400: "INVALID_ARGUMENT",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    408: "DEADLINE_EXCEEDED",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def google_body(code: int, message: str = "something happened") -> dict[str, Any]:
    """An error body as the Gemini API sends it."""
    return {"error": {"code": code, "message": message, "status": STATUS[code]}}


def api_error(code: int) -> genai_errors.APIError:
    """google-genai's own error class for `code` (ClientError for 4xx, ServerError for 5xx)."""
    cls = genai_errors.ClientError if code < 500 else genai_errors.ServerError
    return cls(code, google_body(code))


def kind_of(exc: BaseException) -> ModelErrorKind:
    """The kind to_model_error gives `exc`."""
    error = to_model_error(exc)
    assert isinstance(error, ModelError)
    return error.kind


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (lc.ModelRateLimitError("rate limited"), BUSY),
        (lc.ModelAPIError("server failed"), UNAVAILABLE),
        (lc.ModelConnectionError("cannot connect"), UNAVAILABLE),
        (lc.ModelTimeoutError("timed out"), UNAVAILABLE),
        (lc.ModelError("generic"), REJECTED),
        (lc.ModelInvalidRequestError("bad request"), REJECTED),
        (lc.ModelAuthenticationError("bad key"), AUTH),
        (lc.ModelPermissionDeniedError("forbidden"), AUTH),
        (lc.ModelNotFoundError("no such model"), NOT_FOUND),
        (lc.ContextOverflowError("too long"), REJECTED),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, Exception) else str(value),
)
def test_langchain_model_errors(exc, expected):
    """LangChain's provider-neutral errors map by class: 429 busy, 5xx/transport unavailable."""
    assert kind_of(exc) is expected


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (429, BUSY),
        (500, UNAVAILABLE),
        (503, UNAVAILABLE),
        (504, UNAVAILABLE),
        (408, UNAVAILABLE),
        (400, REJECTED),
        (403, AUTH),
        (404, NOT_FOUND),
    ],
)
def test_google_api_errors_by_code(code, expected):
    """google-genai APIErrors map by HTTP code: 429 busy; 5xx and 408 unavailable; 4xx rejected."""
    assert kind_of(api_error(code)) is expected


def test_google_api_error_without_code_is_unavailable():
    """An APIError whose code is unknown counts as unavailable (not the user's fault)."""
    exc = genai_errors.APIError(None, {"error": {"message": "boom", "status": "UNKNOWN"}})
    assert exc.code is None
    assert kind_of(exc) is UNAVAILABLE


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (GoogleRateLimitError("Error calling model 'm' (RESOURCE_EXHAUSTED): 429"), BUSY),
        (GoogleAPIError(code=503, response_json=google_body(503)), UNAVAILABLE),
        (GoogleAPIError(code=500, response_json=google_body(500)), UNAVAILABLE),
        (GoogleInvalidRequestError("Error calling model 'm' (INVALID_ARGUMENT): 400"), REJECTED),
        (
            GoogleContextOverflowError(code=400, response_json=google_body(400, "token limit")),
            REJECTED,
        ),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, Exception) else str(value),
)
def test_langchain_google_genai_errors(exc, expected):
    """The errors ChatGoogleGenerativeAI really raises map to the right kind."""
    assert kind_of(exc) is expected


@pytest.mark.parametrize(
    "exc",
    [
        httpx.ConnectError("connection refused"),
        httpx.ReadTimeout("read timed out"),
        httpx.RemoteProtocolError("server disconnected"),
        TimeoutError("timed out"),
        ConnectionResetError(104, "reset by peer"),
        ConnectionRefusedError(111, "refused"),
    ],
    ids=lambda value: type(value).__name__,
)
def test_transport_failures_are_unavailable(exc):
    """Connection failures and timeouts below the client map to unavailable."""
    assert kind_of(exc) is UNAVAILABLE


@pytest.mark.parametrize(
    "exc",
    [
        ValueError("Client not initialized."),
        KeyError("candidates"),
        TypeError("bad"),
        RuntimeError("x"),
    ],
    ids=lambda value: type(value).__name__,
)
def test_other_exceptions_are_re_raised(exc):
    """Anything that is not a model failure is raised again, unchanged (a bug stays loud)."""
    with pytest.raises(type(exc)) as info:
        to_model_error(exc)
    assert info.value is exc


def test_detail_is_one_line_and_bounded():
    """The detail is the message on one line, at most 300 characters."""
    error = to_model_error(lc.ModelAPIError("first line\n\n  second   line " + "x" * 1000))
    assert "\n" not in error.detail
    assert error.detail.startswith("first line second line x")
    assert len(error.detail) == 300
    assert error.kind.value in str(error)


def test_detail_falls_back_to_the_class_name():
    """An exception without a message is described by its class name."""
    assert to_model_error(httpx.ConnectError("")).detail == "ConnectError"
    assert to_model_error(TimeoutError()).detail == "TimeoutError"


def test_client_error_wrapped_by_langchain_google_genai_is_classified():
    """A 408 that ChatGoogleGenerativeAI wraps is still a model failure (unavailable)."""
    cause = api_error(408)
    try:
        # Exactly what langchain_google_genai.chat_models._handle_client_error raises.
        raise ChatGoogleGenerativeAIError(f"Error calling model 'gemini' ({cause.status}): {cause}") from cause
    except ChatGoogleGenerativeAIError as wrapped:
        exc = wrapped
    assert kind_of(exc) is UNAVAILABLE


def test_an_invalid_api_key_is_told_apart():
    """Google answers a bad key with 400 API_KEY_INVALID: that is an AUTH failure, not a refused request."""
    from langchain_google_genai.chat_models import GoogleInvalidRequestError

    error = GoogleInvalidRequestError(
        "Error calling model 'm' (INVALID_ARGUMENT): 400 API key not valid. API_KEY_INVALID"
    )
    assert kind_of(error) is AUTH


def rate_limited(details: list[dict[str, Any]]) -> GoogleRateLimitError:
    """A 429 as ChatGoogleGenerativeAI raises it, from google-genai's ClientError with the body."""
    cause = genai_errors.ClientError(429, {"error": {**google_body(429)["error"], "details": details}})
    try:
        raise GoogleRateLimitError(f"Error calling model 'm' (RESOURCE_EXHAUSTED): {cause}") from cause
    except GoogleRateLimitError as wrapped:
        return wrapped


RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"


@pytest.mark.parametrize(
    ("details", "seconds"),
    [
        ([{"@type": RETRY_INFO, "retryDelay": "37s"}], 37.0),
        ([{"@type": RETRY_INFO, "retryDelay": "0.500s"}], 0.5),
        ([{"@type": RETRY_INFO, "retryDelay": {"seconds": 2, "nanos": 500_000_000}}], 2.5),
        ([{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []}], None),
        ([{"@type": RETRY_INFO, "retryDelay": "soon"}], None),
        ([], None),
    ],
    ids=["seconds", "fraction", "proto-form", "no-retry-info", "garbled", "no-details"],
)
def test_a_429_keeps_googles_retry_advice(details, seconds):
    """RetryInfo's retryDelay is read through langchain's wrapper; without usable advice there is none."""
    error = rate_limited(details)
    assert retry_advice(error) == seconds
    assert kind_of(error) is BUSY


def test_a_model_error_is_already_classified():
    """The retry loop's own ModelError (advice beyond the budget) passes through unchanged."""
    error = ModelError(BUSY, "429", retry_after_s=90.0)
    assert to_model_error(error) is error


def test_a_refused_tool_declaration_is_told_apart():
    """A 400 naming the function declarations is TOOLS_REFUSED (an administrator's fix), other 400s REJECTED."""
    detail = "* GenerateContentRequest.tools[0].function_declarations[1].name: Invalid function name."
    cause = genai_errors.ClientError(400, google_body(400, detail))
    wrapped = GoogleInvalidRequestError(f"Error calling model 'm' (INVALID_ARGUMENT): {cause}")
    wrapped.__cause__ = cause  # as `raise ... from cause` in langchain-google-genai
    assert kind_of(wrapped) is ModelErrorKind.TOOLS_REFUSED
    assert kind_of(api_error(400)) is REJECTED
