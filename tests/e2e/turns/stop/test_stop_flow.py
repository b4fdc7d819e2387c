"""Stop (docs/decisions/0021) end to end, the same scenarios on Slack and on Discord.

The real bot against the platform stand-ins, the Gemini stand-in and the HTTP target: a turn
going on for a while shows a progress message with a Stop button; Stop (or `/countersign
stop`) ends it at its next step, closes its waiting cards, and the conversation goes on.
"""

from __future__ import annotations

import asyncio
import inspect
import json

import pytest

from adapters.slack import blocks
from tests.e2e.drivers import DiscordDriver, SlackDriver
from tests.standins.gemini import GeminiRequest, GeminiStandIn
from tests.support.barriers import GENEROUS_S
from tests.support.gate import Gate

pytestmark = pytest.mark.e2e


@pytest.fixture(params=["slack", "discord"])
def driver(request):
    if request.param == "slack":
        return SlackDriver(
            request.getfixturevalue("bot"), request.getfixturevalue("events"), request.getfixturevalue("slack")
        )
    return DiscordDriver(request.getfixturevalue("discord_bot"), request.getfixturevalue("discord_api"))


def hold_the_model(gemini: GeminiStandIn) -> Gate:
    """A gate in front of the Gemini stand-in's script: armed, it holds the next model call."""
    gate, answer = Gate(), gemini.responder

    async def held(request: GeminiRequest):
        await gate.passing()
        outcome = answer(request)
        return await outcome if inspect.isawaitable(outcome) else outcome

    gemini.responder = held
    return gate


async def test_stop_during_a_model_call(driver, gemini, target):
    """The model holds its answer: Stop ends the turn without it; no card, no request, no other model call."""
    model = hold_the_model(gemini)
    model.arm()
    await driver.ask("alice", "post widget")
    await model.wait_arrived(GENEROUS_S)
    handle = await driver.stop_offered()
    assert (await driver.stop(handle, "alice")).startswith("Stopping: the bot ends this turn at its next step")
    notice = await driver.stopped_notice()  # while the model still holds its answer
    assert f"<@{driver.user('alice')}>" in notice
    model.release()
    await driver.settle()
    assert target.requests == [] and len(gemini.requests) == 1
    await driver.say("alice", "hello")
    assert await driver.answer("You said: hello")
    # The model read that the turn was stopped, and answered the next message from there.
    assert any("Stopped by alice." in json.dumps(r.contents) for r in gemini.requests[1:])


async def test_stop_during_a_tool_call(driver, gemini, target):
    """An ungated GET is running: Stop cancels it (http_request may be cancelled) and no model call follows."""
    target.gate.arm()
    await driver.ask("alice", "get")
    await target.gate.wait_arrived()
    handle = await driver.stop_offered()
    await driver.stop(handle, "alice")
    await driver.stopped_notice()
    await driver.settle()
    assert len(target.requests) == 1 and len(gemini.requests) == 1
    target.gate.release()
    await driver.say("alice", "hello")
    assert await driver.answer("You said: hello")
    # The model read that its call was cut short, and who stopped the turn.
    seen = json.dumps(gemini.requests[-1].contents)
    assert "Cancelled: alice stopped this turn while the call ran" in seen and "Stopped by alice." in seen


async def test_stop_with_a_card_pending(driver, gemini, target):
    """`/countersign stop` closes the waiting card as stopped; a later Approve is refused; the next message is answered."""
    await driver.ask("alice", "post widget")
    [card] = await driver.cards()
    reply = await driver.stop_command("alice")
    assert reply.startswith("Stopped. 1 card waiting for a decision was closed as stopped"), reply
    await driver.stopped_notice()
    await driver.settle()
    shown = driver.card_text(card)
    assert "Stopped" in shown and driver.user("alice") in shown and not driver.card_has_buttons(card)
    if driver.platform == "slack":  # a Discord button that is gone cannot be clicked at all
        refused = await driver.approve(card, "alice", private=True)
        assert refused is not None and "already stopped" in refused
    assert target.requests == []
    await driver.say("alice", "hello")
    assert await driver.answer("You said: hello")
    assert len(gemini.requests) == 2  # the stop itself asked the model nothing
    await driver.settle()  # the answer is posted a moment before its run is recorded as over
    assert await driver.stop_command("alice") == (
        "Nothing to stop: the bot is not working on anything in this conversation."
    )


