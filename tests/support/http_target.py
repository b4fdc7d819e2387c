"""The HTTP server the agent's `http_request` tool calls in tests; records every request."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self

from aiohttp import web
from multidict import CIMultiDict

from tests.support.gate import Gate


@dataclass(frozen=True, slots=True)
class Received:
    """One request the target received."""

    method: str
    path: str
    headers: Mapping[str, str]
    """Names compared without case, as HTTP does."""
    json: Any


class HttpTarget:
    """An aiohttp server on 127.0.0.1 port 0 answering `{"ok": true, "echo": <body>}`."""

    def __init__(self) -> None:
        self.gate = Gate()
        """Arm it to hold the next request after it is recorded (the tool is then "running")."""
        self.requests: list[Received] = []
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def host(self) -> str:
        """`127.0.0.1:<port>`, as `HTTP_REQUEST_ALLOWED_HOSTS` wants it."""
        return f"127.0.0.1:{self.port}"

    def url(self, path: str = "/things") -> str:
        """An absolute URL on the target."""
        return f"http://{self.host}{path}"

    async def __aenter__(self) -> Self:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.Response:
        raw = await request.read()
        body = json.loads(raw) if raw else None
        self.requests.append(Received(request.method, request.path, CIMultiDict(request.headers), body))
        await self.gate.passing()
        return web.json_response({"ok": True, "id": len(self.requests), "echo": body}, status=201)
