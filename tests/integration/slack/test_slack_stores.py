"""The PostgreSQL installation and OAuth state stores, through slack_sdk's interfaces, on a real database."""

from __future__ import annotations

import logging
import time

import pytest
from cryptography.fernet import Fernet
from slack_sdk.oauth.installation_store.models.installation import Installation

from adapters.slack.installation_store import PostgresInstallationStore
from adapters.slack.state_store import PostgresOAuthStateStore
from bot.base.errors import ConfigurationError
from bot.storage.database import Database
from bot.storage.secret_box import SecretBox, UnreadableSecretError

OLD_KEY, NEW_KEY = Fernet.generate_key().decode(), Fernet.generate_key().decode()


def installation(team: str, token: str, *, user: str = "UINSTALLER", refresh: str | None = None) -> Installation:
    return Installation(
        app_id="A1",
        team_id=team,
        team_name=f"Team {team}",
        bot_token=token,
        bot_refresh_token=refresh,
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


async def stored_rows(database: Database) -> dict[str, str]:
    """Each team's whole row as PostgreSQL holds it, in text (every column)."""
    rows = await database.pool.fetch("SELECT team_key, t::text AS whole FROM slack_installations t")
    return {row["team_key"]: row["whole"] for row in rows}


async def test_with_a_key_the_tokens_are_stored_encrypted_and_read_back(database: Database):
    """COUNTERSIGN_ENCRYPTION_KEY set: the stored row holds neither the bot token nor its refresh token; reads give them back."""
    store = PostgresInstallationStore(database.pool, SecretBox([NEW_KEY]))
    await store.async_save(installation("T1", "xoxb-secret-one", refresh="xoxe-1-refresh-one"))
    [whole] = (await stored_rows(database)).values()
    assert "secret-one" not in whole and "refresh-one" not in whole and "fernet:" in whole
    bot = await store.async_find_bot(enterprise_id=None, team_id="T1")
    assert bot is not None and (bot.bot_token, bot.bot_refresh_token) == ("xoxb-secret-one", "xoxe-1-refresh-one")
    found = await store.async_find_installation(enterprise_id=None, team_id="T1")
    assert found is not None and found.bot_token == "xoxb-secret-one"


async def test_tokens_stored_before_a_key_keep_working_and_are_encrypted_at_the_next_start(
    database: Database, caplog: pytest.LogCaptureFixture
):
    """Rows stored without a key are read with one, and the start encrypts them; without the key they are refused."""
    plain = PostgresInstallationStore(database.pool)
    with caplog.at_level(logging.WARNING, logger="adapters.slack.installation_store"):
        await plain.prepare()
    assert "COUNTERSIGN_ENCRYPTION_KEY is not set: the Slack bot tokens" in caplog.text
    await plain.async_save(installation("T1", "xoxb-plain-one"))
    await plain.async_save(installation("T2", "xoxb-plain-two", refresh="xoxe-1-plain-refresh"))
    assert "xoxb-plain-one" in (await stored_rows(database))["T1"]

    keyed = PostgresInstallationStore(database.pool, SecretBox([NEW_KEY]))
    before = await keyed.async_find_bot(enterprise_id=None, team_id="T1")
    assert before is not None and before.bot_token == "xoxb-plain-one"
    await keyed.prepare()
    rows = await stored_rows(database)
    assert not any(secret in whole for whole in rows.values() for secret in ("plain-one", "plain-two", "plain-refresh"))
    after = await keyed.async_find_bot(enterprise_id=None, team_id="T2")
    assert after is not None and (after.bot_token, after.bot_refresh_token) == (
        "xoxb-plain-two",
        "xoxe-1-plain-refresh",
    )
    await keyed.prepare()  # a second start finds nothing to do
    assert await stored_rows(database) == rows

    with pytest.raises(UnreadableSecretError):
        await plain.async_find_bot(enterprise_id=None, team_id="T1")
    with pytest.raises(
        ConfigurationError, match=r"team T1: the value is encrypted and COUNTERSIGN_ENCRYPTION_KEY is not set"
    ):
        await plain.prepare()


async def test_a_wrong_key_is_refused_at_start_and_an_old_key_after_the_new_one_rotates(database: Database):
    """Tokens under one key: another key alone is a start error naming the team; the new key first and the old after re-encrypt them."""
    await PostgresInstallationStore(database.pool, SecretBox([OLD_KEY])).async_save(installation("T1", "xoxb-rotated"))
    under_old = await stored_rows(database)
    wrong = PostgresInstallationStore(database.pool, SecretBox([NEW_KEY]))
    with pytest.raises(ConfigurationError) as refused:
        await wrong.prepare()
    assert "cannot read the stored Slack bot token of team T1: no key of COUNTERSIGN_ENCRYPTION_KEY decrypts" in str(
        refused.value
    )
    assert "xoxb-rotated" not in str(refused.value) and NEW_KEY not in str(refused.value)
    assert await stored_rows(database) == under_old

    rotating = PostgresInstallationStore(database.pool, SecretBox([NEW_KEY, OLD_KEY]))
    await rotating.prepare()
    assert await stored_rows(database) != under_old
    await wrong.prepare()  # the new key alone reads everything now
    bot = await wrong.async_find_bot(enterprise_id=None, team_id="T1")
    assert bot is not None and bot.bot_token == "xoxb-rotated"
