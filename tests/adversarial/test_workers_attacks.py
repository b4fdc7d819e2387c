"""Attacks on `countersign run --workers N`: what the supervisor must refuse before any worker starts."""

from __future__ import annotations

import pytest

from tests.e2e.test_process import bot_env
from tests.e2e.test_workers import worker_pids
from tests.support.barriers import wait_until
from tests.support.bot_process import BotProcess, free_port

pytestmark = pytest.mark.e2e


async def test_a_second_supervisor_on_a_served_port_is_refused(db_url, gemini, slack, target, tmp_path):
    """Two `countersign run --workers 2` on one PORT: the second exits 2 in one line, starting no worker.

    Workers bind with SO_REUSEPORT, so without a check the second supervisor's workers would join
    the first's and the kernel would split Slack's requests between two bots (another version, or
    another database, in a botched deploy).
    """
    port = free_port()
    env = bot_env(gemini, slack, target, port, DATABASE_URL=db_url, COUNTERSIGN_WORKERS="2")
    (tmp_path / "first").mkdir()
    (tmp_path / "second").mkdir()
    first = await BotProcess(env, tmp_path / "first").start()
    try:
        await first.wait_healthy(port)
        await wait_until(lambda: len(worker_pids(first)) == 2, "both workers started")
        second = await BotProcess(env, tmp_path / "second").start()
        try:
            # it either exits or starts workers of its own beside the first's
            await wait_until(
                lambda: second.proc is not None and (second.proc.returncode is not None or bool(worker_pids(second))),
                "the second supervisor exits or starts its workers",
            )
        finally:
            code = await second.stop()
        err = second.stderr.decode()
        assert code == 2, err
        assert err.strip().splitlines()[-1].startswith(f"countersign: cannot listen on 127.0.0.1:{port}"), err
        assert not worker_pids(second), err
        assert "Traceback" not in err
    finally:
        assert await first.stop() == 0, first.stderr.decode()
