"""The Discord adapter: connects the client to `DISCORD_API_URL` and its gateway.

discord.py reads its REST base from the class attribute `Route.BASE`, and a plain `Client`
connects to the class attribute `DiscordWebSocket.DEFAULT_GATEWAY` without asking Discord (it
also falls back to it after an invalid session). DESIGN.md requires asking the REST API
(`GET /gateway/bot`) and connecting there, so `start` sets both before connecting. They are
process-wide: one Discord bot per process.

The client is sharded (docs/decisions/0018): it runs `DISCORD_SHARD_IDS` of
`DISCORD_SHARD_COUNT` shards, or every shard `GET /gateway/bot` recommends when unset. With
`DISCORD_SHARD_IDS=none` the process opens no gateway session and only posts over REST (a
worker left without a shard still posts the cards and answers of the turns it runs).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass

import aiohttp
import discord
import discord.http
import yarl
from discord.gateway import DiscordWebSocket
from discord.http import Route

from adapters.discord import messages as msg
from adapters.discord.client import CountersignClient, IdentifyGate
from adapters.discord.platform import DiscordPlatform
from bot.admin.service import AdminService
from bot.base.errors import ConfigurationError, CountersignError, UnreachableError
from bot.service import Countersign
from bot.settings import DiscordSettings

log = logging.getLogger(__name__)

READY_TIMEOUT_S = 60.0
CLOSE_WAIT_S = 5.0
"""Seconds `close` lets the gateway task end by itself once the client is closed, before it cancels it."""


def point_at(api_url: str) -> None:
    """Send discord.py's REST calls to `api_url` (e.g. `https://discord.com/api/v10`)."""
    Route.BASE = api_url.rstrip("/")


class DiscordAdapter:
    """Everything Discord: the client, its handlers and the outbound port.

    Args:
        settings: the token and the REST base URL.
        service: the core.
        admin: the `/countersign` commands.

    Raises:
        ConfigurationError: when the token is missing.
    """

    def __init__(
        self,
        settings: DiscordSettings,
        service: Countersign,
        admin: AdminService,
        *,
        identify_gate: IdentifyGate | None = None,
    ) -> None:
        if settings.token is None:
            raise ConfigurationError("DISCORD_TOKEN is not set")
        self._settings = settings
        self.gateway = settings.shard_ids != ()
        """False for `DISCORD_SHARD_IDS=none`: no gateway session, REST only."""
        self.client = CountersignClient(
            service,
            admin,
            guild_ready_timeout_s=settings.guild_ready_timeout_s,
            shard_count=settings.shard_count,
            shard_ids=settings.shard_ids or None,
            identify_gate=identify_gate,
        )
        self.platform = DiscordPlatform(self.client)
        self._connection: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Log in, discover the gateway, connect, and wait until READY.

        Raises:
            ConfigurationError: the token is refused (401, 403, or another 4xx), the gateway
                closed for a reason that is ours (4004 authentication failed, 4010 to 4013), or
                the Message Content intent is not enabled for the application (one line, with
                what to do).
            UnreachableError: Discord cannot be reached or cannot answer now (a 5xx, a 429, a
                refused or dropped connection, no READY within `READY_TIMEOUT_S`):
                `countersign run` tries again (`countersign.starting`).
        """
        token = self._settings.token
        if token is None:  # pragma: no cover - checked in __init__
            raise ConfigurationError("DISCORD_TOKEN is not set")
        point_at(self._settings.api_url)
        try:
            await self.client.login(token.get_secret_value())
            recommended, gateway_url, limits = await self.client.http.get_bot_gateway()
        except (OSError, aiohttp.ClientError, discord.DiscordException) as exc:
            await self.client.close()
            raise rest_failure(exc, self._settings.api_url) from None
        DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(gateway_url)
        self.client.max_concurrency = int(limits.get("max_concurrency", 1))
        if not self.gateway:
            log.info(
                "Discord: this process runs no shard (DISCORD_SHARD_IDS=none): no gateway session, "
                "it posts over REST only"
            )
            return
        count = self._settings.shard_count or recommended
        shards = self._settings.shard_ids or tuple(range(count))
        log.info(
            "Discord shards %s of %d (max_concurrency %d)",
            ",".join(map(str, shards)),
            count,
            self.client.max_concurrency,
        )
        self._connection = asyncio.create_task(self.client.connect(reconnect=True), name="discord gateway")
        ready = asyncio.create_task(self.client.wait_until_ready(), name="discord ready")
        done, _ = await asyncio.wait(
            {ready, self._connection}, timeout=READY_TIMEOUT_S, return_when=asyncio.FIRST_COMPLETED
        )
        if self._connection in done:
            ready.cancel()
            error = self._connection.exception()
            await self.client.close()
            if isinstance(error, discord.PrivilegedIntentsRequired):
                raise ConfigurationError(msg.MISSING_INTENT)
            if isinstance(error, discord.ConnectionClosed | discord.LoginFailure):
                # discord.py ends `connect` on a close code it may not resume after: 4004
                # (authentication failed) or 4010 to 4014 (Discord's Gateway docs, "Close Event Codes").
                raise ConfigurationError(f"the Discord gateway refused the connection: {error}")
            raise UnreachableError(f"the Discord gateway connection failed: {error}")
        if ready not in done:
            ready.cancel()
            await self.close()
            raise UnreachableError(f"Discord did not become ready within {READY_TIMEOUT_S:.0f}s")
        log.info("Discord connected as %s (gateway %s)", self.client.user, gateway_url)

    async def connected(self) -> bool:
        """Whether every shard's gateway session is up now (`GET /readyz`); REST only: logged in."""
        if not self.gateway:
            return not self.client.is_closed()
        return self.client.gateway_connected and not self.client.is_closed()

    async def close(self) -> None:
        """Disconnect from the gateway and close the HTTP session.

        Closed while it still starts (a stop during the start), the shards' launch is cancelled
        first: discord.py launches shards one after another, and a shard whose turn came after
        the client closed would fail to connect on the closed session and log a traceback.
        """
        if self._connection is not None and not self.client.is_ready():
            self._connection.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._connection
        await self.client.close()
        if self._connection is not None:
            # discord.py's `launch_shard` retries a failed connection every 5 s forever, closed
            # client or not: closed while a shard still waits for its IDENTIFY (a stop during the
            # start), the task would never end and the process never exit.
            await asyncio.wait({self._connection}, timeout=CLOSE_WAIT_S)
            self._connection.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._connection


