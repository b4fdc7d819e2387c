"""The fault matrix (docs/decisions/0009): conversations through two replicas while faults hit at random.

Two `countersign run` processes share one PostgreSQL of their own; Slack events alternate
between them (a killed replica's events are delivered again to the other, as Slack retries).
Each conversation asks for a gated POST (approved or rejected), an ungated GET or plain text,
clicks its card (sometimes on both replicas at once), and waits for the answer. Meanwhile, at
random: SIGKILL of a replica (started again a moment later), a PostgreSQL restart, Gemini 500s
and 429s, Slack rate limits. Afterwards every conversation gets one more message, which must be
answered.

It prints counts; five must be zero, and the exit status is 1 when one is not:

- duplicate runs: a POST that reached the target more than once;
- runs without approval: a POST that reached the target without an approved decision;
- lost messages: a message that got no answer, card or clear message;
- stuck threads: a conversation whose last message went unanswered;
- secrets in logs: a token, the signing secret, the API key or the database password found in
  the replicas' logs or in anything posted to Slack.

Run: `uv run --frozen python -m bench.faults` (`--help` for the knobs; CI runs a short one).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import logging
import random
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg

from adapters.slack import blocks
from bench.common import args as cli
from bot.storage.database import ensure_database
from bot.storage.embedded import DATABASE_NAME, EmbeddedPostgres
from bot.storage.urls import with_database
from tests.e2e.agent_script import agent_script
from tests.standins.gemini import GeminiStandIn
from tests.standins.slack_api import SlackApiStandIn
from tests.support.bot_process import base_env
from tests.support.http_target import HttpTarget
from tests.support.postgres import restart_embedded
from tests.support.replicas import Card, Replicas, bot_texts, cards_in

# Fake credentials only the stand-ins accept; the matrix searches the logs for them.
BOT_TOKEN = "xoxb-fault-matrix-bot-token"  # noqa: S105
SIGNING_SECRET = "fault-matrix-signing-secret"  # noqa: S105
API_KEY = "fault-matrix-gemini-key"
DB_PASSWORD = "fault-matrix-db-password"  # noqa: S105
TEAM, CHANNEL, BOT_USER = "T1", "C1", "UBOT"
USERS = ("UALICE", "UBOB")
ADMIN = "UCAROL"
KINDS = ("post", "post", "reject", "get", "hello")
SECRETS = (BOT_TOKEN, SIGNING_SECRET, API_KEY, DB_PASSWORD)
MUST_BE_ZERO = ("duplicate runs", "runs without approval", "lost messages", "stuck threads", "secrets in logs")


@dataclass
class Conversation:
    """One conversation of the run and what happened to it."""

    number: int
    kind: str
    user: str
    thread: str | None = None
    card: Card | None = None
    replied: bool = False
    answered_last: bool = False


@dataclass
class Chaos:
    """What was injected."""

    counts: dict[str, int] = field(default_factory=dict)

    def count(self, name: str) -> None:
        """Count one fault of this kind."""
        self.counts[name] = self.counts.get(name, 0) + 1


class Server:
    """The matrix's own PostgreSQL, which it may restart (the embedded server on a temp directory)."""

    def __init__(self, data_dir: Path) -> None:
        self._embedded = EmbeddedPostgres(data_dir)
        self.url = ""

    async def start(self) -> None:
        """Start it, with a database and a password the bot is given (so the logs can be searched for it)."""
        admin = await self._embedded.start()
        await ensure_database(admin, DATABASE_NAME)
        connection = await asyncpg.connect(admin)
        try:
            await connection.execute(f"ALTER USER postgres PASSWORD '{DB_PASSWORD}'")
        finally:
            await connection.close()
        url = with_database(admin, DATABASE_NAME)
        self.url = url.replace("postgres:@", f"postgres:{DB_PASSWORD}@", 1)

    async def restart(self) -> None:
        """Stop it fast (every connection dropped, as a crash or a failover does) and start it again."""
        await restart_embedded(self._embedded)

    async def stop(self) -> None:
        """Stop it."""
        await self._embedded.stop()


async def until(check: Callable[[], bool], seconds: float) -> bool:
    """Poll `check` every 100 ms for up to `seconds`; return its last value."""
    for _ in range(max(1, int(seconds * 10))):
        if check():
            return True
        await asyncio.sleep(0.1)
    return check()


