"""Trying a start again after an outage, instead of calling it a configuration error.

A start (`countersign run`, each of its workers, their supervisor) that fails because PostgreSQL,
Slack or Discord cannot be reached now is tried again with backoff, for `START_RETRY_S`
seconds; a refusal (a token refused, a wrong password, a missing database, a bad setting) ends
it at once, with status 2 (docs/decisions/0037-outages-probes-and-tokens-at-rest.md). Any other
failure ends it at once too, in one line (`StartFailedError`, status 70), never a traceback.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import TypeVar

from pydantic import SecretStr

from bot.base.errors import CountersignError, UnreachableError
from bot.settings import DatabaseSettings, Settings
from bot.storage.database import resolve_url
from bot.storage.outages import is_outage

log = logging.getLogger(__name__)

T = TypeVar("T")

FIRST_DELAY_S = 1.0
"""The wait before the second attempt; doubled for each further one, up to `MAX_DELAY_S`."""
MAX_DELAY_S = 30.0


def outage_reason(exc: BaseException) -> str | None:
    """What was unreachable, in one line, when `exc` is an outage; None for a refusal or a bug.

    An outage is an `UnreachableError` (the adapters and `check_reachable` raise it), or a
    connection to PostgreSQL lost later in the start (`bot.storage.outages.is_outage`). Any other
    `CountersignError` (`ConfigurationError`, `DatabaseUnavailableError`) is a refusal.
    """
    if isinstance(exc, UnreachableError):
        return str(exc)
    if isinstance(exc, CountersignError) or not is_outage(exc):
        return None
    detail = " ".join(str(exc).split())
    return f"the connection to PostgreSQL failed: {type(exc).__name__}" + (f": {detail}" if detail else "")


class GaveUpError(UnreachableError):
    """The start still met an outage after `START_RETRY_S` seconds (exit status 75, `countersign.exits`)."""


class StartFailedError(CountersignError):
    """The start failed for a reason that is neither a refusal nor an outage: most likely a bug.

    Said in one line (exit status 70, `countersign.exits.START_FAILED_EXIT`): the error's type
    and message; its traceback is logged at DEBUG (`LOG_LEVEL=DEBUG`). The error is its
    `__cause__`.

    Args:
        what: the attempt's name (`start_with_retries`'s `what`).
        error: what the attempt raised.
    """

    def __init__(self, what: str, error: BaseException) -> None:
        detail = " ".join(str(error).split())
        super().__init__(
            f"{what} failed: {type(error).__name__}" + (f": {detail}" if detail else "") + " (neither an outage "
            "nor a refusal; LOG_LEVEL=DEBUG logs where it was raised)"
        )


async def start_with_retries(
    start: Callable[[], Awaitable[T]],
    *,
    retry_for_s: float,
    what: str = "start-up",
    on_retry: Callable[[str, int], None] | None = None,
    first_delay_s: float = FIRST_DELAY_S,
) -> T:
    """`await start()` until it succeeds, trying again after each outage for `retry_for_s` seconds.

    `start` must leave nothing open when it raises (`BotServer` closes what it opened). Each
    failed attempt is logged once, with its reason and the wait; the waits are `first_delay_s`,
    doubled up to `MAX_DELAY_S`, each drawn between half and all of it so that workers do not
    come back in step.

    Args:
        start: one attempt; its result is returned.
        retry_for_s: seconds after the first failed attempt during which an outage is tried
            again; the last attempt is made at that time (`START_RETRY_S`; 0: one attempt).
        what: the attempt's name in the log lines.
        on_retry: told each failed attempt's reason and number (`/readyz` shows them).
        first_delay_s: the wait before the second attempt, in seconds.

    Raises:
        GaveUpError: the last attempt met an outage `retry_for_s` after the first failed.
        CountersignError: a refusal (`ConfigurationError`, `DatabaseUnavailableError`), at once,
            as `start` raised it.
        StartFailedError: any other error, at once (its traceback logged at DEBUG).
    """
    loop = asyncio.get_running_loop()
    first_failed: float | None = None
    attempt = 1
    while True:
        try:
            return await start()
        except Exception as exc:
            reason = outage_reason(exc)
            if reason is None:
                if isinstance(exc, CountersignError):
                    raise
                log.debug("%s failed", what, exc_info=exc)
                raise StartFailedError(what, exc) from exc
            now = loop.time()
            first_failed = now if first_failed is None else first_failed
            left = retry_for_s - (now - first_failed)
            if left <= 0:
                tried = "1 attempt" if attempt == 1 else f"{attempt} attempts over {now - first_failed:.0f} s"
                raise GaveUpError(f"{reason} (gave up after {tried}; START_RETRY_S={retry_for_s:g})") from None
            ceiling = min(MAX_DELAY_S, first_delay_s * 2.0 ** (attempt - 1))
            delay = min(left, ceiling * (0.5 + random.random() / 2))  # noqa: S311 - jitter, not cryptography
            log.warning("%s attempt %d failed: %s; trying again in %.1f s", what, attempt, reason, delay)
            if on_retry is not None:
                on_retry(reason, attempt)
            await asyncio.sleep(delay)
            attempt += 1


class KeptDatabase:
    """The database a process's start attempts share: the embedded PostgreSQL is started once, not per attempt.

    Without `DATABASE_URL`, the first attempt that gets the embedded server ready keeps it on
    `stack` (the process's own, closed when it exits), and every later attempt uses its URL:
    an attempt that failed because Slack or Discord could not be reached no longer stops the
    server and starts it again (seconds each, and its lines logged every attempt). What the
    attempt opened on the server (pools, the core) is still closed with the attempt. With
    `DATABASE_URL` nothing is kept: each attempt checks the server again
    (docs/decisions/0037-outages-probes-and-tokens-at-rest.md).

    Args:
        stack: closed when the process is done with the database (after what used it).
    """

    def __init__(self, stack: AsyncExitStack) -> None:
        self._stack = stack
        self._embedded: str | None = None

    async def url(self, database: DatabaseSettings) -> str:
        """`bot.storage.database.resolve_url`, but the embedded server once (raises as that does)."""
        if database.url is not None:
            async with AsyncExitStack() as nothing:  # an external server: nothing to keep
                return await resolve_url(database, nothing)
        if self._embedded is None:
            async with AsyncExitStack() as opening:  # an attempt that fails half-way closes what it opened
                url = await resolve_url(database, opening)
                self._stack.push_async_callback(opening.pop_all().aclose)
            self._embedded = url
        return self._embedded

    async def settings(self, settings: Settings) -> Settings:
        """`settings` as they are with `DATABASE_URL` set; else with the embedded server's URL as `DATABASE_URL`."""
        if settings.database.url is not None:
            return settings
        url = await self.url(settings.database)
        return settings.model_copy(update={"database": settings.database.model_copy(update={"url": SecretStr(url)})})
