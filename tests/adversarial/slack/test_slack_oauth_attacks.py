"""Attacks on Slack OAuth distribution (docs/decisions/0019), against the real bot in OAuth mode."""

from __future__ import annotations

import io
import json
import logging

import httpx
import pytest

from adapters.slack import blocks
from countersign.logs import _QUIET, _formatter
from tests.e2e.conftest import SIGNING_SECRET
from tests.e2e.slack.test_slack_flow import _actions, settle
from tests.e2e.slack.test_slack_oauth_flow import (  # noqa: F401 - fixtures, found by pytest by name
    STATE_COOKIE,
    A,
    B,
    Workspace,
    bot,
    browser,
    install,
    installations,
    sender,
    settings,
    slack,
    start_install,
    wait_reply,
)
from tests.standins.slack_events import SlackEventSender
from tests.support.barriers import GENEROUS_S, slack_listeners_done, wait_until_async

pytestmark = pytest.mark.e2e

GRID = Workspace(team="TGRID", bot_user="UBOTG", channel="CGRID", person="UGWEN")
ORG = "EORG1"


async def test_a_workspace_of_an_enterprise_grid_org_is_answered_with_its_token(bot, slack, browser, db_url):  # noqa: F811
    """A workspace inside an Enterprise Grid org installs (not org-wide): its mention is answered with its token.

    Its installation is stored under its enterprise id; the adapter's own calls (the answer) look
    the token up by team id only, so they must still find it, not go out with no token.
    """
    slack.add_workspace(GRID.team, bot_user_id=GRID.bot_user, installer=GRID.person, enterprise_id=ORG)
    slack.add_user(GRID.person, "gwen")
    slack.add_channel(GRID.channel, name="general-grid")
    await install(browser, bot, slack, GRID)
    [token] = slack.tokens_of(GRID.team)
    assert await installations(db_url) == {GRID.team: token}

    async with SlackEventSender(
        f"http://127.0.0.1:{bot.port}/slack/events",
        SIGNING_SECRET,
        team_id=GRID.team,
        bot_user_id=GRID.bot_user,
        enterprise_id=ORG,
    ) as events:
        mention = await events.app_mention(GRID.channel, GRID.person, f"<@{GRID.bot_user}> hello from the org")
        assert mention.status == 200
        answer = await wait_reply(slack, mention.ts, "You said: hello from the org")
        await settle(bot)
        await slack_listeners_done()
    assert (answer.token, answer.team_id) == (token, GRID.team)
    assert not [c for c in slack.calls if c.error in ("not_authed", "invalid_auth")]


async def test_a_forged_code_on_the_redirect_is_refused_and_not_logged(bot, slack, browser, db_url, caplog):  # noqa: F811
    """Anyone may start an install and come back with a code of their own: a multi-line, 4 kB one.

    The browser gets Bolt's failure page, nothing is stored, and the code (untrusted text; when
    genuine, a one-time credential) is not copied into the log, where its line breaks would
    forge log lines in the text format.
    """
    caplog.set_level(logging.INFO)
    _, state = await start_install(browser, bot)
    forged = "x" * 4000 + "\n2026-12-04 21:00:00,000 CRITICAL bot.audit.entries: approval granted by UADMIN"
    reply = await browser.get(
        f"http://127.0.0.1:{bot.port}/slack/oauth_redirect",
        params={"state": state, "code": forged},
        headers={"Cookie": f"{STATE_COOKIE}={state}"},
    )
    assert reply.status_code == 401 and "invalid_code" in reply.text
    [exchange] = slack.calls_to("oauth.v2.access")
    assert exchange.error == "invalid_code"
    assert await installations(db_url) == {}
    # the bot's records (httpx's are the test browser's own)
    logged = [r.getMessage() for r in caplog.records if not r.name.startswith(("httpx", "httpcore"))]
    assert not [m for m in logged if "CRITICAL bot.audit.entries" in m or "x" * 100 in m], logged
    assert any("oauth.v2.access" in m and "invalid_code" in m for m in logged), logged


