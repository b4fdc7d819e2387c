"""Installing into many workspaces: Bolt's OAuth flow, per-workspace tokens, uninstall.

The real bot (Bolt over HTTP, PostgreSQL) runs in OAuth mode against the Slack stand-in, which
plays Slack's authorize page and `oauth.v2.access`, and answers every Web API call per token.
A browser is played by httpx: it carries Bolt's state cookie from `/slack/install` to
`/slack/oauth_redirect`, as a browser does.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from http.cookies import SimpleCookie

import asyncpg
import httpx
import pytest
from cryptography.fernet import Fernet
from pydantic import SecretStr
from slack_sdk.oauth.installation_store.models.installation import Installation

from adapters.slack import blocks
from adapters.slack.installation_store import PostgresInstallationStore
from bot.settings import EncryptionSettings, Settings, SlackSettings
from bot.storage.secret_box import SecretBox
from countersign.server import BotServer
from tests.e2e.conftest import SIGNING_SECRET, make_settings
from tests.e2e.slack.test_slack_flow import _actions, settle
from tests.standins.gemini import GeminiStandIn
from tests.standins.slack_api import ApiCall, SlackApiStandIn
from tests.standins.slack_events import SlackEventSender
from tests.support.barriers import GENEROUS_S, slack_listeners_done
from tests.support.bot_process import BotProcess, base_env, free_port
from tests.support.http_target import HttpTarget

pytestmark = pytest.mark.e2e

STATE_COOKIE = "slack-app-oauth-state"  # slack_sdk's OAuthStateUtils.default_cookie_name


@dataclass(frozen=True)
class Workspace:
    team: str
    bot_user: str
    channel: str
    person: str


A = Workspace(team="TAAA", bot_user="UBOTA", channel="CAAA", person="UANNA")
B = Workspace(team="TBBB", bot_user="UBOTB", channel="CBBB", person="UBEN")


@pytest.fixture
async def slack() -> AsyncIterator[SlackApiStandIn]:
    async with SlackApiStandIn(bot_token="xoxb-unused-default", team_id="T1", trigger_ttl_s=60.0) as server:
        for ws in (A, B):
            server.add_workspace(ws.team, bot_user_id=ws.bot_user, installer=ws.person)
            server.add_user(ws.person, ws.person.lower())
            server.add_channel(ws.channel, name=f"general-{ws.team.lower()}")
        yield server


@pytest.fixture
def settings(db_url: str, gemini: GeminiStandIn, slack: SlackApiStandIn, target: HttpTarget) -> Settings:
    base = make_settings(db_url, gemini, slack, target)
    oauth = SlackSettings(
        client_id=slack.client_id,
        client_secret=slack.client_secret,
        signing_secret=SIGNING_SECRET,
        api_url=slack.base_url,
        authorize_url=slack.oauth_authorize_url,
    )
    return base.model_copy(update={"slack": oauth})


@pytest.fixture
async def bot(settings: Settings, slack: SlackApiStandIn) -> AsyncIterator[BotServer]:
    async with BotServer(settings) as server:
        slack.redirect_url = f"http://127.0.0.1:{server.port}/slack/oauth_redirect"
        yield server


@pytest.fixture
async def browser() -> AsyncIterator[httpx.AsyncClient]:
    # No cookie jar of its own: Bolt's cookie is `Secure`, which a jar would not send over plain
    # HTTP; the tests carry it by hand, as a browser on HTTPS would.
    async with httpx.AsyncClient(timeout=GENEROUS_S, follow_redirects=False) as client:
        yield client


def sender(bot: BotServer, ws: Workspace) -> SlackEventSender:
    return SlackEventSender(
        f"http://127.0.0.1:{bot.port}/slack/events", SIGNING_SECRET, team_id=ws.team, bot_user_id=ws.bot_user
    )


async def start_install(browser: httpx.AsyncClient, bot: BotServer) -> tuple[str, str]:
    """`GET /slack/install`: Bolt redirects to Slack's authorize URL and sets its state cookie."""
    reply = await browser.get(f"http://127.0.0.1:{bot.port}/slack/install")
    assert reply.status_code == 302, reply.text
    cookie = SimpleCookie()
    cookie.load(reply.headers["set-cookie"])
    return reply.headers["location"], cookie[STATE_COOKIE].value


async def allow(browser: httpx.AsyncClient, authorize: str, team: str) -> httpx.Response:
    """The user clicks "Allow" on Slack's authorize page in workspace `team` (the stand-in's `team` parameter)."""
    return await browser.get(str(httpx.URL(authorize).copy_merge_params({"team": team})))


