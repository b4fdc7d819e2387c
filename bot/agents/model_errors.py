"""Classify a failed model call for the user (busy, unavailable, rejected, ...); read Google's retry advice."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from typing import Any

import aiohttp
import httpx
from google.genai import errors as genai_errors
from langchain_core import exceptions as lc

from bot.base.errors import ModelError, ModelErrorKind


def to_model_error(exc: BaseException) -> ModelError:
    """Map an exception raised by the chat model to a `ModelError`.

    Used to decide whether to retry (`bot.agents.model_retry`) and, after the retries, for the
    final outcome. LangChain's provider-neutral `ModelError` family is checked first,
    then google-genai's `APIError` codes, then transport failures, along the exception's cause
    chain (langchain-google-genai wraps some API errors, e.g. a 408 or 413, in a plain
    `ChatGoogleGenerativeAIError` raised from the original).

    A 400 about the request's function declarations becomes `TOOLS_REFUSED` (a tool's name or
    schema, fixed by an administrator, not by the user). A `ModelError` (the retry loop's, when
    Google asked for a longer wait than it may spend) is returned as it is.

    Raises:
        The original exception when it is not a model failure (a bug should stay loud).
    """
    if isinstance(exc, ModelError):
        return exc
    seen: BaseException | None = exc
    while seen is not None:
        found = _classify(seen, one_line(exc))
        if found is not None:
            if found.kind is ModelErrorKind.REJECTED and _about_tools(found.detail):
                return ModelError(ModelErrorKind.TOOLS_REFUSED, found.detail)
            return found
        seen = seen.__cause__
    # Anything else is a bug in our code or the client; the service reports it as internal.
    raise exc


def _classify(exc: BaseException, detail: str) -> ModelError | None:
    if isinstance(exc, lc.ModelRateLimitError):
        return ModelError(ModelErrorKind.BUSY, detail)
    if isinstance(exc, (lc.ModelAPIError, lc.ModelConnectionError, lc.ModelTimeoutError)):
        return ModelError(ModelErrorKind.UNAVAILABLE, detail)
    if isinstance(exc, (lc.ModelAuthenticationError, lc.ModelPermissionDeniedError)) or _bad_key(detail):
        return ModelError(ModelErrorKind.AUTH, detail)
    if isinstance(exc, lc.ModelNotFoundError):
        return ModelError(ModelErrorKind.NOT_FOUND, detail)
    if isinstance(exc, lc.ModelError):
        return ModelError(ModelErrorKind.REJECTED, detail)
    if isinstance(exc, genai_errors.APIError):
        if exc.code == 429:
            return ModelError(ModelErrorKind.BUSY, detail)
        if exc.code is None or exc.code >= 500 or exc.code == 408:
            return ModelError(ModelErrorKind.UNAVAILABLE, detail)
        if exc.code in (401, 403) or _bad_key(detail):
            return ModelError(ModelErrorKind.AUTH, detail)
        if exc.code == 404:
            return ModelError(ModelErrorKind.NOT_FOUND, detail)
        return ModelError(ModelErrorKind.REJECTED, detail)
    if isinstance(exc, (httpx.TransportError, aiohttp.ClientError, asyncio.TimeoutError, ConnectionError)):
        return ModelError(ModelErrorKind.UNAVAILABLE, detail)
    return None


def retry_advice(exc: BaseException) -> float | None:
    """Seconds Google asks to wait before trying again, from the error's `google.rpc.RetryInfo`.

    The Gemini API sends it with a 429 (`error.details[].retryDelay`, a protobuf Duration in
    its JSON form, e.g. `"37s"` or `"0.5s"`); google-genai keeps the body in
    `APIError.details`, and langchain-google-genai raises its own error from that one, so the
    cause chain is searched. None when there is no advice.
    """
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, genai_errors.APIError):
            advice = _retry_delay(seen.details)
            if advice is not None:
                return advice
        seen = seen.__cause__
    return None


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")


def _retry_delay(body: Any) -> float | None:
    error = body.get("error", body) if isinstance(body, Mapping) else None
    details = error.get("details") if isinstance(error, Mapping) else None
    for detail in details if isinstance(details, list) else []:
        if not isinstance(detail, Mapping) or not str(detail.get("@type", "")).endswith("google.rpc.RetryInfo"):
            continue
        delay = detail.get("retryDelay")
        if isinstance(delay, str) and (match := _DURATION.match(delay)):
            return float(match.group(1))
        if isinstance(delay, Mapping):  # the proto's field form, {"seconds": 37, "nanos": 0}
            return float(delay.get("seconds") or 0) + float(delay.get("nanos") or 0) / 1e9
    return None


def _about_tools(detail: str) -> bool:
    """Whether a refusal names the function declarations (`GenerateContentRequest.tools[...]`)."""
    return "function_declarations" in detail or "GenerateContentRequest.tools" in detail


def one_line(exc: BaseException) -> str:
    """The exception's message on one line, at most 300 characters (its class name when empty)."""
    text = " ".join(str(exc).split())
    return text[:300] if text else type(exc).__name__


def _bad_key(detail: str) -> bool:
    """Google answers an invalid key with 400 INVALID_ARGUMENT and reason API_KEY_INVALID."""
    return "API_KEY_INVALID" in detail or "API key not valid" in detail
