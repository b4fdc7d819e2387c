"""kill -9 at each stage of a turn (docs/decisions/0009).

A real `countersign run` process is killed with SIGKILL while a stand-in holds its request at
one stage of a gated call's life (the model deciding, the card posted, the decision's follow-up,
the tool running, the model writing the answer); a new process starts on the same database.
After it: the call ran at most once (and said so when its outcome is unknown), the decision was
applied once, an answer was posted, and the conversation goes on.

The turn that posts a card is also killed while it finishes: with the card's post cut off,
with the card posted but its reference not stored, with the reference stored but the run's end
not recorded, and with the checkpoint of the pause still being written (a database row or table
lock holds the bot's statement; the dead process's waiting statement is then ended, as a crash
before it reached the server). Approve on the card then runs the call once and is answered
within a minute, and no card is posted after it.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import asyncpg
import pytest

from adapters.slack import blocks
from tests.e2e.agent_script import agent_script
from tests.e2e.cli.test_process import bot_env
from tests.e2e.cli.test_workers import worker_pids
from tests.e2e.conftest import ALICE, CHANNEL, D_ALICE, D_APP, D_BOT, SIGNING_SECRET, TEAM
from tests.e2e.discord.test_discord_flow import current_custom_id
from tests.e2e.discord.test_discord_shards import CHANNEL_1, GUILD_1, START_S, answers, sharded_api, start_two_workers
from tests.e2e.drivers import is_discord_card
from tests.standins.gemini import GeminiReply, GeminiRequest, GeminiStandIn
from tests.standins.slack_api import SlackApiStandIn
from tests.support.barriers import wait_until as wait_for_condition
from tests.support.db_faults import statement_waits, waiting_backends
from tests.support.gate import Gate
from tests.support.replicas import WAIT_S, Cluster, Replicas, bot_texts, cards_in, eventually

pytestmark = pytest.mark.e2e

__all__ = ["sharded_api"]  # the fixture, for the Discord stage below

BOT_USER = "UBOT"


class GatedModel:
    """The end-to-end agent script, with a gate before the model's first call and before its answer."""

    def __init__(self, target_url: str) -> None:
        self.script = agent_script(target_url)
        self.before_call = Gate()
        self.before_answer = Gate()

    async def __call__(self, request: GeminiRequest) -> GeminiReply | str:
        await (self.before_answer if request.function_responses else self.before_call).passing()
        outcome = self.script(request)
        return await outcome if asyncio.iscoroutine(outcome) else outcome  # type: ignore[no-any-return]


@pytest.fixture
async def model(target) -> AsyncIterator[tuple[GatedModel, GeminiStandIn]]:
    gated = GatedModel(target.url())
    async with GeminiStandIn(gated, api_key="e2e-gemini-key") as server:
        yield gated, server


def one_replica(gemini: GeminiStandIn, slack: SlackApiStandIn, target: Any, db_url: str, tmp_path: Any) -> Replicas:
    """One `countersign run` process (not started yet) on `db_url`, with the end-to-end settings."""
    return Replicas(
        lambda port: bot_env(gemini, slack, target, port, DATABASE_URL=db_url),
        tmp_path,
        signing_secret=SIGNING_SECRET,
        team_id=TEAM,
        count=1,
    )


async def wait_until(slack: SlackApiStandIn, predicate: Callable[[], bool], what: str, replicas: Cluster) -> None:
    """Wait until `predicate` holds, looking again at every Web API call the bot makes."""
    try:
        await slack.wait_for("chat.postMessage", lambda _: predicate(), timeout=WAIT_S)
    except AssertionError:
        raise AssertionError(f"no {what} within {WAIT_S}s; the replicas logged:\n{replicas.stderr()}") from None