async def with_a_replica(replicas: Replicas, action: Callable[[], Awaitable[Any]], seconds: float) -> Any:
    """Run `action` once a replica is up; retried while every replica is down or restarting."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return await action()
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)


def replies_in(slack: SlackApiStandIn, convo: Conversation) -> list[str]:
    """What the bot said in the conversation: thread messages and ephemerals to its user there."""
    assert convo.thread is not None
    said = bot_texts(slack, CHANNEL, convo.thread, BOT_USER)
    whispered = [
        str(m.get("text") or "")
        for m in slack.ephemerals(CHANNEL)
        if m.get("recipient") == convo.user and m.get("thread_ts") == convo.thread
    ]
    return [*said, *whispered]


def decided(slack: SlackApiStandIn, card: Card) -> bool:
    """Whether the card lost its buttons (a decision was recorded and the card redrawn)."""
    return blocks.ACTION_APPROVE not in json.dumps(slack.message(card.channel, card.ts).get("blocks") or [])


async def converse(
    convo: Conversation, replicas: Replicas, slack: SlackApiStandIn, rng: random.Random, wait_s: float
) -> None:
    """One conversation: ask, click what needs clicking, wait for the answer."""
    text = {"post": f"post item-{convo.number}", "reject": f"post item-{convo.number}", "get": "get"}.get(
        convo.kind, f"hello {convo.number}"
    )
    convo.thread = await with_a_replica(
        replicas, lambda: replicas.mention(CHANNEL, convo.user, f"<@{BOT_USER}> {text}"), wait_s
    )
    if convo.kind in ("post", "reject"):
        if not await until(lambda: bool(cards_in(slack, CHANNEL, convo.thread or "")) or _failed(slack, convo), wait_s):
            return
        if _failed(slack, convo):
            convo.replied = True
            return
        convo.card = cards_in(slack, CHANNEL, convo.thread)[0]
        card = convo.card
        for _ in range(10):  # a click refused by an outage is clicked again, as a person would
            if convo.kind == "reject":
                await _reject(replicas, slack, convo.user, card, wait_s)
            elif rng.random() < 0.3:  # two approvers at once, on both replicas
                await asyncio.gather(
                    *(
                        _approve(replicas, slack, user, card, wait_s, prefer=i)
                        for i, user in enumerate((convo.user, ADMIN))
                    )
                )
            else:
                await _approve(replicas, slack, convo.user, card, wait_s)
            if await until(lambda: decided(slack, card), 15):
                break
    convo.replied = await until(lambda: _answered(slack, convo), wait_s)


async def _approve(
    replicas: Replicas, slack: SlackApiStandIn, user: str, card: Card, wait_s: float, *, prefer: int | None = None
) -> None:
    await with_a_replica(
        replicas, lambda: replicas.click(slack, user, card, blocks.ACTION_APPROVE, prefer=prefer), wait_s
    )


async def _reject(replicas: Replicas, slack: SlackApiStandIn, user: str, card: Card, wait_s: float) -> None:
    """Reject opens a form (the reason); submit it with a reason."""

    def form() -> list[Any]:
        return [c for c in slack.calls_to("views.open") if card.approval_id in json.dumps(c.args.get("view") or {})]

    opened = len(form())
    await with_a_replica(replicas, lambda: replicas.click(slack, user, card, blocks.ACTION_REJECT), wait_s)
    if not await until(lambda: len(form()) > opened, 15):
        return
    metadata = form()[-1].args["view"]["private_metadata"]
    values = {blocks.REASON_BLOCK: {blocks.REASON_INPUT: "not today"}}
    await with_a_replica(
        replicas,
        lambda: replicas.send(lambda events: events.view_submission(user, blocks.VIEW_REJECT, metadata, values)),
        wait_s,
    )


def _said(slack: SlackApiStandIn, convo: Conversation, text: str) -> Callable[[], bool]:
    return lambda: text in replies_in(slack, convo)


def _answered(slack: SlackApiStandIn, convo: Conversation) -> bool:
    texts = replies_in(slack, convo)
    return any(t.startswith(("Result: ", "You said: ")) for t in texts) or _failed(slack, convo)


def _failed(slack: SlackApiStandIn, convo: Conversation) -> bool:
    """Whether the bot told the conversation that something failed (a clear message, not silence)."""
    words = ("went wrong", "failed", "could not", "not answering", "busy", "try again")
    return any(any(w in t.lower() for w in words) for t in replies_in(slack, convo) if not t.startswith("Result: "))


FAULTS = ("kill", "postgres", "gemini-500", "gemini-429", "slack-429")


async def inject(
    replicas: Replicas,
    server: Server,
    gemini: GeminiStandIn,
    slack: SlackApiStandIn,
    chaos: Chaos,
    rng: random.Random,
    every_s: float,
    each_once: asyncio.Event,
) -> None:
    """Inject a fault every `every_s` seconds (on average) until cancelled: each kind once first, then at random.

    `each_once` is set when every kind of fault has happened once.
    """
    schedule = rng.sample(FAULTS, len(FAULTS))
    revivals: set[asyncio.Task[None]] = set()
    try:
        while True:
            await asyncio.sleep(rng.uniform(0.5, 1.5) * every_s)
            fault = schedule.pop(0) if schedule else rng.choice(FAULTS)
            chaos.count(fault)
            if fault == "kill" and replicas.live():
                victim = rng.choice(replicas.live())
                await replicas.kill(victim)
                revivals.add(asyncio.create_task(_revive(replicas, victim, after_s=rng.uniform(0.2, 3.0))))
            elif fault == "postgres":
                await server.restart()
                for index in range(len(replicas.ports)):
                    if index not in replicas.live():  # it failed while the database was down
                        revivals.add(asyncio.create_task(_revive(replicas, index)))
            elif fault == "gemini-500":
                gemini.fail_next(rng.randint(1, 3), 500)
            elif fault == "gemini-429":
                gemini.fail_next(1, 429)
            elif fault == "slack-429":
                slack.rate_limit("chat.postMessage", times=1, retry_after=1)
            if not schedule:
                each_once.set()
    finally:
        if revivals:
            await asyncio.gather(*revivals, return_exceptions=True)


async def _revive(replicas: Replicas, index: int, *, after_s: float = 0.0) -> None:
    """Start a replica again; one that fails to start (the database was down) is tried again."""
    await asyncio.sleep(after_s)
    for _ in range(5):
        if index in replicas.live():
            return
        with contextlib.suppress(AssertionError):
            await replicas.start(index)
            return
        await asyncio.sleep(1)


async def tally(
    convos: list[Conversation], target: HttpTarget, server: Server, slack: SlackApiStandIn, logs: str
) -> dict[str, int]:
    """The counts the matrix prints."""
    connection = await asyncpg.connect(server.url)
    try:
        rows = await connection.fetch("SELECT tool_name, status, final_args, proposed_args FROM approvals")
    finally:
        await connection.close()
    approved_names = set()
    for row in rows:
        if row["status"] in ("approved", "edited"):
            args = row["final_args"] or row["proposed_args"]
            body = (json.loads(args) if isinstance(args, str) else args or {}).get("body") or {}
            approved_names.add(body.get("name"))
    posts = [r.json.get("name") for r in target.requests if r.method == "POST" and isinstance(r.json, dict)]
    posted = [json.dumps(call.args) for call in slack.calls]
    return {
        "conversations": len(convos),
        "decisions applied": sum(row["status"] != "pending" for row in rows),
        "tool runs (GET and POST)": len(target.requests),
        "duplicate runs": sum(posts.count(name) - 1 for name in set(posts)),
        "runs without approval": sum(name not in approved_names for name in posts),
        "lost messages": sum(not convo.replied for convo in convos),
        "stuck threads": sum(not convo.answered_last for convo in convos),
        "secrets in logs": sum(logs.count(s) + sum(p.count(s) for p in posted) for s in SECRETS),
    }


async def run(args: argparse.Namespace) -> dict[str, int]:
    """The whole matrix; returns the counts."""
    rng = random.Random(args.seed)
    chaos = Chaos()
    with tempfile.TemporaryDirectory(prefix="countersign-faults-") as tmp:
        root = Path(tmp)
        server = Server(root / "data")
        await server.start()
        try:
            async with (
                HttpTarget() as target,
                GeminiStandIn(agent_script(target.url()), api_key=API_KEY) as gemini,
                SlackApiStandIn(bot_token=BOT_TOKEN, team_id=TEAM) as slack,
            ):
                for user in (*USERS, ADMIN):
                    slack.add_user(user, user.lower(), is_admin=user == ADMIN)
                slack.add_channel(CHANNEL, name="general")

                def env_for(port: int) -> dict[str, str]:
                    return base_env(
                        GOOGLE_API_KEY=API_KEY,
                        GEMINI_BASE_URL=gemini.base_url,
                        GEMINI_RETRY_INITIAL_DELAY="0.05",
                        SLACK_BOT_TOKEN=BOT_TOKEN,
                        SLACK_SIGNING_SECRET=SIGNING_SECRET,
                        SLACK_API_URL=slack.base_url,
                        HTTP_REQUEST_ALLOWED_HOSTS=target.host,
                        DATABASE_URL=server.url,
                        PORT=str(port),
                        HOST="127.0.0.1",
                        LOG_LEVEL="DEBUG",
                    )

                replicas = Replicas(env_for, root, signing_secret=SIGNING_SECRET, team_id=TEAM, count=2)
                await replicas.start()
                convos = [
                    Conversation(n, rng.choice(KINDS), rng.choice(USERS)) for n in range(1, args.conversations + 1)
                ]
                each_once = asyncio.Event()
                faults = asyncio.create_task(
                    inject(replicas, server, gemini, slack, chaos, rng, args.faults_every, each_once)
                )
                limit = asyncio.Semaphore(args.concurrency)

                async def one(convo: Conversation) -> None:
                    # Spread the starts over at least the time every kind of fault needs to happen once.
                    window = max(args.conversations / args.concurrency, len(FAULTS) + 2) * args.faults_every
                    await asyncio.sleep(rng.uniform(0, window))
                    async with limit:
                        await converse(convo, replicas, slack, rng, args.wait)

                await asyncio.gather(*(one(convo) for convo in convos), each_once.wait())
                faults.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await faults
                gemini.clear_failures()  # faults are over: what they queued and nobody met goes too
                slack.clear_faults()
                for index in range(len(replicas.ports)):
                    if index not in replicas.live():
                        await _revive(replicas, index)
                for convo in convos:
                    if convo.thread is not None:
                        await replicas.reply(CHANNEL, convo.user, f"last {convo.number}", convo.thread)
                for convo in convos:
                    convo.answered_last = convo.thread is not None and await until(
                        _said(slack, convo, f"You said: last {convo.number}"), args.wait
                    )
                await replicas.stop()
                logs = replicas.stderr()
                counts = await tally(convos, target, server, slack, logs)
                if args.logs is not None:
                    args.logs.write_text(logs)
                for convo in convos:
                    if not (convo.replied and convo.answered_last):
                        said = replies_in(slack, convo) if convo.thread else []
                        print(f"conversation {convo.number} ({convo.kind}, thread {convo.thread}): {said}")
        finally:
            await server.stop()
    mix = collections.Counter(convo.kind for convo in convos)
    print(f"Fault matrix: {args.conversations} conversations, seed {args.seed}, two replicas")
    print("Conversations: " + ", ".join(f"{kind} {n}" for kind, n in sorted(mix.items())))
    print("Faults injected: " + (", ".join(f"{k} {v}" for k, v in sorted(chaos.counts.items())) or "none"))
    width = max(len(name) for name in counts)
    for name, value in counts.items():
        flag = "  (must be 0)" if name in MUST_BE_ZERO else ""
        print(f"  {name.ljust(width)}  {value:>5}{flag}")
    return counts


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run the matrix, print the counts; exit 1 when a must-be-zero count is not."""
    parser = cli.parser("bench.faults", __doc__.split("\n\n")[0])
    parser.add_argument(
        "--conversations", type=int, default=30, help="conversations to hold (each a random kind: see KINDS)"
    )
    parser.add_argument("--concurrency", type=int, default=4, help="conversations at once")
    parser.add_argument("--faults-every", type=float, default=6.0, help="mean seconds between faults")
    parser.add_argument("--wait", type=float, default=150.0, help="seconds a conversation waits for the bot")
    parser.add_argument(
        "--seed", type=int, default=int(time.time()), help="seed of the random choices; the same seed repeats a run"
    )
    parser.add_argument("--logs", type=Path, help="write the replicas' logs to this file")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    counts = asyncio.run(run(args))
    return 1 if any(counts[name] for name in MUST_BE_ZERO) else 0


if __name__ == "__main__":
    sys.exit(main())
