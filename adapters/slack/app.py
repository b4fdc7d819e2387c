"""The Slack adapter: a slack-bolt `AsyncApp` wired to the core.

HTTP mode serves `POST /slack/events` (Bolt verifies the signing secret and the timestamp,
per Slack's "Verifying requests from Slack"); Socket Mode is used instead when
`SLACK_APP_TOKEN` is set. `SLACK_API_URL` points the Web API client elsewhere (tests).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING

import aiohttp
from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)

from adapters.slack.commands import SlackCommands
from adapters.slack.listeners import SlackListeners
from adapters.slack.platform import SlackPlatform, UserDirectory, finish_decorations
from adapters.slack.web_client import CountedWebClient
from bot.admin.service import AdminService
from bot.errors import ConfigurationError
from bot.service import Countersign
from bot.settings import SlackSettings

if TYPE_CHECKING:
    from adapters.slack.socket_mode import SocketModeConnection

log = logging.getLogger(__name__)


def _not_the_unused_token_warning(record: logging.LogRecord) -> bool:
    # Bolt reads SLACK_BOT_TOKEN from the environment itself and, since we pass a configured
    # client, warns on every start that the token "will be unused": true, and no mistake.
    return "will be unused" not in record.getMessage()


logging.getLogger("slack_bolt.AsyncApp").addFilter(_not_the_unused_token_warning)


def _not_the_refused_body(record: logging.LogRecord) -> bool:
    # Bolt logs a refused request with its whole body (at INFO). A replayed request is a real
    # one, with its `response_url` and the legacy verification token in the body; those must
    # not reach the log. `_refused_request` logs what an operator needs instead.
    return not record.getMessage().startswith("Invalid request signature detected")


logging.getLogger("slack_bolt.RequestVerification").addFilter(_not_the_refused_body)

EVENTS_PATH = "/slack/events"
_TIMESTAMP = re.compile(r"[0-9]{1,12}")
"""What `X-Slack-Request-Timestamp` must look like: Unix seconds."""
SOCKET_CONNECT_TIMEOUT_S = 60.0
"""How long `start` waits for the first Socket Mode connection. slack_sdk's `connect()` retries a
WebSocket that will not open forever (every `ping_interval`, with the same URL), so without a
bound the bot would hang at start, never listening, with only slack_sdk's retries in the log."""


