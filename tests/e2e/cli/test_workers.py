"""`countersign run --workers N` as separate processes: one port, one database, restarts, SIGTERM.

The bot runs as a real supervisor with real worker processes against the Slack, Gemini and HTTP
stand-ins; which worker answered a request is read from the `X-Countersign-Worker` header.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import psutil
import pytest

from adapters.slack import blocks
from tests.e2e.cli.test_process import bot_env
from tests.e2e.conftest import ALICE, CHANNEL, SIGNING_SECRET, TEAM
from tests.e2e.slack.test_slack_flow import click, wait_answer, wait_card
from tests.standins.slack_events import SEND_ERRORS, SlackEventSender
from tests.support.barriers import wait_until, wait_until_async
from tests.support.bot_process import BotProcess, free_port
from tests.support.postgres import own_embedded, start_embedded_again, stop_embedded

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(480)]

START_S = 180.0
"""How long a worker process may take to start: it imports the whole bot, and a test beside a
second copy of the suite on two cores waits a minute and more for that."""

WORKER = "X-Countersign-Worker"
STARTED = re.compile(rb"worker (\d+) started \(pid (\d+)\)")


def worker_pids(bot: BotProcess) -> dict[int, list[int]]:
    """Each worker index with the pids it has had, in start order (from the supervisor's log)."""
    pids: dict[int, list[int]] = {}
    for index, pid in STARTED.findall(bot.stderr):
        pids.setdefault(int(index), []).append(int(pid))
    return pids


@asynccontextmanager
async def sender_on(port: int, worker: str) -> AsyncIterator[SlackEventSender]:
    """A sender whose one kept-alive connection is served by `worker` (new connections until one is).

    A worker the supervisor has started may not listen yet on a busy machine (every connection
    then reaches its sibling), and a connection made while a killed worker's socket leaves the
    port's SO_REUSEPORT group can be refused or reset, so this tries for up to a minute.
    """
    deadline = asyncio.get_running_loop().time() + 60
    while asyncio.get_running_loop().time() < deadline:
        sender = SlackEventSender(f"http://127.0.0.1:{port}/slack/events", SIGNING_SECRET, team_id=TEAM)
        await sender.__aenter__()
        try:
            probe = await sender.url_verification()
        except BaseException as exc:
            await sender.aclose()  # an unclosed session would fail a later test with a ResourceWarning
            if not isinstance(exc, SEND_ERRORS):
                raise
            await asyncio.sleep(0.1)  # a poll interval, not a wait for an event
            continue
        if probe.headers.get(WORKER.lower()) == worker:
            try:
                yield sender
            finally:
                await sender.aclose()
            return
        await sender.aclose()
    raise AssertionError(f"no connection reached worker {worker} within a minute")


async def metric(port: int, name: str) -> float:
    """The sum of `name`'s samples on any worker's `/metrics` (they all show every worker's)."""
    async with httpx.AsyncClient() as client:
        text = (await client.get(f"http://127.0.0.1:{port}/metrics")).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name + "{"))


async def test_two_workers_share_the_port_and_the_database(db_url, gemini, slack, target, tmp_path):
    """The mention reaches one worker, the click the other: one decision, one request, one answer, counted once."""
    port = free_port()
    env = bot_env(gemini, slack, target, port, DATABASE_URL=db_url, COUNTERSIGN_WORKERS="2")
    bot = await BotProcess(env, tmp_path).start()
    try:
        await bot.wait_healthy(port)
        await wait_until(lambda: len(worker_pids(bot)) == 2, "both workers started")
        async with sender_on(port, "0") as first:
            mention = await first.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
            assert mention.headers[WORKER.lower()] == "0"
        [card] = await wait_card(slack)
        async with sender_on(port, "1") as second:
            clicked = await click(second, slack, ALICE, blocks.ACTION_APPROVE, card)
            assert clicked.status == 200 and clicked.headers[WORKER.lower()] == "1"
            again = await click(second, slack, ALICE, blocks.ACTION_APPROVE, card)
            assert again.status == 200
        [answer] = await wait_answer(slack, mention.ts)
        assert "widget" in answer
        assert [r.json for r in target.requests] == [{"name": "widget"}]
        assert "Approved" in json.dumps(slack.message(card.channel, card.ts)["blocks"])

        async def counted() -> bool:
            requested = await metric(port, "countersign_approvals_requested_total")
            decided = await metric(port, "countersign_approvals_decided_total")
            return requested == 1 and decided == 1

        await wait_until_async(counted, "/metrics summing both workers' counts")
        pids = [pid for started in worker_pids(bot).values() for pid in started]
    finally:
        code = await bot.stop()
    assert code == 0, bot.stderr.decode()
    assert b"Traceback" not in bot.stderr
    assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE for pid in pids)


