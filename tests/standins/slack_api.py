"""A local stand-in for Slack's Web API, served over real HTTP.

Tests point the real ``slack_sdk`` ``AsyncWebClient(base_url=slack.base_url)`` (or a bot running
in a subprocess) at it, drive the bot, then assert on what the stand-in received, the way
bolt-python's ``tests/scenario_tests_async/`` do. All state lives in the server object in the test
process, so a bot in another process sees the same workspace the test inspects.

The stand-in answers like Slack's public method docs describe: HTTP 200 with ``{"ok": false,
"error": ...}`` for API errors, HTTP 429 with ``Retry-After`` when rate limited, and the same
Block Kit limits Slack enforces (with Slack's ``[json-pointer:...]`` error messages).

Example:
    async with SlackApiStandIn(bot_token="xoxb-test") as slack:
        client = AsyncWebClient(token="xoxb-test", base_url=slack.base_url)
        await client.chat_postMessage(channel="C1", text="hi")
        [call] = await slack.wait_for("chat.postMessage")
"""

from __future__ import annotations

import asyncio
import base64
import copy
import itertools
import json
import secrets
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from types import TracebackType
from typing import Any, Self
from urllib.parse import urlencode
from zoneinfo import ZoneInfo

from aiohttp import web

from tests.standins.slack_socket import SocketModeServer
from tests.support.gate import Gate

__all__ = ["ApiCall", "SlackApiStandIn"]

Args = dict[str, Any]
_Handler = Callable[[Args], Args]

