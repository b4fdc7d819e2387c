"""The Slack adapter: a slack-bolt `AsyncApp` wired to the core.

HTTP mode serves `POST /slack/events` (Bolt verifies the signing secret and the timestamp,
per Slack's "Verifying requests from Slack"); Socket Mode is used instead when
`SLACK_APP_TOKEN` is set. `SLACK_API_URL` points the Web API client elsewhere (tests).

With `SLACK_CLIENT_ID` and `SLACK_CLIENT_SECRET` instead of `SLACK_BOT_TOKEN` (OAuth mode,
docs/decisions/0019), Bolt's own OAuth flow also serves `GET /slack/install` and
`GET /slack/oauth_redirect`, installations live in PostgreSQL, and Bolt's built-in listeners
delete a workspace's installation on `tokens_revoked` and `app_uninstalled`.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING

import aiohttp
import asyncpg
from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.async_app import AsyncApp
from slack_bolt.oauth.async_oauth_settings import AsyncOAuthSettings
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.errors import SlackApiError

from adapters.slack import ack_timing
from adapters.slack.after_ack import AfterAck
from adapters.slack.commands import SlackCommands
from adapters.slack.installation_store import (
    InstallationStoreUnavailable,
    PostgresInstallationStore,
    StoreCheckingAuthorize,
)
from adapters.slack.listeners import LAST_RETRY, SlackListeners, retry_num
from adapters.slack.platform import SlackPlatform, UserDirectory, finish_decorations
from adapters.slack.state_store import PostgresOAuthStateStore
from adapters.slack.workspaces import WorkspaceClients
from bot.admin.service import AdminService
from bot.base.errors import ConfigurationError, UnreachableError
from bot.service import Countersign
from bot.settings import SlackSettings
from bot.storage.secret_box import SecretBox

if TYPE_CHECKING:
    from adapters.slack.socket_mode import SocketModeConnection

log = logging.getLogger(__name__)


def _bolt_logger() -> logging.Logger:
    """Bolt's logger, from WARNING up (as `countersign.logs` keeps chatty libraries).

    Given no logger, Bolt copies the root logger's level onto its own, so `LOG_LEVEL=DEBUG`
    would log every Socket Mode envelope whole: people's messages and each click's
    `response_url`. Given one, Bolt hands its level to every logger it makes.
    """
    logger = logging.getLogger("slack_bolt.AsyncApp")
    logger.setLevel(max(logging.WARNING, logging.getLogger().getEffectiveLevel()))
    return logger


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

SLACK_OUTAGE_ERRORS = frozenset(
    {"ratelimited", "fatal_error", "internal_error", "service_unavailable", "request_timeout"}
)
"""Web API `error`s that mean "not now" (Slack's method docs, "Errors" common to every method),
whatever the HTTP status: a start that meets one tries again instead of calling it a refusal."""

_REFUSED_CODE = "Failed to fetch oauth.v2.access result with code: "
_SLACK_ERROR = re.compile(r"'error': '([a-z0-9_]{1,64})'")


def _without_the_code(record: logging.LogRecord) -> bool:
    # Bolt's OAuth flow logs a code Slack refused verbatim (at WARNING). Anyone can start an
    # install and come back to /slack/oauth_redirect with a code of their own: up to 8 kB of
    # text whose line breaks would forge log lines, and a genuine code is a one-time
    # credential. The line keeps only Slack's error code.
    message = record.getMessage()
    if message.startswith(_REFUSED_CODE):
        found = _SLACK_ERROR.findall(message)
        record.msg = "refused an OAuth redirect: Slack did not accept its code (oauth.v2.access: %s)"
        record.args = (found[-1] if found else "no reason given",)
    return True


logging.getLogger("slack_bolt.AsyncApp").addFilter(_without_the_code)

EVENTS_PATH = "/slack/events"
PROCESS_BEFORE_RESPONSE = True
"""Bolt answers Slack when a listener returns (`adapters.slack.after_ack` says why and how)."""
INSTALL_PATH = "/slack/install"
REDIRECT_PATH = "/slack/oauth_redirect"
BOT_SCOPES = (
    "app_mentions:read",
    "channels:history",
    "groups:history",
    "im:history",
    "mpim:history",
    "chat:write",
    "commands",
    "reactions:write",
    "users:read",
    "usergroups:read",
)
"""What an OAuth install asks for: the manifest's `oauth_config.scopes.bot`, in its order
(tests/unit/slack/test_manifest.py keeps the two equal)."""

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
        pool: the asyncpg pool, for the installation and OAuth state stores (OAuth mode only).
        box: encrypts the workspaces' bot tokens at rest (OAuth mode; `COUNTERSIGN_ENCRYPTION_KEY`);
            None: no key, stored as they are.

    Construct it inside the running event loop (it opens an HTTP session).

    Raises:
        ConfigurationError: when the bot token is missing, or neither a signing secret (HTTP
            mode) nor an app token (Socket Mode) is set; in OAuth mode, when the OAuth
            settings are incomplete or mixed with a bot token (`SlackSettings.problem`).
    """

    def __init__(
        self,
        settings: SlackSettings,
        service: Countersign,
        admin: AdminService,
        pool: asyncpg.Pool | None = None,
        *,
        box: SecretBox | None = None,
    ) -> None:
        if settings.problem is not None:
            raise ConfigurationError(settings.problem)
        if not settings.oauth and settings.bot_token is None:
            raise ConfigurationError("SLACK_BOT_TOKEN is not set")
        if settings.signing_secret is None and settings.app_token is None:
            raise ConfigurationError("set SLACK_SIGNING_SECRET (HTTP events) or SLACK_APP_TOKEN (Socket Mode)")
        if settings.oauth and pool is None:
            raise ConfigurationError("Slack OAuth installs need the database")
        self._settings = settings
        # One HTTP session for every Web API call (slack_sdk opens one per call otherwise).
        self._session = aiohttp.ClientSession()
        self.installations: PostgresInstallationStore | None = None
        oauth_settings: AsyncOAuthSettings | None = None
        if settings.oauth and pool is not None:
            self.installations = PostgresInstallationStore(pool, box)
            oauth_settings = self._oauth_settings(settings, self.installations, PostgresOAuthStateStore(pool))
            self.clients = WorkspaceClients(self._session, settings.api_url, installations=self.installations)
        else:
            token = settings.bot_token.get_secret_value() if settings.bot_token is not None else None
            self.clients = WorkspaceClients(self._session, settings.api_url, token=token)
        self.client = self.clients.default
        self.users = UserDirectory(self.clients)
        self.platform = SlackPlatform(self.clients, self.users)
        signing_secret = settings.signing_secret.get_secret_value() if settings.signing_secret else None
        if oauth_settings is None:
            self.app = AsyncApp(
                client=self.client,
                logger=_bolt_logger(),
                signing_secret=signing_secret,
                # Socket Mode carries no signature; HTTP mode always verifies.
                request_verification_enabled=settings.app_token is None,
                process_before_response=PROCESS_BEFORE_RESPONSE,
            )
        else:
            # The authorize reads the installation store (each request gets the workspace's
            # bot token on `context.client`), failing the request when the store cannot be
            # read; Bolt's flow calls `oauth.v2.access` through `self.client` (so
            # `SLACK_API_URL` applies).
            self.app = AsyncApp(
                client=self.client,
                logger=_bolt_logger(),
                signing_secret=signing_secret,
                # Bolt takes an `AsyncAuthorize` as it is (its own answers None for "no
                # installation" too), though its annotation asks for a result every time.
                authorize=StoreCheckingAuthorize(  # type: ignore[arg-type]
                    logger=_bolt_logger(),
                    installation_store=oauth_settings.installation_store,
                    client_id=oauth_settings.client_id,
                    client_secret=oauth_settings.client_secret,
                    bot_only=True,
                    client=self.client,
                ),
                oauth_settings=oauth_settings,
                installation_store=self.installations,
                installation_store_bot_only=True,
                process_before_response=PROCESS_BEFORE_RESPONSE,
            )
        self.app.error(self._on_error)
        # Bolt tries the listeners in the order they were added, building every possible listener
        # argument for each one it tries (about 18 us each here): messages and clicks first,
        # the rare events last.
        self.after_ack = AfterAck(service.tasks)
        SlackListeners(service, self.platform, self.users, self.after_ack).register(self.app)
        SlackCommands(admin, service, self.users, self.after_ack).register(self.app)
        if oauth_settings is not None:
            # slack-bolt's own listeners: `tokens_revoked` and `app_uninstalled` delete the
            # workspace's installation (conversations and audit stay until retention).
            self.app.enable_token_revocation_listeners()
        else:
            # The manifest subscribes both for OAuth installs; with one token there is nothing
            # to delete, but the operator must hear of it (and Bolt would answer 404 and Slack retry).
            self.app.event("app_uninstalled")(_token_gone)
            self.app.event("tokens_revoked")(_token_gone)
        self._socket: SocketModeConnection | None = None

    @staticmethod
    def _oauth_settings(
        settings: SlackSettings, installations: PostgresInstallationStore, states: PostgresOAuthStateStore
    ) -> AsyncOAuthSettings:
        """Bolt's OAuth settings: our paths, the manifest's bot scopes, the PostgreSQL stores.

        `/slack/install` answers with a redirect to Slack's authorize URL (and Bolt's state
        cookie); the redirect back is checked against the state store and the cookie by Bolt,
        as Slack's "Installing with OAuth" asks.
        """
        secret = settings.client_secret
        return AsyncOAuthSettings(
            client_id=settings.client_id,
            client_secret=secret.get_secret_value() if secret is not None else None,
            scopes=list(BOT_SCOPES),
            redirect_uri=settings.redirect_uri,
            install_path=INSTALL_PATH,
            redirect_uri_path=REDIRECT_PATH,
            install_page_rendering_enabled=False,
            authorization_url=settings.authorize_url,
            installation_store=installations,
            installation_store_bot_only=True,
            state_store=states,
            state_expiration_seconds=states.expiration_seconds,
        )

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
        traceback: the sender is at fault, and nothing ran. Every other answer's time is counted
        in `countersign_platform_ack_seconds` (`adapters.slack.ack_timing`).
        """
        started = time.perf_counter()
        if not _TIMESTAMP.fullmatch(request.headers.get("X-Slack-Request-Timestamp", "0")):
            # Bolt would fail on it inside its middleware (a 500 and a traceback).
            _refused_request(request)
            return web.json_response({"error": "invalid request"}, status=401)
        try:
            bolt_request = await to_bolt_request(request)
            bolt_response = await self.app.async_dispatch(bolt_request)
        except Exception as exc:
            # The exception's text, never its repr: a UnicodeDecodeError's repr holds the body.
            reason = f"{type(exc).__name__}: {str(exc)[:200]}"
            log.warning("refused a Slack request Bolt could not read (from %s): %s", request.remote, reason)
            return web.json_response({"error": "invalid request"}, status=400)
        if bolt_response.status == 401:
            _refused_request(request)
        else:
            ack_timing.record(ack_timing.kind_of_payload(bolt_request.body), time.perf_counter() - started)
        return await to_aiohttp_response(bolt_response)

    async def handle_install(self, request: web.Request) -> web.Response:
        """`GET /slack/install`: Bolt's OAuth flow redirects the browser to Slack, with a state cookie."""
        flow = self.app.oauth_flow
        if flow is None:  # pragma: no cover - the route exists only in OAuth mode
            raise web.HTTPNotFound
        return await to_aiohttp_response(await flow.handle_installation(await to_bolt_request(request)))

    async def handle_redirect(self, request: web.Request) -> web.Response:
        """`GET /slack/oauth_redirect`: Bolt checks the state, exchanges the code, saves the installation.

        A missing, unknown, used or expired state, or a browser without the state cookie, gets
        Bolt's failure page (400) and nothing is stored. So does a code Slack refuses (401);
        its warning names Slack's error, never the code (`_without_the_code`).
        """
        flow = self.app.oauth_flow
        if flow is None:  # pragma: no cover - the route exists only in OAuth mode
            raise web.HTTPNotFound
        return await to_aiohttp_response(await flow.handle_callback(await to_bolt_request(request)))

    def add_routes(self, web_app: web.Application) -> None:
        """Mount the events endpoint (HTTP mode only), and the OAuth pages in OAuth mode."""
        if not self.socket_mode:
            web_app.router.add_post(EVENTS_PATH, self.handle_http)
        if self.app.oauth_flow is not None:
            web_app.router.add_get(INSTALL_PATH, self.handle_install)
            web_app.router.add_get(REDIRECT_PATH, self.handle_redirect)

    async def start(self) -> None:
        """Check the credentials with Slack, then connect Socket Mode when configured.

        `auth.test` proves SLACK_BOT_TOKEN (and SLACK_API_URL) before the bot says it is
        running; with Socket Mode, `apps.connections.open` proves SLACK_APP_TOKEN, which the
        Socket Mode client would otherwise retry forever. In OAuth mode there is no token to
        prove until a workspace installs the app (Bolt checks each one per request); the stored
        tokens are checked to be readable, and encrypted when a key is set
        (`PostgresInstallationStore.prepare`).

        Raises:
            ConfigurationError: Slack refused a token; in OAuth mode, a stored token no key of
                `COUNTERSIGN_ENCRYPTION_KEY` decrypts.
            UnreachableError: the Web API cannot be reached or cannot answer now (a 5xx, a 429,
                `SLACK_OUTAGE_ERRORS`), or the Socket Mode WebSocket did not open within
                `SOCKET_CONNECT_TIMEOUT_S`: `countersign run` tries again
                (`countersign.starting`).
        """
        if self.installations is not None:
            await self.installations.prepare()
            log.info("Slack OAuth mode: workspaces install at %s", INSTALL_PATH)
            return
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
            raise UnreachableError(
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
        """Disconnect Socket Mode, let decoration finish (bounded), close the Web API session."""
        if self._socket is not None:
            await self._socket.close()
        await finish_decorations()  # the hourglass of the last turns comes off before the session closes
        await self._session.close()

    async def _check(self, variable: str, call: Awaitable[object]) -> None:
        """Await a Web API call that proves `variable`: a refusal is a `ConfigurationError`, an outage not.

        slack_sdk's retry handlers have already tried a connection error, a 429 and a 5xx again
        (`adapters.slack.workspaces`); what still fails here is told apart by its HTTP status
        and its `error`.
        """
        try:
            await call
        except SlackApiError as exc:
            error = exc.response.get("error") if exc.response is not None else None
            status = exc.response.status_code if exc.response is not None else 200
            if status == 429 or status >= 500 or error in SLACK_OUTAGE_ERRORS:
                raise UnreachableError(
                    f"the Slack Web API at {self.client.base_url} cannot answer now (HTTP {status}, {error})"
                ) from None
            raise ConfigurationError(f"Slack refused {variable} ({error or 'no reason given'})") from None
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            reason = str(exc) or type(exc).__name__
            raise UnreachableError(f"cannot reach the Slack Web API at {self.client.base_url}: {reason}") from None

    async def _on_error(self, error: Exception, request: AsyncBoltRequest) -> None:
        # A listener's exception is logged here; Slack users never see a stack trace.
        if isinstance(error, InstallationStoreUnavailable):
            if request.body.get("type") == "event_callback" and retry_num(request) >= LAST_RETRY:
                log.error(
                    "answered Slack's last delivery of an event with 500: %s; Slack will not deliver it again, "
                    "and without the workspace's token nobody can be told",
                    error,
                )
            else:
                log.error("answered a Slack request with 500: %s", error)
            return
        log.error("unhandled error in a Slack listener", exc_info=error)


async def _token_gone(event: dict[str, object], body: dict[str, object]) -> None:
    """Single-token mode: say that Slack ended SLACK_BOT_TOKEN (the app was uninstalled or its token revoked)."""
    log.warning("Slack sent %s for team %s: SLACK_BOT_TOKEN no longer works", event.get("type"), body.get("team_id"))


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