async def install(browser: httpx.AsyncClient, bot: BotServer, slack: SlackApiStandIn, ws: Workspace) -> None:
    """The whole flow: install page -> Slack's authorize page ("Allow" in `ws`) -> our redirect."""
    authorize, state = await start_install(browser, bot)
    assert authorize.startswith(slack.oauth_authorize_url + "?")
    allowed = await allow(browser, authorize, ws.team)
    assert allowed.status_code == 302, allowed.text
    done = await browser.get(allowed.headers["location"], headers={"Cookie": f"{STATE_COOKIE}={state}"})
    assert done.status_code == 200, done.text
    assert slack.tokens_of(ws.team), "the stand-in issued no token"


async def installations(db_url: str) -> dict[str, str]:
    """team id -> bot token, as stored."""
    connection = await asyncpg.connect(db_url)
    try:
        rows = await connection.fetch("SELECT team_id, bot_token FROM slack_installations")
    finally:
        await connection.close()
    return {row["team_id"]: row["bot_token"] for row in rows}


async def wait_reply(slack: SlackApiStandIn, thread_ts: str, starts: str) -> ApiCall:
    [call] = await slack.wait_for(
        "chat.postMessage",
        lambda a: a.get("thread_ts") == thread_ts and str(a.get("text", "")).startswith(starts),
        timeout=GENEROUS_S,
    )
    return call


def calls_in(slack: SlackApiStandIn, channel: str) -> list[ApiCall]:
    return [c for c in slack.calls if c.args.get("channel") == channel]


async def test_two_workspaces_install_and_each_is_answered_with_its_own_token(bot, slack, browser, db_url):
    """Two installs through Bolt's flow; a mention in each is answered with that workspace's bot token only."""
    await install(browser, bot, slack, A)
    await install(browser, bot, slack, B)
    [exchange_a, exchange_b] = slack.calls_to("oauth.v2.access")
    assert exchange_a.error is None and exchange_b.error is None
    # the requested scopes are the manifest's (adapters/slack/app.py BOT_SCOPES)
    [authorize, _] = slack.calls_to("oauth.authorize")
    assert "chat:write" in authorize.args["scope"] and "usergroups:read" in authorize.args["scope"]
    stored = await installations(db_url)
    assert stored == {A.team: slack.tokens_of(A.team)[0], B.team: slack.tokens_of(B.team)[0]}

    async with sender(bot, A) as events_a, sender(bot, B) as events_b:
        mention_a = await events_a.app_mention(A.channel, A.person, f"<@{A.bot_user}> hello from A")
        mention_b = await events_b.app_mention(B.channel, B.person, f"<@{B.bot_user}> hello from B")
        assert mention_a.status == 200 and mention_b.status == 200
        answer_a = await wait_reply(slack, mention_a.ts, "You said: hello from A")
        answer_b = await wait_reply(slack, mention_b.ts, "You said: hello from B")
    await settle(bot)
    await slack_listeners_done()
    assert (answer_a.token, answer_a.team_id) == (stored[A.team], A.team)
    assert (answer_b.token, answer_b.team_id) == (stored[B.team], B.team)
    # every call about a workspace's channel (answers, reactions) used that workspace's token
    assert {c.team_id for c in calls_in(slack, A.channel)} == {A.team}
    assert {c.team_id for c in calls_in(slack, B.channel)} == {B.team}
    assert not [c for c in slack.calls if c.error in ("not_authed", "invalid_auth")]


