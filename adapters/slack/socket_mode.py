"""Socket Mode: Bolt's `AsyncSocketModeHandler`, bounded at start and stoppable before the drain.

Imported only when `SLACK_APP_TOKEN` is set. slack_sdk's client asks `apps.connections.open`
(through the app's Web API client, so `SLACK_API_URL` applies) for a WebSocket URL, connects,
and reconnects by itself after a `disconnect` message or a closed socket (Slack's "Using Socket
Mode"). What it lacks for a server is handled here: a bound on the first connection, and a way to
stop taking envelopes at shutdown while the envelopes already being handled get their acks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest

from adapters.slack import ack_timing

log = logging.getLogger(__name__)

STOP_GRACE_S = 5.0
"""How long `stop_receiving` lets envelopes already being handled finish (the HTTP listener's
`shutdown_timeout` in `countersign.server` is the same)."""


class _Handler(AsyncSocketModeHandler):
    """Bolt's handler, refusing envelopes once told to and counting the ones in hand."""

    def __init__(self, app: AsyncApp, app_token: str) -> None:
        super().__init__(app, app_token)
        self.receiving = True
        self.in_hand = 0
        self.idle = asyncio.Event()
        self.idle.set()

    async def handle(self, client: SocketModeClient, req: SocketModeRequest) -> None:  # type: ignore[override]
        if not self.receiving:
            # Not acknowledged: Slack delivers an event again (to another connection); see stop_receiving.
            log.info("not taking Slack envelope %s (%s): stopping", req.envelope_id, req.type)
            return
        self.in_hand += 1
        self.idle.clear()
        started = time.perf_counter()
        try:
            await super().handle(client, req)  # dispatches, then sends the ack
            ack_timing.record(ack_timing.kind_of_envelope(req.type), time.perf_counter() - started)
        finally:
            self.in_hand -= 1
            if self.in_hand == 0:
                self.idle.set()


class SocketModeConnection:
    """The bot's Socket Mode link to Slack.

    Args:
        app: The Bolt app whose listeners handle the envelopes (its `client` asks for the URL).
        app_token: The app-level token (`xapp-...`).

    Construct it inside the running event loop (slack_sdk's client starts a task).
    """

    def __init__(self, app: AsyncApp, app_token: str) -> None:
        self._handler = _Handler(app, app_token)
        self._closed = False

    async def connect(self, timeout_s: float) -> None:
        """Open the first connection.

        Args:
            timeout_s: Seconds to wait. slack_sdk retries a WebSocket that will not open
                forever (every `ping_interval`, 10 s, with the same URL); this bounds it.

        Raises:
            TimeoutError: Not connected within `timeout_s` (the connection is closed then).
        """
        try:
            await asyncio.wait_for(self._handler.connect_async(), timeout_s)  # type: ignore[no-untyped-call]
        except TimeoutError:
            await self.close()
            raise

    @property
    def receiving(self) -> bool:
        """Whether envelopes are still taken (false once `stop_receiving` or `close` began)."""
        return self._handler.receiving

    async def is_connected(self) -> bool:
        """slack_sdk's `is_connected`: the socket open and its pings answered."""
        return bool(await self._handler.client.is_connected())

    async def stop_receiving(self, grace_s: float = STOP_GRACE_S) -> None:
        """Stop taking envelopes, let those in hand be acknowledged (up to `grace_s`), close the socket.

        An envelope that arrives after this is not acknowledged, so Slack delivers it again on
        another connection (another replica, or this bot after its restart) rather than to a
        bot that is draining (DESIGN.md "Lifecycle": it stops taking new work first). Closing
        also ends slack_sdk's reconnecting.
        """
        self._handler.receiving = False
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._handler.idle.wait(), grace_s)
        if self._handler.in_hand:
            log.warning("closing Slack Socket Mode with %d envelope(s) still being handled", self._handler.in_hand)
        await self.close()

    async def close(self) -> None:
        """Close the socket and slack_sdk's session and tasks (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._handler.receiving = False
        await self._handler.close_async()  # type: ignore[no-untyped-call]
