"""`countersign run` as a separate process: the whole flow, restarts, shutdown, one-line errors."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from collections.abc import Awaitable
from pathlib import Path
from urllib.parse import urlsplit

import asyncpg
import httpx
import psutil
import pytest

from adapters.slack import blocks
from bot.storage.embedded import EmbeddedPostgres
from bot.storage.migrate import migrations_dir
from bot.storage.urls import redact
from countersign.server import LISTEN_BACKLOG
from tests.e2e.conftest import ALICE, BOT_TOKEN, CHANNEL, SIGNING_SECRET, TEAM
from tests.e2e.slack.test_slack_flow import click, wait_answer, wait_card
from tests.standins.slack_events import SlackEventSender
from tests.support.barriers import wait_until, wait_until_async
from tests.support.bot_process import BotProcess, base_env, chat_env, free_port, run_chat, start_chat

pytestmark = pytest.mark.e2e


def bot_env(gemini, slack, target, port: int, **extra: str) -> dict[str, str]:
    return base_env(
        GOOGLE_API_KEY="e2e-gemini-key",
        GEMINI_BASE_URL=gemini.base_url,
        GEMINI_RETRY_INITIAL_DELAY="0.01",
        SLACK_BOT_TOKEN=BOT_TOKEN,
        SLACK_SIGNING_SECRET=SIGNING_SECRET,
        SLACK_API_URL=slack.base_url,
        HTTP_REQUEST_ALLOWED_HOSTS=target.host,
        PORT=str(port),
        HOST="127.0.0.1",
        **extra,
    )


async def test_the_whole_flow_across_a_restart_in_separate_processes(db_url, gemini, slack, target, tmp_path):
    """Card from one process, SIGTERM, click served by a new process: one request, answer posted."""
    port = free_port()
    env = bot_env(gemini, slack, target, port, DATABASE_URL=db_url)
    first = await BotProcess(env, tmp_path).start()
    await first.wait_healthy(port)
    async with SlackEventSender(f"http://127.0.0.1:{port}/slack/events", SIGNING_SECRET, team_id=TEAM) as events:
        mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
        [card] = await wait_card(slack)
    assert await first.stop() == 0, first.stderr.decode()
    assert b"Traceback" not in first.stderr
    assert first.stderr.count(b"send_email is off: SMTP_URL is not set") == 1  # said once, not per tools build
    assert b"(SlackAdapter; uvloop)" in first.stderr  # COUNTERSIGN_EVENT_LOOP=auto

    second = await BotProcess(env, tmp_path).start()
    await second.wait_healthy(port)
    async with SlackEventSender(f"http://127.0.0.1:{port}/slack/events", SIGNING_SECRET, team_id=TEAM) as events:
        await click(events, slack, ALICE, blocks.ACTION_APPROVE, card)
        [answer] = await wait_answer(slack, mention.ts)
    assert await second.stop() == 0, second.stderr.decode()
    assert [r.json for r in target.requests] == [{"name": "widget"}]
    assert "widget" in answer
    shown = json.dumps(slack.message(card.channel, card.ts)["blocks"])
    assert "Approved" in shown


def _postmaster_pid(data_dir: Path) -> int | None:
    """The server's pid from postmaster.pid; None while the file is missing or still being written."""
    try:
        words = (data_dir / "pgdata" / "postmaster.pid").read_text().split()
    except FileNotFoundError:
        return None
    return int(words[0]) if words and words[0].isdigit() else None


async def test_embedded_postgres_starts_with_the_bot_and_stops_with_it(gemini, slack, target, tmp_path):
    """No DATABASE_URL: the data directory is created, the server starts, and SIGTERM stops it."""
    port = free_port()
    data_dir = tmp_path / "data" / "countersign"
    env = bot_env(gemini, slack, target, port, COUNTERSIGN_DATA_DIR=str(data_dir))
    bot = await BotProcess(env, tmp_path).start()
    await bot.wait_healthy(port, timeout=120)
    pid = _postmaster_pid(data_dir)
    assert pid is not None and psutil.pid_exists(pid)
    assert await bot.stop(signal.SIGINT) == 0, bot.stderr.decode()
    await _stopped(pid)