async def test_a_card_in_the_second_workspace_is_approved_and_installs_survive_a_restart(
    settings, slack, browser, db_url, target
):
    """After a restart (installs in PostgreSQL), workspace B's card is posted, approved and redrawn with B's token."""
    async with BotServer(settings) as first:
        slack.redirect_url = f"http://127.0.0.1:{first.port}/slack/oauth_redirect"
        await install(browser, first, slack, A)
        await install(browser, first, slack, B)
    token_b = slack.tokens_of(B.team)[0]

    async with BotServer(settings) as second, sender(second, B) as events_b, sender(second, A) as events_a:
        mention = await events_b.app_mention(B.channel, B.person, f"<@{B.bot_user}> post widget")
        [post] = await slack.wait_for("chat.postMessage", lambda a: bool(_actions(a.get("blocks"))), timeout=GENEROUS_S)
        assert (post.token, post.team_id) == (token_b, B.team)
        card_ts = post.response["ts"]
        approve = _actions(post.args["blocks"])[0]["elements"][0]
        # Edit opens its modal with Bolt's per-request client, which Bolt's authorize gave B's token
        await events_b.block_actions(
            B.person,
            B.channel,
            card_ts,
            blocks.ACTION_EDIT,
            approve["value"],
            slack.new_trigger_id(),
            thread_ts=mention.ts,
        )
        [opened] = await slack.wait_for("views.open", timeout=GENEROUS_S)
        assert opened.error is None and opened.token == token_b
        click = await events_b.block_actions(
            B.person,
            B.channel,
            card_ts,
            blocks.ACTION_APPROVE,
            approve["value"],
            slack.new_trigger_id(),
            thread_ts=mention.ts,
        )
        assert click.status == 200
        answer = await wait_reply(slack, mention.ts, "Result: ")
        assert answer.token == token_b
        [update] = await slack.wait_for("chat.update", lambda a: a.get("ts") == card_ts, timeout=GENEROUS_S)
        assert update.token == token_b
        # workspace A is still served after the restart, with its own token
        mention_a = await events_a.app_mention(A.channel, A.person, f"<@{A.bot_user}> still here")
        answer_a = await wait_reply(slack, mention_a.ts, "You said: still here")
        assert answer_a.team_id == A.team
        await settle(second)
        await slack_listeners_done()
    assert [r.json for r in target.requests] == [{"name": "widget"}]
    assert "Approved" in str(slack.message(B.channel, card_ts)["blocks"])


async def test_a_bad_or_expired_state_is_refused_and_nothing_is_stored(bot, slack, browser, db_url):
    """A forged, missing-cookie, reused or expired state gets Bolt's failure page; no code is exchanged."""
    redirect = f"http://127.0.0.1:{bot.port}/slack/oauth_redirect"

    # a state this bot never issued, even with a matching cookie
    forged = await browser.get(
        redirect, params={"code": "code-x", "state": "forged"}, headers={"Cookie": f"{STATE_COOKIE}=forged"}
    )
    assert forged.status_code == 401
    assert "Something Went Wrong" in forged.text and "invalid_state" in forged.text

    # an issued state, but from another browser (no cookie)
    authorize, state = await start_install(browser, bot)
    allowed = await allow(browser, authorize, A.team)
    no_cookie = await browser.get(allowed.headers["location"])
    assert no_cookie.status_code == 400 and "invalid_browser" in no_cookie.text

    # an issued state that expired before the user came back
    authorize, state = await start_install(browser, bot)
    connection = await asyncpg.connect(db_url)
    try:
        await connection.execute(
            "UPDATE slack_oauth_states SET expires_at = now() - interval '1 second' WHERE state = $1", state
        )
    finally:
        await connection.close()
    allowed = await allow(browser, authorize, A.team)
    expired = await browser.get(allowed.headers["location"], headers={"Cookie": f"{STATE_COOKIE}={state}"})
    assert expired.status_code == 401 and "invalid_state" in expired.text

    assert slack.calls_to("oauth.v2.access") == []
    assert await installations(db_url) == {}

    # a state is good once: the second use of a completed install's redirect is refused
    authorize, state = await start_install(browser, bot)
    allowed = await allow(browser, authorize, B.team)
    cookie = {"Cookie": f"{STATE_COOKIE}={state}"}
    assert (await browser.get(allowed.headers["location"], headers=cookie)).status_code == 200
    again = await browser.get(allowed.headers["location"], headers=cookie)
    assert again.status_code == 401 and "invalid_state" in again.text
    assert len(slack.calls_to("oauth.v2.access")) == 1
    assert set(await installations(db_url)) == {B.team}


async def count(db_url: str, sql: str, *args: object) -> int:
    connection = await asyncpg.connect(db_url)
    try:
        return int(await connection.fetchval(sql, *args))
    finally:
        await connection.close()


