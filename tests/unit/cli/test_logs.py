"""`configure_logging`: libraries that log payloads stay out of DEBUG (docs/operations.md: tokens never appear)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from countersign.logs import configure_logging


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    names = ("discord", "discord.gateway", "discord.http", "slack_sdk")
    saved = (root.level, list(root.handlers), {n: logging.getLogger(n).level for n in names})
    yield
    root.setLevel(saved[0])
    root.handlers[:] = saved[1]
    for name, level in saved[2].items():
        logging.getLogger(name).setLevel(level)


def test_debug_keeps_discord_py_payloads_out(restore_logging):
    """LOG_LEVEL=DEBUG: our own lines at DEBUG; discord.py's gateway events and REST bodies (DEBUG) not, its INFO lines yes."""
    logging.getLogger().handlers[:] = []  # bare, as at the entry point (pytest adds its own per phase)
    configure_logging("DEBUG")
    assert logging.getLogger().level == logging.DEBUG
    for name in ("discord.gateway", "discord.http", "discord.webhook.async_"):
        assert not logging.getLogger(name).isEnabledFor(logging.DEBUG), name
        assert logging.getLogger(name).isEnabledFor(logging.INFO), name
    assert not logging.getLogger("slack_sdk").isEnabledFor(logging.INFO)


def test_a_higher_level_still_holds_for_discord_py(restore_logging):
    """LOG_LEVEL=WARNING keeps discord.py's INFO lines out too."""
    logging.getLogger().handlers[:] = []
    configure_logging("WARNING")
    assert not logging.getLogger("discord.gateway").isEnabledFor(logging.INFO)
    assert logging.getLogger("discord.gateway").isEnabledFor(logging.WARNING)


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_a_workers_lines_say_which_worker_wrote_them(restore_logging, capsys, log_format):
    logging.getLogger().handlers[:] = []  # pytest's own capture handler; basicConfig adds to none
    configure_logging("INFO", log_format, worker=1)
    logging.getLogger("countersign").info("Countersign is running")

    line = capsys.readouterr().err.strip()
    if log_format == "json":
        record = json.loads(line)
        assert (record["worker"], record["message"]) == (1, "Countersign is running")
    else:
        assert " worker 1 INFO countersign: Countersign is running" in line


def test_a_lone_processs_lines_name_no_worker(restore_logging, capsys):
    logging.getLogger().handlers[:] = []
    configure_logging("INFO", "json")
    logging.getLogger("countersign").info("Countersign is running")

    assert "worker" not in json.loads(capsys.readouterr().err.strip())