async def test_a_server_already_running_on_the_data_dir_is_reused_and_left_running(gemini, slack, target, tmp_path):
    """When PostgreSQL already runs on the data directory, the bot uses it and does not stop it."""
    data_dir = tmp_path / "shared"
    mine = EmbeddedPostgres(data_dir)
    await mine.start()
    try:
        pid = _postmaster_pid(data_dir)
        port = free_port()
        bot = await BotProcess(
            bot_env(gemini, slack, target, port, COUNTERSIGN_DATA_DIR=str(data_dir)), tmp_path
        ).start()
        await bot.wait_healthy(port, timeout=120)
        assert _postmaster_pid(data_dir) == pid
        assert await bot.stop() == 0, bot.stderr.decode()
        assert pid is not None and psutil.pid_exists(pid)
    finally:
        await mine.stop()


async def test_missing_api_key_is_one_line_and_a_failure_exit(tmp_path):
    """Without GOOGLE_API_KEY, `countersign run` prints one line naming it and exits non-zero."""
    bot = await BotProcess(base_env(SLACK_BOT_TOKEN="xoxb-x", SLACK_SIGNING_SECRET="s"), tmp_path).start()
    assert await bot.wait() == 2
    lines = bot.stderr.decode().strip().splitlines()
    assert lines == ["countersign: GOOGLE_API_KEY is not set: the agent needs a Gemini API key"]


async def test_unreachable_database_is_one_line_without_the_password(tmp_path):
    """A DATABASE_URL nobody answers on gives one readable line, password redacted, exit 75 (an outage, not a setting)."""
    env = base_env(GOOGLE_API_KEY="k", DATABASE_URL="postgresql://app:s3cret@127.0.0.1:1/app")
    bot = await BotProcess(env, tmp_path, command="migrate").start()
    assert await bot.wait() == 75
    err = bot.stderr.decode()
    assert "s3cret" not in err
    assert (
        err.strip()
        .splitlines()[-1]
        .startswith("countersign: cannot reach PostgreSQL at postgresql://app:***@127.0.0.1:1/app")
    )
    assert "Traceback" not in err


async def test_a_data_directory_behind_a_file_is_one_line_naming_the_file(tmp_path):
    """COUNTERSIGN_DATA_DIR that cannot be created (a file is in the way): one line naming the file, exit 2.

    (The tests run as root, for whom every existing directory is writable; scripts/prove-image
    checks the message for a directory the user cannot write, a root-owned volume and the
    image's user, which names the uid.)
    """
    (tmp_path / "taken").write_text("a file, not a directory")
    for data_dir in (tmp_path / "taken" / "data", tmp_path / "taken"):
        env = base_env(GOOGLE_API_KEY="k", COUNTERSIGN_DATA_DIR=str(data_dir))
        bot = await BotProcess(env, tmp_path, command="migrate").start()
        assert await bot.wait() == 2
        err = bot.stderr.decode()
        assert err.strip().splitlines()[-1] == (
            f"countersign: the data directory {data_dir} cannot be created: {tmp_path / 'taken'} is a file, "
            "not a directory; set COUNTERSIGN_DATA_DIR to a directory, or set DATABASE_URL"
        )
        assert "Traceback" not in err


BURST = 400
"""New connections opened at once by `test_a_burst_of_new_connections_waits_to_be_accepted`:
more than aiohttp's default listen backlog (128), fewer than `LISTEN_BACKLOG`."""


async def _get_health(connection: tuple[asyncio.StreamReader, asyncio.StreamWriter]) -> bytes:
    reader, writer = connection
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: bot\r\nConnection: close\r\n\r\n")
    try:
        return await reader.read()  # to the end: the bot closes after its answer
    finally:
        writer.close()


