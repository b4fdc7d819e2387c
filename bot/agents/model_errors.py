"""Classify a failed model call for the user: busy, unavailable, or rejected."""

from __future__ import annotations

import asyncio

import aiohttp
import httpx
from google.genai import errors as genai_errors
from langchain_core import exceptions as lc

from bot.errors import ModelError, ModelErrorKind


def to_model_error(exc: BaseException) -> ModelError:
    """Map an exception raised by the chat model to a `ModelError`.

    Retries already happened inside the client (google-genai's `HttpRetryOptions`), so this
    is the final outcome. LangChain's provider-neutral `ModelError` family is checked first,
    then google-genai's `APIError` codes, then transport failures, along the exception's cause
    chain (langchain-google-genai wraps some API errors, e.g. a 408 or 413, in a plain
    `ChatGoogleGenerativeAIError` raised from the original).

    Raises:
        The original exception when it is not a model failure (a bug should stay loud).
    """
    seen: BaseException | None = exc
    while seen is not None:
        found = _classify(seen, _one_line(exc))
        if found is not None:
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


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:300] if text else type(exc).__name__


def _bad_key(detail: str) -> bool:
    """Google answers an invalid key with 400 INVALID_ARGUMENT and reason API_KEY_INVALID."""
    return "API_KEY_INVALID" in detail or "API key not valid" in detail