async def test_a_killed_worker_is_restarted_and_the_cards_still_work(gemini, slack, target, tmp_path):
    """kill -9 on a worker (embedded PostgreSQL, started once by the supervisor): a new one starts, the card is decided once."""
    port = free_port()
    env = bot_env(gemini, slack, target, port, COUNTERSIGN_DATA_DIR=str(tmp_path / "data"), COUNTERSIGN_WORKERS="2")
    bot = await BotProcess(env, tmp_path).start()
    try:
        await bot.wait_healthy(port, timeout=START_S)
        await wait_until(lambda: len(worker_pids(bot)) == 2, "both workers started")
        async with SlackEventSender(f"http://127.0.0.1:{port}/slack/events", SIGNING_SECRET, team_id=TEAM) as events:
            mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
        [card] = await wait_card(slack)
        [victim] = worker_pids(bot)[0]
        os.kill(victim, signal.SIGKILL)
        await wait_until(lambda: len(worker_pids(bot)[0]) == 2, "worker 0 restarted", timeout=START_S)
        assert b"worker 0 (pid %d) was killed by signal 9 (SIGKILL)" % victim in bot.stderr
        async with sender_on(port, "0") as restarted:
            await click(restarted, slack, ALICE, blocks.ACTION_APPROVE, card)
        [answer] = await wait_answer(slack, mention.ts)
        assert "widget" in answer
        assert [r.json for r in target.requests] == [{"name": "widget"}]
    finally:
        code = await bot.stop()
    assert code == 0, bot.stderr.decode()
    assert not (tmp_path / "data" / "pgdata" / "postmaster.pid").exists(), "the embedded server outlived the bot"


async def test_a_worker_that_cannot_start_stops_them_all_in_one_line(db_url, gemini, slack, target, tmp_path):
    """A Slack token Slack refuses: each worker would fail the same way; the supervisor exits 2, no restart loop."""
    port = free_port()
    env = bot_env(gemini, slack, target, port, DATABASE_URL=db_url, COUNTERSIGN_WORKERS="2")
    env["SLACK_BOT_TOKEN"] = "xoxb-refused"
    bot = await BotProcess(env, tmp_path).start()
    assert await bot.wait(timeout=120) == 2
    err = bot.stderr.decode()
    assert err.strip().splitlines()[-1].startswith("countersign: worker ")
    assert "could not start (exit status 2, see above); all workers stopped" in err
    assert "restart in" not in err and "Traceback" not in err


def running(bot: BotProcess) -> bool:
    """Whether the supervisor is still running (it exits once it has stopped every worker)."""
    return bot.proc is not None and bot.proc.returncode is None


def runs(bot: BotProcess, index: int) -> int:
    """How many times worker `index` has said it is running (once per start that succeeded)."""
    return bot.stderr.count(b"worker %d INFO countersign.server: Countersign is running" % index)


async def test_a_supervisor_started_while_postgresql_is_down_starts_its_workers_once_it_is_up(
    gemini, slack, target, tmp_path
):
    """PostgreSQL down when the supervisor starts: it says so per attempt, and starts both workers once it is up."""
    async with own_embedded(tmp_path / "own") as (embedded, url):
        await stop_embedded(embedded)
        port = free_port()
        env = bot_env(gemini, slack, target, port, DATABASE_URL=url, COUNTERSIGN_WORKERS="2")
        bot = await BotProcess(env, tmp_path).start()
        try:
            waiting = b"the supervisor's start attempt 1 failed: cannot reach PostgreSQL"
            await wait_until(
                lambda: waiting in bot.stderr or not running(bot), "the supervisor waiting", timeout=START_S
            )
            assert running(bot), bot.stderr.decode()
            await start_embedded_again(embedded)
            await wait_until(
                lambda: runs(bot, 0) == runs(bot, 1) == 1 or not running(bot), "both workers running", timeout=START_S
            )
            assert running(bot), bot.stderr.decode()
        finally:
            code = await bot.stop()
    assert code == 0, bot.stderr.decode()
    assert [len(pids) for pids in worker_pids(bot).values()] == [1, 1]


