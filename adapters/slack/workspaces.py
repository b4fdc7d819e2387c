"""Which Web API client speaks for a workspace: one bot token, or each workspace's own.

Inside a Bolt request, Bolt's authorize already put the workspace's token on `context.client`.
The adapter's own calls (answers, cards, expiry notices, the upkeep's recovery: often outside
any request, and after a restart) go through `WorkspaceClients.client(team_id)` instead, so
that a workspace is always answered with its own token (docs/decisions/0019).
"""

from __future__ import annotations

import logging

import aiohttp
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.oauth.installation_store.async_installation_store import AsyncInstallationStore
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.web_client import CountedWebClient

log = logging.getLogger(__name__)


def _patient() -> list[AsyncRetryHandler]:
    return [
        AsyncConnectionErrorRetryHandler(max_retry_count=2),
        AsyncRateLimitErrorRetryHandler(max_retry_count=2),
        AsyncServerErrorRetryHandler(max_retry_count=2),
    ]


def _quick() -> list[AsyncRetryHandler]:
    # What only decorates a turn must not wait out a rate limit (see `SlackPlatform`).
    return [AsyncConnectionErrorRetryHandler(max_retry_count=1)]


class WorkspaceClients:
    """Web API clients per workspace, on one shared HTTP session.

    Args:
        session: the adapter's aiohttp session (closed by the adapter).
        base_url: `SLACK_API_URL`.
        token: the single bot token (`SLACK_BOT_TOKEN`); every workspace uses it.
        installations: instead of `token`, the installation store (OAuth mode): each
            workspace's bot token is read from it by team id on every call, so a workspace
            that uninstalled the app is never spoken for again, on any worker.

    Raises:
        ValueError: when neither or both of `token` and `installations` are given.
    """

    def __init__(
        self,
        session: aiohttp.ClientSession,
        base_url: str,
        *,
        token: str | None = None,
        installations: AsyncInstallationStore | None = None,
    ) -> None:
        if (token is None) == (installations is None):
            raise ValueError("give either a token or an installation store")
        self._session = session
        self._installations = installations
        self.base_url = base_url
        self.default = self._make(token, _patient())
        """The client Bolt is built with (in OAuth mode it has no token: Bolt's authorize adds one)."""
        self._default_quick = self._make(token, _quick())

    @property
    def multi_workspace(self) -> bool:
        """Whether each workspace has its own token (OAuth mode)."""
        return self._installations is not None

    async def client(self, team_id: str) -> AsyncWebClient:
        """The client for the workspace, retrying rate limits and server errors.

        In OAuth mode, a workspace without an installation gets a client with no token: Slack
        (or the stand-in) refuses its calls with `not_authed`, which every caller already
        handles as it handles a revoked token.
        """
        if self._installations is None:
            return self.default
        return self._make(await self._token_of(team_id), _patient())

    async def quick(self, team_id: str) -> AsyncWebClient:
        """As `client`, without waiting out rate limits (for decoration)."""
        if self._installations is None:
            return self._default_quick
        return self._make(await self._token_of(team_id), _quick())

    async def _token_of(self, team_id: str) -> str | None:
        if self._installations is None:
            return None
        bot = await self._installations.async_find_bot(enterprise_id=None, team_id=team_id)
        if bot is None:
            log.info("no Slack installation for team %s: its calls go out without a token", team_id)
            return None
        return bot.bot_token

    def _make(self, token: str | None, retry_handlers: list[AsyncRetryHandler]) -> CountedWebClient:
        # A client is a few attributes on the shared session: cheap to make per call.
        return CountedWebClient(
            token=token, base_url=self.base_url, session=self._session, retry_handlers=retry_handlers
        )
