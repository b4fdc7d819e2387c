"""Attacks on `countersign run --workers N`: what the supervisor must refuse before any worker starts."""

from __future__ import annotations

import signal

import pytest

from tests.e2e.cli.test_process import bot_env
from tests.e2e.cli.test_workers import worker_pids
from tests.e2e.discord.test_discord_shards import discord_env
from tests.support.barriers import wait_until
from tests.support.bot_process import BotProcess, free_port

pytestmark = pytest.mark.e2e


@pytest.mark.timeout(420)  # two workers import the whole stack side by side: slow on a busy machine
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
        await first.wait_healthy(port, timeout=180)
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


async def test_sigterm_while_the_supervisor_asks_discord_for_its_shards_stops_it_at_once(
    db_url, gemini, target, discord_api, tmp_path
):
    """SIGTERM while GET /gateway/bot is failing (discord.py retries a 500 for about 25 s): exit 0, no worker.

    A single `countersign run` cancels its start-up on a signal; the supervisor must too, not
    carry on into a start-up error (or into starting workers) long after it was told to stop.
    """
    discord_api.fail_next("GET", r"/gateway/bot", status=500, times=100)
    env = discord_env(gemini, target, discord_api, free_port(), db_url)
    bot = await BotProcess(env, tmp_path).start()
    try:
        await discord_api.wait_for_request("GET", r"/gateway/bot", timeout=60)
    finally:
        code = await bot.stop(signal.SIGTERM, timeout=60)
    err = bot.stderr.decode()
    assert code == 0, err
    assert "cannot reach Discord" not in err and "Traceback" not in err, err
    assert not worker_pids(bot), err