async def test_a_burst_of_new_connections_waits_to_be_accepted(db_url, gemini, slack, target, tmp_path):
    """More new connections at once than aiohttp's default backlog all connect, and each is answered.

    The bot is stopped (SIGSTOP) while they open, as a busy event loop would leave them: each
    completed connection waits in the kernel's accept queue (`LISTEN_BACKLOG`), and one beyond
    the queue would not complete at all (its SYN dropped, then retried after one second, three,
    ...). With aiohttp's 128, 129 of these 400 connected and the rest timed out.
    """
    assert BURST < LISTEN_BACKLOG
    port = free_port()
    bot = await BotProcess(bot_env(gemini, slack, target, port, DATABASE_URL=db_url), tmp_path).start()
    await bot.wait_healthy(port)
    assert bot.proc is not None
    connections: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    try:
        bot.proc.send_signal(signal.SIGSTOP)
        try:
            opened = await asyncio.gather(
                *(asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 30) for _ in range(BURST)),
                return_exceptions=True,
            )
        finally:
            bot.proc.send_signal(signal.SIGCONT)
        connections = [c for c in opened if not isinstance(c, BaseException)]
        assert len(connections) == BURST, [repr(c) for c in opened if isinstance(c, BaseException)][:3]
        answers = await asyncio.wait_for(asyncio.gather(*(_get_health(c) for c in connections)), 60)
        assert all(answer.startswith(b"HTTP/1.1 200") for answer in answers)
        assert await bot.stop() == 0, bot.stderr.decode()
    finally:
        for _, writer in connections:
            writer.close()
        if bot.proc.returncode is None:  # a failed assertion: leave no bot behind
            await bot.stop(signal.SIGKILL)


async def test_migrate_applies_and_is_idempotent(pg_server, tmp_path):
    """`countersign migrate` exits 0 twice on a new, empty database, and says each thing once.

    The first run says what it applied in one log line ("applied 13 migrations, 0001_... to
    0013_..."), not twice; the second says there was nothing to do.
    """
    url = await pg_server.create_database(empty=True)
    newest = max(path.stem for path in migrations_dir().glob("*.sql"))
    logs = []
    try:
        for _ in range(2):
            bot = await BotProcess(base_env(DATABASE_URL=url), tmp_path, command="migrate").start()
            assert await bot.wait() == 0, bot.stderr.decode()
            logs.append(bot.stderr.decode())
    finally:
        await pg_server.drop_database(url)
    assert logs[0].count(newest) == 1, logs[0]
    count = len(list(migrations_dir().glob("*.sql")))
    assert f"applied {count} migrations, " in logs[0], logs[0]
    assert "already up to date" not in logs[0], logs[0]
    assert newest not in logs[1], logs[1]
    assert "migrations: already up to date" in logs[1], logs[1]


async def test_discord_and_slack_in_one_process_across_a_restart(db_url, gemini, slack, target, discord_api, tmp_path):
    """`countersign run` with both platforms: Discord discovers its gateway from DISCORD_API_URL,
    a card posted before a restart is approved on a new client, and Slack answers meanwhile."""
    from tests.e2e.conftest import D_ALICE, D_BOT, D_CHANNEL, D_GUILD, DISCORD_TOKEN
    from tests.e2e.discord.test_discord_flow import click as discord_click
    from tests.e2e.discord.test_discord_flow import wait_answer as discord_answer
    from tests.e2e.discord.test_discord_flow import wait_card as discord_card

    port = free_port()
    env = bot_env(
        gemini,
        slack,
        target,
        port,
        DATABASE_URL=db_url,
        DISCORD_TOKEN=DISCORD_TOKEN,
        DISCORD_API_URL=discord_api.api_url,
        DISCORD_GUILD_READY_TIMEOUT="0.05",
    )
    first = await BotProcess(env, tmp_path).start()
    await first.wait_healthy(port)
    await discord_api.send_message(D_CHANNEL, D_ALICE, f"<@{D_BOT}> post widget", mentions=[D_BOT], guild_id=D_GUILD)
    [card] = await discord_card(discord_api)
    async with SlackEventSender(f"http://127.0.0.1:{port}/slack/events", SIGNING_SECRET, team_id=TEAM) as events:
        mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> hello from slack")
        await wait_answer(slack, mention.ts, starts="You said: hello from slack")
    assert await first.stop() == 0, first.stderr.decode()

    second = await BotProcess(env, tmp_path).start()
    await second.wait_healthy(port)
    await discord_click(discord_api, card, D_ALICE, "approve")
    [answer] = await discord_answer(discord_api)
    assert await second.stop() == 0, second.stderr.decode()
    assert "widget" in answer and [r.json for r in target.requests] == [{"name": "widget"}]
    assert discord_api.identifies and all(i["intents"] & (1 << 15) for i in discord_api.identifies)