async def test_a_click_signed_for_another_workspace_cannot_decide_a_card(bot, slack, browser, db_url, target):  # noqa: F811
    """Both workspaces installed; A's card is clicked in payloads naming team B (B's user, then A's user id).

    The app has one signing secret for every workspace, so such a payload is correctly signed;
    the clicker is of workspace B and the card is A's: refused each time, nothing runs, and A's
    requester can still approve.
    """
    await install(browser, bot, slack, A)
    await install(browser, bot, slack, B)
    async with sender(bot, A) as events_a, sender(bot, B) as events_b:
        mention = await events_a.app_mention(A.channel, A.person, f"<@{A.bot_user}> post widget")
        [post] = await slack.wait_for("chat.postMessage", lambda a: bool(_actions(a.get("blocks"))), timeout=GENEROUS_S)
        card_ts = post.response["ts"]
        approve = _actions(post.args["blocks"])[0]["elements"][0]
        for person in (B.person, A.person):
            click = await events_b.block_actions(
                person,
                A.channel,
                card_ts,
                blocks.ACTION_APPROVE,
                approve["value"],
                slack.new_trigger_id(),
                thread_ts=mention.ts,
            )
            assert click.status == 200
        await slack_listeners_done()
        await settle(bot)
        assert target.requests == []
        assert bot.runtime is not None
        pool = bot.runtime.database.pool
        assert await pool.fetchval("SELECT status FROM approvals") == "pending"
        # each refusal is audited on A's card, naming the clicker's own workspace (B), not A's
        refusals = await pool.fetch(
            "SELECT actor_id, workspace_id, reason, detail->>'actor_workspace_id' AS actor_workspace "
            "FROM audit_log WHERE kind = 'refused'"
        )
        assert sorted(tuple(r) for r in refusals) == sorted(
            [(B.person, A.team, "other_workspace", B.team), (A.person, A.team, "other_workspace", B.team)]
        ), refusals
        # the card's own requester, in its own workspace, still decides it
        await events_a.block_actions(
            A.person,
            A.channel,
            card_ts,
            blocks.ACTION_APPROVE,
            approve["value"],
            slack.new_trigger_id(),
            thread_ts=mention.ts,
        )
        await wait_reply(slack, mention.ts, "Result: ")
        await settle(bot)
        await slack_listeners_done()
    assert [r.json for r in target.requests] == [{"name": "widget"}]


async def test_an_error_or_an_oversized_redirect_changes_nothing(bot, slack, browser, db_url):  # noqa: F811
    """`?error=<script>...` (the user cancelled, or a forged link) gets Bolt's failure page with the text escaped;
    a 20 kB code is refused by the HTTP server; neither exchanges a code or stores anything, and
    the browser's state still completes its install afterwards.
    """
    authorize, state = await start_install(browser, bot)
    redirect = f"http://127.0.0.1:{bot.port}/slack/oauth_redirect"
    cookie = {"Cookie": f"{STATE_COOKIE}={state}"}
    cancelled = await browser.get(
        redirect, params={"error": "<script>alert(1)</script>", "state": state}, headers=cookie
    )
    assert cancelled.status_code == 200
    assert "<script>" not in cancelled.text and "alert(1)" in cancelled.text  # shown, escaped
    huge = await browser.get(redirect, params={"code": "c" * 20_000, "state": state}, headers=cookie)
    assert 400 <= huge.status_code < 500
    assert slack.calls_to("oauth.v2.access") == []
    assert await installations(db_url) == {}
    allowed = await browser.get(str(httpx.URL(authorize).copy_merge_params({"team": A.team})))
    done = await browser.get(allowed.headers["location"], headers=cookie)
    assert done.status_code == 200, done.text
    assert set(await installations(db_url)) == {A.team}


