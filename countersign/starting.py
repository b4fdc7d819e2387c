"""Trying a start again after an outage, instead of calling it a configuration error.

A start (`countersign run`, each of its workers, their supervisor) that fails because PostgreSQL,
Slack or Discord cannot be reached now is tried again with backoff, for `START_RETRY_S`
seconds; a refusal (a token refused, a wrong password, a missing database, a bad setting) ends
it at once, with status 2 (docs/decisions/0037-outages-probes-and-tokens-at-rest.md).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

from bot.errors import CountersignError, UnreachableError
from bot.storage.database import is_outage

log = logging.getLogger(__name__)

T = TypeVar("T")

FIRST_DELAY_S = 1.0
"""The wait before the second attempt; doubled for each further one, up to `MAX_DELAY_S`."""
MAX_DELAY_S = 30.0


def outage_reason(exc: BaseException) -> str | None:
    """What was unreachable, in one line, when `exc` is an outage; None for a refusal or a bug.

    An outage is an `UnreachableError` (the adapters and `check_reachable` raise it), or a
    connection to PostgreSQL lost later in the start (`bot.storage.database.is_outage`). Any other
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
        Exception: a refusal or a bug, at once, as `start` raised it.
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
                raise
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