async def answered_and_going_on(slack: SlackApiStandIn, replicas: Cluster, thread: str) -> None:
    """Wait for the turn's "Result: " answer in `thread`, then for the answer to a next message there."""

    def answered() -> bool:
        return any(text.startswith("Result: ") for text in bot_texts(slack, CHANNEL, thread, BOT_USER))

    await wait_until(slack, answered, "answer", replicas)
    await replicas.reply(CHANNEL, ALICE, "ping", thread)
    await wait_until(
        slack, lambda: "You said: ping" in bot_texts(slack, CHANNEL, thread, BOT_USER), "next answer", replicas
    )


async def card_recorded(db_url: str) -> None:
    """Wait until the bot recorded where its card is (a kill before that posts the card again)."""
    connection = await asyncpg.connect(db_url)
    try:

        async def recorded() -> bool:
            return bool(await connection.fetchval("SELECT count(*) FROM approvals WHERE card_ref IS NOT NULL"))

        await eventually(recorded, "recording the card")
    finally:
        await connection.close()


STAGES = ("model deciding", "card posted", "decision recorded", "tool running", "model answering")


@pytest.mark.parametrize("stage", STAGES)
async def test_kill_9_at_a_stage_of_a_turn(stage, db_url, model, slack, target, tmp_path):
    """SIGKILL at `stage`, a new process: one request at most, decided once, answered, and the thread goes on."""
    gated, gemini = model
    replicas = one_replica(gemini, slack, target, db_url, tmp_path)
    gates: dict[str, Gate] = {
        "model deciding": gated.before_call,
        "decision recorded": slack.gates.setdefault("chat.update", Gate()),
        "tool running": target.gate,
        "model answering": gated.before_answer,
    }

    async def crash_at(name: str) -> None:
        if stage != name:
            return
        if name in gates:
            await gates[name].wait_arrived(WAIT_S)
        await replicas.kill(0)
        if name in gates:
            gates[name].release()
        await replicas.start(0)

    await replicas.start()
    try:
        if stage in gates:
            gates[stage].arm()
        thread = await replicas.mention(CHANNEL, ALICE, "<@UBOT> post widget")
        await crash_at("model deciding")
        await wait_until(slack, lambda: bool(cards_in(slack, CHANNEL, thread)), "card", replicas)
        if stage == "card posted":
            await card_recorded(db_url)
        await crash_at("card posted")
        [card] = cards_in(slack, CHANNEL, thread)
        assert (await replicas.click(slack, ALICE, card)).status == 200
        await crash_at("decision recorded")
        await crash_at("tool running")
        await crash_at("model answering")
        await answered_and_going_on(slack, replicas, thread)
    finally:
        codes = await replicas.stop()
    assert codes == [0], replicas.stderr()
    assert [r.json for r in target.requests] == [{"name": "widget"}]  # at most once; here exactly once
    [answer] = [t for t in bot_texts(slack, CHANNEL, thread, BOT_USER) if t.startswith("Result: ")]
    shown = json.dumps(slack.message(card.channel, card.ts)["blocks"])
    assert "Approved" in shown
    if stage == "tool running":
        assert "interruption" in answer  # the agent was told the outcome is unknown
        assert "may or may not have taken effect" in shown  # and so is everyone who reads the card
    else:
        assert "widget" in answer
        assert "may or may not" not in shown
    assert "Traceback" not in replicas.stderr()


