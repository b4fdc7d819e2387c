"""Slack's side of Socket Mode, served by `SlackApiStandIn` beside its Web API.

Socket Mode as Slack's "Using Socket Mode" page and slack_sdk's own client describe it:

* ``apps.connections.open``, called with the app-level token (``xapp-...``), answers a WebSocket
  URL with a one-use ticket (here ``ws://127.0.0.1:PORT/link/?ticket=...``);
* on connect the server sends ``{"type": "hello", "num_connections": ..., "debug_info": ...,
  "connection_info": {"app_id": ...}}``;
* events, interactions and slash commands arrive as envelopes ``{"envelope_id", "type":
  "events_api" | "interactive" | "slash_commands", "payload", "accepts_response_payload"}``
  (events also carry ``retry_attempt`` and ``retry_reason``), and the app acknowledges each
  with ``{"envelope_id", "payload"?}``;
* an ``events_api`` envelope not acknowledged within the ack timeout (Slack: about 3 s) is
  delivered again with ``retry_attempt`` one higher, at most three times;
* before Slack ends a connection it sends ``{"type": "disconnect", "reason": ...}``; the client
  then opens a new one through ``apps.connections.open``.

Tests drive it through ``slack.socket``: `SocketModeServer.deliver` sends an envelope (a
`SocketModeEventSender` builds them with `SlackEventSender`'s own payload builders),
`wait_connected` and `wait_acked` wait for the client, `disconnect` and `close_connections`
end connections. The client's pings are answered by aiohttp.

Example:
    async with SlackApiStandIn(app_token="xapp-1") as slack:
        ...  # start the bot with SLACK_APP_TOKEN=xapp-1 and SLACK_API_URL=slack.base_url
        await slack.socket.wait_connected()
        events = SocketModeEventSender(slack.socket)
        sent = await events.app_mention("C1", "U1", "<@UBOT> deploy")  # returns once acked
        assert sent.status == 200
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import secrets
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import Any, Literal, Self

from aiohttp import WSMsgType, web

from tests.standins.slack_events import Delivery, SlackEventSender

__all__ = [
    "LINK_PATH",
    "Ack",
    "Envelope",
    "EnvelopeType",
    "SocketConnection",
    "SocketModeEventSender",
    "SocketModeServer",
]

log = logging.getLogger(__name__)

Args = dict[str, Any]
EnvelopeType = Literal["events_api", "interactive", "slash_commands"]

LINK_PATH = "/link/"
"""Where the WebSocket is served (Slack's URLs are ``wss://wss-primary.slack.com/link/?ticket=...``)."""
_ACK_TIMEOUT_S = 3.0
_MAX_RETRIES = 3
_WAIT_S = 30.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Envelope:
    """One envelope sent over a socket: one delivery attempt.

    Attributes:
        envelope_id: The id the client acknowledges; a redelivery keeps it.
        type: ``"events_api"``, ``"interactive"`` or ``"slash_commands"``.
        payload: What Slack would have posted over HTTP (the event callback, the interaction,
            the slash command's fields).
        accepts_response_payload: Whether the acknowledgement may carry a payload.
        retry_attempt: 0 for an event's first delivery, then 1, 2, ...; None for other types.
        retry_reason: ``""`` for a first delivery, e.g. ``"timeout"`` for a redelivery.
        connection: The `SocketConnection.id` it was sent on.
        at: Wall-clock time it was sent.
    """

    envelope_id: str
    type: str
    payload: Args
    accepts_response_payload: bool
    retry_attempt: int | None = None
    retry_reason: str | None = None
    connection: int = 0
    at: float = 0.0

    def message(self) -> Args:
        """The JSON object sent over the socket."""
        message: Args = {
            "envelope_id": self.envelope_id,
            "type": self.type,
            "payload": self.payload,
            "accepts_response_payload": self.accepts_response_payload,
        }
        if self.retry_attempt is not None:
            message.update(retry_attempt=self.retry_attempt, retry_reason=self.retry_reason or "")
        return message


@dataclass(frozen=True, slots=True, kw_only=True)
class Ack:
    """An acknowledgement the client sent.

    Attributes:
        envelope_id: The envelope it acknowledges.
        payload: The response payload (e.g. a modal's ``response_action``), or None.
        connection: The connection it came over.
        at: Wall-clock time it arrived.
    """

    envelope_id: str
    payload: Args | None
    connection: int
    at: float


@dataclass(slots=True, kw_only=True)
class SocketConnection:
    """One WebSocket connection a client opened (kept after it closed, for inspection).

    Attributes:
        id: 1 for the first connection, 2 for the next, ...
        opened_at: Wall-clock time of the handshake.
        closed_at: When it closed, or None while open.
        closed_by: ``"server"`` when the stand-in closed it, ``"client"`` otherwise.
        disconnect_reasons: The ``disconnect`` messages sent on it.
    """

    id: int
    opened_at: float
    closed_at: float | None = None
    closed_by: str | None = None
    disconnect_reasons: list[str] = field(default_factory=list)
    _ws: web.WebSocketResponse | None = field(default=None, repr=False)
    _transport: asyncio.BaseTransport | None = field(default=None, repr=False)

    @property
    def open(self) -> bool:
        """Whether the connection is still up."""
        return self.closed_at is None and self._ws is not None and not self._ws.closed


class SocketModeServer:
    """The Socket Mode endpoint of `SlackApiStandIn`: tickets, connections, envelopes, acks.

    Args:
        app_token: The app-level token ``apps.connections.open`` accepts.
        app_id: Reported in ``hello``.
        ack_timeout_s: How long an ``events_api`` envelope may go unacknowledged before it is
            delivered again (Slack: about 3 s). Read at each attempt, so a test may change it.
        max_retries: How many times an unacknowledged event is delivered again (Slack: 3).
    """

    def __init__(
        self,
        *,
        app_token: str,
        app_id: str,
        ack_timeout_s: float = _ACK_TIMEOUT_S,
        max_retries: int = _MAX_RETRIES,
    ) -> None:
        self.app_token = app_token
        self.app_id = app_id
        self.ack_timeout_s = ack_timeout_s
        self.max_retries = max_retries
        self.refuse_status: int | None = None
        """When set, every WebSocket handshake is answered with this HTTP status (the ticket is spent)."""
        self._origin: str | None = None
        self._closing = False
        self._tickets: set[str] = set()
        self._connections: list[SocketConnection] = []
        self._sent: list[Envelope] = []
        self._acks: list[Ack] = []
        self._other: list[Any] = []
        self._changed = asyncio.Condition()
        self._redeliveries: set[asyncio.Task[None]] = set()
        self._ids = itertools.count(1)

    # ----------------------------------------------------------------- lifecycle

    def add_routes(self, app: web.Application) -> None:
        """Serve the WebSocket endpoint on the stand-in's aiohttp app."""
        app.router.add_get(LINK_PATH, self._handle_link)

    def serving_at(self, origin: str) -> None:
        """Tell the server its ``http://host:port`` origin (known once the site listens)."""
        self._origin = origin
        self._closing = False

    async def close(self) -> None:
        """Stop redelivering, refuse new connections and close the open ones (before the HTTP server stops)."""
        self._closing = True
        for task in list(self._redeliveries):
            task.cancel()
        for task in list(self._redeliveries):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for connection in self._connections:
            if connection.open and connection._ws is not None:
                connection.closed_by = connection.closed_by or "server"
                await connection._ws.close(code=1001, message=b"stand-in stopping")

    def open_connection(self, args: Args) -> Args:
        """``apps.connections.open`` (the stand-in has checked the app token): a URL with a fresh ticket."""
        if self._origin is None:
            raise RuntimeError("SocketModeServer is not serving; start the stand-in")
        ticket = secrets.token_hex(16)
        self._tickets.add(ticket)
        base = self._origin.replace("http://", "ws://", 1)
        return {"url": f"{base}{LINK_PATH}?ticket={ticket}&app_id={self.app_id}"}

    # ------------------------------------------------------------ test controls

    async def deliver(
        self,
        type: EnvelopeType,
        payload: Args,
        *,
        accepts_response_payload: bool = False,
        retry_attempt: int = 0,
        retry_reason: str = "",
        timeout: float = _WAIT_S,
    ) -> Envelope:
        """Send a new envelope (a fresh id) on the newest open connection, waiting for one.

        An ``events_api`` envelope is delivered again while unacknowledged (see the class).

        Args:
            type: The envelope type.
            payload: The envelope's payload.
            accepts_response_payload: Whether the ack may carry a payload (slash commands,
                view submissions).
            retry_attempt: For ``events_api``: 0 for a first delivery; more plays Slack
                retrying an event under a new envelope id. Ignored for other types.
            retry_reason: For ``events_api``: ``""`` for a first delivery, else e.g.
                ``"timeout"``.
            timeout: Seconds to wait for an open connection.

        Returns:
            The envelope as sent.

        Raises:
            AssertionError: No connection was open within ``timeout``.
        """
        event = type == "events_api"
        envelope = Envelope(
            envelope_id=str(uuid.uuid4()),
            type=type,
            payload=payload,
            accepts_response_payload=accepts_response_payload,
            retry_attempt=retry_attempt if event else None,
            retry_reason=retry_reason if event else None,
        )
        sent = await self._send(envelope, timeout)
        if type == "events_api":
            task = asyncio.create_task(self._redeliver_until_acked(sent))
            self._redeliveries.add(task)
            task.add_done_callback(self._redeliveries.discard)
        return sent

    async def redeliver(
        self,
        envelope_id: str,
        *,
        retry_attempt: int | None = None,
        retry_reason: str = "timeout",
        timeout: float = _WAIT_S,
    ) -> Envelope:
        """Deliver a sent envelope again now, under the same id (acknowledged or not).

        Args:
            envelope_id: The envelope to send again.
            retry_attempt: The attempt number to send; one more than its last attempt when None.
            retry_reason: Slack's reason for the retry (``"timeout"`` for an unacknowledged one).
            timeout: Seconds to wait for an open connection.

        Returns:
            The envelope as sent.

        Raises:
            KeyError: No envelope with that id was sent.
            AssertionError: No connection was open within ``timeout``.
        """
        attempts = self.sent(envelope_id)
        if not attempts:
            raise KeyError(envelope_id)
        last = attempts[-1]
        attempt = (last.retry_attempt or 0) + 1 if retry_attempt is None else retry_attempt
        return await self._send(
            Envelope(
                envelope_id=envelope_id,
                type=last.type,
                payload=last.payload,
                accepts_response_payload=last.accepts_response_payload,
                retry_attempt=attempt,
                retry_reason=retry_reason,
            ),
            timeout,
        )

    async def send_disconnect(self, reason: str = "refresh_requested") -> list[SocketConnection]:
        """Send ``{"type": "disconnect", "reason": reason}`` on every open connection; close none.

        Returns:
            The connections it was sent on.
        """
        told = [c for c in self._connections if c.open]
        for connection in told:
            connection.disconnect_reasons.append(reason)
            message = {"type": "disconnect", "reason": reason, "debug_info": {"host": "applink-standin"}}
            assert connection._ws is not None
            await connection._ws.send_json(message)
        return told

    async def close_connections(self, code: int = 1000, *, abrupt: bool = False) -> list[SocketConnection]:
        """Close every open connection from the server's side, without a ``disconnect`` first.

        Args:
            code: The WebSocket close code sent (RFC 6455 section 7.4), unless ``abrupt``.
            abrupt: Drop the TCP connection without a close frame, as a network fault or a
                crashed server would.

        Returns:
            The connections closed; each is closed (``open`` false) on return.
        """
        closing = [c for c in self._connections if c.open and c._ws is not None]
        for connection in closing:
            connection.closed_by = "server"
            if abrupt and connection._transport is not None:
                connection._transport.close()
            elif connection._ws is not None:
                await connection._ws.close(code=code)
        await self._wait(lambda: not any(c.open for c in closing), "the closed connections to end", _WAIT_S)
        return closing

    async def disconnect(self, reason: str = "refresh_requested", *, timeout: float = _WAIT_S) -> SocketConnection:
        """Refresh the link as Slack does: ``disconnect``, wait for the client's new connection, close the old.

        The old connections are closed by the server if the client has not closed them itself
        once it is connected again.

        Returns:
            The new connection.

        Raises:
            AssertionError: The client did not connect again within ``timeout``.
        """
        before = len(self._connections)
        told = await self.send_disconnect(reason)
        connection = await self.wait_connected(count=before + 1, timeout=timeout)
        for old in told:
            if old.open and old._ws is not None:
                old.closed_by = "server"
                await old._ws.close(code=1000)
        return connection

    # ---------------------------------------------------------------- inspection

    @property
    def connections(self) -> list[SocketConnection]:
        """Every connection so far, oldest first (open or closed)."""
        return list(self._connections)

    @property
    def envelopes(self) -> list[Envelope]:
        """Every envelope sent, redeliveries included, in sending order."""
        return list(self._sent)

    @property
    def acks(self) -> list[Ack]:
        """Every acknowledgement received, in arrival order."""
        return list(self._acks)

    @property
    def unexpected(self) -> list[Any]:
        """Messages from the client that were not acknowledgements (should stay empty)."""
        return list(self._other)

    def sent(self, envelope_id: str) -> list[Envelope]:
        """The delivery attempts of one envelope, in order."""
        return [e for e in self._sent if e.envelope_id == envelope_id]

    def acks_of(self, envelope_id: str) -> list[Ack]:
        """The acknowledgements of one envelope (one per attempt the client answered)."""
        return [a for a in self._acks if a.envelope_id == envelope_id]

    async def wait_connected(self, count: int = 1, *, timeout: float = _WAIT_S) -> SocketConnection:
        """Wait until ``count`` connections were made in all and one is open; return the newest open one.

        Raises:
            AssertionError: Not so within ``timeout`` seconds.
        """

        def newest_open() -> SocketConnection | None:
            if len(self._connections) < count:
                return None
            return next((c for c in reversed(self._connections) if c.open), None)

        await self._wait(lambda: newest_open() is not None, f"connection #{count} (open)", timeout)
        found = newest_open()
        assert found is not None
        return found

    async def wait_closed(self, connection: SocketConnection, *, timeout: float = _WAIT_S) -> None:
        """Wait until ``connection`` is closed (by either side).

        Raises:
            AssertionError: Still open after ``timeout`` seconds.
        """
        await self._wait(lambda: not connection.open, f"connection #{connection.id} to close", timeout)

    async def redeliveries_done(self, *, timeout: float = _WAIT_S) -> None:
        """Wait until no event awaits a redelivery (each was acknowledged, or retried ``max_retries`` times).

        Raises:
            TimeoutError: Some are still pending after ``timeout`` seconds.
        """
        pending = list(self._redeliveries)
        if pending:
            await asyncio.wait_for(asyncio.gather(*pending), timeout)

    async def wait_disconnected(self, *, timeout: float = _WAIT_S) -> None:
        """Wait until no connection is open."""
        await self._wait(lambda: not any(c.open for c in self._connections), "no open connection", timeout)

    async def wait_acked(self, envelope_id: str, *, count: int = 1, timeout: float = _WAIT_S) -> list[Ack]:
        """Wait until the envelope was acknowledged ``count`` times; return its acks.

        Raises:
            AssertionError: Fewer acks within ``timeout`` seconds.
        """
        await self._wait(lambda: len(self.acks_of(envelope_id)) >= count, f"{count} ack(s) of {envelope_id}", timeout)
        return self.acks_of(envelope_id)

    async def wait_sent(self, envelope_id: str, *, attempts: int, timeout: float = _WAIT_S) -> list[Envelope]:
        """Wait until the envelope was sent ``attempts`` times (first delivery included)."""
        await self._wait(
            lambda: len(self.sent(envelope_id)) >= attempts, f"{attempts} deliveries of {envelope_id}", timeout
        )
        return self.sent(envelope_id)

    # ----------------------------------------------------------------- internals

    async def _wait(self, condition: Any, what: str, timeout: float) -> None:
        try:
            async with asyncio.timeout(timeout), self._changed:
                await self._changed.wait_for(condition)
        except TimeoutError:
            states = [(c.id, "open" if c.open else f"closed by {c.closed_by}") for c in self._connections]
            raise AssertionError(f"waited {timeout}s for {what}; connections: {states}") from None

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def _handle_link(self, request: web.Request) -> web.StreamResponse:
        ticket = request.query.get("ticket", "")
        if self._closing or ticket not in self._tickets:
            return web.json_response({"ok": False, "error": "invalid_ticket"}, status=401)
        self._tickets.discard(ticket)  # one use: a reconnect needs apps.connections.open again
        if self.refuse_status is not None:
            return web.Response(status=self.refuse_status, text="refused by the test")
        # autoping answers the client's pings; the server sends none of its own.
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        connection = SocketConnection(
            id=len(self._connections) + 1, opened_at=time.time(), _ws=ws, _transport=request.transport
        )
        await ws.send_json(
            {
                "type": "hello",
                "num_connections": sum(1 for c in self._connections if c.open) + 1,
                "debug_info": {"host": "applink-standin", "build_number": 1, "approximate_connection_time": 18060},
                "connection_info": {"app_id": self.app_id},
            }
        )
        # Registered after `hello`, so no envelope goes out before it.
        self._connections.append(connection)
        await self._notify()
        try:
            async for message in ws:
                if message.type is WSMsgType.TEXT:
                    await self._received(connection, message.data)
        finally:
            connection.closed_at = time.time()
            connection.closed_by = connection.closed_by or "client"
            await self._notify()
        return ws

    async def _received(self, connection: SocketConnection, data: str) -> None:
        try:
            message = json.loads(data)
        except json.JSONDecodeError:
            message = data
        if isinstance(message, dict) and isinstance(message.get("envelope_id"), str):
            payload = message.get("payload")
            ack = Ack(
                envelope_id=message["envelope_id"],
                payload=payload if isinstance(payload, dict) else None,
                connection=connection.id,
                at=time.time(),
            )
            async with self._changed:
                self._acks.append(ack)
                self._changed.notify_all()
        else:
            self._other.append(message)

    async def _send(self, envelope: Envelope, timeout: float) -> Envelope:
        """Send on the newest open connection; a connection closing under the send is skipped."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            connection = await self.wait_connected(timeout=max(0.0, deadline - loop.time()))
            sent = Envelope(
                envelope_id=envelope.envelope_id,
                type=envelope.type,
                payload=envelope.payload,
                accepts_response_payload=envelope.accepts_response_payload,
                retry_attempt=envelope.retry_attempt,
                retry_reason=envelope.retry_reason,
                connection=connection.id,
                at=time.time(),
            )
            assert connection._ws is not None
            try:
                await connection._ws.send_json(sent.message())
            except (ConnectionError, RuntimeError):
                # It closed between the check and the write: Slack would pick another.
                await self._wait(lambda c=connection: not c.open, "the closing connection", timeout)  # type: ignore[misc]
                continue
            async with self._changed:
                self._sent.append(sent)
                self._changed.notify_all()
            return sent

    async def _redeliver_until_acked(self, first: Envelope) -> None:
        attempt = 0
        while attempt < self.max_retries and not self._closing:
            try:
                await self.wait_acked(first.envelope_id, timeout=self.ack_timeout_s)
                return
            except AssertionError:
                pass
            attempt += 1
            try:
                await self.redeliver(first.envelope_id)
            except AssertionError:
                log.warning("gave up redelivering %s: no connection", first.envelope_id)
                return


class SocketModeEventSender(SlackEventSender):
    """`SlackEventSender`'s events, interactions and slash commands, sent as Socket Mode envelopes.

    Every builder of `SlackEventSender` (``app_mention``, ``message``, ``event``,
    ``block_actions``, ``view_submission``, ``slash_command``) builds the same payload as for
    HTTP; only the transport differs: the payload becomes an envelope's ``payload`` (Slack's
    "Using Socket Mode": an event callback as ``events_api``, an interaction as
    ``interactive``, a slash command's fields as ``slash_commands``), sent by ``server``.

    Each call returns once the client acknowledged that delivery, as an HTTP delivery returns
    with the response: `Delivery.status` is 200, `Delivery.body` the ack's payload as JSON
    (``""`` for a bare ack, e.g. ``{"response_action": "errors", ...}`` for a modal),
    `Delivery.envelope_id` the envelope's id and `Delivery.request_body` the envelope sent.
    With ``wait_for_ack`` false a call returns once sent, with status 0 (for an envelope the
    client is not expected to acknowledge soon).

    ``retry_num`` on ``app_mention``/``message``/``event`` becomes the envelope's
    ``retry_attempt`` (a new envelope carrying the same event); `retry` sends an envelope
    again under its own id. Socket Mode carries no signature and no ``url_verification``:
    ``bad_signature``/``stale`` and ``url_verification`` raise ValueError.

    Args:
        server: The stand-in's Socket Mode side (``slack.socket``).
        team_id: The workspace id.
        api_app_id: The app id.
        bot_user_id: The installing bot user, reported in ``authorizations``.
        timeout: Seconds to wait for a connection and for each acknowledgement.
        wait_for_ack: Whether calls wait for the acknowledgement (see above); may be changed
            between calls.
    """

    def __init__(
        self,
        server: SocketModeServer,
        team_id: str = "T1",
        api_app_id: str = "A1",
        *,
        bot_user_id: str = "UBOT",
        timeout: float = 60.0,
        wait_for_ack: bool = True,
    ) -> None:
        super().__init__("socket-mode:", "", team_id, api_app_id, bot_user_id=bot_user_id, timeout=timeout)
        self.server = server
        self.wait_for_ack = wait_for_ack

    async def __aenter__(self) -> Self:
        return self  # no HTTP client to open

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None

    async def retry(self, previous: Delivery, *, retry_num: int = 1, retry_reason: str = "timeout") -> Delivery:
        """Send a delivered envelope again under its own id, ``retry_attempt=retry_num``.

        Raises:
            ValueError: ``previous`` did not come over a socket.
            AssertionError: Not acknowledged within the timeout (when waiting for acks).
        """
        if previous.envelope_id is None:
            raise ValueError("not a Socket Mode delivery: it has no envelope id")
        before = len(self.server.acks_of(previous.envelope_id))
        envelope = await self.server.redeliver(
            previous.envelope_id, retry_attempt=retry_num, retry_reason=retry_reason, timeout=self._timeout
        )
        delivery = await self._acked(envelope, before)
        return replace(delivery, ts=previous.ts, event_id=previous.event_id)

    # ------------------------------------------------------------- transport
    #
    # The three transport hooks of SlackEventSender, sending envelopes instead of requests.

    async def _post_json(
        self,
        payload: Args,
        *,
        extra_headers: Mapping[str, str] | None = None,
        bad_signature: bool,
        stale: bool,
    ) -> Delivery:
        _unsigned(bad_signature, stale)
        if payload.get("type") != "event_callback":
            raise ValueError(f"Socket Mode carries no {payload.get('type')!r} requests")
        headers = extra_headers or {}
        attempt = headers.get("X-Slack-Retry-Num")
        envelope = await self.server.deliver(
            "events_api",
            payload,
            retry_attempt=int(attempt) if attempt is not None else 0,
            retry_reason=headers.get("X-Slack-Retry-Reason", "timeout" if attempt else ""),
            timeout=self._timeout,
        )
        return await self._acked(envelope, 0)

    async def _post_form(self, payload: Args, *, bad_signature: bool, stale: bool) -> Delivery:
        _unsigned(bad_signature, stale)
        # A modal's submission may be answered in the ack (response_action); a click may not.
        accepts = payload.get("type") in ("view_submission", "block_suggestion")
        envelope = await self.server.deliver(
            "interactive", payload, accepts_response_payload=accepts, timeout=self._timeout
        )
        return await self._acked(envelope, 0)

    async def _post_command(self, form: Mapping[str, str], *, bad_signature: bool, stale: bool) -> Delivery:
        _unsigned(bad_signature, stale)
        envelope = await self.server.deliver(
            "slash_commands", dict(form), accepts_response_payload=True, timeout=self._timeout
        )
        return await self._acked(envelope, 0)

    async def _acked(self, envelope: Envelope, before: int) -> Delivery:
        """The delivery of ``envelope``, once its ``before + 1``-th ack came (or at once)."""
        sent = json.dumps(envelope.message()).encode()
        if not self.wait_for_ack:
            return Delivery(
                status=0, body="", headers={}, request_body=sent, request_headers={}, envelope_id=envelope.envelope_id
            )
        acks = await self.server.wait_acked(envelope.envelope_id, count=before + 1, timeout=self._timeout)
        payload = acks[before].payload
        return Delivery(
            status=200,
            body=json.dumps(payload) if payload else "",
            headers={},
            request_body=sent,
            request_headers={},
            envelope_id=envelope.envelope_id,
        )


def _unsigned(bad_signature: bool, stale: bool) -> None:
    if bad_signature or stale:
        raise ValueError("Socket Mode envelopes carry no signature or timestamp to get wrong")