async def test_missing_message_content_intent_is_reported_at_start(gemini, target, tmp_path, db_url):
    """When the application may not use the Message Content intent, the bot says so in one line."""
    from tests.e2e.conftest import D_APP, D_BOT, DISCORD_TOKEN
    from tests.standins.discord_api import DiscordStandIn, Intent

    async with DiscordStandIn(
        bot_token=DISCORD_TOKEN, application_id=D_APP, bot_user_id=D_BOT, approved_intents=Intent(0)
    ) as api:
        env = base_env(
            GOOGLE_API_KEY="k",
            GEMINI_BASE_URL=gemini.base_url,
            DATABASE_URL=db_url,
            DISCORD_TOKEN=DISCORD_TOKEN,
            DISCORD_API_URL=api.api_url,
            PORT=str(free_port()),
            HOST="127.0.0.1",
        )
        bot = await BotProcess(env, tmp_path).start()
        assert await bot.wait(timeout=60) == 2
    last = bot.stderr.decode().strip().splitlines()[-1]
    assert last.startswith("countersign: Discord refused the Message Content intent")
    assert "Privileged Gateway Intents" in last


async def test_half_configured_slack_is_one_line(tmp_path):
    """A Slack bot token without a signing secret or app token is refused at start, not ignored."""
    bot = await BotProcess(base_env(GOOGLE_API_KEY="k", SLACK_BOT_TOKEN="xoxb-x"), tmp_path).start()
    assert await bot.wait() == 2
    assert bot.stderr.decode().strip().splitlines() == [
        "countersign: Slack is only half configured: set SLACK_SIGNING_SECRET or SLACK_APP_TOKEN too (see README, Slack setup)"
    ]


async def test_slack_oauth_mixed_with_a_bot_token_is_one_line(tmp_path):
    """SLACK_CLIENT_ID and SLACK_CLIENT_SECRET beside SLACK_BOT_TOKEN are refused at start in one line."""
    env = base_env(
        GOOGLE_API_KEY="k",
        SLACK_BOT_TOKEN="xoxb-x",
        SLACK_SIGNING_SECRET="s",
        SLACK_CLIENT_ID="1.2",
        SLACK_CLIENT_SECRET="c",
    )
    bot = await BotProcess(env, tmp_path).start()
    assert await bot.wait() == 2
    assert bot.stderr.decode().strip().splitlines() == [
        "countersign: set either SLACK_BOT_TOKEN (one workspace) or SLACK_CLIENT_ID and SLACK_CLIENT_SECRET (many), not both"
    ]


async def test_unreachable_discord_is_one_line(db_url, gemini, tmp_path):
    """A Discord API nobody answers, with no time to try again (START_RETRY_S=0): one line naming it, no traceback, exit 75."""
    env = base_env(
        GOOGLE_API_KEY="k",
        GEMINI_BASE_URL=gemini.base_url,
        DATABASE_URL=db_url,
        DISCORD_TOKEN="t",
        DISCORD_API_URL="http://127.0.0.1:9/api/v10",
        PORT=str(free_port()),
        HOST="127.0.0.1",
        START_RETRY_S="0",
    )
    bot = await BotProcess(env, tmp_path).start()
    assert await bot.wait(timeout=90) == 75
    err = bot.stderr.decode()
    assert err.strip().splitlines()[-1].startswith("countersign: cannot reach Discord at http://127.0.0.1:9/api/v10")
    assert "Traceback" not in err


