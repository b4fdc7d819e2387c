"""Counting discord.py's failed REST calls in `countersign_platform_api_errors`."""

from __future__ import annotations

import functools
from typing import Any

import discord
from discord.http import Route

from bot import metrics


def count_failures(client: discord.Client) -> None:
    """Make `client`'s REST calls count in the metrics when they raise.

    discord.py sends every REST call of a client through its `HTTPClient.request` (after its
    own rate-limit waits and retries); this wraps that bound method on the client's instance,
    labelling a failure with the route's method and path template (`POST
    /channels/{channel_id}/messages`: no ids). Interaction responses and follow-ups go through
    discord.py's webhook adapter instead and are not counted here.
    """
    request = client.http.request

    @functools.wraps(request)
    async def counted(route: Route, **kwargs: Any) -> Any:
        try:
            return await request(route, **kwargs)
        except Exception:
            metrics.PLATFORM_API_ERRORS.labels(platform="discord", method=f"{route.method} {route.path}").inc()
            raise

    client.http.request = counted  # type: ignore[method-assign]
