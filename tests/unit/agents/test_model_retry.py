"""with_retries: which failures are tried again, how long it waits, and when it says so."""

from __future__ import annotations

from typing import Any

import pytest
from google.genai import errors as genai_errors
from langchain_core import exceptions as lc

from bot.agents.model_retry import ModelWait, RetryPolicy, with_retries
from bot.base.errors import ModelError, ModelErrorKind

POLICY = RetryPolicy(attempts=4, initial_delay_s=1.0, max_delay_s=8.0, max_wait_s=60.0, announce_after_s=5.0)


def too_many(retry_delay: str | None = None) -> genai_errors.ClientError:
    details: list[dict[str, Any]] = []
    if retry_delay is not None:
        details.append({"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": retry_delay})
    return genai_errors.ClientError(429, {"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "details": details}})


class Script:
    """Fails with the given exceptions in order, then answers "ok"; records waits and announcements."""

    def __init__(self, *failures: BaseException) -> None:
        self.failures = list(failures)
        self.attempts = 0
        self.slept: list[float] = []
        self.announced: list[ModelWait] = []

    async def call(self) -> str:
        self.attempts += 1
        if self.failures:
            raise self.failures.pop(0)
        return "ok"

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)

    async def run(self, policy: RetryPolicy = POLICY) -> str:
        return await with_retries(self.call, policy, announce=self.announced.append, sleep=self.sleep)


async def test_a_429_waits_as_long_as_google_asks_and_says_so():
    """retryDelay 37s: one wait of exactly 37 s, announced as a rate limit, then the answer."""
    script = Script(too_many("37s"))
    assert await script.run() == "ok"
    assert script.slept == [37.0]
    assert script.announced == [ModelWait(kind=ModelErrorKind.BUSY, seconds=37.0, attempt=2)]


async def test_a_429_asking_for_more_than_the_budget_fails_at_once():
    """retryDelay beyond GEMINI_RETRY_MAX_WAIT: no wait at all, a busy error carrying Google's advice."""
    script = Script(too_many("120s"))
    with pytest.raises(ModelError) as info:
        await script.run()
    assert (info.value.kind, info.value.retry_after_s) == (ModelErrorKind.BUSY, 120.0)
    assert isinstance(info.value.__cause__, genai_errors.ClientError)
    assert (script.attempts, script.slept, script.announced) == (1, [], [])


async def test_honoured_advice_is_not_repeated_when_the_attempts_run_out():
    """Every 429 asked for 1 s and got it: the last 429 is raised as is (no "wait about 1 second")."""
    script = Script(*(too_many("1s") for _ in range(5)))
    with pytest.raises(genai_errors.ClientError):
        await script.run()
    assert script.slept == [1.0, 1.0, 1.0]


async def test_server_errors_back_off_and_short_waits_are_not_announced():
    """Two 503s then success: exponential waits with jitter (half to all of 1 s, 2 s), nothing announced."""
    script = Script(genai_errors.ServerError(503, {}), lc.ModelAPIError("503"))
    assert await script.run() == "ok"
    assert script.attempts == 3
    assert 0.5 <= script.slept[0] <= 1.0 and 1.0 <= script.slept[1] <= 2.0
    assert script.announced == []


async def test_timeouts_are_retried_until_the_attempts_run_out():
    """A timeout every time: GEMINI_MAX_ATTEMPTS attempts, then the last timeout is raised."""
    script = Script(*(TimeoutError() for _ in range(10)))
    with pytest.raises(TimeoutError):
        await script.run(RetryPolicy(attempts=3, initial_delay_s=0.01, max_delay_s=0.01))
    assert script.attempts == 3 and len(script.slept) == 2


async def test_the_wait_budget_bounds_the_sum_of_waits():
    """Waits that add up beyond max_wait_s stop the retries before the wait that would cross it."""
    script = Script(too_many("4s"), too_many("4s"), too_many("4s"))
    with pytest.raises(ModelError):
        await script.run(RetryPolicy(attempts=10, max_wait_s=10.0))
    assert script.slept == [4.0, 4.0]
    backoff = Script(*(TimeoutError() for _ in range(10)))
    with pytest.raises(TimeoutError):
        await backoff.run(RetryPolicy(attempts=10, initial_delay_s=4.0, max_delay_s=4.0, max_wait_s=10.0))
    assert backoff.attempts < 10 and sum(backoff.slept) <= 10.0  # stopped by the budget, not the attempts


@pytest.mark.parametrize(
    "failure",
    [genai_errors.ClientError(400, {}), lc.ModelAuthenticationError("bad key"), ValueError("a bug")],
    ids=["refused", "auth", "bug"],
)
async def test_what_asking_again_cannot_fix_is_raised_at_once(failure):
    """A refusal, a bad key or a bug in our code: one attempt, no wait."""
    script = Script(failure)
    with pytest.raises(type(failure)):
        await script.run()
    assert (script.attempts, script.slept) == (1, [])
