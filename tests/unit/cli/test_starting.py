"""Telling an outage at start from a refusal, and trying the start again only after an outage."""

from __future__ import annotations

import logging
import socket
import ssl

import asyncpg
import psycopg
import pytest

from bot.base.errors import (
    ConfigurationError,
    DatabaseUnavailableError,
    DatabaseUnreachableError,
    MigrationLockedError,
    UnreachableError,
)
from countersign.starting import GaveUpError, StartFailedError, outage_reason, start_with_retries


@pytest.mark.parametrize(
    "exc",
    [
        ConnectionRefusedError(111, "Connection refused"),
        ConnectionResetError(104, "Connection reset by peer"),
        TimeoutError(),
        socket.gaierror(-2, "Name or service not known"),
        asyncpg.CannotConnectNowError("the database system is starting up"),
        asyncpg.TooManyConnectionsError("sorry, too many clients already"),
        asyncpg.AdminShutdownError("terminating connection due to administrator command"),
        asyncpg.ConnectionDoesNotExistError("connection was closed in the middle of operation"),
        psycopg.OperationalError("server closed the connection unexpectedly"),
        asyncpg.ReadOnlySQLTransactionError("cannot execute INSERT in a read-only transaction"),
        psycopg.errors.ReadOnlySqlTransaction("cannot execute CREATE TABLE in a read-only transaction"),
        DatabaseUnreachableError("postgresql://app:***@db/app", "Connection refused"),
        MigrationLockedError("postgresql://app:***@db/app", "2030-01-02 03:04:05 UTC"),
        UnreachableError("cannot reach the Slack Web API at https://slack.com/api/: timed out"),
    ],
)
def test_an_outage_is_told_apart(exc: BaseException) -> None:
    """Refused, reset or timed-out connections, DNS, PostgreSQL starting, full or read-only, a migration lock held elsewhere, a platform's outage: tried again."""
    assert outage_reason(exc)


@pytest.mark.parametrize(
    "exc",
    [
        asyncpg.InvalidPasswordError('password authentication failed for user "app"'),
        asyncpg.InvalidCatalogNameError('database "app" does not exist'),
        asyncpg.InvalidAuthorizationSpecificationError('no pg_hba.conf entry for host "10.0.0.2"'),
        ssl.SSLCertVerificationError("certificate verify failed"),
        DatabaseUnavailableError("postgresql://app:***@db/app", 'database "app" does not exist'),
        ConfigurationError("Slack refused SLACK_BOT_TOKEN (invalid_auth)"),
        ValueError("invalid DSN"),
        RuntimeError("a bug"),
    ],
)
def test_a_refusal_or_a_bug_is_not_an_outage(exc: BaseException) -> None:
    """A wrong password or database, a certificate that does not verify, a bad setting, a bug: never tried again."""
    assert outage_reason(exc) is None


async def test_a_start_is_tried_again_after_each_outage_and_each_attempt_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Two outages, then success: three attempts, two log lines naming the reason, the result returned."""
    attempts: list[int] = []
    told: list[tuple[str, int]] = []

    async def start() -> str:
        attempts.append(len(attempts) + 1)
        if len(attempts) < 3:
            raise UnreachableError("cannot reach Discord at http://127.0.0.1:9/api/v10: refused")
        return "started"

    with caplog.at_level(logging.WARNING, logger="countersign.starting"):
        result = await start_with_retries(
            start, retry_for_s=60, first_delay_s=0.01, on_retry=lambda reason, n: told.append((reason, n))
        )
    assert result == "started" and attempts == [1, 2, 3]
    assert [n for _, n in told] == [1, 2]
    lines = [r.getMessage() for r in caplog.records if r.name == "countersign.starting"]
    assert len(lines) == 2
    assert lines[0].startswith("start-up attempt 1 failed: cannot reach Discord at http://127.0.0.1:9/api/v10")


async def test_a_refusal_ends_the_start_at_once() -> None:
    """A token refused on the first attempt is raised as it is, with no second attempt."""
    attempts = 0

    async def start() -> None:
        nonlocal attempts
        attempts += 1
        raise ConfigurationError("Slack refused SLACK_BOT_TOKEN (invalid_auth)")

    with pytest.raises(ConfigurationError, match="invalid_auth"):
        await start_with_retries(start, retry_for_s=60, first_delay_s=0.01)
    assert attempts == 1


async def test_an_outage_longer_than_the_bound_gives_up_with_the_reason() -> None:
    """START_RETRY_S=0: one attempt, then the outage is raised as given up, naming the reason and the setting."""

    async def start() -> None:
        raise ConnectionRefusedError(111, "Connection refused")

    with pytest.raises(GaveUpError) as caught:
        await start_with_retries(start, retry_for_s=0)
    message = str(caught.value)
    assert message.startswith(
        "the connection to PostgreSQL failed: ConnectionRefusedError: [Errno 111] Connection refused"
    )
    assert message.endswith("(gave up after 1 attempt; START_RETRY_S=0)")
    assert isinstance(caught.value, UnreachableError)


async def test_a_bug_ends_the_start_at_once_in_one_line_with_its_traceback_at_debug(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Neither an outage nor a refusal: one attempt, one line naming the error (status 70), the traceback only at DEBUG."""
    attempts = 0

    async def start() -> None:
        nonlocal attempts
        attempts += 1
        raise KeyError("workspace")

    with caplog.at_level(logging.DEBUG, logger="countersign.starting"), pytest.raises(StartFailedError) as caught:
        await start_with_retries(start, retry_for_s=60, first_delay_s=0.01)
    assert attempts == 1
    assert str(caught.value) == (
        "start-up failed: KeyError: 'workspace' (neither an outage nor a refusal; LOG_LEVEL=DEBUG logs where it was "
        "raised)"
    )
    assert isinstance(caught.value.__cause__, KeyError)
    [record] = [r for r in caplog.records if r.name == "countersign.starting" and r.exc_info]
    assert record.levelno == logging.DEBUG
