"""Slack installations in PostgreSQL: slack_sdk's `AsyncInstallationStore` over our asyncpg pool.

Bolt's OAuth flow saves an installation here after `oauth.v2.access`
(`/slack/oauth_redirect`), Bolt's authorize reads the workspace's bot from here on every
request, and Bolt's built-in `tokens_revoked` / `app_uninstalled` listeners delete from here
(slack-bolt docs, "Authenticating with OAuth"). The adapter's background work (expiry, upkeep,
recovery) looks the bot token up by team id here too (`adapters.slack.workspaces`).

Only the bot is kept: the app asks for bot scopes only (adapters/slack/manifest.yml), so an
installation has no user token worth storing; `async_find_installation` answers from the bot
row. Tokens are secrets: nothing here logs one, and with `COUNTERSIGN_ENCRYPTION_KEY` set the
bot token and its refresh token are stored encrypted (`bot.storage.secret_box`; `prepare`
encrypts what was stored before at start). See docs/decisions/0019 and
docs/decisions/0037-outages-probes-and-tokens-at-rest.md.
"""

from __future__ import annotations

import logging
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

import asyncpg
from slack_bolt.authorization import AuthorizeResult
from slack_bolt.authorization.async_authorize import AsyncInstallationStoreAuthorize
from slack_bolt.context.async_context import AsyncBoltContext
from slack_sdk.oauth.installation_store.async_installation_store import AsyncInstallationStore
from slack_sdk.oauth.installation_store.models.bot import Bot
from slack_sdk.oauth.installation_store.models.installation import Installation

from bot.base.errors import ConfigurationError
from bot.storage.secret_box import SecretBox, UnreadableSecretError

log = logging.getLogger(__name__)

_COLUMNS = (
    "enterprise_id, enterprise_name, team_id, team_name, app_id, bot_id, bot_user_id, bot_token, "
    "bot_scopes, bot_refresh_token, bot_token_expires_at, is_enterprise_install, installer_user_id, installed_at"
)


_FAILURES: ContextVar[list[Exception] | None] = ContextVar("slack_installation_reads_failed", default=None)
"""Where `PostgresInstallationStore` leaves a read that failed, for `StoreCheckingAuthorize` (set
around each authorize call only)."""


class InstallationStoreUnavailable(Exception):  # noqa: N818 - says what happened, as asyncpg's errors do
    """The installation store could not be read (the database did not answer): the request gets a 500."""


def _key(enterprise_id: str | None, team_id: str | None, is_enterprise_install: bool | None) -> tuple[str, str]:
    """The row key: an org-wide install (Enterprise Grid) is one row for the whole org."""
    if is_enterprise_install:
        return enterprise_id or "", ""
    return enterprise_id or "", team_id or ""


def _at(value: int | float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, UTC)