async def test_a_start_while_slack_cannot_answer_waits_for_slack(db_url, gemini, slack, target, tmp_path):
    """auth.test answers 503 at start: each attempt is logged, METRICS_PORT says live but not ready and why; then it serves."""
    slack.fail("auth.test", error="service_unavailable", status=503, times=10_000)
    port, probes = free_port(), free_port()
    env = bot_env(gemini, slack, target, port, DATABASE_URL=db_url, METRICS_PORT=str(probes))
    bot = await BotProcess(env, tmp_path).start()
    try:
        await _first_of(
            wait_until(lambda: b"start-up attempt 2 failed: the Slack Web API" in bot.stderr, "a second attempt"),
            bot,
            "a second failed attempt",
        )
        outage = f"the Slack Web API at {slack.base_url} cannot answer now (HTTP 503, service_unavailable)"
        assert f"{outage}; trying again in".encode() in bot.stderr
        async with httpx.AsyncClient(timeout=30) as client:
            assert (await client.get(f"http://127.0.0.1:{probes}/healthz")).status_code == 200
            waiting = await client.get(f"http://127.0.0.1:{probes}/readyz")
            assert waiting.status_code == 503
            assert waiting.json()["status"] == "starting" and waiting.json()["waiting_for"] == outage
            assert waiting.json()["attempts"] >= 2
            slack.clear_faults()

            async def ready() -> bool:
                return (await client.get(f"http://127.0.0.1:{probes}/readyz")).status_code == 200

            await _first_of(wait_until_async(ready, "readiness once Slack answers", timeout=90), bot, "readiness")
        async with SlackEventSender(f"http://127.0.0.1:{port}/slack/events", SIGNING_SECRET, team_id=TEAM) as events:
            mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> hello")
            await wait_answer(slack, mention.ts, starts="You said: hello")
    finally:
        code = await bot.stop()
    assert code == 0, bot.stderr.decode()
    assert b"Traceback" not in bot.stderr


async def test_an_outage_longer_than_start_retry_s_exits_75(db_url, gemini, slack, target, tmp_path):
    """Slack answers 503 past START_RETRY_S: the last line names the outage and the bound, exit 75 (not 2)."""
    slack.fail("auth.test", error="service_unavailable", status=503, times=10_000)
    env = bot_env(gemini, slack, target, free_port(), DATABASE_URL=db_url, START_RETRY_S="2")
    bot = await BotProcess(env, tmp_path).start()
    assert await bot.wait(timeout=90) == 75, bot.stderr.decode()
    err = bot.stderr.decode()
    last = err.strip().splitlines()[-1]
    assert last.startswith(
        f"countersign: the Slack Web API at {slack.base_url} cannot answer now (HTTP 503, service_unavailable) "
        "(gave up after "
    ), last
    assert last.endswith("START_RETRY_S=2)"), last
    assert "start-up attempt 1 failed" in err and "Traceback" not in err


async def test_the_embedded_server_is_kept_across_start_attempts(gemini, slack, target, tmp_path):
    """No DATABASE_URL while Slack answers 503: the embedded PostgreSQL starts once and stays up through every attempt, the agent's lines are said once."""
    slack.fail("auth.test", error="service_unavailable", status=503, times=10_000)
    data_dir = tmp_path / "data"
    # One second after the first failure: at least a second attempt.
    env = bot_env(gemini, slack, target, free_port(), COUNTERSIGN_DATA_DIR=str(data_dir), START_RETRY_S="1")
    bot = await BotProcess(env, tmp_path).start()
    assert await bot.wait(timeout=180) == 75, bot.stderr.decode()
    err = bot.stderr.decode()
    assert " attempts over " in err.strip().splitlines()[-1], err  # "1 attempt" is singular
    assert err.count("embedded PostgreSQL ready") == 1, err
    assert err.count("embedded PostgreSQL released") == 1, err
    assert err.count("agent for channels without a setting") == 1, err
    assert err.index("embedded PostgreSQL released") > err.rindex("start-up attempt"), err  # released at the end
    assert _postmaster_pid(data_dir) is None, "the embedded server outlived the bot"