@pytest.mark.parametrize("how", ["app_uninstalled", "tokens_revoked"])
async def test_uninstall_removes_the_tokens_and_the_team_is_no_longer_answered(bot, slack, browser, db_url, how):
    """app_uninstalled / tokens_revoked delete A's installation; A's later events go unanswered, B still works."""
    await install(browser, bot, slack, A)
    await install(browser, bot, slack, B)
    async with sender(bot, A) as events_a, sender(bot, B) as events_b:
        # A has a conversation with a decision in it (an audit row) before it uninstalls
        mention = await events_a.app_mention(A.channel, A.person, f"<@{A.bot_user}> post widget")
        [post] = await slack.wait_for("chat.postMessage", lambda a: bool(_actions(a.get("blocks"))), timeout=GENEROUS_S)
        approve = _actions(post.args["blocks"])[0]["elements"][0]
        await events_a.block_actions(
            A.person,
            A.channel,
            post.response["ts"],
            blocks.ACTION_APPROVE,
            approve["value"],
            slack.new_trigger_id(),
            thread_ts=mention.ts,
        )
        await wait_reply(slack, mention.ts, "Result: ")
        await settle(bot)
        await slack_listeners_done()
        thread_a = f"slack:{A.team}:{A.channel}:{mention.ts}"
        audit_before = await count(db_url, "SELECT count(*) FROM audit_log WHERE thread_id = $1", thread_a)
        assert audit_before > 0

        # Slack revokes the tokens, then tells the app
        slack.revoke(A.team)
        if how == "app_uninstalled":
            gone = await events_a.event({"type": "app_uninstalled"})
        else:
            gone = await events_a.event({"type": "tokens_revoked", "tokens": {"oauth": [], "bot": [A.bot_user]}})
        assert gone.status == 200
        await slack_listeners_done()
        assert set(await installations(db_url)) == {B.team}
        # A's conversation and audit stay until retention
        assert await count(db_url, "SELECT count(*) FROM conversations WHERE thread_id = $1", thread_a) == 1
        assert await count(db_url, "SELECT count(*) FROM audit_log WHERE thread_id = $1", thread_a) == audit_before

        calls_before = len(slack.calls)
        later_a = await events_a.app_mention(A.channel, A.person, f"<@{A.bot_user}> anyone there?")
        assert later_a.status == 200  # Bolt answers (so Slack does not retry) and runs no listener
        later_b = await events_b.app_mention(B.channel, B.person, f"<@{B.bot_user}> still here")
        answer_b = await wait_reply(slack, later_b.ts, "You said: still here")
        assert answer_b.team_id == B.team
        await settle(bot)
        await slack_listeners_done()
    after = slack.calls[calls_before:]
    assert not [c for c in after if c.args.get("channel") == A.channel], "A was answered after uninstalling"
    assert not [c for c in after if c.error in ("not_authed", "invalid_auth")]
    assert (
        await count(db_url, "SELECT count(*) FROM inbox WHERE thread_id LIKE $1", f"slack:{A.team}:%:{later_a.ts}") == 0
    )


async def test_while_the_installations_cannot_be_read_slack_delivers_a_message_again(
    bot, slack, browser, db_url, caplog
):
    """The installation store cannot be read: Slack gets a 500, not a 200 asking to reinstall, and delivers the
    message again; once the store is back, that delivery is answered."""
    await install(browser, bot, slack, A)
    connection = await asyncpg.connect(db_url)
    try:
        await connection.execute("ALTER TABLE slack_installations RENAME TO slack_installations_away")
        async with sender(bot, A) as events:
            first = await events.app_mention(A.channel, A.person, f"<@{A.bot_user}> hello")
            assert (first.status, first.body) == (500, "")
            assert (await events.retry(first, retry_num=1)).status == 500
            await connection.execute("ALTER TABLE slack_installations_away RENAME TO slack_installations")
            assert (await events.retry(first, retry_num=2)).status == 200
            answer = await wait_reply(slack, first.ts, "You said: hello")
    finally:
        await connection.close()
    await settle(bot)
    assert answer.team_id == A.team
    refusals = [
        r.getMessage() for r in caplog.records if r.getMessage().startswith("answered a Slack request with 500")
    ]
    assert len(refusals) == 2 and f"could not read the Slack installation of team {A.team}" in refusals[0]
    assert not [c for c in slack.calls if "reinstall" in str(c.args.get("text", ""))]