@dataclass(frozen=True, slots=True, kw_only=True)
class GatewayLimits:
    """What `GET /gateway/bot` says about sharding (Discord's Gateway docs, "Get Gateway Bot").

    Attributes:
        shards: the recommended shard count.
        max_concurrency: `session_start_limit.max_concurrency`: IDENTIFY buckets
            (`shard_id % max_concurrency`), one IDENTIFY per bucket per 5 seconds.
    """

    shards: int
    max_concurrency: int


async def fetch_gateway_limits(settings: DiscordSettings) -> GatewayLimits:
    """Ask `GET /gateway/bot` once with the bot token (the supervisor, before it starts workers).

    Raises:
        ConfigurationError: the token is missing or refused.
        UnreachableError: Discord cannot be reached or cannot answer now (`rest_failure`).
    """
    token = settings.token
    if token is None:
        raise ConfigurationError("DISCORD_TOKEN is not set")
    point_at(settings.api_url)
    http = discord.http.HTTPClient(asyncio.get_running_loop())
    try:
        await http.static_login(token.get_secret_value())
        shards, _, limits = await http.get_bot_gateway()
    except (OSError, aiohttp.ClientError, discord.DiscordException) as exc:
        raise rest_failure(exc, settings.api_url) from None
    finally:
        await http.close()
    return GatewayLimits(shards=int(shards), max_concurrency=int(limits.get("max_concurrency", 1)))


def rest_failure(exc: Exception, api_url: str) -> CountersignError:
    """The start's error for a failed login or `GET /gateway/bot`: a refusal, or an outage.

    discord.py has already waited out 429s and tried 5xx and dropped connections again (five
    attempts); what still fails is a refusal when Discord answered 4xx (401 is discord.py's
    `LoginFailure`), an outage otherwise.

    Args:
        exc: what discord.py or aiohttp raised.
        api_url: `DISCORD_API_URL`, for the message.

    Returns:
        A `ConfigurationError` (refused: status 2) or an `UnreachableError` (tried again).
    """
    if isinstance(exc, discord.LoginFailure):
        return ConfigurationError("Discord refused DISCORD_TOKEN (401 Unauthorized)")
    detail = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, discord.HTTPException) and 400 <= exc.status < 500 and exc.status != 429:
        return ConfigurationError(f"Discord refused the bot at {api_url}: {detail}")
    return UnreachableError(f"cannot reach Discord at {api_url}: {detail}")