async def test_a_read_only_database_at_start_is_an_outage_in_one_line(db_url, gemini, slack, target, tmp_path):
    """A standby during a failover (read-only) at start: an outage, tried again, then one line naming it and status 75, never a traceback."""
    connection = await asyncpg.connect(db_url)
    try:
        await connection.execute(
            f'ALTER DATABASE "{urlsplit(db_url).path.lstrip("/")}" SET default_transaction_read_only = on'
        )
    finally:
        await connection.close()
    env = bot_env(gemini, slack, target, free_port(), DATABASE_URL=db_url, START_RETRY_S="0")
    bot = await BotProcess(env, tmp_path).start()
    assert await bot.wait(timeout=90) == 75, bot.stderr.decode()
    err = bot.stderr.decode()
    assert err.strip().splitlines()[-1] == (
        f"countersign: cannot reach PostgreSQL at {redact(db_url)}: the server is read-only (a standby, as during a "
        "failover) (gave up after 1 attempt; START_RETRY_S=0)"
    ), err
    assert "Traceback" not in err


async def test_a_signal_during_start_up_stops_the_bot(gemini, tmp_path):
    """SIGTERM while the bot is still starting (Discord took the connection and answers nothing) ends it cleanly, PostgreSQL too.

    The Discord endpoint never answers, so the bot cannot finish starting (or give up) by
    itself: the signal surely arrives during start-up, and the test waits for the moment it
    is there (the bot's connection) instead of guessing it with a sleep.
    """
    connected = asyncio.Event()

    async def never_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connected.set()
        await reader.read()  # until the bot hangs up
        writer.close()

    data_dir = tmp_path / "data"
    async with await asyncio.start_server(never_answer, "127.0.0.1", 0) as discord:
        discord_port = discord.sockets[0].getsockname()[1]
        env = base_env(
            GOOGLE_API_KEY="k",
            GEMINI_BASE_URL=gemini.base_url,
            COUNTERSIGN_DATA_DIR=str(data_dir),
            DISCORD_TOKEN="t",
            DISCORD_API_URL=f"http://127.0.0.1:{discord_port}/api/v10",
            PORT=str(free_port()),
            HOST="127.0.0.1",
        )
        bot = await BotProcess(env, tmp_path).start()
        await _first_of(connected.wait(), bot, "the bot asking Discord (PostgreSQL up, start-up not done)")
        pid = _postmaster_pid(data_dir)
        assert pid is not None and psutil.pid_exists(pid)
        assert await bot.stop(signal.SIGTERM, timeout=90) == 0, bot.stderr.decode()
    await _stopped(pid)
    assert "Traceback" not in bot.stderr.decode()


async def test_a_signal_while_the_embedded_server_is_created_leaves_no_server_running(gemini, tmp_path):
    """SIGTERM while initdb runs (a fresh data directory): the bot ends cleanly and no PostgreSQL is left behind."""
    connected = asyncio.Event()

    async def never_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connected.set()
        await reader.read()
        writer.close()

    data_dir = tmp_path / "data"
    async with await asyncio.start_server(never_answer, "127.0.0.1", 0) as discord:
        env = base_env(
            GOOGLE_API_KEY="k",
            GEMINI_BASE_URL=gemini.base_url,
            COUNTERSIGN_DATA_DIR=str(data_dir),
            DISCORD_TOKEN="t",
            DISCORD_API_URL=f"http://127.0.0.1:{discord.sockets[0].getsockname()[1]}/api/v10",
            PORT=str(free_port()),
            HOST="127.0.0.1",
        )
        bot = await BotProcess(env, tmp_path).start()
        await wait_until(lambda: (data_dir / "pgdata").exists(), "the embedded server's creation", timeout=120)
        assert await bot.stop(signal.SIGTERM, timeout=120) == 0, bot.stderr.decode()
    pid = _postmaster_pid(data_dir)
    assert pid is None or not psutil.pid_exists(pid), f"PostgreSQL {pid} outlived the bot"


async def test_a_signal_during_migrate_stops_the_embedded_server_it_started(tmp_path):
    """SIGTERM while `countersign migrate` works on its own embedded PostgreSQL: the server stops with it, never a kill."""
    data_dir = tmp_path / "data"
    bot = await BotProcess(base_env(COUNTERSIGN_DATA_DIR=str(data_dir)), tmp_path, command="migrate").start()
    assert bot.proc is not None
    await wait_until(
        lambda: _postmaster_pid(data_dir) is not None or bot.proc.returncode is not None,
        "the embedded server starting",
        timeout=120,
    )
    pid = _postmaster_pid(data_dir)
    code = await bot.stop(signal.SIGTERM, timeout=120)
    # Finished before the signal (0), or stopped by it (1, saying so); never killed by it (-15).
    assert code in (0, 1), bot.stderr.decode()
    if code == 1:
        assert bot.stderr.decode().strip().splitlines()[-1] == (
            "countersign: migrate was stopped by a signal before it finished"
        )
    if pid is not None:
        await _stopped(pid)


