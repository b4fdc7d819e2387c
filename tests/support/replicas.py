"""Several bots on one database, with Slack traffic spread across them: processes or workers.

What a load balancer and Slack's retries do in production: an event goes to one replica; when
that replica cannot take it (it was killed), Slack delivers it again (same event, same message
ts, `X-Slack-Retry-Num`) and the balancer sends it to another. A click whose request fails is
clicked again by its user.

Two shapes share one interface (`Cluster`), so the same tests hold for both:

- `Replicas`: separate `countersign run` processes, each on its own port (replicas on several
  machines behind a balancer);
- `Workers`: one `countersign run --workers N` (a supervisor and N worker processes sharing one
  port with `SO_REUSEPORT`). The kernel, not the test, picks the worker of a connection; a
  request meant for worker i goes on a fresh connection that a probe has shown to be served by
  worker i, and its answer's `X-Countersign-Worker` header is checked.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import aclosing
from pathlib import Path
from typing import Any

import psutil

from adapters.slack import blocks
from tests.standins.slack_api import SlackApiStandIn
from tests.standins.slack_events import SEND_ERRORS, Delivery, SlackEventSender
from tests.support.bot_process import BotProcess, free_port

WAIT_S = 90.0
"""Seconds to wait for anything that goes through a replica, PostgreSQL and the stand-ins."""

WORKER_HEADER = "x-countersign-worker"
"""The response header naming the worker that answered (countersign.server.WORKER_HEADER)."""

AIM_TRIES = 200
"""Fresh connections tried before concluding that no connection reaches a worker (with two
workers the kernel hands one a connection about every second try)."""


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


class Cluster:
    """Bots sharing one database, reached over Slack's HTTP endpoint; replica `i` is bot `i`.

    Subclasses say which bots run (`live`), how a request reaches bot `i` (`_senders`), and
    how bots start, die and stop. Requests take turns over the live bots unless `prefer`
    names one; `served` records which bot answered each request, in order.

    Args:
        signing_secret: the Slack signing secret the bots verify.
        team_id: the Slack workspace.
        count: how many bots.
    """

    def __init__(self, *, signing_secret: str, team_id: str, count: int) -> None:
        self.count = count
        self.signing_secret = signing_secret
        self.team_id = team_id
        self.served: list[int] = []
        """The index of the bot that answered each request sent through this cluster, in order."""
        self._turn = itertools.count()

    def live(self) -> list[int]:
        """Indexes of the bots running now."""
        raise NotImplementedError

    def pid(self, index: int) -> int:
        """The pid of bot `index`'s current process.

        Raises:
            AssertionError: bot `index` is not running.
        """
        raise NotImplementedError

    async def start(self, index: int | None = None, *, timeout: float = 120.0) -> None:
        """Have bot `index` (every bot when None) running and answering; fail after `timeout` s."""
        raise NotImplementedError

    async def kill(self, index: int) -> None:
        """SIGKILL bot `index`: no shutdown, no cleanup, as a crash or an OOM kill."""
        raise NotImplementedError

    async def stop(self) -> list[int]:
        """SIGTERM every process; return their exit codes."""
        raise NotImplementedError

    def stderr(self) -> str:
        """Everything the bots logged so far."""
        raise NotImplementedError

    def _senders(self, order: Sequence[int]) -> AsyncIterator[tuple[int, SlackEventSender]]:
        """For each index of `order` in turn, a sender whose requests reach that bot.

        A bot that cannot be reached is left out. The sender is valid until the next one is asked for.
        """
        raise NotImplementedError

    def _answered(self, index: int, delivery: Delivery) -> None:
        """Note that bot `index` answered `delivery` (a subclass checks it really was that bot)."""
        self.served.append(index)

    def _order(self, prefer: int | None) -> list[int]:
        live = self.live()
        if not live:
            raise AssertionError("no replica is running")
        first = live[next(self._turn) % len(live)] if prefer is None or prefer not in live else prefer
        return [first, *[i for i in live if i != first]]

    async def mention(self, channel: str, user: str, text: str, *, prefer: int | None = None) -> str:
        """Post an `app_mention` as Slack delivers it; return its ts (the conversation's thread).

        Bots take turns unless `prefer` names one. When the chosen bot cannot be reached, the
        event is delivered again, as Slack retries it, to the next live one.

        Raises:
            AssertionError: no live bot took it.
        """
        ts = f"{time.time():.6f}"
        event_id = f"Ev{uuid.uuid4().hex[:12].upper()}"
        attempt = 0
        async with aclosing(self._senders(self._order(prefer))) as senders:
            async for index, events in senders:
                try:
                    delivery = await events.app_mention(
                        channel,
                        user,
                        text,
                        ts=ts,
                        event_id=event_id,
                        retry_num=attempt or None,
                        retry_reason="http_error" if attempt else None,
                    )
                except SEND_ERRORS:  # the bot cannot be reached: the request goes to another
                    attempt += 1
                    continue
                attempt += 1
                if delivery.status == 200:
                    self._answered(index, delivery)
                    return ts
        raise AssertionError(f"no replica took the mention {text!r}")

    async def reply(self, channel: str, user: str, text: str, thread_ts: str, *, prefer: int | None = None) -> str:
        """Post a thread reply (a `message` event); return its ts. Retried like `mention`."""
        ts = f"{time.time():.6f}"
        event_id = f"Ev{uuid.uuid4().hex[:12].upper()}"
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
        attempt = 0
        async with aclosing(self._senders(self._order(prefer))) as senders:
            async for index, events in senders:
                try:
                    delivery = await events.event(event, ts=ts, event_id=event_id, retry_num=attempt or None)
                except SEND_ERRORS:  # the bot cannot be reached: the request goes to another
                    attempt += 1
                    continue
                attempt += 1
                if delivery.status == 200:
                    self._answered(index, delivery)
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
        """Click a card's button on a bot; a click that cannot be sent is clicked again on another."""
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
        """Send an interaction (a click, a form, a slash command) to a bot; one that cannot be reached is skipped.

        Args:
            request: sends the request with the sender it is given and returns its delivery.
            prefer: the bot to send it to (when it runs); by default bots take turns.

        Raises:
            AssertionError: no live bot took it.
        """
        async with aclosing(self._senders(self._order(prefer))) as senders:
            async for index, events in senders:
                try:
                    delivery = await request(events)
                except SEND_ERRORS:  # the bot cannot be reached: the request goes to another
                    continue
                self._answered(index, delivery)
                return delivery
        raise AssertionError("no replica took the request")


class Replicas(Cluster):
    """`count` `countersign run` processes on the same `DATABASE_URL`, each on its own port.

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
        super().__init__(signing_secret=signing_secret, team_id=team_id, count=count)
        self._env_for = env_for
        self._cwd = cwd
        self.ports = [free_port() for _ in range(count)]
        self.processes: list[BotProcess | None] = [None] * count
        self.logs: list[bytes] = [b""] * count
        """Everything each replica wrote to stderr, over all its lives."""
        self.events = SlackEventSender(self.url(0), signing_secret, team_id=team_id, timeout=WAIT_S)

    def url(self, index: int) -> str:
        """Replica `index`'s Slack events URL."""
        return f"http://127.0.0.1:{self.ports[index]}/slack/events"

    def live(self) -> list[int]:
        return [
            i
            for i, process in enumerate(self.processes)
            if process is not None and process.proc is not None and process.proc.returncode is None
        ]

    def pid(self, index: int) -> int:
        process = self.processes[index]
        if process is None or process.proc is None or process.proc.returncode is not None:
            raise AssertionError(f"replica {index} is not running")
        return process.proc.pid

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

    async def _senders(self, order: Sequence[int]) -> AsyncIterator[tuple[int, SlackEventSender]]:
        for index in order:
            self.events.url = self.url(index)
            yield index, self.events


class Workers(Cluster):
    """One `countersign run --workers count` process; bot `i` is its worker `i`.

    Workers share one port, so a request meant for worker `i` goes on a fresh TCP connection
    that a probe (Slack's `url_verification`) has shown to be served by worker `i`; the answer
    to the request itself must carry `X-Countersign-Worker: i` too. A killed worker is
    restarted by the supervisor, not by the test.

    Args:
        env: the supervisor's environment (with `DATABASE_URL`, `PORT` and the stand-ins' URLs).
        port: the port in `env`, which every worker listens on.
        cwd: the process's working directory.
        signing_secret: the Slack signing secret the workers verify.
        team_id: the Slack workspace.
        count: how many workers.
    """

    def __init__(
        self,
        env: dict[str, str],
        port: int,
        cwd: Path,
        *,
        signing_secret: str,
        team_id: str,
        count: int = 2,
    ) -> None:
        super().__init__(signing_secret=signing_secret, team_id=team_id, count=count)
        self.port = port
        self.url = f"http://127.0.0.1:{port}/slack/events"
        self.supervisor = BotProcess(env, cwd, command="run", args=("--workers", str(count)))
        self.killed: list[int] = []
        """The pids of the workers `kill` killed."""
        self.pids: set[int] = set()
        """Every worker pid seen, over all workers' lives."""

    def _workers(self) -> dict[int, int]:
        """Worker index -> pid of each running worker (a child of the supervisor with its index in its environment)."""
        proc = self.supervisor.proc
        if proc is None or proc.returncode is not None:
            return {}
        found: dict[int, int] = {}
        try:
            children = psutil.Process(proc.pid).children()
        except psutil.NoSuchProcess:
            return {}
        for child in children:
            try:
                if child.status() == psutil.STATUS_ZOMBIE or child.pid in self.killed:
                    continue
                index = child.environ().get("COUNTERSIGN_WORKER_INDEX")
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
            if index is not None:
                if int(index) in found:
                    raise AssertionError(
                        f"two running processes claim worker {index}: {found[int(index)]}, {child.pid}"
                    )
                found[int(index)] = child.pid
                self.pids.add(child.pid)
        return found

    def live(self) -> list[int]:
        return sorted(self._workers())

    def pid(self, index: int) -> int:
        pid = self._workers().get(index)
        if pid is None:
            raise AssertionError(f"worker {index} is not running")
        return pid

    async def start(self, index: int | None = None, *, timeout: float = 120.0) -> None:
        """Start the supervisor (when `index` is None) or wait for the supervisor to have restarted worker `index`.

        Either way, returns once the worker (every worker, for None) runs and a connection
        has reached it.

        Raises:
            AssertionError: not so within `timeout` seconds, or the supervisor exited.
        """
        if index is None:
            await self.supervisor.start()
            await self.supervisor.wait_healthy(self.port, timeout=timeout)
        deadline = time.monotonic() + timeout
        for i in range(self.count) if index is None else [index]:
            while True:
                if self.supervisor.proc is None or self.supervisor.proc.returncode is not None:
                    raise AssertionError(f"the supervisor exited:\n{self.stderr()}")
                if i in self._workers():
                    sender = await self._aimed(i)
                    if sender is not None:
                        await sender.aclose()
                        break
                if time.monotonic() > deadline:
                    raise AssertionError(f"worker {i} not answering after {timeout}s:\n{self.stderr()}")
                await asyncio.sleep(0.1)

    async def kill(self, index: int) -> None:
        """SIGKILL worker `index`; return once the supervisor logged its death (it restarts it by itself).

        Raises:
            AssertionError: worker `index` is not running, or the supervisor did not notice
                within `WAIT_S` seconds.
        """
        pid = self.pid(index)
        victim = psutil.Process(pid)
        self.killed.append(pid)
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + WAIT_S
        noticed = f"worker {index} (pid {pid}) was killed by signal 9 (SIGKILL)"
        while noticed not in self.stderr():
            if time.monotonic() > deadline:
                alive = victim.is_running() and victim.status() != psutil.STATUS_ZOMBIE
                raise AssertionError(
                    f"the supervisor did not log {noticed!r} within {WAIT_S}s (alive: {alive}):\n{self.stderr()}"
                )
            await asyncio.sleep(0.05)

    async def stop(self) -> list[int]:
        """SIGTERM the supervisor; return its exit code (the only process the test started).

        Raises:
            AssertionError: a worker process is still running after the supervisor exited.
        """
        self._workers()
        if self.supervisor.proc is None:
            return []
        code = await self.supervisor.stop(timeout=WAIT_S)
        left = [
            pid for pid in self.pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        ]
        if left:
            raise AssertionError(f"workers {left} outlived the supervisor")
        return [code]

    def stderr(self) -> str:
        """The supervisor's log, with every worker's (they write to its stderr)."""
        return self.supervisor.stderr.decode(errors="replace")

    async def _aimed(self, index: int) -> SlackEventSender | None:
        """A sender (open; the caller closes it) whose kept-alive connection is served by worker `index`.

        None when `AIM_TRIES` fresh connections did not reach it (it is not listening).
        """
        for _ in range(AIM_TRIES):
            sender = SlackEventSender(self.url, self.signing_secret, team_id=self.team_id, timeout=WAIT_S)
            await sender.__aenter__()
            try:
                probe = await sender.url_verification()
            except SEND_ERRORS:  # the bot cannot be reached: the request goes to another
                await sender.aclose()
                continue
            if probe.status == 200 and probe.headers.get(WORKER_HEADER) == str(index):
                return sender
            await sender.aclose()
        return None

    async def _senders(self, order: Sequence[int]) -> AsyncIterator[tuple[int, SlackEventSender]]:
        for index in order:
            sender = await self._aimed(index)
            if sender is None:
                continue
            try:
                yield index, sender
            finally:
                await sender.aclose()

    def _answered(self, index: int, delivery: Delivery) -> None:
        worker = delivery.headers.get(WORKER_HEADER)
        if worker != str(index):
            raise AssertionError(f"a request aimed at worker {index} was answered by worker {worker}")
        super()._answered(index, delivery)


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
