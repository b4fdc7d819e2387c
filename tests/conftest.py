"""Shared fixtures: a real PostgreSQL server for the session, a fresh database per test."""

from __future__ import annotations

import os
import shutil
import tempfile
import traceback
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.settings import DatabaseSettings
from bot.storage.database import Database, open_database
from bot.tools.registry import ToolRegistry
from tests.support.postgres import TestServer
from tests.support.tools import ToolLog, make_test_registry

_OWN_BASETEMP = "_countersign_own_basetemp"


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto` (the default, pyproject.toml): one pytest-xdist worker per usable core, plus one.

    The tests spend much of their time waiting on child processes, stand-ins and PostgreSQL:
    on two cores, two workers kept them about 60 % busy (670 s for the suite), three took 550 s.
    `PYTEST_XDIST_AUTO_NUM_WORKERS` still decides when it is set (xdist's own hook reads it).
    """
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return cores + 1


def pytest_configure(config: pytest.Config) -> None:
    """Give each session its own temporary root outside /tmp/pytest-of-<user>.

    The embedded PostgreSQL runs as another user when tests run as root, so the directories
    above its data directory must stay traversable; every new pytest session on the machine
    resets /tmp/pytest-of-<user> to mode 0700, which would pull the ground from under a server
    still running for another session.
    """
    if config.option.basetemp is None:
        config.option.basetemp = tempfile.mkdtemp(prefix="countersign-tests-")
        setattr(config, _OWN_BASETEMP, config.option.basetemp)


def _utf8(text: str) -> str:
    """`text` with lone surrogates written as escapes (the hostile strategies make them)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    """Failure reports and captured output made UTF-8 safe.

    pytest-xdist sends each report to the controller through execnet, which refuses strings
    that are not UTF-8 encodable: a hypothesis failure whose example holds a lone surrogate
    ended the whole run with an INTERNALERROR instead of showing the falsifying example. So
    did a failure whose source pytest could not parse (`_report_without_source`).
    """
    outcome = yield
    try:
        report = outcome.get_result()
    except Exception as error:
        if not _ast_race(error):
            raise
        # CPython 3.11 keeps the AST constructor's recursion depth in state shared by every
        # thread, so pytest parsing a test's source for its traceback while another thread
        # parses too fails with "AST constructor recursion depth mismatch" (and the xdist
        # worker, and the run, with it). The failure is reported without its source lines.
        report = _report_without_source(item, call)
        outcome.force_result(report)
    if report.longrepr is not None and not isinstance(report.longrepr, tuple):
        report.longrepr = _utf8(str(report.longrepr))
    report.sections = [(_utf8(title), _utf8(body)) for title, body in report.sections]


def _ast_race(error: BaseException | None) -> bool:
    """Whether `error`, or one it was raised from or during, is CPython 3.11's AST depth mismatch.

    A hook wrapper around pytest's (hypothesis's) turns it into a warning, which the suite's
    warning filter turns into an error of its own.
    """
    while error is not None:
        if isinstance(error, SystemError) and "AST constructor recursion depth" in str(error):
            return True
        error = error.__cause__ or error.__context__
    return False


def _report_without_source(item: pytest.Item, call: pytest.CallInfo[None]) -> pytest.TestReport:
    """`call`'s report with a traceback of file, line and function only (no source is parsed)."""
    excinfo = call.excinfo
    assert excinfo is not None  # only a failure's traceback is formatted
    frames = traceback.extract_tb(excinfo.tb)
    lines = [f"{frame.filename}:{frame.lineno}: in {frame.name}" for frame in frames]
    lines += traceback.format_exception_only(excinfo.type, excinfo.value)
    return pytest.TestReport(
        nodeid=item.nodeid,
        location=item.location,
        keywords=dict.fromkeys(item.keywords, 1),
        outcome="failed",
        longrepr="\n".join(line.rstrip("\n") for line in lines),
        when=call.when,
        duration=call.duration,
        start=call.start,
        stop=call.stop,
        user_properties=item.user_properties,
    )


def pytest_unconfigure(config: pytest.Config) -> None:
    """Remove the session's temporary root (and the test databases' files) afterwards."""
    own = getattr(config, _OWN_BASETEMP, None)
    if own:
        shutil.rmtree(own, ignore_errors=True)


@pytest.fixture(scope="session")
async def pg_server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[TestServer]:
    """The embedded PostgreSQL (or TEST_DATABASE_URL's server) with a migrated template."""
    data_dir: Path = tmp_path_factory.mktemp("countersign-pg")
    server = await TestServer.start(data_dir)
    await server.prepare_template()
    yield server
    await server.stop()


@pytest.fixture
async def db_url(pg_server: TestServer) -> AsyncIterator[str]:
    """A fresh, migrated database for one test; dropped afterwards."""
    url = await pg_server.create_database()
    yield url
    await pg_server.drop_database(url)


@pytest.fixture
async def database(db_url: str) -> AsyncIterator[Database]:
    """The bot's pools and savers opened on the test's database."""
    settings = DatabaseSettings(url=db_url, pool_max_size=5)
    async with open_database(settings, run_migrations=False) as db:
        yield db


@pytest.fixture
def tool_log() -> ToolLog:
    """What the test tools (`tests.support.tools`) were called with, in order."""
    return ToolLog()


@pytest.fixture
def registry(tool_log: ToolLog) -> ToolRegistry:
    """The test tools, recording into `tool_log` (a test module may define its own `registry`)."""
    return make_test_registry(tool_log)