async def test_a_worker_restarted_while_postgresql_is_down_waits_for_it_and_stops_no_sibling(
    gemini, slack, target, tmp_path
):
    """kill -9 on a worker while PostgreSQL is down: the new one waits for it and then serves; its sibling runs on."""
    async with own_embedded(tmp_path / "own") as (embedded, url):
        port = free_port()
        env = bot_env(gemini, slack, target, port, DATABASE_URL=url, COUNTERSIGN_WORKERS="2")
        bot = await BotProcess(env, tmp_path).start()
        try:
            await wait_until(
                lambda: runs(bot, 0) == runs(bot, 1) == 1 or not running(bot), "both workers running", timeout=START_S
            )
            await stop_embedded(embedded)
            [victim] = worker_pids(bot)[0]
            os.kill(victim, signal.SIGKILL)
            waiting = b"worker 0 WARNING countersign.starting: start-up attempt 1 failed: cannot reach PostgreSQL"
            await wait_until(
                lambda: waiting in bot.stderr or not running(bot), "the restarted worker waiting", timeout=START_S
            )
            assert running(bot), bot.stderr.decode()
            await start_embedded_again(embedded)
            await wait_until(
                lambda: runs(bot, 0) == 2 or not running(bot), "the restarted worker running", timeout=START_S
            )
            assert running(bot), bot.stderr.decode()
            async with sender_on(port, "0") as restarted:
                assert (await restarted.url_verification()).status == 200
            assert [len(pids) for pids in worker_pids(bot).values()] == [2, 1]  # the sibling ran on throughout
        finally:
            code = await bot.stop()
    err = bot.stderr.decode()
    assert code == 0, err
    assert "could not start" not in err


async def test_a_worker_that_gives_up_says_so_in_a_line_with_its_index_and_the_time(gemini, slack, target, tmp_path):
    """A worker's last line (an outage past START_RETRY_S) is a log line like its others, not a bare `countersign:` line."""
    env = bot_env(
        gemini,
        slack,
        target,
        free_port(),
        DATABASE_URL="postgresql://app:hunter2@127.0.0.1:1/app",
        START_RETRY_S="0",
        COUNTERSIGN_WORKER_INDEX="1",  # as the supervisor starts its worker 1
    )
    bot = await BotProcess(env, tmp_path).start()
    assert await bot.wait(timeout=90) == 75, bot.stderr.decode()
    last = bot.stderr.decode().strip().splitlines()[-1]
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} worker 1 ERROR countersign: cannot reach PostgreSQL at "
        r"postgresql://app:\*\*\*@127\.0\.0\.1:1/app: .+ \(gave up after 1 attempt; START_RETRY_S=0\)",
        last,
    ), last


async def test_workers_started_while_slack_cannot_answer_all_come_up(db_url, gemini, slack, target, tmp_path):
    """auth.test answers 503 while two workers start: both try again, and both serve once Slack answers; none is stopped."""
    slack.fail("auth.test", error="service_unavailable", status=503, times=10_000)
    port = free_port()
    env = bot_env(gemini, slack, target, port, DATABASE_URL=db_url, COUNTERSIGN_WORKERS="2")
    bot = await BotProcess(env, tmp_path).start()

    def waiting(index: int) -> bool:
        line = b"worker %d WARNING countersign.starting: start-up attempt 1 failed: the Slack Web API" % index
        return line in bot.stderr or not running(bot)

    try:
        await wait_until(lambda: waiting(0) and waiting(1), "both workers waiting for Slack", timeout=START_S)
        assert running(bot), bot.stderr.decode()
        slack.clear_faults()
        await bot.wait_healthy(port, timeout=START_S)
        for index in ("0", "1"):
            async with sender_on(port, index) as sender:
                assert (await sender.url_verification()).status == 200
        assert [len(pids) for pids in worker_pids(bot).values()] == [1, 1]
    finally:
        code = await bot.stop()
    assert code == 0, bot.stderr.decode()
    assert b"Traceback" not in bot.stderr


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"COUNTERSIGN_WORKERS": "0"}, "countersign: invalid setting COUNTERSIGN_WORKERS"),
        ({"DISCORD_TOKEN": "t", "DISCORD_SHARD_IDS": "1"}, "countersign: invalid setting DISCORD_SHARD_IDS"),
    ],
)
async def test_workers_refused_in_one_line(gemini, slack, target, tmp_path, extra, expected):
    """A worker count below 1, Discord shard ids without a count: one line, exit 2."""
    env = {**bot_env(gemini, slack, target, free_port(), COUNTERSIGN_WORKERS="2"), **extra}
    bot = await BotProcess(env, tmp_path).start()
    assert await bot.wait() == 2
    assert bot.stderr.decode().strip().splitlines()[-1].startswith(expected), bot.stderr.decode()