class PostgresInstallationStore(AsyncInstallationStore):
    """The `slack_installations` table (migrations/0006), one bot per workspace.

    Args:
        pool: the asyncpg pool.
        box: encrypts the tokens before they are written and decrypts them when read (None:
            no key, tokens stored as they are).

    Errors from asyncpg (the database is down) propagate: the OAuth redirect then shows
    Bolt's failure page, and a request authorized with `StoreCheckingAuthorize` is answered
    500 (an event is delivered again), as is one whose stored token no key decrypts
    (`UnreadableSecretError`; `prepare` refuses to start on one).
    """

    def __init__(self, pool: asyncpg.Pool, box: SecretBox | None = None) -> None:
        self._pool = pool
        self._box = box if box is not None else SecretBox()

    async def prepare(self) -> None:
        """At start: check every stored token can be read, and encrypt those that are not yet.

        Without a key, says (once, as a warning) that tokens are stored unencrypted. With one,
        rewrites each token stored in clear text (before the key was set) or under an older key
        (`COUNTERSIGN_ENCRYPTION_KEY` lists it after the newest), each row only if it is still
        as read, so workers starting together do it once.

        Raises:
            ConfigurationError: a stored token is encrypted and no key given decrypts it (or no
                key is set), naming the workspace, never the token.
        """
        if not self._box.encrypting:
            log.warning(
                "COUNTERSIGN_ENCRYPTION_KEY is not set: the Slack bot tokens of installed workspaces are stored "
                "unencrypted in PostgreSQL (table slack_installations; README, Installing into many workspaces)"
            )
        rows = await self._pool.fetch(
            "SELECT enterprise_key, team_key, bot_token, bot_refresh_token FROM slack_installations"
        )
        rewritten = 0
        for row in rows:
            try:
                stale = self._box.needs_sealing(row["bot_token"]) or self._box.needs_sealing(row["bot_refresh_token"])
            except UnreadableSecretError as exc:
                where = row["team_key"] or f"enterprise {row['enterprise_key']}"
                raise ConfigurationError(
                    f"cannot read the stored Slack bot token of team {where}: {exc}; set COUNTERSIGN_ENCRYPTION_KEY "
                    "to the key it was stored with (a newer key first, the older ones after it)"
                ) from None
            if not stale:
                continue
            updated = await self._pool.fetchval(
                """
                WITH updated AS (
                    UPDATE slack_installations SET bot_token = $5, bot_refresh_token = $6
                    WHERE enterprise_key = $1 AND team_key = $2
                      AND bot_token = $3 AND bot_refresh_token IS NOT DISTINCT FROM $4
                    RETURNING 1
                )
                SELECT count(*) FROM updated
                """,
                row["enterprise_key"],
                row["team_key"],
                row["bot_token"],
                row["bot_refresh_token"],
                self._box.seal(self._box.unseal(row["bot_token"])),
                self._box.seal(self._box.unseal(row["bot_refresh_token"])),
            )
            rewritten += int(updated)
        if self._box.encrypting:
            log.info(
                "Slack bot tokens are stored encrypted (COUNTERSIGN_ENCRYPTION_KEY): %d installation(s), "
                "%d encrypted with the newest key now",
                len(rows),
                rewritten,
            )

    @property
    def logger(self) -> logging.Logger:
        """The module's logger (slack_sdk's interface asks for one)."""
        return log

    async def async_save(self, installation: Installation) -> None:
        """Keep the installation's bot; a reinstall replaces the workspace's row.

        Args:
            installation: what Bolt built from `oauth.v2.access`; `installation.user_id` is
                kept as the installer.
        """
        await self._save(installation.to_bot(), installer=installation.user_id)

    async def async_save_bot(self, bot: Bot) -> None:
        """Keep the bot (Bolt calls this after refreshing a rotated token)."""
        await self._save(bot, installer=None)

    async def _save(self, bot: Bot, *, installer: str | None) -> None:
        enterprise_key, team_key = _key(bot.enterprise_id, bot.team_id, bot.is_enterprise_install)
        scopes = bot.bot_scopes if isinstance(bot.bot_scopes, str) else ",".join(bot.bot_scopes or ())
        await self._pool.execute(
            f"""
            INSERT INTO slack_installations (enterprise_key, team_key, {_COLUMNS})
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
            ON CONFLICT (enterprise_key, team_key) DO UPDATE SET
                enterprise_id = EXCLUDED.enterprise_id, enterprise_name = EXCLUDED.enterprise_name,
                team_id = EXCLUDED.team_id, team_name = EXCLUDED.team_name, app_id = EXCLUDED.app_id,
                bot_id = EXCLUDED.bot_id, bot_user_id = EXCLUDED.bot_user_id, bot_token = EXCLUDED.bot_token,
                bot_scopes = EXCLUDED.bot_scopes, bot_refresh_token = EXCLUDED.bot_refresh_token,
                bot_token_expires_at = EXCLUDED.bot_token_expires_at,
                is_enterprise_install = EXCLUDED.is_enterprise_install,
                installer_user_id = COALESCE(EXCLUDED.installer_user_id, slack_installations.installer_user_id),
                installed_at = EXCLUDED.installed_at
            """,  # noqa: S608 - the columns are constants
            enterprise_key,
            team_key,
            bot.enterprise_id,
            bot.enterprise_name,
            bot.team_id,
            bot.team_name,
            bot.app_id,
            bot.bot_id,
            bot.bot_user_id,
            self._box.seal(bot.bot_token),
            scopes,
            self._box.seal(bot.bot_refresh_token),
            _at(bot.bot_token_expires_at),
            bool(bot.is_enterprise_install),
            installer,
            _at(bot.installed_at) or datetime.now(UTC),
        )
        log.info("Slack installation saved for team %s (enterprise %s)", bot.team_id, bot.enterprise_id)

    async def async_find_bot(
        self,
        *,
        enterprise_id: str | None,
        team_id: str | None,
        is_enterprise_install: bool | None = False,
    ) -> Bot | None:
        """The workspace's bot, or None when the app is not installed there (or was uninstalled).

        `enterprise_id` None finds the workspace by team id alone, in or outside an org (`_find`).
        """
        row = await self._find(enterprise_id, team_id, is_enterprise_install)
        return None if row is None else self._bot(row)

    async def async_find_installation(
        self,
        *,
        enterprise_id: str | None,
        team_id: str | None,
        user_id: str | None = None,
        is_enterprise_install: bool | None = False,
    ) -> Installation | None:
        """The installation as far as it is kept (the bot and its installer), or None.

        A `user_id` other than the installer's finds nothing: no user tokens are stored.
        """
        row = await self._find(enterprise_id, team_id, is_enterprise_install)
        if row is None or (user_id is not None and user_id != row["installer_user_id"]):
            return None
        bot = self._bot(row)
        return Installation(
            app_id=bot.app_id,
            enterprise_id=bot.enterprise_id,
            enterprise_name=bot.enterprise_name,
            team_id=bot.team_id,
            team_name=bot.team_name,
            bot_token=bot.bot_token,
            bot_id=bot.bot_id,
            bot_user_id=bot.bot_user_id,
            bot_scopes=bot.bot_scopes,
            bot_refresh_token=bot.bot_refresh_token,
            bot_token_expires_at=bot.bot_token_expires_at,
            user_id=row["installer_user_id"] or "",
            is_enterprise_install=bot.is_enterprise_install,
            installed_at=bot.installed_at,
        )

    async def async_delete_bot(self, *, enterprise_id: str | None, team_id: str | None) -> None:
        """Forget the workspace's bot token (`tokens_revoked` naming the bot)."""
        await self._delete(enterprise_id, team_id)

    async def async_delete_installation(
        self, *, enterprise_id: str | None, team_id: str | None, user_id: str | None = None
    ) -> None:
        """Forget a user's tokens: none are stored, so only a whole-workspace call (no user) deletes."""
        if user_id is None:
            await self._delete(enterprise_id, team_id)

    async def async_delete_all(self, *, enterprise_id: str | None, team_id: str | None) -> None:
        """Forget everything about the workspace (`app_uninstalled`). Its conversations and audit stay."""
        await self._delete(enterprise_id, team_id)

    async def _find(
        self, enterprise_id: str | None, team_id: str | None, is_enterprise_install: bool | None
    ) -> asyncpg.Record | None:
        """The row of the workspace (or of the org, for an org-wide install).

        Without an enterprise id a workspace is found by its team id whatever org it belongs
        to: the adapter's own calls (`WorkspaceClients`) know only the team id, while a
        workspace of an Enterprise Grid org is stored under its enterprise id too. Team ids
        are unique across Slack, so this finds no other workspace.

        Raises:
            Exception: asyncpg's, when the database cannot be read (also left for
                `StoreCheckingAuthorize`, which Bolt would not tell it).
        """
        try:
            return await self._read(enterprise_id, team_id, is_enterprise_install)
        except Exception as exc:
            failures = _FAILURES.get()
            if failures is not None:
                failures.append(exc)
            raise

    async def _read(
        self, enterprise_id: str | None, team_id: str | None, is_enterprise_install: bool | None
    ) -> asyncpg.Record | None:
        enterprise_key, team_key = _key(enterprise_id, team_id, is_enterprise_install)
        if enterprise_id is None and team_key:
            row: asyncpg.Record | None = await self._pool.fetchrow(
                f"SELECT {_COLUMNS} FROM slack_installations WHERE team_key = $1 "  # noqa: S608
                "ORDER BY enterprise_key LIMIT 1",
                team_key,
            )
            return row
        row = await self._pool.fetchrow(
            f"SELECT {_COLUMNS} FROM slack_installations WHERE enterprise_key = $1 AND team_key = $2",  # noqa: S608
            enterprise_key,
            team_key,
        )
        return row

    async def _delete(self, enterprise_id: str | None, team_id: str | None) -> None:
        # Exactly the workspace's row: a workspace leaving must not take an org-wide install
        # (keyed with team '') of its enterprise along with it.
        deleted = await self._pool.fetchval(
            """
            WITH gone AS (
                DELETE FROM slack_installations WHERE enterprise_key = $1 AND team_key = $2 RETURNING 1
            )
            SELECT count(*) FROM gone
            """,
            enterprise_id or "",
            team_id or "",
        )
        log.info("Slack installation deleted for team %s (enterprise %s): %s row(s)", team_id, enterprise_id, deleted)

    def _bot(self, row: asyncpg.Record) -> Bot:
        """The row as slack_sdk's `Bot`, its tokens decrypted.

        Raises:
            UnreadableSecretError: no key decrypts them (replicas with different keys); left for
                `StoreCheckingAuthorize` like a failed read, so the request is answered 500.
        """
        try:
            token, refresh_token = self._box.unseal(row["bot_token"]), self._box.unseal(row["bot_refresh_token"])
        except UnreadableSecretError as exc:
            failures = _FAILURES.get()
            if failures is not None:
                failures.append(exc)
            raise
        return _bot(row, token, refresh_token)