async def test_json_logs_of_installs_and_uninstalls_hold_no_token_or_secret(bot, slack, browser, db_url):  # noqa: F811
    """LOG_FORMAT=json at INFO, libraries at WARNING as `countersign.logs` sets them: install A, answer,
    refuse a forged code, uninstall A and fail to answer it. No bot token, no client secret in any line."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(_formatter("json"))
    root = logging.getLogger()
    levels = {name: logging.getLogger(name).level for name in ("", *_QUIET)}
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    for name in _QUIET:
        logging.getLogger(name).setLevel(logging.WARNING)
    try:
        await install(browser, bot, slack, A)
        _, state = await start_install(browser, bot)
        await browser.get(
            f"http://127.0.0.1:{bot.port}/slack/oauth_redirect",
            params={"state": state, "code": "forged"},
            headers={"Cookie": f"{STATE_COOKIE}={state}"},
        )
        async with sender(bot, A) as events_a:
            mention = await events_a.app_mention(A.channel, A.person, f"<@{A.bot_user}> hello")
            await wait_reply(slack, mention.ts, "You said: hello")
            slack.revoke(A.team)
            await events_a.event({"type": "app_uninstalled"})
            await slack_listeners_done()
            await settle(bot)
    finally:
        root.removeHandler(handler)
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
    lines = stream.getvalue().splitlines()
    assert lines and all(json.loads(line) for line in lines)
    secrets_ = [*slack.tokens_of(A.team), slack.client_secret]
    leaked = [line for line in lines for secret in secrets_ if secret in line]
    assert not leaked, leaked


async def test_a_card_pending_when_its_workspace_uninstalls_expires_without_a_storm(bot, slack, browser, db_url):  # noqa: F811
    """A's card waits; A uninstalls; the card expires. The expiry is recorded once, the few posts
    Slack refuses (no token) are not retried in a loop: the run's outcome is left to the
    upkeep's backoff (half a minute and more), and the bot stays healthy and serves B."""
    await install(browser, bot, slack, A)
    await install(browser, bot, slack, B)
    async with sender(bot, A) as events_a, sender(bot, B) as events_b:
        await events_a.app_mention(A.channel, A.person, f"<@{A.bot_user}> post widget")
        await slack.wait_for("chat.postMessage", lambda a: bool(_actions(a.get("blocks"))), timeout=GENEROUS_S)
        await settle(bot)
        slack.revoke(A.team)
        assert (await events_a.event({"type": "app_uninstalled"})).status == 200
        await slack_listeners_done()
        assert bot.runtime is not None
        pool = bot.runtime.database.pool
        await pool.execute("UPDATE approvals SET expires_at = now() - interval '1 second'")

        async def given_up_for_now() -> bool:
            return bool(
                await pool.fetchval(
                    "SELECT count(*) FROM conversations WHERE workspace_id = $1 AND retry_at IS NOT NULL", A.team
                )
            )

        await wait_until_async(given_up_for_now, "the expired run's outcome left to the upkeep")
        await settle(bot)
        assert await pool.fetchval("SELECT status FROM approvals") == "expired"
        assert await pool.fetchval("SELECT count(*) FROM audit_log WHERE kind = 'expiry'") == 1
        retry_in = await pool.fetchval(
            "SELECT extract(epoch FROM retry_at - now()) FROM conversations WHERE workspace_id = $1", A.team
        )
        assert retry_in > 10, f"the outcome is retried again in {retry_in:.1f} s"
        refused = [c for c in slack.calls if c.error == "not_authed"]
        assert 0 < len(refused) <= 8, [(c.method, c.error) for c in refused]
        later_b = await events_b.app_mention(B.channel, B.person, f"<@{B.bot_user}> still here")
        await wait_reply(slack, later_b.ts, "You said: still here")
        await settle(bot)
        await slack_listeners_done()


async def test_a_card_pending_across_a_reinstall_is_decided_with_the_new_token(bot, slack, browser, db_url, target):  # noqa: F811
    """A's card waits; A uninstalls (its token revoked) and installs again: the requester's Approve
    runs the call once and the card is redrawn with the new token, not the revoked one."""
    await install(browser, bot, slack, A)
    async with sender(bot, A) as events_a:
        mention = await events_a.app_mention(A.channel, A.person, f"<@{A.bot_user}> post widget")
        [post] = await slack.wait_for("chat.postMessage", lambda a: bool(_actions(a.get("blocks"))), timeout=GENEROUS_S)
        await settle(bot)
        [old_token] = slack.tokens_of(A.team)
        slack.revoke(A.team)
        assert (await events_a.event({"type": "app_uninstalled"})).status == 200
        await slack_listeners_done()
        await install(browser, bot, slack, A)
        new_token = (await installations(db_url))[A.team]
        assert new_token != old_token
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
        answer = await wait_reply(slack, mention.ts, "Result: ")
        [update] = await slack.wait_for("chat.update", lambda a: a.get("ts") == post.response["ts"], timeout=GENEROUS_S)
        await settle(bot)
        await slack_listeners_done()
    assert (answer.token, update.token) == (new_token, new_token)
    assert [r.json for r in target.requests] == [{"name": "widget"}]