# Block Kit and message limits from Slack's reference pages (block and element docs).
_MAX_MESSAGE_TEXT = 40_000
_MAX_MESSAGE_BLOCKS = 50
_MAX_MODAL_BLOCKS = 100
_MAX_ID = 255
_TRIGGER_TTL_SECONDS = 3.0
# Arguments Slack documents as "JSON-encoded string" when sent form-encoded.
_JSON_ARGS = ("blocks", "attachments", "view", "metadata")
_FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")
# Methods that take the app-level token (xapp-...) instead of the bot token.
_APP_TOKEN_METHODS = frozenset({"apps.connections.open"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiCall:
    """One HTTP request the stand-in received, recorded after it was answered.

    Attributes:
        method: The Web API method, e.g. ``"chat.postMessage"``; ``"response_url"`` for posts
            to a URL from ``SlackApiStandIn.new_response_url``.
        args: Query, form and JSON arguments merged, without the token. Arguments Slack takes
            as JSON strings in forms (``blocks``, ``attachments``, ``view``, ``metadata``) are
            decoded, so ``args["blocks"]`` is a list whichever content type the client used.
        at: Wall-clock time (``time.time()``) when the request arrived.
        status: The HTTP status of the reply (429 when rate limited).
        error: The ``error`` of the reply, or None when it was ``ok``.
        response: The JSON body of the reply (e.g. the ``ts`` of a posted message); empty for
            posts to a response URL.
        token: The bearer (or form) token the call carried, None without one.
        team_id: The workspace that token belongs to (see ``add_workspace``), None when the
            token is unknown or revoked.
    """

    method: str
    args: Args
    at: float
    status: int = 200
    error: str | None = None
    response: Args = field(default_factory=dict)
    token: str | None = None
    team_id: str | None = None


@dataclass(slots=True, kw_only=True)
class _Workspace:
    """A workspace the app can be installed into (the default one is installed already)."""

    team_id: str
    team_name: str
    team_domain: str
    bot_user_id: str
    bot_id: str
    installer: str
    enterprise_id: str | None = None


class _ApiError(Exception):
    """A Slack API error reply: ``{"ok": false, "error": error, **extra}``."""

    def __init__(self, error: str, **extra: Any) -> None:
        super().__init__(error)
        self.error = error
        self.extra = extra


@dataclass(slots=True, kw_only=True)
class _Fault:
    status: int
    error: str
    retry_after: int | None = None


@dataclass(slots=True, kw_only=True)
class _Trigger:
    issued_at: float
    used: bool = False


@dataclass(slots=True, kw_only=True)
class _ResponseUrl:
    channel: str
    user: str
    message_ts: str | None
    thread_ts: str | None
    uses: int = 0


@dataclass(slots=True, kw_only=True)
class _Channel:
    name: str | None = None
    is_private: bool = False
    user: str | None = None
    created: int = field(default_factory=lambda: int(time.time()))


class SlackApiStandIn:
    """Slack Web API stand-in: an aiohttp server on 127.0.0.1 at a free port.

    Use it as ``async with SlackApiStandIn(...) as slack:``; ``slack.base_url`` is what
    ``AsyncWebClient(base_url=...)`` wants. Any channel id is accepted unless forbidden with
    ``forbid_channel``; users must be registered with ``add_user`` (the bot user is registered
    already). Posting to a user id (``U...``) posts into the bot's DM with that user, whose
    channel id is ``D`` followed by the user id.

    Socket Mode is served too: ``apps.connections.open`` with the app token answers a
    ``ws://`` URL of ``slack.socket`` (a `SocketModeServer`), through which tests deliver
    envelopes to a connected client.

    Args:
        bot_token: The only token the Web API methods accept.
        app_token: The app-level token ``apps.connections.open`` accepts (and the only method
            that accepts it; Slack answers ``not_allowed_token_type`` for the wrong kind).
        bot_user_id: The bot's user id, returned by ``auth.test`` and used as message author.
        team_id: The workspace id.
        bot_id: The bot id (``B...``) returned by ``auth.test`` and put on bot messages.
        app_id: The app id put on bot messages and views.
        team_domain: The workspace subdomain used in ``auth.test`` and permalinks.
        bot_name: The bot user's name.
        scopes: The bot scopes reported in each reply's ``x-oauth-scopes`` header.
        trigger_ttl_s: How long a trigger id stays valid for ``views.open`` (Slack: 3 seconds).
        client_id: The app's client id, for the OAuth flow (``oauth_authorize_url``,
            ``oauth.v2.access``).
        client_secret: The app's client secret, checked by ``oauth.v2.access``.

    OAuth install (Slack's "Installing with OAuth"): register workspaces with ``add_workspace``;
    ``GET /oauth/v2/authorize?client_id=..&scope=..&state=..&team=T2`` plays the user who
    clicks "Allow" in workspace ``team`` and redirects to ``redirect_uri`` (or
    ``redirect_url``) with a one-time ``code`` and the ``state``; ``oauth.v2.access`` trades the
    code (with the client id and secret, HTTP Basic or form) for a bot token of that workspace.
    Every method then answers per token: ``auth.test`` names the token's workspace, and each
    recorded ``ApiCall`` says which token and workspace a call used. ``revoke`` ends a
    workspace's tokens, as an uninstall does.
    """

    def __init__(
        self,
        *,
        bot_token: str = "xoxb-test",  # noqa: S107 - a fake token only this stand-in accepts
        app_token: str = "xapp-test",  # noqa: S107 - likewise
        bot_user_id: str = "UBOT",
        team_id: str = "T1",
        bot_id: str = "BBOT",
        app_id: str = "A1",
        team_domain: str = "standin",
        bot_name: str = "countersign",
        scopes: tuple[str, ...] = ("app_mentions:read", "chat:write", "reactions:write"),
        trigger_ttl_s: float = _TRIGGER_TTL_SECONDS,
        client_id: str = "1111.2222",
        client_secret: str = "standin-client-secret",  # noqa: S107 - a fake secret
    ) -> None:
        self.bot_token = bot_token
        self.app_token = app_token
        self.socket = SocketModeServer(app_token=app_token, app_id=app_id)
        """Socket Mode: the WebSocket side, its connections, envelopes and acks."""
        self.client_id = client_id
        self.client_secret = client_secret
        self.redirect_url: str | None = None
        """Where ``/oauth/v2/authorize`` sends the browser when the request names no ``redirect_uri``
        (Slack uses the app's configured redirect URL)."""
        self._workspaces: dict[str, _Workspace] = {
            team_id: _Workspace(
                team_id=team_id,
                team_name="Stand-in Workspace",
                team_domain=team_domain,
                bot_user_id=bot_user_id,
                bot_id=bot_id,
                installer="UINSTALLER",
            )
        }
        self._tokens: dict[str, str] = {bot_token: team_id}
        """Live bot tokens -> their workspace."""
        self._codes: dict[str, tuple[str, str]] = {}
        """OAuth codes not yet exchanged -> (team id, scopes)."""
        self._current: _Workspace | None = None
        self.trigger_ttl_s = trigger_ttl_s
        self.bot_user_id = bot_user_id
        self.team_id = team_id
        self.bot_id = bot_id
        self.app_id = app_id
        self.team_domain = team_domain
        self.bot_name = bot_name
        self._scopes = ",".join(scopes)
        self._runner: web.AppRunner | None = None
        self._origin: str | None = None
        self._calls: list[ApiCall] = []
        self._changed = asyncio.Condition()
        self._faults: dict[str, deque[_Fault]] = {}
        self._disconnects: dict[str, int] = {}
        self.gates: dict[str, Gate] = {}
        """Per Web API method: a `Gate` that, once armed, holds the next call before it is answered."""
        self._forbidden: set[str] = set()
        self._channels: dict[str, _Channel] = {}
        self._messages: dict[str, dict[str, Args]] = {}
        self._ephemerals: dict[str, list[Args]] = {}
        self._users: dict[str, Args] = {}
        self._usergroups: dict[str, list[str]] = {}
        self._triggers: dict[str, _Trigger] = {}
        self._views: dict[str, Args] = {}
        self._response_urls: dict[str, _ResponseUrl] = {}
        self._ids = itertools.count(1)
        self._last_ts_us = 0
        self._methods: dict[str, _Handler] = {
            "auth.test": self._auth_test,
            "chat.postMessage": self._chat_post_message,
            "chat.update": self._chat_update,
            "chat.delete": self._chat_delete,
            "chat.postEphemeral": self._chat_post_ephemeral,
            "chat.getPermalink": self._chat_get_permalink,
            "views.open": self._views_open,
            "views.update": self._views_update,
            "views.push": self._views_push,
            "users.info": self._users_info,
            "reactions.add": self._reactions_add,
            "reactions.remove": self._reactions_remove,
            "conversations.info": self._conversations_info,
            "usergroups.users.list": self._usergroups_users_list,
            "apps.connections.open": self.socket.open_connection,
        }
        self.add_user(bot_user_id, name=bot_name, real_name=bot_name, is_bot=True)

    # ----------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        """Start serving on 127.0.0.1 at a port the OS picks."""
        app = web.Application()
        app.router.add_route("*", "/api/{method}", self._handle_api)
        app.router.add_get("/oauth/v2/authorize", self._handle_authorize)
        app.router.add_post("/actions/{team}/{hook_id}/{secret}", self._handle_response_url)
        self.socket.add_routes(app)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        host, port = self._runner.addresses[0][:2]
        self._origin = f"http://{host}:{port}"
        self.socket.serving_at(self._origin)

    async def close(self) -> None:
        """Stop serving (Socket Mode connections first); recorded calls and stored state stay readable."""
        await self.socket.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    @property
    def base_url(self) -> str:
        """The Web API root with a trailing slash, e.g. ``http://127.0.0.1:PORT/api/``."""
        if self._origin is None:
            raise RuntimeError("SlackApiStandIn is not started; use `async with`")
        return f"{self._origin}/api/"

    # ------------------------------------------------------------ test controls

    def add_user(
        self,
        user_id: str,
        name: str = "alice",
        real_name: str | None = None,
        is_admin: bool = False,
        is_owner: bool = False,
        is_primary_owner: bool = False,
        is_bot: bool = False,
        *,
        deleted: bool = False,
        is_restricted: bool = False,
        is_ultra_restricted: bool = False,
        tz: str = "America/Los_Angeles",
        email: str | None = None,
        team_id: str | None = None,
    ) -> Args:
        """Register a user that ``users.info`` returns, in Slack's user object shape.

        Args:
            user_id: The user id, e.g. ``"U123"``.
            name: The handle; also the profile's ``display_name``.
            real_name: The full name; defaults to ``name``.
            is_admin: Workspace admin.
            is_owner: Workspace owner.
            is_primary_owner: Primary owner.
            is_bot: A bot user.
            deleted: A deactivated account.
            is_restricted: A multi-channel guest.
            is_ultra_restricted: A single-channel guest.
            tz: An IANA time zone name.
            email: The profile email, if any.
            team_id: The user's home workspace; another one than the stand-in's makes a Slack
                Connect user of another organisation (their admin flags are that workspace's,
                as Slack reports them).

        Returns:
            A copy of the stored user object.
        """
        home = team_id or self.team_id
        real_name = name if real_name is None else real_name
        now = datetime.now(ZoneInfo(tz))
        offset = now.utcoffset()
        profile: Args = {
            "title": "",
            "phone": "",
            "real_name": real_name,
            "real_name_normalized": real_name,
            "display_name": name,
            "display_name_normalized": name,
            "status_text": "",
            "status_emoji": "",
            "avatar_hash": secrets.token_hex(6),
            "team": home,
        }
        if email is not None:
            profile["email"] = email
        if user_id == self.bot_user_id:
            profile["bot_id"] = self.bot_id
        self._users[user_id] = {
            "id": user_id,
            "team_id": home,
            "name": name,
            "deleted": deleted,
            "color": "9f69e7",
            "real_name": real_name,
            "tz": tz,
            "tz_label": now.tzname(),
            "tz_offset": int(offset.total_seconds()) if offset is not None else 0,
            "profile": profile,
            "is_admin": is_admin,
            "is_owner": is_owner,
            "is_primary_owner": is_primary_owner,
            "is_restricted": is_restricted,
            "is_ultra_restricted": is_ultra_restricted,
            "is_bot": is_bot,
            "is_app_user": False,
            "updated": int(time.time()),
        }
        return copy.deepcopy(self._users[user_id])

    def add_workspace(
        self,
        team_id: str,
        *,
        team_name: str | None = None,
        team_domain: str | None = None,
        bot_user_id: str | None = None,
        bot_id: str | None = None,
        installer: str = "UINSTALLER",
        enterprise_id: str | None = None,
    ) -> None:
        """Register a workspace the app can be installed into through ``/oauth/v2/authorize``.

        Its bot user is registered like the default one (``users.info`` finds it). With
        `enterprise_id` the workspace belongs to that Enterprise Grid org: `oauth.v2.access`
        names it in `enterprise` (the install is still the workspace's, not org-wide).
        """
        workspace = _Workspace(
            team_id=team_id,
            team_name=team_name or f"Workspace {team_id}",
            team_domain=team_domain or team_id.lower(),
            bot_user_id=bot_user_id or f"UBOT{team_id}",
            bot_id=bot_id or f"BBOT{team_id}",
            installer=installer,
            enterprise_id=enterprise_id,
        )
        self._workspaces[team_id] = workspace
        self.add_user(workspace.bot_user_id, name=self.bot_name, real_name=self.bot_name, is_bot=True)

    @property
    def oauth_authorize_url(self) -> str:
        """Slack's authorize page as this stand-in serves it (``SLACK_AUTHORIZE_URL`` for the bot)."""
        if self._origin is None:
            raise RuntimeError("SlackApiStandIn is not started; use `async with`")
        return f"{self._origin}/oauth/v2/authorize"

    def tokens_of(self, team_id: str) -> list[str]:
        """The live bot tokens of a workspace (issued by ``oauth.v2.access`` or given at start)."""
        return [token for token, team in self._tokens.items() if team == team_id]

    def revoke(self, team_id: str) -> None:
        """End every token of the workspace, as uninstalling the app does: calls then get ``invalid_auth``."""
        for token in self.tokens_of(team_id):
            del self._tokens[token]

    def add_usergroup(self, group_id: str, users: list[str]) -> None:
        """Define a user group (``S...``) whose members ``usergroups.users.list`` returns."""
        self._usergroups[group_id] = list(users)

    def add_channel(
        self,
        channel_id: str,
        *,
        name: str | None = None,
        is_private: bool = False,
        user: str | None = None,
    ) -> None:
        """Describe a channel for ``conversations.info`` (any id works without this).

        Args:
            channel_id: ``C...`` / ``G...`` for channels, ``D...`` for a DM.
            name: The channel name (defaults to the lower-cased id).
            is_private: A private channel.
            user: For a DM, the other member.
        """
        self._channels[channel_id] = _Channel(name=name, is_private=is_private, user=user)

    def add_message(
        self,
        channel: str,
        *,
        user: str,
        text: str,
        ts: str | None = None,
        thread_ts: str | None = None,
        blocks: list[Args] | None = None,
    ) -> str:
        """Seed a message written by a person, so the bot can react to it, link it, reply to it.

        Args:
            channel: The channel id.
            user: The author.
            text: The message text.
            ts: Its ts (e.g. the ts a ``SlackEventSender`` used); a fresh one when None.
            thread_ts: The parent's ts for a thread reply.
            blocks: Its blocks, if any.

        Returns:
            The message ts.

        Raises:
            ValueError: A message with that ts already exists in the channel.
        """
        ts = ts or self._next_ts()
        if ts in self._messages.get(channel, {}):
            raise ValueError(f"message {ts} already exists in {channel}")
        message: Args = {
            "type": "message",
            "user": user,
            "text": text,
            "ts": ts,
            "team": self.team_id,
        }
        if blocks is not None:
            message["blocks"] = blocks
        self._store_message(channel, message, thread_ts)
        return ts

    def forbid_channel(self, channel_id: str) -> None:
        """Make every method answer ``channel_not_found`` for this channel."""
        self._forbidden.add(channel_id)

    def rate_limit(self, method: str, times: int = 1, retry_after: int = 1) -> None:
        """Answer the next ``times`` calls of ``method`` with HTTP 429 and ``Retry-After``."""
        queue = self._faults.setdefault(method, deque())
        queue.extend(_Fault(status=429, error="ratelimited", retry_after=retry_after) for _ in range(times))

    def fail(self, method: str, error: str = "fatal_error", times: int = 1, status: int = 200) -> None:
        """Answer the next ``times`` calls of ``method`` with ``{"ok": false, "error": error}``."""
        queue = self._faults.setdefault(method, deque())
        queue.extend(_Fault(status=status, error=error) for _ in range(times))

    def disconnect(self, method: str, times: int = 1) -> None:
        """Drop the connection of the next ``times`` calls of ``method`` without answering.

        What a network failure looks like to the client (a reset, a proxy dying): no HTTP
        response at all. slack_sdk retries a connection error once by default, so pass 2 to make
        a call fail.
        """
        self._disconnects[method] = self._disconnects.get(method, 0) + times

    def clear_faults(self) -> None:
        """Forget the errors `fail`, `rate_limit` and `disconnect` queued that no call has met yet."""
        self._faults.clear()
        self._disconnects.clear()

    def new_trigger_id(self, *, age: float = 0.0) -> str:
        """Issue a trigger id that ``views.open`` accepts once within ``trigger_ttl_s`` (3 s by default).

        Args:
            age: Pretend it was issued this many seconds ago (``age=4`` gives an expired one
                with the default validity).
        """
        trigger_id = f"{next(self._ids)}.{int(time.time())}.{secrets.token_hex(16)}"
        self._triggers[trigger_id] = _Trigger(issued_at=time.monotonic() - age)
        return trigger_id

    def new_response_url(
        self,
        channel: str,
        *,
        user: str,
        message_ts: str | None = None,
        thread_ts: str | None = None,
    ) -> str:
        """Issue a ``response_url`` for an interaction on ``message_ts`` by ``user``.

        Posts to it are recorded as ``ApiCall(method="response_url")`` and act like Slack:
        ``delete_original`` deletes the message, ``replace_original`` updates it,
        ``response_type: "in_channel"`` posts a message, anything else posts an ephemeral one.
        """
        hook_id = str(next(self._ids))
        secret = secrets.token_urlsafe(18)
        self._response_urls[f"{hook_id}/{secret}"] = _ResponseUrl(
            channel=channel, user=user, message_ts=message_ts, thread_ts=thread_ts
        )
        if self._origin is None:
            raise RuntimeError("SlackApiStandIn is not started; use `async with`")
        return f"{self._origin}/actions/{self.team_id}/{hook_id}/{secret}"

    # ---------------------------------------------------------------- inspection

    @property
    def calls(self) -> list[ApiCall]:
        """Every request received so far, in arrival order."""
        return list(self._calls)

    def calls_to(self, method: str) -> list[ApiCall]:
        """The recorded calls of one method, in arrival order."""
        return [call for call in self._calls if call.method == method]

    async def wait_for(
        self,
        method: str,
        predicate: Callable[[Args], bool] | None = None,
        *,
        count: int = 1,
        timeout: float = 30.0,
    ) -> list[ApiCall]:
        """Wait until ``count`` calls of ``method`` whose args match ``predicate`` were answered.

        Failed calls (429s, injected errors) count too; filter on ``ApiCall.error`` if needed.

        Args:
            method: The Web API method.
            predicate: Gets each call's ``args``; None matches every call.
            count: How many matching calls to wait for.
            timeout: Seconds to wait.

        Returns:
            All matching calls so far (at least ``count``).

        Raises:
            AssertionError: Fewer than ``count`` matching calls arrived in time.
        """

        def matching() -> list[ApiCall]:
            return [
                call for call in self._calls if call.method == method and (predicate is None or predicate(call.args))
            ]

        try:
            async with asyncio.timeout(timeout), self._changed:
                await self._changed.wait_for(lambda: len(matching()) >= count)
        except TimeoutError:
            seen = [call.method for call in self._calls]
            raise AssertionError(
                f"waited {timeout}s for {count} matching {method} call(s), "
                f"got {len(matching())}; recorded calls: {seen}"
            ) from None
        return matching()

    def messages(self, channel: str, *, thread_ts: str | None = None) -> list[Args]:
        """Messages in a channel, oldest first: copies with ts, thread_ts, text, blocks, user.

        Args:
            channel: The channel id.
            thread_ts: Only this thread (its parent and replies), as ``conversations.replies``.
        """
        stored = sorted(self._messages.get(channel, {}).values(), key=lambda m: _ts_key(m["ts"]))
        if thread_ts is not None:
            stored = [m for m in stored if m.get("thread_ts") == thread_ts]
        return [_with_defaults(m) for m in stored]

    def message(self, channel: str, ts: str) -> Args:
        """One stored message (a copy).

        Raises:
            KeyError: No such message.
        """
        return _with_defaults(self._messages[channel][ts])

    def ephemerals(self, channel: str) -> list[Args]:
        """Ephemeral messages posted in a channel, oldest first; ``recipient`` says to whom."""
        return [_with_defaults(m) for m in self._ephemerals.get(channel, [])]

    @property
    def views(self) -> dict[str, Args]:
        """Views opened, pushed or updated, by view id (copies)."""
        return copy.deepcopy(self._views)

    # --------------------------------------------------------------- HTTP layer

    async def _handle_api(self, request: web.Request) -> web.StreamResponse:
        method = request.match_info["method"]
        at = time.time()
        if method in self.gates:
            await self.gates[method].passing()
        if self._disconnects.get(method):
            self._disconnects[method] -= 1
            await self._record(ApiCall(method=method, args={}, at=at, status=0, error="disconnected"))
            if request.transport is not None:
                request.transport.close()
            raise web.HTTPServiceUnavailable  # never reaches the client: its connection is gone
        headers = {"x-oauth-scopes": self._scopes}
        token: str | None = None
        try:
            args, form_token, warnings = await _read_args(request)
            token = _bearer(request) or form_token
            if method == "oauth.v2.access":
                status, body, extra_headers = self._exchange_code(args, _basic(request))
            else:
                status, body, extra_headers = self._answer(method, args, token)
        except _ApiError as e:
            args, status, body, extra_headers = {}, 200, {"ok": False, "error": e.error}, {}
            warnings = []
        if warnings:
            body.update(warning=",".join(warnings), response_metadata={"warnings": warnings})
        await self._record(
            ApiCall(
                method=method,
                args=args,
                at=at,
                status=status,
                error=body.get("error"),
                response=body,
                token=token,
                team_id=self._tokens.get(token or ""),
            )
        )
        return web.json_response(body, status=status, headers={**headers, **extra_headers})

    def _answer(self, method: str, args: Args, token: str | None) -> tuple[int, Args, dict[str, str]]:
        handler = self._methods.get(method)
        if handler is None:
            return 200, {"ok": False, "error": "unknown_method", "req_method": method}, {}
        if not token:
            return 200, {"ok": False, "error": "not_authed"}, {}
        if method in _APP_TOKEN_METHODS:
            if token != self.app_token:
                kind = "not_allowed_token_type" if token in self._tokens else "invalid_auth"
                return 200, {"ok": False, "error": kind}, {}
        elif token not in self._tokens:
            kind = "not_allowed_token_type" if token == self.app_token else "invalid_auth"
            return 200, {"ok": False, "error": kind}, {}
        queue = self._faults.get(method)
        if queue:
            fault = queue.popleft()
            headers = {} if fault.retry_after is None else {"Retry-After": str(fault.retry_after)}
            return fault.status, {"ok": False, "error": fault.error}, headers
        # Handlers are synchronous: the token's workspace stays current for exactly this call.
        # An app-level token (Socket Mode) belongs to the app's own workspace.
        self._current = self._workspaces[self._tokens.get(token, self.team_id)]
        try:
            return 200, {"ok": True, **handler(args)}, {}
        except _ApiError as e:
            return 200, {"ok": False, "error": e.error, **e.extra}, {}
        finally:
            self._current = None

    # -------------------------------------------------------------------- OAuth

    async def _handle_authorize(self, request: web.Request) -> web.Response:
        """Slack's authorize page, as if the user had clicked "Allow" in workspace ``team``."""
        query = request.query
        at = time.time()
        team = query.get("team", "")
        redirect = query.get("redirect_uri") or self.redirect_url
        if query.get("client_id") != self.client_id or team not in self._workspaces or not redirect:
            await self._record(ApiCall(method="oauth.authorize", args=dict(query), at=at, status=400))
            return web.Response(status=400, text="invalid authorize request")
        code = f"code-{secrets.token_urlsafe(12)}"
        self._codes[code] = (team, query.get("scope", ""))
        await self._record(ApiCall(method="oauth.authorize", args=dict(query), at=at, status=302))
        location = f"{redirect}?{urlencode({'code': code, 'state': query.get('state', '')})}"
        return web.Response(status=302, headers={"Location": location})

    def _exchange_code(self, args: Args, basic: tuple[str, str] | None) -> tuple[int, Args, dict[str, str]]:
        """``oauth.v2.access``: the app's credentials and a one-time code -> a new bot token."""
        client_id, client_secret = basic or (args.get("client_id"), args.get("client_secret"))
        if client_id != self.client_id:
            return 200, {"ok": False, "error": "invalid_client_id"}, {}
        if client_secret != self.client_secret:
            return 200, {"ok": False, "error": "bad_client_secret"}, {}
        grant = self._codes.pop(str(args.get("code", "")), None)
        if grant is None:
            return 200, {"ok": False, "error": "invalid_code"}, {}
        team, scopes = grant
        workspace = self._workspaces[team]
        token = f"xoxb-{team}-{secrets.token_hex(8)}"
        self._tokens[token] = team
        body: Args = {
            "ok": True,
            "app_id": self.app_id,
            "authed_user": {"id": workspace.installer},
            "scope": scopes,
            "token_type": "bot",
            "access_token": token,
            "bot_user_id": workspace.bot_user_id,
            "team": {"id": team, "name": workspace.team_name},
            "enterprise": (
                None
                if workspace.enterprise_id is None
                else {"id": workspace.enterprise_id, "name": f"Org {workspace.enterprise_id}"}
            ),
            "is_enterprise_install": False,
        }
        return 200, body, {}

    async def _record(self, call: ApiCall) -> None:
        async with self._changed:
            self._calls.append(call)
            self._changed.notify_all()

    async def _handle_response_url(self, request: web.Request) -> web.Response:
        at = time.time()
        key = f"{request.match_info['hook_id']}/{request.match_info['secret']}"
        try:
            body = await request.json()
        except json.JSONDecodeError:
            body = {}
        status, text = self._respond_to_hook(self._response_urls.get(key), body)
        args = body if isinstance(body, dict) else {}
        error = None if status == 200 else text
        await self._record(ApiCall(method="response_url", args=args, at=at, status=status, error=error))
        return web.Response(status=status, text=text)

    def _respond_to_hook(self, hook: _ResponseUrl | None, body: Any) -> tuple[int, str]:
        if hook is None or not isinstance(body, dict):
            return 404, "invalid_token"
        # Slack allows five uses of one response_url.
        hook.uses += 1
        if hook.uses > 5:
            return 404, "used_url"
        try:
            self._apply_response(hook, body)
        except _ApiError as e:
            return 400, e.error
        return 200, "ok"

    def _apply_response(self, hook: _ResponseUrl, body: Args) -> None:
        if _truthy(body.get("delete_original")):
            if hook.message_ts is not None:
                self._messages.get(hook.channel, {}).pop(hook.message_ts, None)
            return
        content = _message_content(body, max_blocks=_MAX_MESSAGE_BLOCKS)
        if _truthy(body.get("replace_original")) and hook.message_ts is not None:
            stored = self._messages.get(hook.channel, {}).get(hook.message_ts)
            if stored is None:
                raise _ApiError("message_not_found")
            # Replacing the original drops whatever the new payload does not carry.
            for key in ("blocks", "attachments"):
                stored.pop(key, None)
            stored.update(content)
            return
        thread_ts = body.get("thread_ts") or hook.thread_ts
        message = self._bot_message(content)
        if body.get("response_type") == "in_channel":
            self._store_message(hook.channel, message, thread_ts)
        else:
            self._post_ephemeral(hook.channel, hook.user, message, thread_ts)

    # ------------------------------------------------------------ chat.* methods

    def _auth_test(self, args: Args) -> Args:
        workspace = self._current or self._workspaces[self.team_id]
        return {
            "url": f"https://{workspace.team_domain}.slack.com/",
            "team": workspace.team_name,
            "user": self.bot_name,
            "team_id": workspace.team_id,
            "user_id": workspace.bot_user_id,
            "bot_id": workspace.bot_id,
            "is_enterprise_install": False,
        }

    def _chat_post_message(self, args: Args) -> Args:
        channel = self._channel(args)
        if channel[0] in "UW":
            # Slack posts to the app's DM with that user and answers with the DM's id.
            channel = self._dm_with(channel)
        content = _message_content(args, max_blocks=_MAX_MESSAGE_BLOCKS)
        message = self._bot_message(content)
        if args.get("thread_ts") and _truthy(args.get("reply_broadcast")):
            message["subtype"] = "thread_broadcast"
        stored = self._store_message(channel, message, args.get("thread_ts") or None)
        return {"channel": channel, "ts": stored["ts"], "message": copy.deepcopy(stored)}

    def _chat_update(self, args: Args) -> Args:
        channel = self._channel(args)
        message = self._find_message(channel, args.get("ts"))
        if message.get("user") != self.bot_user_id:
            raise _ApiError("cant_update_message")
        content = _message_content(args, max_blocks=_MAX_MESSAGE_BLOCKS)
        # Slack keeps blocks and attachments that the update leaves out; [] clears them.
        for key in ("blocks", "attachments"):
            if key in content and not content[key]:
                message.pop(key, None)
                del content[key]
        message.update(content)
        message["edited"] = {"user": self.bot_user_id, "ts": self._next_ts()}
        return {
            "channel": channel,
            "ts": message["ts"],
            "text": message.get("text", ""),
            "message": copy.deepcopy(message),
        }

    def _chat_delete(self, args: Args) -> Args:
        channel = self._channel(args)
        message = self._find_message(channel, args.get("ts"))
        if message.get("user") != self.bot_user_id:
            raise _ApiError("cant_delete_message")
        del self._messages[channel][message["ts"]]
        return {"channel": channel, "ts": message["ts"]}

    def _chat_post_ephemeral(self, args: Args) -> Args:
        channel = self._channel(args)
        user = args.get("user")
        if not user or user not in self._users:
            raise _ApiError("user_not_in_channel")
        content = _message_content(args, max_blocks=_MAX_MESSAGE_BLOCKS)
        stored = self._post_ephemeral(channel, user, self._bot_message(content), args.get("thread_ts") or None)
        return {"message_ts": stored["ts"]}

    def _chat_get_permalink(self, args: Args) -> Args:
        channel = self._channel(args)
        message = self._find_message(channel, args.get("message_ts"))
        ts = message["ts"]
        permalink = f"https://{self.team_domain}.slack.com/archives/{channel}/p{ts.replace('.', '')}"
        thread_ts = message.get("thread_ts")
        if thread_ts and thread_ts != ts:
            permalink += f"?thread_ts={thread_ts}&cid={channel}"
        return {"channel": channel, "permalink": permalink}

    # ----------------------------------------------------------- views.* methods

    def _views_open(self, args: Args) -> Args:
        view = self._modal_from(args)
        self._exchange_trigger(args.get("trigger_id"))
        return {"view": self._save_view(view, view_id=self._new_view_id())}

    def _views_push(self, args: Args) -> Args:
        view = self._modal_from(args)
        self._exchange_trigger(args.get("trigger_id"))
        return {"view": self._save_view(view, view_id=self._new_view_id())}

    def _views_update(self, args: Args) -> Args:
        view = self._modal_from(args, need_trigger=False)
        view_id = args.get("view_id")
        external_id = args.get("external_id")
        if not view_id and not external_id:
            raise _invalid_arguments("either view_id or external_id is required")
        stored = next(
            (
                v
                for v in self._views.values()
                if v["id"] == view_id or (external_id and v["external_id"] == external_id)
            ),
            None,
        )
        if stored is None:
            raise _ApiError("not_found")
        if args.get("hash") and args["hash"] != stored["hash"]:
            raise _ApiError("hash_conflict")
        return {"view": self._save_view(view, view_id=stored["id"], previous=stored)}

    def _modal_from(self, args: Args, *, need_trigger: bool = True) -> Args:
        if need_trigger and not args.get("trigger_id") and not args.get("interactivity_pointer"):
            raise _invalid_arguments("invalid `trigger_id`")
        view = args.get("view")
        if not isinstance(view, dict):
            raise _invalid_arguments("must provide an object [json-pointer:/view]")
        errors = _modal_errors(view)
        if errors:
            raise _invalid_arguments(*errors)
        return view

    def _exchange_trigger(self, trigger_id: Any) -> None:
        trigger = self._triggers.get(trigger_id) if isinstance(trigger_id, str) else None
        if trigger is None or time.monotonic() - trigger.issued_at > self.trigger_ttl_s:
            raise _ApiError("expired_trigger_id")
        if trigger.used:
            raise _ApiError("exchanged_trigger_id")
        trigger.used = True

    def _new_view_id(self) -> str:
        return f"V{next(self._ids):08X}"

    def _save_view(self, view: Args, *, view_id: str, previous: Args | None = None) -> Args:
        saved: Args = {
            "id": view_id,
            "team_id": self.team_id,
            "type": view["type"],
            "title": view["title"],
            "close": view.get("close"),
            "submit": view.get("submit"),
            "blocks": view.get("blocks", []),
            "private_metadata": view.get("private_metadata", ""),
            "callback_id": view.get("callback_id", ""),
            "external_id": view.get("external_id", ""),
            "state": {"values": {}},
            "hash": f"{int(time.time())}.{secrets.token_hex(4)}",
            "clear_on_close": bool(view.get("clear_on_close", False)),
            "notify_on_close": bool(view.get("notify_on_close", False)),
            "root_view_id": previous["root_view_id"] if previous else view_id,
            "previous_view_id": None,
            "app_id": self.app_id,
            "app_installed_team_id": self.team_id,
            "bot_id": self.bot_id,
        }
        self._views[view_id] = saved
        return copy.deepcopy(saved)

    # -------------------------------------------------- users, reactions, conversations

    def _users_info(self, args: Args) -> Args:
        user = self._users.get(args.get("user") or "")
        if user is None:
            raise _ApiError("user_not_found")
        return {"user": copy.deepcopy(user)}

    def _usergroups_users_list(self, args: Args) -> Args:
        users = self._usergroups.get(args.get("usergroup") or "")
        if users is None:
            raise _ApiError("no_such_subteam")
        return {"users": list(users)}

    def _reactions_add(self, args: Args) -> Args:
        reactions = self._reactions_of(args)
        name = args["name"]
        entry = next((r for r in reactions if r["name"] == name), None)
        if entry is None:
            entry = {"name": name, "users": [], "count": 0}
            reactions.append(entry)
        if self.bot_user_id in entry["users"]:
            raise _ApiError("already_reacted")
        entry["users"].append(self.bot_user_id)
        entry["count"] += 1
        return {}

    def _reactions_remove(self, args: Args) -> Args:
        reactions = self._reactions_of(args)
        entry = next((r for r in reactions if r["name"] == args["name"]), None)
        if entry is None or self.bot_user_id not in entry["users"]:
            raise _ApiError("no_reaction")
        entry["users"].remove(self.bot_user_id)
        entry["count"] -= 1
        if not entry["users"]:
            reactions.remove(entry)
        return {}

    def _reactions_of(self, args: Args) -> list[Args]:
        if not args.get("channel") or not args.get("timestamp"):
            raise _ApiError("no_item_specified")
        if not args.get("name"):
            raise _ApiError("invalid_name")
        channel = self._channel(args)
        message = self._find_message(channel, args["timestamp"])
        reactions: list[Args] = message.setdefault("reactions", [])
        return reactions

    def _conversations_info(self, args: Args) -> Args:
        channel_id = self._channel(args)
        meta = self._channels.get(channel_id) or _Channel()
        is_im = channel_id.startswith("D")
        info: Args = {
            "id": channel_id,
            "created": meta.created,
            "is_channel": not is_im and not channel_id.startswith("G"),
            "is_group": channel_id.startswith("G"),
            "is_im": is_im,
            "is_mpim": False,
            "is_archived": False,
            "is_org_shared": False,
        }
        if is_im:
            info.update(user=meta.user, is_user_deleted=False, priority=0)
            return {"channel": info}
        name = meta.name or channel_id.lower()
        info.update(
            name=name,
            name_normalized=name,
            is_private=meta.is_private or channel_id.startswith("G"),
            is_general=False,
            is_shared=False,
            is_ext_shared=False,
            is_pending_ext_shared=False,
            is_member=True,
            unlinked=0,
            creator=self.bot_user_id,
            topic={"value": "", "creator": "", "last_set": 0},
            purpose={"value": "", "creator": "", "last_set": 0},
        )
        return {"channel": info}

    # ------------------------------------------------------------------ storage

    def _channel(self, args: Args) -> str:
        channel = args.get("channel")
        if not isinstance(channel, str) or not channel or channel in self._forbidden:
            raise _ApiError("channel_not_found")
        return channel

    def _dm_with(self, user_id: str) -> str:
        channel = f"D{user_id}"
        if channel in self._forbidden:
            raise _ApiError("channel_not_found")
        self._channels.setdefault(channel, _Channel(user=user_id))
        return channel

    def _find_message(self, channel: str, ts: Any) -> Args:
        message = self._messages.get(channel, {}).get(ts) if isinstance(ts, str) else None
        if message is None:
            raise _ApiError("message_not_found")
        return message

    def _bot_message(self, content: Args) -> Args:
        return {
            "type": "message",
            "user": self.bot_user_id,
            "bot_id": self.bot_id,
            "app_id": self.app_id,
            "team": self.team_id,
            "text": "",
            **content,
            "bot_profile": {
                "id": self.bot_id,
                "app_id": self.app_id,
                "name": self.bot_name,
                "team_id": self.team_id,
                "deleted": False,
            },
        }

    def _store_message(self, channel: str, message: Args, thread_ts: str | None) -> Args:
        message.setdefault("ts", self._next_ts())
        messages = self._messages.setdefault(channel, {})
        if thread_ts:
            parent = messages.get(thread_ts)
            # Slack threads a reply-to-a-reply under the original parent.
            if parent is not None and parent.get("thread_ts") not in (None, parent["ts"]):
                thread_ts = parent["thread_ts"]
                parent = messages.get(thread_ts)
            message["thread_ts"] = thread_ts
            if parent is not None:
                message["parent_user_id"] = parent.get("user")
                parent["thread_ts"] = thread_ts
                parent["reply_count"] = parent.get("reply_count", 0) + 1
                users = parent.setdefault("reply_users", [])
                if message["user"] not in users:
                    users.append(message["user"])
                parent["reply_users_count"] = len(users)
                parent["latest_reply"] = message["ts"]
        messages[message["ts"]] = message
        return message

    def _post_ephemeral(self, channel: str, user: str, message: Args, thread_ts: str | None) -> Args:
        message.update(ts=self._next_ts(), recipient=user)
        if thread_ts:
            message["thread_ts"] = thread_ts
        self._ephemerals.setdefault(channel, []).append(message)
        return message

    def _next_ts(self) -> str:
        # Wall-clock microseconds, bumped so that every ts is strictly greater than the last.
        self._last_ts_us = max(time.time_ns() // 1000, self._last_ts_us + 1)
        seconds, micros = divmod(self._last_ts_us, 1_000_000)
        return f"{seconds}.{micros:06d}"


# ---------------------------------------------------------------------- helpers


async def _read_args(request: web.Request) -> tuple[Args, str | None, list[str]]:
    """Merge query and body arguments; return them, a form/query token and Slack warnings."""
    args: Args = dict(request.query)
    warnings: list[str] = []
    if request.content_type == "application/json":
        try:
            body = await request.json()
        except json.JSONDecodeError:
            raise _ApiError("invalid_json") from None
        if not isinstance(body, dict):
            raise _ApiError("invalid_json")
        if request.charset is None:
            warnings.append("missing_charset")
        # Slack ignores a token inside a JSON body: JSON callers must use the header.
        body.pop("token", None)
        args.update(body)
    elif request.content_type in _FORM_TYPES:
        form = await request.post()
        args.update({k: v for k, v in form.items() if isinstance(v, str)})
    elif request.can_read_body and await request.read():
        raise _ApiError("invalid_post_type")
    token = args.pop("token", None)
    for key in _JSON_ARGS:
        if isinstance(args.get(key), str):
            try:
                args[key] = json.loads(args[key])
            except json.JSONDecodeError:
                error = "invalid_blocks_format" if key == "blocks" else "invalid_arguments"
                raise _ApiError(error) from None
    return args, token, warnings


def _basic(request: web.Request) -> tuple[str, str] | None:
    """HTTP Basic credentials (slack_sdk sends the client id and secret that way)."""
    scheme, _, encoded = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        user, _, password = base64.b64decode(encoded.strip()).decode().partition(":")
    except (ValueError, UnicodeDecodeError):
        return None
    return user, password


def _bearer(request: web.Request) -> str | None:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


def _truthy(value: Any) -> bool:
    return value is True or value in ("true", "1", 1)


def _ts_key(ts: str) -> tuple[int, int]:
    seconds, _, micros = ts.partition(".")
    return int(seconds), int(micros or 0)


def _with_defaults(message: Args) -> Args:
    return {"thread_ts": None, "blocks": [], **copy.deepcopy(message)}


def _invalid_arguments(*messages: str) -> _ApiError:
    return _ApiError("invalid_arguments", response_metadata={"messages": [f"[ERROR] {m}" for m in messages]})


def _message_content(args: Args, *, max_blocks: int) -> Args:
    """Validate text/blocks/attachments like chat.postMessage; return the ones given."""
    content: Args = {}
    text = args.get("text")
    if text is not None:
        content["text"] = str(text)
    for key in ("blocks", "attachments"):
        if args.get(key) is not None:
            content[key] = args[key]
    if "blocks" in content:
        if not isinstance(content["blocks"], list):
            raise _ApiError("invalid_blocks_format")
        errors = _blocks_errors(content["blocks"], "/blocks", max_blocks)
        if errors:
            raise _ApiError(
                "invalid_blocks",
                errors=errors,
                response_metadata={"messages": [f"[ERROR] {e}" for e in errors]},
            )
    if not (content.get("text") or content.get("blocks") or content.get("attachments")):
        raise _ApiError("no_text")
    if len(content.get("text", "")) > _MAX_MESSAGE_TEXT:
        raise _ApiError("msg_too_long")
    return content


def _modal_errors(view: Args) -> list[str]:
    """Slack's view checks: title/submit/close, ids, metadata and the blocks within."""
    errors: list[str] = []
    if view.get("type") != "modal":
        errors.append('must be "modal" [json-pointer:/view/type]')
    _text_errors(view.get("title"), 24, "/view/title", errors, plain_only=True)
    for key in ("submit", "close"):
        if view.get(key) is not None:
            _text_errors(view[key], 24, f"/view/{key}", errors, plain_only=True)
    _length_errors(view.get("private_metadata"), 3000, "/view/private_metadata", errors)
    _length_errors(view.get("callback_id"), _MAX_ID, "/view/callback_id", errors)
    _length_errors(view.get("external_id"), _MAX_ID, "/view/external_id", errors)
    blocks = view.get("blocks")
    if not isinstance(blocks, list):
        errors.append("must provide an array [json-pointer:/view/blocks]")
        return errors
    errors.extend(_blocks_errors(blocks, "/view/blocks", _MAX_MODAL_BLOCKS))
    has_input = any(isinstance(b, dict) and b.get("type") == "input" for b in blocks)
    if has_input and view.get("submit") is None:
        errors.append("submit is required when an input block is present [json-pointer:/view]")
    return errors


def _blocks_errors(blocks: list[Any], pointer: str, max_blocks: int) -> list[str]:
    errors: list[str] = []
    if len(blocks) > max_blocks:
        errors.append(f"no more than {max_blocks} items allowed [json-pointer:{pointer}]")
    for index, block in enumerate(blocks):
        _block_errors(block, f"{pointer}/{index}", errors)
    return errors


def _block_errors(block: Any, pointer: str, errors: list[str]) -> None:
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        errors.append(f"missing required field: type [json-pointer:{pointer}]")
        return
    _length_errors(block.get("block_id"), _MAX_ID, f"{pointer}/block_id", errors)
    kind = block["type"]
    if kind == "section":
        if block.get("text") is None and block.get("fields") is None:
            errors.append(f"must provide either text or fields [json-pointer:{pointer}]")
        if block.get("text") is not None:
            _text_errors(block["text"], 3000, f"{pointer}/text", errors)
        fields = block.get("fields") or []
        _count_errors(fields, 10, f"{pointer}/fields", errors)
        for i, item in enumerate(fields):
            _text_errors(item, 2000, f"{pointer}/fields/{i}", errors)
        if block.get("accessory") is not None:
            _element_errors(block["accessory"], f"{pointer}/accessory", errors)
    elif kind == "header":
        _text_errors(block.get("text"), 150, f"{pointer}/text", errors, plain_only=True)
    elif kind == "context":
        elements = block.get("elements") or []
        _count_errors(elements, 10, f"{pointer}/elements", errors)
        for i, item in enumerate(elements):
            if isinstance(item, dict) and item.get("type") in ("plain_text", "mrkdwn"):
                _text_errors(item, 3000, f"{pointer}/elements/{i}", errors)
    elif kind == "actions":
        elements = block.get("elements") or []
        _count_errors(elements, 25, f"{pointer}/elements", errors)
        for i, item in enumerate(elements):
            _element_errors(item, f"{pointer}/elements/{i}", errors)
    elif kind == "input":
        _text_errors(block.get("label"), 2000, f"{pointer}/label", errors, plain_only=True)
        if block.get("hint") is not None:
            _text_errors(block["hint"], 2000, f"{pointer}/hint", errors, plain_only=True)
        _element_errors(block.get("element"), f"{pointer}/element", errors)


def _element_errors(element: Any, pointer: str, errors: list[str]) -> None:
    if not isinstance(element, dict) or not isinstance(element.get("type"), str):
        errors.append(f"missing required field: type [json-pointer:{pointer}]")
        return
    _length_errors(element.get("action_id"), _MAX_ID, f"{pointer}/action_id", errors)
    kind = element["type"]
    if kind == "button":
        _text_errors(element.get("text"), 75, f"{pointer}/text", errors, plain_only=True)
        _length_errors(element.get("value"), 2000, f"{pointer}/value", errors)
        _length_errors(element.get("url"), 3000, f"{pointer}/url", errors)
    elif kind == "plain_text_input":
        _length_errors(element.get("initial_value"), 3000, f"{pointer}/initial_value", errors)
        max_length = element.get("max_length")
        if isinstance(max_length, int) and max_length > 3000:
            errors.append(f"must be at most 3000 [json-pointer:{pointer}/max_length]")
        if element.get("placeholder") is not None:
            placeholder = element["placeholder"]
            _text_errors(placeholder, 150, f"{pointer}/placeholder", errors, plain_only=True)


def _text_errors(obj: Any, limit: int, pointer: str, errors: list[str], *, plain_only: bool = False) -> None:
    if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
        errors.append(f"must provide a text object [json-pointer:{pointer}]")
        return
    allowed = ("plain_text",) if plain_only else ("plain_text", "mrkdwn")
    if obj.get("type") not in allowed:
        errors.append(f"must be one of {', '.join(allowed)} [json-pointer:{pointer}/type]")
    if not obj["text"]:
        errors.append(f"must be more than 0 characters [json-pointer:{pointer}/text]")
    _length_errors(obj["text"], limit, f"{pointer}/text", errors)


def _length_errors(value: Any, limit: int, pointer: str, errors: list[str]) -> None:
    if isinstance(value, str) and len(value) > limit:
        errors.append(f"must be less than {limit + 1} characters [json-pointer:{pointer}]")


def _count_errors(items: Any, limit: int, pointer: str, errors: list[str]) -> None:
    if not isinstance(items, list):
        errors.append(f"must provide an array [json-pointer:{pointer}]")
    elif len(items) > limit:
        errors.append(f"no more than {limit} items allowed [json-pointer:{pointer}]")