class SlackAdapter:
    """Everything Slack: the Bolt app, its listeners, and the outbound port.

    Args:
        settings: Slack credentials and URLs.
        service: the core.
        admin: the `/countersign` commands.

    Construct it inside the running event loop (it opens an HTTP session).

    Raises:
        ConfigurationError: when the bot token is missing, or neither a signing secret (HTTP
            mode) nor an app token (Socket Mode) is set.
    """

    def __init__(self, settings: SlackSettings, service: Countersign, admin: AdminService) -> None:
        if settings.bot_token is None:
            raise ConfigurationError("SLACK_BOT_TOKEN is not set")
        if settings.signing_secret is None and settings.app_token is None:
            raise ConfigurationError("set SLACK_SIGNING_SECRET (HTTP events) or SLACK_APP_TOKEN (Socket Mode)")
        self._settings = settings
        # One HTTP session for every Web API call (slack_sdk opens one per call otherwise).
        self._session = aiohttp.ClientSession()
        self.client = CountedWebClient(
            token=settings.bot_token.get_secret_value(),
            base_url=settings.api_url,
            session=self._session,
            retry_handlers=[
                AsyncConnectionErrorRetryHandler(max_retry_count=2),
                AsyncRateLimitErrorRetryHandler(max_retry_count=2),
                AsyncServerErrorRetryHandler(max_retry_count=2),
            ],
        )
        self.users = UserDirectory(self.client)
        quick = CountedWebClient(
            token=settings.bot_token.get_secret_value(),
            base_url=settings.api_url,
            session=self._session,
            retry_handlers=[AsyncConnectionErrorRetryHandler(max_retry_count=1)],
        )
        self.platform = SlackPlatform(self.client, self.users, quick)
        self.app = AsyncApp(
            client=self.client,
            signing_secret=settings.signing_secret.get_secret_value() if settings.signing_secret else None,
            # Socket Mode carries no signature; HTTP mode always verifies.
            request_verification_enabled=settings.app_token is None,
        )
        self.app.error(self._on_error)
        SlackListeners(service, self.platform, self.users, admin).register(self.app)
        SlackCommands(admin, self.users).register(self.app)
        self._socket: SocketModeConnection | None = None

    @property
    def socket_mode(self) -> bool:
        """Whether events arrive over Socket Mode instead of HTTP."""
        return self._settings.app_token is not None

    async def handle_http(self, request: web.Request) -> web.Response:
        """`POST /slack/events`: hand the request to Bolt and return its response.

        A request Bolt refuses for its signature or timestamp gets Bolt's 401 and one warning
        line (see `_refused_request`), as does a timestamp that is not a number. A body that is
        not UTF-8 or not JSON, or a payload so malformed that Bolt itself fails on it while matching
        listeners (an empty `actions` list, say), gets a 400 and a warning, not a 500 and a
        traceback: the sender is at fault, and nothing ran.
        """
        if not _TIMESTAMP.fullmatch(request.headers.get("X-Slack-Request-Timestamp", "0")):
            # Bolt would fail on it inside its middleware (a 500 and a traceback).
            _refused_request(request)
            return web.json_response({"error": "invalid request"}, status=401)
        try:
            bolt_response = await self.app.async_dispatch(await to_bolt_request(request))
        except Exception as exc:
            # The exception's text, never its repr: a UnicodeDecodeError's repr holds the body.
            reason = f"{type(exc).__name__}: {str(exc)[:200]}"
            log.warning("refused a Slack request Bolt could not read (from %s): %s", request.remote, reason)
            return web.json_response({"error": "invalid request"}, status=400)
        if bolt_response.status == 401:
            _refused_request(request)
        return await to_aiohttp_response(bolt_response)

    def add_routes(self, web_app: web.Application) -> None:
        """Mount the events endpoint (HTTP mode only)."""
        if not self.socket_mode:
            web_app.router.add_post(EVENTS_PATH, self.handle_http)

    async def start(self) -> None:
        """Check the credentials with Slack, then connect Socket Mode when configured.

        `auth.test` proves SLACK_BOT_TOKEN (and SLACK_API_URL) before the bot says it is
        running; with Socket Mode, `apps.connections.open` proves SLACK_APP_TOKEN, which the
        Socket Mode client would otherwise retry forever.

        Raises:
            ConfigurationError: Slack refused a token, the Web API cannot be reached, or the
                Socket Mode WebSocket did not open within `SOCKET_CONNECT_TIMEOUT_S`.
        """
        await self._check("SLACK_BOT_TOKEN", self.client.auth_test())
        if not self.socket_mode:
            return
        from adapters.slack.socket_mode import SocketModeConnection

        token = self._settings.app_token
        if token is None:  # pragma: no cover - socket_mode checked it
            return
        await self._check("SLACK_APP_TOKEN", self.client.apps_connections_open(app_token=token.get_secret_value()))
        self._socket = SocketModeConnection(self.app, token.get_secret_value())
        try:
            await self._socket.connect(SOCKET_CONNECT_TIMEOUT_S)
        except TimeoutError:
            raise ConfigurationError(
                f"Slack Socket Mode did not connect within {SOCKET_CONNECT_TIMEOUT_S:.0f}s: apps.connections.open "
                f"at {self.client.base_url} answered, but the WebSocket it named did not open (see the errors above)"
            ) from None
        log.info("Slack Socket Mode connected")

    async def connected(self) -> bool:
        """Whether Slack can reach the bot now (`GET /readyz`).

        HTTP mode keeps no connection (Slack calls in; `start` proved the token), so it is
        connected once started; Socket Mode asks slack_sdk's client (`is_connected`: the
        WebSocket open and its pings answered).
        """
        if not self.socket_mode:
            return True
        if self._socket is None:
            return False
        return await self._socket.is_connected()

    async def stop_receiving(self) -> None:
        """Stop taking Slack's events, before the core drains its in-flight turns (shutdown).

        Socket Mode: envelopes no longer acknowledged, those in hand finished (bounded), the
        socket closed (`SocketModeConnection.stop_receiving`). HTTP mode: nothing, the
        server's own listener stops taking requests.
        """
        if self._socket is not None:
            await self._socket.stop_receiving()

    async def close(self) -> None:
        """Disconnect Socket Mode, let background decoration finish (bounded), close the Web API session."""
        if self._socket is not None:
            await self._socket.close()
        await finish_decorations()  # the hourglass of the last turns comes off before the session closes
        await self._session.close()

    async def _check(self, variable: str, call: Awaitable[object]) -> None:
        try:
            await call
        except SlackApiError as exc:
            error = exc.response.get("error") if exc.response is not None else None
            raise ConfigurationError(f"Slack refused {variable} ({error or 'no reason given'})") from None
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            reason = str(exc) or type(exc).__name__
            raise ConfigurationError(f"cannot reach the Slack Web API at {self.client.base_url}: {reason}") from None

    async def _on_error(self, error: Exception) -> None:
        # A listener's exception is logged here; Slack users never see a stack trace.
        log.error("unhandled error in a Slack listener", exc_info=error)


def _refused_request(request: web.Request) -> None:
    """Log a request Bolt refused (bad signature, or a timestamp over five minutes from now).

    Such a request has no authenticated sender, so there is no actor for an audit row (the
    audit log holds decisions and refusals of people the platform vouched for); this warning
    is its record: where it came from, how old its timestamp was, whether Slack says it is a
    retry. The body is not logged (a replayed request carries a live `response_url`).
    """
    stamp = request.headers.get("X-Slack-Request-Timestamp", "")
    try:
        age = f"{time.time() - int(stamp):.0f}s old"
    except (ValueError, OverflowError):
        age = "no valid timestamp"
    log.warning(
        "refused a Slack request that failed signature verification: from %s, timestamp %s, "
        "signature %s, retry %s, %s bytes",
        request.remote,
        age,
        "present" if request.headers.get("X-Slack-Signature") else "missing",
        request.headers.get("X-Slack-Retry-Num", "no"),
        request.content_length,
    )
