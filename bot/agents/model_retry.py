"""Retrying a failed model call: bounded in attempts and in waiting time, honouring Google's advice.

Decision 0011. google-genai's `HttpRetryOptions` (read in google-genai 3.6, `_api_client.
retry_args`) waits with tenacity's exponential backoff, blind to the `retryDelay` Google sends
with a 429 (langchain-google-genai's `max_retries` documentation says so and advises
`max_retries=1` plus one's own loop); it does not retry a timeout of its aiohttp transport
(`_AIOHTTP_TRANSIENT_EXC` lacks `TimeoutError`); and it cannot tell the person waiting. So the
client makes one attempt per call and this loop does the retries, with one bound on attempts
(`GEMINI_MAX_ATTEMPTS`) and one on the time spent waiting between them
(`GEMINI_RETRY_MAX_WAIT`); each attempt is bounded by `GEMINI_TIMEOUT`.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from langgraph.config import get_stream_writer

from bot import metrics
from bot.agents.model_errors import one_line, retry_advice, to_model_error
from bot.base.errors import ModelError, ModelErrorKind
from bot.settings import GeminiSettings

log = logging.getLogger(__name__)

T = TypeVar("T")

RETRYABLE = frozenset({ModelErrorKind.BUSY, ModelErrorKind.UNAVAILABLE})
"""429 (busy) and 408, 5xx, timeouts and connection failures (unavailable); a refusal, a bad
key or an unknown model gives the same answer however often it is asked."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How a failed model call is retried.

    Attributes:
        attempts: attempts per call, the first included (`GEMINI_MAX_ATTEMPTS`).
        initial_delay_s: the first wait without advice, doubled per attempt
            (`GEMINI_RETRY_INITIAL_DELAY`), with jitter (half to all of it).
        max_delay_s: the longest single wait without advice.
        max_wait_s: the most time spent waiting between the attempts of one call
            (`GEMINI_RETRY_MAX_WAIT`). A wait that would go beyond it is not started: the call
            fails at once, so a 429 asking for more than that fails fast with its advice.
        announce_after_s: waits at least this long are announced (`ModelWait`), so the person
            waiting is told that the bot is retrying.
    """

    attempts: int = 4
    initial_delay_s: float = 1.0
    max_delay_s: float = 20.0
    max_wait_s: float = 60.0
    announce_after_s: float = 5.0

    @classmethod
    def from_settings(cls, settings: GeminiSettings) -> RetryPolicy:
        """The policy the Gemini settings describe."""
        return cls(
            attempts=settings.max_attempts,
            initial_delay_s=settings.retry_initial_delay_s,
            max_delay_s=settings.retry_max_delay_s,
            max_wait_s=settings.retry_max_wait_s,
            announce_after_s=settings.retry_announce_after_s,
        )

    def backoff_s(self, attempt: int) -> float:
        """The wait after failed attempt number `attempt` (1-based) when Google gave no advice."""
        base: float = min(self.max_delay_s, self.initial_delay_s * 2.0 ** (attempt - 1))
        return base * (0.5 + random.random() / 2)  # noqa: S311 - jitter, not cryptography


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelWait:
    """Written to the run's custom stream before a wait worth telling the person about.

    Attributes:
        kind: why the call failed (`BUSY`: rate limited; `UNAVAILABLE`: a server error or a timeout).
        seconds: how long the bot waits before the next attempt.
        attempt: the number of the attempt that follows (2 for the first retry).
    """

    kind: ModelErrorKind
    seconds: float
    attempt: int


def announce_in_stream(wait: ModelWait) -> None:
    """Write `wait` to the LangGraph run's custom stream; outside a run, do nothing.

    `TurnRunner` streams with `subgraphs=True`, so a subagent's waits reach it too.
    """
    try:
        writer = get_stream_writer()
    except (RuntimeError, KeyError):  # not inside a graph run (a direct call, a test)
        return
    writer(wait)


async def with_retries(
    call: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    announce: Callable[[ModelWait], None] = announce_in_stream,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> T:
    """Await `call()`, retrying busy and unavailable failures as `policy` allows.

    A 429 waits as long as its `google.rpc.RetryInfo` asks (`retry_advice`), other failures
    back off exponentially. Cancellation is never retried.

    Args:
        call: makes one attempt.
        policy: the bounds.
        announce: told of each wait of at least `policy.announce_after_s`.
        sleep: how to wait (tests may pass a fake).

    Raises:
        ModelError: `BUSY` with `retry_after_s`, at once, when a 429 asks for a longer wait
            than `policy.max_wait_s` leaves (the user is told how long Google asks to wait).
        The last attempt's exception, unchanged, when it is not retryable, when the attempts
        are used up, or when the next wait without advice would exceed `policy.max_wait_s`.
    """
    try:
        result = await _attempts(call, policy, announce=announce, sleep=sleep)
    except Exception:
        metrics.MODEL_CALLS.labels(outcome="failed").inc()
        raise
    metrics.MODEL_CALLS.labels(outcome="ok").inc()
    return result


async def _attempts(
    call: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    announce: Callable[[ModelWait], None],
    sleep: Callable[[float], Awaitable[None]],
) -> T:
    waited = 0.0
    attempt = 1
    while True:
        try:
            return await call()
        except Exception as exc:
            kind = _retryable_kind(exc)
            metrics.MODEL_ERRORS.labels(kind=_kind_label(exc)).inc()
            if kind is None or attempt >= policy.attempts:
                raise
            advised = retry_advice(exc) if kind is ModelErrorKind.BUSY else None
            delay = max(0.0, advised) if advised is not None else policy.backoff_s(attempt)
            if waited + delay > policy.max_wait_s:
                log.warning("model call failed (%s); a retry in %.1fs would exceed the wait budget", kind, delay)
                if advised is not None:
                    raise ModelError(kind, one_line(exc), retry_after_s=advised) from exc
                raise
            attempt += 1
            metrics.MODEL_RETRIES.labels(kind=kind.value).inc()
            log.info("model call failed (%s: %s); attempt %d in %.1fs", kind, _first_line(exc), attempt, delay)
            if delay >= policy.announce_after_s:
                announce(ModelWait(kind=kind, seconds=delay, attempt=attempt))
            await sleep(delay)
            waited += delay


def _kind_label(exc: Exception) -> str:
    """The error's `ModelErrorKind` value, or `other` for a failure that is not the model's."""
    try:
        return to_model_error(exc).kind.value
    except Exception:
        return "other"


def _retryable_kind(exc: Exception) -> ModelErrorKind | None:
    try:
        kind = to_model_error(exc).kind
    except Exception:  # not a model failure (to_model_error re-raises it): never retried
        return None
    return kind if kind in RETRYABLE else None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__