async def test_kill_9_while_an_unreviewed_call_runs(db_url, model, slack, target, tmp_path):
    """SIGKILL while an ungated GET runs, a new process: the GET is not made again, the model is told, and the thread goes on.

    The ReAct agent writes its checkpoint only when a run stops (docs/decisions/0027): it stops
    before `human_review` once the model asked for calls, so the call's id is stored before the
    call runs, and the new process finishes the round under that id, which the ledger knows as
    started (a call under a new id, from asking the model again, would run twice).
    """
    _, gemini = model
    replicas = one_replica(gemini, slack, target, db_url, tmp_path)
    await replicas.start()
    try:
        target.gate.arm()
        thread = await replicas.mention(CHANNEL, ALICE, "<@UBOT> get")
        await target.gate.wait_arrived(WAIT_S)
        await replicas.kill(0)
        target.gate.release()
        await replicas.start(0)
        await answered_and_going_on(slack, replicas, thread)
    finally:
        target.gate.release()
        codes = await replicas.stop()
    assert codes == [0], replicas.stderr()
    assert [r.method for r in target.requests] == ["GET"]  # at most once
    [answer] = [t for t in bot_texts(slack, CHANNEL, thread, BOT_USER) if t.startswith("Result: ")]
    assert "interruption" in answer  # the agent was told the outcome is unknown
    assert not cards_in(slack, CHANNEL, thread)


async def test_kill_9_after_the_acknowledgement_before_the_turn(db_url, model, slack, target, tmp_path):
    """Slack got its 200, then the process died before the turn began: the message was claimed first, and is answered."""
    _, gemini = model
    replicas = one_replica(gemini, slack, target, db_url, tmp_path)
    await replicas.start()
    blocker = await asyncpg.connect(db_url)
    try:
        ts = f"{time.time():.6f}"
        # The turn waits for the conversation's lock, held here: the process can only have claimed it.
        await blocker.execute("SELECT pg_advisory_lock(hashtextextended($1, 0))", f"slack:{TEAM}:{CHANNEL}:{ts}")
        replicas.events.url = replicas.url(0)
        delivery = await replicas.events.app_mention(CHANNEL, ALICE, "<@UBOT> hello", ts=ts)
        assert delivery.status == 200
        await replicas.kill(0)
    finally:
        await blocker.close()
    await replicas.start(0)
    try:
        await wait_until(
            slack, lambda: "You said: hello" in bot_texts(slack, CHANNEL, ts, BOT_USER), "answer", replicas
        )
    finally:
        assert await replicas.stop() == [0], replicas.stderr()
    assert bot_texts(slack, CHANNEL, ts, BOT_USER) == ["You said: hello"]


ANSWER_WITHIN_S = 60.0
"""Seconds an approved call has to run and be answered after a restart (docs/decisions/0009: "within a minute")."""

CARD_WINDOWS = ("card post cut off", "card posted, not recorded", "card recorded, run not marked finished")


def card_posts(slack: SlackApiStandIn, channel: str, thread_ts: str) -> int:
    """How many cards (messages with our Approve button) were posted in a thread, decided or not."""
    return sum(
        1
        for call in slack.calls_to("chat.postMessage")
        if call.error is None
        and call.args.get("channel") == channel
        and call.args.get("thread_ts") == thread_ts
        and blocks.ACTION_APPROVE in json.dumps(call.args.get("blocks") or [])
    )


async def approve_answered_once(replicas: Cluster, slack: SlackApiStandIn, thread: str, cards: list[Any]) -> None:
    """Approve the first card: answered within `ANSWER_WITHIN_S`; Approve on the last is told it is decided.

    Raises:
        AssertionError: no answer in time (with how many cards were posted and the replicas' log),
            or no "already" notice to the second click.
    """
    assert (await replicas.click(slack, ALICE, cards[0])).status == 200
    started = time.monotonic()

    def answered() -> bool:
        return any(text.startswith("Result: ") for text in bot_texts(slack, CHANNEL, thread, BOT_USER))

    try:
        await slack.wait_for("chat.postMessage", lambda _: answered(), timeout=ANSWER_WITHIN_S)
    except AssertionError:
        raise AssertionError(
            f"no answer within {ANSWER_WITHIN_S}s of the Approve ({card_posts(slack, CHANNEL, thread)} cards "
            f"posted); the replicas logged:\n{replicas.stderr()}"
        ) from None
    assert time.monotonic() - started < ANSWER_WITHIN_S
    assert (await replicas.click(slack, ALICE, cards[-1])).status == 200
    await slack.wait_for("chat.postEphemeral", lambda a: "already" in str(a.get("text", "")).lower(), timeout=WAIT_S)


