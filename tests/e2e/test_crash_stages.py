"""kill -9 at each stage of a turn (issue 9, "Restarts and crashes").

A real `countersign run` process is killed with SIGKILL while a stand-in holds its request at
one stage of a gated call's life (the model deciding, the card posted, the decision's follow-up,
the tool running, the model writing the answer); a new process starts on the same database.
After it: the call ran at most once (and said so when its outcome is unknown), the decision was
applied once, an answer was posted, and the conversation goes on.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable

import asyncpg
import pytest

from tests.e2e.agent_script import agent_script
from tests.e2e.conftest import ALICE, CHANNEL, SIGNING_SECRET, TEAM
from tests.e2e.test_process import bot_env
from tests.standins.gemini import GeminiReply, GeminiRequest, GeminiStandIn
from tests.standins.slack_api import SlackApiStandIn
from tests.support.gate import Gate
from tests.support.replicas import WAIT_S, Cluster, Replicas, bot_texts, cards_in, eventually

pytestmark = pytest.mark.e2e

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


async def wait_until(slack: SlackApiStandIn, predicate: Callable[[], bool], what: str, replicas: Cluster) -> None:
    """Wait until `predicate` holds, looking again at every Web API call the bot makes."""
    try:
        await slack.wait_for("chat.postMessage", lambda _: predicate(), timeout=WAIT_S)
    except AssertionError:
        raise AssertionError(f"no {what} within {WAIT_S}s; the replicas logged:\n{replicas.stderr()}") from None


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
    replicas = Replicas(
        lambda port: bot_env(gemini, slack, target, port, DATABASE_URL=db_url),
        tmp_path,
        signing_secret=SIGNING_SECRET,
        team_id=TEAM,
        count=1,
    )
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

        def answered() -> bool:
            return any(text.startswith("Result: ") for text in bot_texts(slack, CHANNEL, thread, BOT_USER))

        await wait_until(slack, answered, "answer", replicas)
        await replicas.reply(CHANNEL, ALICE, "ping", thread)
        await wait_until(
            slack, lambda: "You said: ping" in bot_texts(slack, CHANNEL, thread, BOT_USER), "next answer", replicas
        )
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


async def test_kill_9_after_the_acknowledgement_before_the_turn(db_url, model, slack, target, tmp_path):
    """Slack got its 200, then the process died before the turn began: the message was claimed first, and is answered."""
    _, gemini = model
    replicas = Replicas(
        lambda port: bot_env(gemini, slack, target, port, DATABASE_URL=db_url),
        tmp_path,
        signing_secret=SIGNING_SECRET,
        team_id=TEAM,
        count=1,
    )
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
