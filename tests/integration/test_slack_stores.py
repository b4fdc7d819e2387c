"""The PostgreSQL installation and OAuth state stores, through slack_sdk's interfaces, on a real database."""

from __future__ import annotations

import time

from slack_sdk.oauth.installation_store.models.installation import Installation

from adapters.slack.installation_store import PostgresInstallationStore
from adapters.slack.state_store import PostgresOAuthStateStore
from bot.storage.database import Database


def installation(team: str, token: str, *, user: str = "UINSTALLER") -> Installation:
    return Installation(
        app_id="A1",
        team_id=team,
        team_name=f"Team {team}",
        bot_token=token,
        bot_id=f"B{team}",
        bot_user_id=f"UBOT{team}",
        bot_scopes="chat:write,commands",
        user_id=user,
        installed_at=time.time(),
    )


async def test_an_installation_is_saved_found_by_team_and_replaced_on_reinstall(database: Database):
    """Save, find the bot by team id, reinstall replaces the token; other teams are separate."""
    store = PostgresInstallationStore(database.pool)
    await store.async_save(installation("T1", "xoxb-one"))
    await store.async_save(installation("T2", "xoxb-two"))
    bot = await store.async_find_bot(enterprise_id=None, team_id="T1")
    assert bot is not None
    assert (bot.bot_token, bot.bot_user_id, bot.bot_id, bot.team_name) == ("xoxb-one", "UBOTT1", "BT1", "Team T1")
    assert bot.bot_scopes == ["chat:write", "commands"]
    await store.async_save(installation("T1", "xoxb-one-again"))
    again = await store.async_find_bot(enterprise_id=None, team_id="T1")
    assert again is not None and again.bot_token == "xoxb-one-again"
    other = await store.async_find_bot(enterprise_id=None, team_id="T2")
    assert other is not None and other.bot_token == "xoxb-two"
    assert await store.async_find_bot(enterprise_id=None, team_id="T3") is None
    found = await store.async_find_installation(enterprise_id=None, team_id="T1")
    assert found is not None and found.bot_token == "xoxb-one-again" and found.user_id == "UINSTALLER"
    assert await store.async_find_installation(enterprise_id=None, team_id="T1", user_id="USOMEONE") is None


async def test_deleting_removes_only_that_workspace(database: Database):
    """delete_all and delete_bot forget one team; a user's deletion alone keeps the bot (no user tokens kept)."""
    store = PostgresInstallationStore(database.pool)
    for team in ("T1", "T2", "T3"):
        await store.async_save(installation(team, f"xoxb-{team}"))
    await store.async_delete_installation(enterprise_id=None, team_id="T1", user_id="UINSTALLER")
    assert await store.async_find_bot(enterprise_id=None, team_id="T1") is not None
    await store.async_delete_all(enterprise_id=None, team_id="T1")
    await store.async_delete_bot(enterprise_id=None, team_id="T2")
    assert await store.async_find_bot(enterprise_id=None, team_id="T1") is None
    assert await store.async_find_bot(enterprise_id=None, team_id="T2") is None
    assert await store.async_find_bot(enterprise_id=None, team_id="T3") is not None


async def test_a_state_is_valid_once_and_only_before_it_expires(database: Database):
    """An issued state is consumed once; an unknown one never; an expired one is refused (and gone)."""
    states = PostgresOAuthStateStore(database.pool)
    first, second = await states.async_issue(), await states.async_issue()
    assert first != second and len(first) >= 32
    assert await states.async_consume(first) is True
    assert await states.async_consume(first) is False
    assert await states.async_consume("never-issued") is False
    await database.pool.execute(
        "UPDATE slack_oauth_states SET expires_at = now() - interval '1 second' WHERE state = $1", second
    )
    assert await states.async_consume(second) is False
    assert await database.pool.fetchval("SELECT count(*) FROM slack_oauth_states") == 0


async def test_issuing_sweeps_expired_states(database: Database):
    """States nobody came back for do not pile up: the next issue deletes the expired ones."""
    states = PostgresOAuthStateStore(database.pool)
    old = await states.async_issue()
    await database.pool.execute(
        "UPDATE slack_oauth_states SET expires_at = now() - interval '1 hour' WHERE state = $1", old
    )
    fresh = await states.async_issue()
    assert [r["state"] for r in await database.pool.fetch("SELECT state FROM slack_oauth_states")] == [fresh]