@pytest.mark.parametrize("unreadable", ["inbox", "slack_installations"])
async def test_slack_s_last_retry_is_told_with_the_workspace_s_token_when_it_can_be_read(
    bot, slack, browser, db_url, caplog, unreadable
):
    """After Slack's last retry of a message the inbox never took, its sender is told with the workspace's own
    token; when the installations cannot be read either, there is no token, and the log says nobody was told."""
    await install(browser, bot, slack, A)
    connection = await asyncpg.connect(db_url)
    try:
        await connection.execute(f"ALTER TABLE {unreadable} RENAME TO {unreadable}_away")
        async with sender(bot, A) as events:
            first = await events.app_mention(A.channel, A.person, f"<@{A.bot_user}> hello")
            for retry_num in (1, 2, 3):
                assert (await events.retry(first, retry_num=retry_num)).status == 500
            if unreadable == "inbox":
                await slack.wait_for("chat.postEphemeral", timeout=GENEROUS_S)
            await slack_listeners_done()
        await connection.execute(f"ALTER TABLE {unreadable}_away RENAME TO {unreadable}")
    finally:
        await connection.close()
    notices = slack.calls_to("chat.postEphemeral")
    if unreadable == "inbox":
        [notice] = notices
        assert (notice.team_id, notice.args["channel"], notice.args["user"]) == (A.team, A.channel, A.person)
        assert "could not answer your message “hello”" in notice.args["text"]
    else:
        assert notices == []
        lost = [r.getMessage() for r in caplog.records if "without the workspace's token nobody" in r.getMessage()]
        assert len(lost) == 1 and lost[0].startswith("answered Slack's last delivery of an event with 500")


async def stored_row(db_url: str, team: str) -> str:
    """Workspace `team`'s whole stored row, every column, as PostgreSQL's text."""
    connection = await asyncpg.connect(db_url)
    try:
        return str(await connection.fetchval("SELECT t::text FROM slack_installations t WHERE team_id = $1", team))
    finally:
        await connection.close()


async def test_with_an_encryption_key_the_installed_token_is_stored_encrypted_and_answers_use_it(
    settings, slack, browser, db_url
):
    """COUNTERSIGN_ENCRYPTION_KEY set: the token Slack issued in the OAuth flow is not in its stored row; the workspace is answered with it."""
    keyed = settings.model_copy(
        update={"encryption": EncryptionSettings(keys=(SecretStr(Fernet.generate_key().decode()),))}
    )
    async with BotServer(keyed) as bot:
        slack.redirect_url = f"http://127.0.0.1:{bot.port}/slack/oauth_redirect"
        await install(browser, bot, slack, A)
        [token] = slack.tokens_of(A.team)
        row = await stored_row(db_url, A.team)
        assert token not in row and token.split("-")[-1] not in row and "fernet:" in row
        async with sender(bot, A) as events:
            mention = await events.app_mention(A.channel, A.person, f"<@{A.bot_user}> hello encrypted")
            answer = await wait_reply(slack, mention.ts, "You said: hello encrypted")
        await settle(bot)
        await slack_listeners_done()
    assert (answer.token, answer.team_id) == (token, A.team)


async def test_a_key_that_does_not_decrypt_the_stored_tokens_stops_the_start_in_one_line(
    db_url, gemini, slack, tmp_path
):
    """Tokens stored under one key and COUNTERSIGN_ENCRYPTION_KEY another: `countersign run` exits 2 naming the team, not the token."""
    pool = await asyncpg.create_pool(db_url, min_size=1, max_size=1)
    try:
        store = PostgresInstallationStore(pool, SecretBox([Fernet.generate_key().decode()]))
        await store.async_save(
            Installation(
                app_id="A1",
                team_id=A.team,
                bot_token="xoxb-under-the-old-key",
                bot_id="BA",
                bot_user_id=A.bot_user,
                user_id=A.person,
                installed_at=time.time(),
            )
        )
    finally:
        await pool.close()
    env = base_env(
        GOOGLE_API_KEY="e2e-gemini-key",
        GEMINI_BASE_URL=gemini.base_url,
        DATABASE_URL=db_url,
        SLACK_CLIENT_ID=slack.client_id,
        SLACK_CLIENT_SECRET=slack.client_secret,
        SLACK_SIGNING_SECRET=SIGNING_SECRET,
        SLACK_API_URL=slack.base_url,
        COUNTERSIGN_ENCRYPTION_KEY=Fernet.generate_key().decode(),
        PORT=str(free_port()),
        HOST="127.0.0.1",
    )
    bot = await BotProcess(env, tmp_path).start()
    try:
        code = await bot.wait(timeout=60)
    finally:  # a bot that did start (the key ignored) is stopped, not left running
        if bot.proc is not None and bot.proc.returncode is None:
            await bot.stop()
    err = bot.stderr.decode()
    assert code == 2, err
    assert err.strip().splitlines()[-1] == (
        f"countersign: cannot read the stored Slack bot token of team {A.team}: no key of COUNTERSIGN_ENCRYPTION_KEY "
        "decrypts the value; set COUNTERSIGN_ENCRYPTION_KEY to the key it was stored with (a newer key first, the "
        "older ones after it)"
    )
    assert "xoxb-under-the-old-key" not in err and "Traceback" not in err
