"""Several `countersign run` processes on one database, with Slack traffic spread across them.

What a load balancer and Slack's retries do in production: an event goes to one replica; when
that replica cannot take it (it was killed), Slack delivers it again (same event, same message
ts, `X-Slack-Retry-Num`) and the balancer sends it to another. A click whose request fails is
clicked again by its user.
"""

from __future__ import annotations

import asyncio
import itertools
import signal
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import httpx

from adapters.slack import blocks
from tests.standins.slack_api import SlackApiStandIn
from tests.standins.slack_events import Delivery, SlackEventSender
from tests.support.bot_process import BotProcess, free_port

WAIT_S = 90.0
"""Seconds to wait for anything that goes through a replica, PostgreSQL and the stand-ins."""


async def eventually(check: Callable[[], Awaitable[bool]], what: str, timeout: float = WAIT_S) -> None:
    """Poll `check` (every 50 ms) until it is true; fail naming `what` after `timeout` seconds.

    For state only a query can see (a database row); a stand-in's calls have `wait_for`.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{what} did not happen within {timeout}s")


class Replicas:
    """`count` bot processes on the same `DATABASE_URL`, each on its own port.

    Args:
        env_for: the environment of a replica listening on the given port (with
            `DATABASE_URL` and the stand-ins' URLs).
        cwd: the processes' working directory.
        signing_secret: the Slack signing secret the replicas verify.
        team_id: the Slack workspace.
        count: how many replicas.
    """

    def __init__(
        self,
        env_for: Callable[[int], dict[str, str]],
        cwd: Path,
        *,
        signing_secret: str,
        team_id: str,
        count: int = 2,
    ) -> None:
        self._env_for = env_for
        self._cwd = cwd
        self.ports = [free_port() for _ in range(count)]
        self.processes: list[BotProcess | None] = [None] * count
        self.logs: list[bytes] = [b""] * count
        """Everything each replica wrote to stderr, over all its lives."""
        self.events = SlackEventSender(self.url(0), signing_secret, team_id=team_id, timeout=WAIT_S)
        self._turn = itertools.count()

    def url(self, index: int) -> str:
        """Replica `index`'s Slack events URL."""
        return f"http://127.0.0.1:{self.ports[index]}/slack/events"

    def live(self) -> list[int]:
        """Indexes of the replicas running now."""
        return [
            i
            for i, process in enumerate(self.processes)
            if process is not None and process.proc is not None and process.proc.returncode is None
        ]

    async def start(self, index: int | None = None, *, timeout: float = 120.0) -> None:
        """Start replica `index` (every replica when None) and wait until it is healthy."""
        for i in range(len(self.ports)) if index is None else [index]:
            process = await BotProcess(self._env_for(self.ports[i]), self._cwd).start()
            self.processes[i] = process
            try:
                await process.wait_healthy(self.ports[i], timeout=timeout)
            except AssertionError:
                await self._forget(i)
                raise

    async def kill(self, index: int) -> None:
        """SIGKILL replica `index`: no shutdown, no cleanup, as a crash or an OOM kill."""
        process = self.processes[index]
        if process is None:
            return
        await process.stop(signal.SIGKILL)
        await self._forget(index)

    async def stop(self) -> list[int]:
        """SIGTERM every live replica; return their exit codes."""
        codes = []
        for i in self.live():
            process = self.processes[i]
            assert process is not None
            codes.append(await process.stop())
            await self._forget(i)
        await self.events.aclose()
        return codes

    def stderr(self) -> str:
        """All replicas' logs so far (including the live ones')."""
        parts = [log for log in self.logs]
        for i, process in enumerate(self.processes):
            if process is not None:
                parts[i] = parts[i] + process.stderr
        return b"".join(parts).decode(errors="replace")

    async def _forget(self, index: int) -> None:
        process = self.processes[index]
        if process is not None:
            if process.proc is not None and process.proc.returncode is None:
                await process.stop(signal.SIGKILL)
            self.logs[index] += process.stderr
        self.processes[index] = None

    def _order(self, prefer: int | None) -> list[int]:
        live = self.live()
        if not live:
            raise AssertionError("no replica is running")
        first = live[next(self._turn) % len(live)] if prefer is None or prefer not in live else prefer
        return [first, *[i for i in live if i != first]]

    async def mention(self, channel: str, user: str, text: str, *, prefer: int | None = None) -> str:
        """Post an `app_mention` as Slack delivers it; return its ts (the conversation's thread).

        Replicas take turns unless `prefer` names one. When the chosen replica cannot be
        reached, the event is delivered again, as Slack retries it, to the next live one.
        """
        ts = f"{time.time():.6f}"
        event_id = f"Ev{uuid.uuid4().hex[:12].upper()}"
        for attempt, index in enumerate(self._order(prefer)):
            self.events.url = self.url(index)
            try:
                delivery = await self.events.app_mention(
                    channel,
                    user,
                    text,
                    ts=ts,
                    event_id=event_id,
                    retry_num=attempt or None,
                    retry_reason="http_error" if attempt else None,
                )
            except httpx.TransportError:
                continue
            if delivery.status == 200:
                return ts
        raise AssertionError(f"no replica took the mention {text!r}")

    async def reply(self, channel: str, user: str, text: str, thread_ts: str, *, prefer: int | None = None) -> str:
        """Post a thread reply (a `message` event); return its ts. Retried like `mention`."""
        ts = f"{time.time():.6f}"
        event_id = f"Ev{uuid.uuid4().hex[:12].upper()}"
        for attempt, index in enumerate(self._order(prefer)):
            self.events.url = self.url(index)
            event: dict[str, Any] = {
                "type": "message",
                "channel": channel,
                "user": user,
                "text": text,
                "ts": ts,
                "thread_ts": thread_ts,
                "event_ts": ts,
                "channel_type": "channel",
            }
            try:
                delivery = await self.events.event(event, ts=ts, event_id=event_id, retry_num=attempt or None)
            except httpx.TransportError:
                continue
            if delivery.status == 200:
                return ts
        raise AssertionError(f"no replica took the reply {text!r}")

    async def click(
        self,
        slack: SlackApiStandIn,
        user: str,
        card: Card,
        action_id: str = blocks.ACTION_APPROVE,
        *,
        prefer: int | None = None,
    ) -> Delivery:
        """Click a card's button on a replica; a click that cannot be sent is clicked again on another."""
        return await self.send(
            lambda events: events.block_actions(
                user,
                card.channel,
                card.ts,
                action_id,
                card.approval_id,
                slack.new_trigger_id(),
                thread_ts=card.thread_ts,
            ),
            prefer=prefer,
        )

    async def send(
        self, request: Callable[[SlackEventSender], Awaitable[Delivery]], *, prefer: int | None = None
    ) -> Delivery:
        """Send an interaction (a click, a form) to a replica; one that cannot be reached is skipped.

        Raises:
            AssertionError: no live replica took it.
        """
        for index in self._order(prefer):
            self.events.url = self.url(index)
            try:
                return await request(self.events)
            except httpx.TransportError:
                continue
        raise AssertionError("no replica took the request")


class Card:
    """A posted card: where it is and the approval its buttons name."""

    def __init__(self, channel: str, ts: str, thread_ts: str | None, approval_id: str) -> None:
        self.channel = channel
        self.ts = ts
        self.thread_ts = thread_ts
        self.approval_id = approval_id


def cards_in(slack: SlackApiStandIn, channel: str, thread_ts: str) -> list[Card]:
    """The cards (messages with our Approve button) posted in a thread, oldest first."""
    found = []
    for message in slack.messages(channel, thread_ts=thread_ts):
        for block in message.get("blocks") or []:
            for element in block.get("elements", []) if block.get("type") == "actions" else []:
                if element.get("action_id") == blocks.ACTION_APPROVE:
                    found.append(Card(channel, message["ts"], message.get("thread_ts"), element["value"]))
    return found


def bot_texts(slack: SlackApiStandIn, channel: str, thread_ts: str, bot_user: str) -> list[str]:
    """The text of every message the bot posted in a thread (answers, notices, cards), oldest first."""
    return [
        str(message.get("text") or "")
        for message in slack.messages(channel, thread_ts=thread_ts)
        if message.get("user") == bot_user and message["ts"] != thread_ts
    ]


def ephemerals_to(slack: SlackApiStandIn, channel: str, user: str) -> Sequence[dict[str, Any]]:
    """Ephemeral messages a user got in a channel."""
    return [m for m in slack.ephemerals(channel) if m.get("recipient") == user]