async def test_the_workers_flag_sets_the_count(db_url, gemini, slack, target, tmp_path):
    """`countersign run --workers 2` starts two workers (the flag wins over COUNTERSIGN_WORKERS)."""
    port = free_port()
    env = bot_env(gemini, slack, target, port, DATABASE_URL=db_url, COUNTERSIGN_WORKERS="1")
    bot = await BotProcess(env, tmp_path, command="run", args=("--workers", "2")).start()
    try:
        await bot.wait_healthy(port)
        await wait_until(lambda: len(worker_pids(bot)) == 2, "both workers started")
    finally:
        assert await bot.stop() == 0, bot.stderr.decode()


async def test_workers_serve_the_probes_on_metrics_port_apart_from_slack(db_url, gemini, slack, target, tmp_path):
    """METRICS_PORT with two workers: both answer the probes there (summed metrics), and PORT has Slack's routes only."""
    port, probes = free_port(), free_port()
    env = bot_env(gemini, slack, target, port, DATABASE_URL=db_url, COUNTERSIGN_WORKERS="2", METRICS_PORT=str(probes))
    bot = await BotProcess(env, tmp_path).start()
    try:
        await bot.wait_healthy(probes)
        await wait_until(lambda: runs(bot, 0) == runs(bot, 1) == 1, "both workers running", timeout=START_S)
        seen: set[str] = set()
        async with httpx.AsyncClient(timeout=30) as client:
            while seen != {"0", "1"}:  # each request on a new connection: the kernel spreads them
                response = await client.get(f"http://127.0.0.1:{probes}/readyz", headers={"Connection": "close"})
                assert response.status_code == 200, response.text
                seen.add(response.headers[WORKER])
            scraped = await client.get(f"http://127.0.0.1:{probes}/metrics")
            assert scraped.status_code == 200 and "countersign_turns_running" in scraped.text
            assert (await client.get(f"http://127.0.0.1:{port}/metrics")).status_code == 404
        async with sender_on(port, "1") as sender:
            assert (await sender.url_verification()).status == 200
    finally:
        code = await bot.stop()
    assert code == 0, bot.stderr.decode()


async def test_workers_stop_when_their_supervisor_is_killed(db_url, gemini, slack, target, tmp_path):
    """kill -9 on the supervisor: both workers notice they are orphans and shut down on their own, none keeps the port."""
    port = free_port()
    env = bot_env(gemini, slack, target, port, DATABASE_URL=db_url, COUNTERSIGN_WORKERS="2")
    bot = await BotProcess(env, tmp_path).start()
    workers: list[psutil.Process] = []
    try:
        await bot.wait_healthy(port)
        await wait_until(lambda: len(worker_pids(bot)) == 2, "both workers started")
        workers = [psutil.Process(pid) for [pid] in worker_pids(bot).values()]
        assert bot.proc is not None
        bot.proc.kill()
        _, alive = await asyncio.to_thread(psutil.wait_procs, workers, timeout=START_S)
        assert not alive, f"workers {[p.pid for p in alive]} outlived their supervisor:\n{bot.stderr.decode()}"
    finally:
        for worker in workers:  # orphans are init's children now, not ours: end them by pid
            with contextlib.suppress(psutil.NoSuchProcess):
                worker.kill()
        await bot.wait()
    assert bot.stderr.count(b"the supervisor (pid %d) is gone: this worker stops" % bot.proc.pid) == 2
    assert b"Traceback" not in bot.stderr


async def test_a_port_another_server_listens_on_with_so_reuseport_is_refused(db_url, gemini, slack, target, tmp_path):
    """PORT served by another SO_REUSEPORT listener of this user (say a second `run --workers`): one line, exit 2, no worker starts."""
    with socket.socket() as other:
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        env = bot_env(gemini, slack, target, port, DATABASE_URL=db_url, COUNTERSIGN_WORKERS="2")
        bot = await BotProcess(env, tmp_path).start()
        try:
            code = await bot.wait(timeout=START_S)
        finally:  # within pytest's 120 s: a bot that did start is stopped, not left running
            if bot.proc is not None and bot.proc.returncode is None:
                await bot.stop(timeout=30)
    last = bot.stderr.decode().strip().splitlines()[-1]
    assert code == 2, bot.stderr.decode()
    assert last.startswith(f"countersign: cannot listen on 127.0.0.1:{port} (HOST, PORT):"), last
    assert worker_pids(bot) == {}