async def lose_waiting(connection: asyncpg.Connection, backends: list[int]) -> None:
    """End the killed process's server sessions `backends` (from `waiting_backends`): their statements never run.

    PostgreSQL notices a dead client only when it next reads from it, so a statement waiting for
    a lock would still run once the lock is released; a crash before the statement reached the
    server loses it, as this does. Only the sessions found before the kill are ended: a new
    process (a restarted worker) may be waiting on the same lock by now.
    """
    assert backends, "no waiting statement of the killed process"
    await connection.execute("SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid", backends)

    async def gone() -> bool:
        return not await connection.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1::int[])", backends
        )

    await eventually(gone, "the killed process's waiting statements ended")


@pytest.mark.parametrize("window", CARD_WINDOWS)
async def test_kill_9_while_the_turn_that_posted_the_card_finishes(window, db_url, model, slack, target, tmp_path):
    """SIGKILL while the turn's card is posted, or after it, before the run's end is recorded.

    "card post cut off": the process dies while Slack holds the card's `chat.postMessage`
    (Slack never gets the whole request). "card posted, not recorded": Slack posted the card;
    the process dies while storing its reference (`approval_cards`, behind the approval's row,
    locked here). "card recorded, run not marked finished": the reference is stored; the run's
    `mark_delivered` waits for the conversation's row, locked here. After a new process on the
    same database: Approve on the first card runs the call once and is answered within
    `ANSWER_WITHIN_S`, no card is posted after the click, a click on the last copy is told it
    is already decided, and the conversation goes on.
    """
    _, gemini = model
    replicas = one_replica(gemini, slack, target, db_url, tmp_path)
    post = slack.gates.setdefault("chat.postMessage", Gate())
    watcher = await asyncpg.connect(db_url)
    await replicas.start()
    try:
        post.arm()
        thread = await replicas.mention(CHANNEL, ALICE, "<@UBOT> post widget")
        await post.wait_arrived(WAIT_S)
        if window == "card post cut off":
            await replicas.kill(0)
            post.release()
        else:
            locked, statement = (
                ("SELECT 1 FROM approvals WHERE thread_id = $1 FOR UPDATE", "INSERT INTO approval_cards")
                if window == "card posted, not recorded"
                else (
                    "SELECT 1 FROM conversations WHERE thread_id = $1 FOR UPDATE",
                    "UPDATE conversations SET running_since = NULL",
                )
            )
            blocker = await asyncpg.connect(db_url)
            try:
                holding = blocker.transaction()
                await holding.start()
                await blocker.execute(locked, f"slack:{TEAM}:{CHANNEL}:{thread}")
                post.release()
                await eventually(lambda: statement_waits(watcher, statement), f"{statement} waiting for its row")
                backends = await waiting_backends(watcher, statement)
                await replicas.kill(0)
                await lose_waiting(watcher, backends)
                await holding.rollback()
            finally:
                await blocker.close()
        posted = card_posts(slack, CHANNEL, thread)
        assert posted == (0 if window == "card post cut off" else 1)
        await replicas.start(0)
        await card_recorded(db_url)  # the new process posted the card again when it was not recorded
        cards = cards_in(slack, CHANNEL, thread)
        assert len(cards) == (1 if window == "card recorded, run not marked finished" else posted + 1)
        assert len({card.approval_id for card in cards}) == 1, "every copy names the same approval"
        await approve_answered_once(replicas, slack, thread, cards)
        await replicas.reply(CHANNEL, ALICE, "ping", thread)
        await wait_until(
            slack, lambda: "You said: ping" in bot_texts(slack, CHANNEL, thread, BOT_USER), "next answer", replicas
        )
    finally:
        post.release()
        await watcher.close()
        codes = await replicas.stop()
    assert codes == [0], replicas.stderr()
    assert [r.json for r in target.requests] == [{"name": "widget"}]
    assert card_posts(slack, CHANNEL, thread) == len(cards), "no card after the Approve"
    [answer] = [t for t in bot_texts(slack, CHANNEL, thread, BOT_USER) if t.startswith("Result: ")]
    assert "widget" in answer
    assert "Approved" in json.dumps(slack.message(cards[-1].channel, cards[-1].ts)["blocks"])
    assert "Traceback" not in replicas.stderr()