async def test_a_stop_by_someone_else_is_refused_and_the_turn_goes_on(driver, gemini, target):
    """Bob, neither the requester nor an admin, is refused privately; the running turn answers as usual."""
    target.gate.arm()
    await driver.ask("alice", "get")
    await target.gate.wait_arrived()
    handle = await driver.stop_offered()
    refused = await driver.stop(handle, "bob")
    assert refused.startswith("You can't stop this turn: only the person who asked") and driver.user("alice") in refused
    target.gate.release()
    assert (await driver.answer()).startswith("Result: ")
    await driver.settle()
    assert len(target.requests) == 1 and len(gemini.requests) == 2
    audit = await driver.command("carol", "audit")
    assert "refused" in audit and "not_permitted" in audit


async def test_stop_clicked_twice_stops_once(driver, gemini, target):
    """Two clicks at once: one stops the turn, the other is told who did; one stopped notice."""
    target.gate.arm()
    await driver.ask("alice", "get")
    await target.gate.wait_arrived()
    handle = await driver.stop_offered()
    replies = await asyncio.gather(driver.stop(handle, "alice"), driver.stop(handle, "carol"))
    assert sorted(reply.split(":")[0].split(" ")[0] for reply in replies) == ["Stopping", "This"]
    assert any("was already stopped by" in reply for reply in replies)
    await driver.stopped_notice()
    target.gate.release()
    await driver.settle()
    assert len(gemini.requests) == 1
    audit = await driver.command("carol", "audit")
    assert audit.count("already_stopped") == 1 and audit.count("decision · stopped") == 1


async def test_stop_racing_an_approve_decides_the_card_once(driver, gemini, target):
    """An Approve and a stop at once: the card is approved or stopped, never both; the request runs at most once."""
    await driver.ask("alice", "post widget")
    [card] = await driver.cards()
    approve, stop = await asyncio.gather(driver.approve_racing(card, "alice"), driver.stop_command("carol"))
    await driver.settle()
    shown = driver.card_text(card)
    if "already stopped" in str(approve):
        assert "Stopped" in shown and "Approved" not in shown and target.requests == []
        assert stop.startswith("Stopped. 1 card")
    else:
        assert "Approved" in shown and len(target.requests) <= 1
        # During the resumed run, after it, or in the moment between its answer and its end.
        assert stop.startswith(("Stopping", "Nothing to stop", "That turn has already ended"))


async def test_the_stop_button_of_an_ended_turn_changes_nothing(bot, events, slack, gemini, target):
    """Slack: Stop on a progress message whose turn has ended (its deletion failed, say) is told so."""
    driver = SlackDriver(bot, events, slack)
    target.gate.arm()
    await driver.ask("alice", "get")
    await target.gate.wait_arrived()
    handle = await driver.stop_offered()
    target.gate.release()
    assert (await driver.answer()).startswith("Result: ")
    await driver.settle()
    assert (
        await driver.stop(handle, "alice")
        == "That turn has already ended, so there is nothing to stop. Nothing was changed."
    )
    assert not [c for c in slack.calls_to("chat.postMessage") if "Stopped by" in str(c.args.get("text"))]
    # The progress message went with the turn (the Stop button with it).
    await slack.wait_for("chat.delete", lambda a: a.get("ts") == handle.message, timeout=GENEROUS_S)
    assert blocks.ACTION_STOP == "countersign_stop"


async def test_slack_stop_needs_the_thread_link_where_each_thread_is_a_conversation(bot, events, slack, gemini):
    """Slack does not tell a command its thread: without the link the reply says how to name it; nothing is stopped."""
    driver = SlackDriver(bot, events, slack)
    reply = await driver.command("alice", "stop")
    assert "Copy link" in reply and "`/countersign stop <link>`" in reply and "context reset" not in reply
    await driver.ask("alice", "hello")
    assert await driver.answer("You said: hello")
    await driver.settle()  # the answer is posted a moment before its run is recorded as over
    assert (await driver.stop_command("alice")).startswith("Nothing to stop")