class StoreCheckingAuthorize(AsyncInstallationStoreAuthorize):
    """Bolt's authorize from the installation store, failing the request when the store cannot be read.

    Bolt's own catches an exception of the store (and logs it at INFO) and goes on as for a
    workspace without an installation: it answers 200, with "please reinstall this app" as the
    body, or sent to a click's `response_url`. An event so answered is never delivered again:
    with the database down, every message was lost, and whoever clicked was told to reinstall.
    This one raises `InstallationStoreUnavailable` instead, so Bolt answers 500 and Slack
    delivers an event again, as it does when the inbox cannot take a message (docs/decisions/0009).
    A workspace that has no installation is answered as before.

    Takes the arguments of `AsyncInstallationStoreAuthorize`.
    """

    async def __call__(
        self,
        *,
        context: AsyncBoltContext,
        enterprise_id: str | None,
        team_id: str | None,
        user_id: str | None,
        actor_enterprise_id: str | None = None,
        actor_team_id: str | None = None,
        actor_user_id: str | None = None,
    ) -> AuthorizeResult | None:
        """Bolt's answer, unless it is "no installation" because the store could not be read.

        Raises:
            InstallationStoreUnavailable: the store failed and no installation was found.
        """
        failures: list[Exception] = []
        mark = _FAILURES.set(failures)
        try:
            result = await super().__call__(
                context=context,
                enterprise_id=enterprise_id,
                team_id=team_id,
                user_id=user_id,
                actor_enterprise_id=actor_enterprise_id,
                actor_team_id=actor_team_id,
                actor_user_id=actor_user_id,
            )
        finally:
            _FAILURES.reset(mark)
        if result is None and failures:
            cause = failures[-1]
            raise InstallationStoreUnavailable(
                f"could not read the Slack installation of team {team_id} ({type(cause).__name__}: {cause})"
            ) from cause
        return result


def _bot(row: asyncpg.Record, token: str | None, refresh_token: str | None) -> Bot:
    expires: datetime | None = row["bot_token_expires_at"]
    fields: dict[str, Any] = {
        "app_id": row["app_id"],
        "enterprise_id": row["enterprise_id"],
        "enterprise_name": row["enterprise_name"],
        "team_id": row["team_id"],
        "team_name": row["team_name"],
        "bot_token": token,
        "bot_id": row["bot_id"],
        "bot_user_id": row["bot_user_id"],
        "bot_scopes": row["bot_scopes"],
        "bot_refresh_token": refresh_token,
        "bot_token_expires_at": None if expires is None else int(expires.timestamp()),
        "is_enterprise_install": row["is_enterprise_install"],
        "installed_at": row["installed_at"].timestamp(),
    }
    return Bot(**fields)