WRITES = {
    "the decision": "checkpoints",
    "the pause": "checkpoint_writes",
}
"""What a kill interrupts while it is stored, and the LangGraph table whose insert the test holds."""


@pytest.mark.parametrize("stored", WRITES)
async def test_kill_9_while_the_decision_is_being_stored(stored, db_url, model, slack, target, tmp_path):
    """SIGKILL while the checkpoint of the model's decision, or of the pause it leads to, is still being written.

    The ReAct agent's run writes its checkpoint when it stops (`durability="exit"`, stopping
    before `human_review` once the model asked for calls; docs/decisions/0027): first the
    decision (a row of `checkpoints`), then, in the invocation that goes on at once, the pause
    (the interrupt, a row of `checkpoint_writes`). No review opens before the pause is stored: a
    card posted for a pause that the process's death loses would name an interrupt that never
    comes back. The test holds one of the two writes (a lock on its table) after the model
    decided and checks that no review is open meanwhile (and, holding the pause, that the
    decision was stored). After a new process (the message asked again, or the stored decision
    taken on to its pause): every card names one approval, Approve on the first runs the call
    once and is answered within `ANSWER_WITHIN_S`, no card is posted after the click, and a
    click on the last copy is told it is already decided.
    """
    gated, gemini = model
    replicas = one_replica(gemini, slack, target, db_url, tmp_path)
    watcher = await asyncpg.connect(db_url)
    blocker = await asyncpg.connect(db_url)
    await replicas.start()
    try:
        gated.before_call.arm()
        thread = await replicas.mention(CHANNEL, ALICE, "<@UBOT> post widget")
        await gated.before_call.wait_arrived(WAIT_S)
        holding = blocker.transaction()
        await holding.start()
        table = WRITES[stored]
        await blocker.execute(f"LOCK TABLE {table} IN SHARE MODE")
        gated.before_call.release()
        statement = f"INSERT INTO {table} ("
        await eventually(lambda: statement_waits(watcher, statement), f"{stored} waiting to be stored")
        assert await watcher.fetchval("SELECT count(*) FROM approvals") == 0, "a review opened before its checkpoint"
        decided = await watcher.fetchval("SELECT count(*) FROM checkpoints WHERE thread_id LIKE $1", f"%{thread}")
        assert decided == (1 if stored == "the pause" else 0)
        backends = await waiting_backends(watcher, statement)
        await replicas.kill(0)
        await lose_waiting(watcher, backends)
        await holding.rollback()
        await replicas.start(0)
        await wait_until(slack, lambda: bool(cards_in(slack, CHANNEL, thread)), "card", replicas)
        await card_recorded(db_url)
        cards = cards_in(slack, CHANNEL, thread)
        assert len({card.approval_id for card in cards}) == 1, f"{len(cards)} cards name different approvals"
        await approve_answered_once(replicas, slack, thread, cards)
    finally:
        gated.before_call.release()
        await blocker.close()
        await watcher.close()
        codes = await replicas.stop()
    assert codes == [0], replicas.stderr()
    assert [r.json for r in target.requests] == [{"name": "widget"}]
    assert card_posts(slack, CHANNEL, thread) == len(cards), "no card after the Approve"
    assert "Traceback" not in replicas.stderr()


