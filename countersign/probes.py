"""What `/healthz`, `/readyz` and `/metrics` answer, from the first start attempt to the shutdown.

- `GET /healthz` is liveness: 200 whenever the process answers at all. It touches nothing else,
  so that an orchestrator never restarts a process for a database or a platform that is down
  (restarting would not bring them back) or busy.
- `GET /readyz` is readiness: 200 only once the bot has started, while PostgreSQL answers on the
  probes' own connection (`bot.storage.probe.DatabaseProbe`) and every platform is connected;
  503 while it starts (with the outage it is waiting out, `countersign.starting`), when
  something is down, and once it is stopping.
- `GET /metrics` is `bot.metrics`, with the pending approvals counted on that same connection.

Every wait is bounded by `CHECK_TIMEOUT_S`, and none uses the pools message intake uses
(docs/decisions/0037-outages-probes-and-tokens-at-rest.md; docs/decisions/0015).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from aiohttp import web

from bot import metrics
from bot.storage.probe import DatabaseProbe

log = logging.getLogger(__name__)

HEALTH_PATH = "/healthz"
READY_PATH = "/readyz"
METRICS_PATH = "/metrics"
CHECK_TIMEOUT_S = 2.0
"""Seconds a probe waits for the database, and for each platform to say whether it is connected."""


class Connectable(Protocol):
    """A platform adapter as readiness sees it."""

    async def connected(self) -> bool:
        """Whether the platform can reach the bot now."""
        ...


@dataclass(slots=True)
class _Serving:
    database: DatabaseProbe
    adapters: Sequence[Connectable]


class Probes:
    """The three endpoints' state: starting (and why it is taking long), serving, stopping.

    One per process; `countersign run` makes it before its first start attempt, so that a
    separate bind (`METRICS_PORT`) answers during the whole start.
    """

    def __init__(self) -> None:
        self._serving: _Serving | None = None
        self._stopping = False
        self._waiting_for: str | None = None
        self._attempts = 0

    def retrying(self, reason: str, attempt: int) -> None:
        """A start attempt met an outage (`countersign.starting.start_with_retries`'s `on_retry`).

        Args:
            reason: what could not be reached, in one line (no secrets: URLs are redacted).
            attempt: the failed attempt's number, from 1.
        """
        self._waiting_for = reason
        self._attempts = attempt

    def serving(self, database: DatabaseProbe, adapters: Sequence[Connectable]) -> None:
        """The bot has started: readiness asks `database` and each adapter from now on."""
        self._serving = _Serving(database, adapters)
        self._waiting_for = None

    def stopping(self) -> None:
        """The bot is shutting down: readiness answers 503 from now on."""
        self._stopping = True

    def add_routes(self, app: web.Application) -> None:
        """Mount `/healthz`, `/readyz` and `/metrics` on `app`."""
        app.router.add_get(HEALTH_PATH, self.health)
        app.router.add_get(READY_PATH, self.ready)
        app.router.add_get(METRICS_PATH, self.metrics)

    async def health(self, request: web.Request) -> web.Response:
        """`GET /healthz`: 200 `{"status": "ok"}`, without asking the database or a platform."""
        return web.json_response({"status": "ok"})

    async def ready(self, request: web.Request) -> web.Response:
        """`GET /readyz`: 200 only when started, PostgreSQL answers and every platform is connected.

        For a load balancer or an orchestrator to route around a replica that is starting, lost
        its database or a platform, or is stopping. The body says which:
        `{"status": "unavailable", "database": "ok", "platforms": {"DiscordAdapter":
        "disconnected"}}`, `{"status": "starting", "waiting_for": "cannot reach PostgreSQL at
        ...", "attempts": 3}`, `{"status": "stopping"}`.
        """
        if self._stopping:
            return web.json_response({"status": "stopping"}, status=503)
        serving = self._serving
        if serving is None:
            body: dict[str, Any] = {"status": "starting"}
            if self._waiting_for is not None:
                body.update(waiting_for=self._waiting_for, attempts=self._attempts)
            return web.json_response(body, status=503)
        # Asked side by side: the answer comes within CHECK_TIMEOUT_S however many platforms.
        answers, *ups = await asyncio.gather(serving.database.answers(), *map(_connected, serving.adapters))
        database = "ok" if answers else "unreachable"
        platforms = {
            type(adapter).__name__: "connected" if up else "disconnected"
            for adapter, up in zip(serving.adapters, ups, strict=True)
        }
        ready = database == "ok" and all(state == "connected" for state in platforms.values())
        body = {"status": "ok" if ready else "unavailable", "database": database, "platforms": platforms}
        return web.json_response(body, status=200 if ready else 503)

    async def metrics(self, request: web.Request) -> web.Response:
        """`GET /metrics`: `bot.metrics` in Prometheus' text format (pending approvals once started)."""
        serving = self._serving
        count = serving.database.pending_approvals if serving is not None and not self._stopping else None
        body = await metrics.render(count)
        return web.Response(body=body, headers={"Content-Type": metrics.CONTENT_TYPE_LATEST})


async def _connected(adapter: Connectable) -> bool:
    """Whether `adapter` says it is connected within `CHECK_TIMEOUT_S` (a failure or no answer is no)."""
    try:
        return await asyncio.wait_for(adapter.connected(), timeout=CHECK_TIMEOUT_S)
    except Exception as exc:
        log.warning("readiness: %s did not say whether it is connected: %s", type(adapter).__name__, exc)
        return False