async def _first_of(event: Awaitable[object], bot: BotProcess, what: str, timeout: float = 180) -> None:
    """Wait for `event`; fail at once, with the bot's stderr, if the bot exits first."""
    assert bot.proc is not None
    waiting, exiting = asyncio.ensure_future(event), asyncio.ensure_future(bot.proc.wait())
    done, _ = await asyncio.wait({waiting, exiting}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    waiting.cancel()
    exiting.cancel()
    assert waiting in done, f"no {what} within {timeout}s (exit {bot.proc.returncode}):\n{bot.stderr.decode()}"


async def _stopped(pid: int) -> None:
    """Wait until the PostgreSQL process `pid` is gone (a zombie counts: it has stopped)."""

    def gone() -> bool:
        try:
            return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    await wait_until(gone, f"PostgreSQL (pid {pid}) stopping")


async def test_chat_shows_a_card_left_waiting_by_an_earlier_run(db_url, gemini, target, tmp_path):
    """A chat that ended at an approval prompt shows that approval again next time; approving it runs the call."""
    env = chat_env(gemini_url=gemini.base_url, allowed_host=target.host, db_url=db_url, api_key="e2e-gemini-key")
    code, out, err = await run_chat(env, tmp_path, b"post widget\n")
    assert code == 0, err
    assert "http_request wants to run" in out and target.requests == []
    code, out, err = await run_chat(env, tmp_path, b"a\n/quit\n")
    assert code == 0, err
    assert "http_request wants to run" in out and "approved by" in out
    assert [r.json for r in target.requests] == [{"name": "widget"}]


EXAMPLE_MCP_SERVER = Path(__file__).resolve().parents[3] / "examples" / "mcp" / "notes_server.py"


async def test_chat_says_how_each_mcp_server_stands_before_its_first_prompt(db_url, gemini, target, tmp_path):
    """Before the first prompt, chat waits for each MCP server's first attempt and says which connected and which did not."""
    config = tmp_path / "servers.json"
    servers = {
        "notes": {"command": sys.executable, "args": [str(EXAMPLE_MCP_SERVER)]},
        "ghost": {"url": f"http://127.0.0.1:{free_port()}/mcp"},
    }
    config.write_text(json.dumps({"mcpServers": servers}))
    env = chat_env(gemini_url=gemini.base_url, allowed_host=target.host, db_url=db_url, api_key="e2e-gemini-key")
    code, out, err = await run_chat({**env, "COUNTERSIGN_MCP_CONFIG": str(config)}, tmp_path, b"/quit\n")
    assert code == 0, err
    first_prompt = out.index("you> ")
    assert 0 <= out.index("MCP server notes: connected, 4 tools offered.") < first_prompt, out
    assert 0 <= out.index("MCP server ghost is not connected yet (") < first_prompt, out


async def test_chat_stops_at_once_on_sigterm_at_a_prompt(gemini, tmp_path):
    """SIGTERM at an idle prompt ends the chat promptly and stops the embedded PostgreSQL it started."""
    data_dir = tmp_path / "data"
    env = base_env(GOOGLE_API_KEY="k", GEMINI_BASE_URL=gemini.base_url, COUNTERSIGN_DATA_DIR=str(data_dir))
    proc = await start_chat(env, tmp_path)
    assert proc.stdout is not None
    await asyncio.wait_for(proc.stdout.readuntil(b"you> "), timeout=120)
    pid = _postmaster_pid(data_dir)
    assert pid is not None
    proc.send_signal(signal.SIGTERM)
    await asyncio.wait_for(proc.wait(), timeout=90)
    await _stopped(pid)


async def test_a_slack_token_slack_refuses_is_one_line(db_url, gemini, slack, target, tmp_path):
    """A wrong SLACK_BOT_TOKEN stops the start with one line (auth.test), instead of a healthy-looking bot."""
    env = {**bot_env(gemini, slack, target, free_port(), DATABASE_URL=db_url), "SLACK_BOT_TOKEN": "xoxb-wrong"}
    bot = await BotProcess(env, tmp_path).start()
    assert await bot.wait(timeout=60) == 2
    assert bot.stderr.decode().strip().splitlines()[-1] == "countersign: Slack refused SLACK_BOT_TOKEN (invalid_auth)"


async def test_a_port_in_use_is_one_line(db_url, gemini, slack, target, tmp_path):
    """PORT taken by another program: one line naming HOST and PORT, exit 2, nothing left running."""
    import socket

    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        bot = await BotProcess(bot_env(gemini, slack, target, port, DATABASE_URL=db_url), tmp_path).start()
        assert await bot.wait(timeout=60) == 2
    last = bot.stderr.decode().strip().splitlines()[-1]
    assert last.startswith(f"countersign: cannot listen on 127.0.0.1:{port} (HOST, PORT):"), last


async def test_no_platform_and_no_terminal_is_one_line(tmp_path):
    """No Slack or Discord settings and stdin is not a terminal (a container without -it): exit 2 with a reason."""
    bot = await BotProcess(base_env(GOOGLE_API_KEY="k"), tmp_path).start()
    assert await bot.wait(timeout=60) == 2
    assert "no platform is configured" in bot.stderr.decode().strip().splitlines()[-1]


async def test_workers_without_a_platform_are_refused_before_the_terminal_chat(tmp_path):
    """`run --workers 2` with neither Slack nor Discord: one line saying workers need a platform (not the terminal's reason), exit 2."""
    bot = await BotProcess(base_env(GOOGLE_API_KEY="k"), tmp_path, args=("--workers", "2")).start()
    assert await bot.wait(timeout=60) == 2
    last = bot.stderr.decode().strip().splitlines()[-1]
    assert last.startswith(
        "countersign: several workers (--workers, COUNTERSIGN_WORKERS) serve only Slack or Discord"
    ), last


async def test_a_bad_workers_option_is_named_as_typed(tmp_path):
    """`run --workers 0` names `--workers` (what the operator typed), exit 2."""
    bot = await BotProcess(base_env(GOOGLE_API_KEY="k"), tmp_path, args=("--workers", "0")).start()
    assert await bot.wait(timeout=60) == 2
    lines = bot.stderr.decode().strip().splitlines()
    assert lines == ["countersign: invalid setting --workers: must be at least 1, not 0"], lines


async def test_a_refused_setting_reads_as_our_own_words(tmp_path):
    """A setting our validators refuse: the line is their sentence, without pydantic's "Value error," prefix."""
    bot = await BotProcess(base_env(GOOGLE_API_KEY="k", DISCORD_SHARD_IDS="0"), tmp_path).start()
    assert await bot.wait(timeout=60) == 2
    lines = bot.stderr.decode().strip().splitlines()
    assert lines == [
        "countersign: invalid setting DISCORD_SHARD_IDS: needs DISCORD_SHARD_COUNT (the shard count of the whole bot)"
    ], lines


async def test_a_broken_tools_module_is_reported_before_there_is_nothing_to_serve(tmp_path):
    """No platform, no terminal and a tools module that does not exist: the line names the module, the real fault."""
    env = base_env(GOOGLE_API_KEY="k", COUNTERSIGN_TOOLS_MODULE="no_such_tools_module")
    bot = await BotProcess(env, tmp_path).start()
    assert await bot.wait(timeout=60) == 2
    last = bot.stderr.decode().strip().splitlines()[-1]
    assert "no_such_tools_module" in last and "no platform" not in last, last


async def test_a_bad_log_level_is_one_line(tmp_path):
    """LOG_LEVEL=VERBOSE is refused like every other bad setting."""
    bot = await BotProcess(base_env(GOOGLE_API_KEY="k", LOG_LEVEL="VERBOSE"), tmp_path).start()
    assert await bot.wait(timeout=60) == 2
    [line] = bot.stderr.decode().strip().splitlines()
    assert line.startswith("countersign: invalid setting LOG_LEVEL"), line