async def test_kill_9_of_a_discord_worker_while_the_decision_is_being_stored(
    db_url, model, sharded_api, target, tmp_path
):
    """`--workers 2` with Discord: the worker of the guild's shard dies while the decision's checkpoint is written.

    As `test_kill_9_while_the_decision_is_being_stored`, where the report came from:
    the supervisor restarts the worker, its shard identifies again, and Approve on the card
    runs the call once, is answered within `ANSWER_WITHIN_S`, posts no second card, and a
    second click is told who decided.
    """
    api = sharded_api
    gated, gemini = model
    watcher = await asyncpg.connect(db_url)
    blocker = await asyncpg.connect(db_url)
    bot, _, sessions = await start_two_workers(gemini, target, api, db_url, tmp_path)

    def card_posts_here() -> list[Any]:
        return [
            r
            for r in api.requests
            if r.method == "POST" and r.path.endswith(f"/channels/{CHANNEL_1}/messages") and is_discord_card(r)
        ]

    try:
        gated.before_call.arm()
        await api.send_message(CHANNEL_1, D_ALICE, f"<@{D_BOT}> post widget", mentions=[D_BOT], guild_id=GUILD_1)
        await gated.before_call.wait_arrived(START_S)
        holding = blocker.transaction()
        await holding.start()
        await blocker.execute("LOCK TABLE checkpoints IN SHARE MODE")
        gated.before_call.release()
        await eventually(lambda: statement_waits(watcher, "INSERT INTO checkpoints ("), "a checkpoint write waiting")
        assert await watcher.fetchval("SELECT count(*) FROM approvals") == 0, "a review opened before its checkpoint"
        backends = await waiting_backends(watcher, "INSERT INTO checkpoints (")
        [victim] = worker_pids(bot)[1]
        os.kill(victim, signal.SIGKILL)
        await wait_for_condition(lambda: len(worker_pids(bot)[1]) == 2, "worker 1 restarted", timeout=START_S)
        await lose_waiting(watcher, backends)
        await holding.rollback()
        await wait_for_condition(
            lambda: api.ready_shards().get(1) not in (None, sessions[1]), "shard 1 identified again", timeout=START_S
        )
        await card_recorded(db_url)
        posts = card_posts_here()
        first = posts[0]
        approval_ids = {
            c["custom_id"].split(":")[2] for p in posts for row in p.json["components"] for c in row["components"]
        }
        assert len(approval_ids) == 1, f"{len(posts)} cards name different approvals"
        message_id = first.response["id"]
        approve = current_custom_id(api, message_id, "approve")
        clicks = await asyncio.gather(  # a double click: one decision, the other told who decided
            *(api.click_button(message_id, approve, D_ALICE, guild_id=GUILD_1, channel_id=CHANNEL_1) for _ in range(2))
        )
        started = time.monotonic()
        try:
            await api.wait_for_request(
                "POST",
                rf"/channels/{CHANNEL_1}/messages$",
                lambda r: str((r.json or {}).get("content", "")).startswith("Result: "),
                timeout=ANSWER_WITHIN_S,
            )
        except TimeoutError:
            raise AssertionError(
                f"no answer within {ANSWER_WITHIN_S}s of the Approve ({len(card_posts_here())} cards posted); "
                f"the workers logged:\n{bot.stderr.decode(errors='replace')}"
            ) from None
        assert time.monotonic() - started < ANSWER_WITHIN_S
        await api.wait_for_request("POST", rf"/webhooks/{D_APP}/.+", timeout=WAIT_S)
        told = [f for c in clicks for f in api.followups(c.id)]
        assert [("already approved by" in f["content"]) for f in told] == [True], told
        [answer] = await answers(api, CHANNEL_1, "Result: ")
    finally:
        gated.before_call.release()
        await blocker.close()
        await watcher.close()
        code = await bot.stop()
    assert code == 0, bot.stderr.decode()
    assert "widget" in answer
    assert [r.json for r in target.requests] == [{"name": "widget"}]
    assert len(card_posts_here()) == len(posts), "no card after the Approve"
