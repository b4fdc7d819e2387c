"""State under stress: crashes between steps, restarts mid-turn, failing platforms and models."""

from __future__ import annotations

import contextlib

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from adapters.slack import blocks
from bot.base.errors import InvalidDecisionError, NotPermittedError
from bot.reviews.decisions import Approve, Edit, EditedAction, Reject
from bot.reviews.lifecycle import ApprovalStatus
from countersign.server import BotServer
from tests.adversarial.slack_support import ephemerals_to, posted_texts, sender
from tests.e2e.conftest import ALICE, CHANNEL
from tests.e2e.slack.test_slack_flow import click, settle, wait_answer, wait_card
from tests.standins.gemini import GeminiRequest, GeminiStandIn, text
from tests.standins.slack_api import SlackApiStandIn
from tests.support.barriers import slack_listeners_done
from tests.support.http_target import HttpTarget
from tests.support.scripted_model import ScriptedChatModel, calls, tool_call
from tests.support.service import actor, conversation, message, open_service


async def _pause_without_rows(h, text: str) -> None:
    """Run a turn straight through the graph, as if the bot died before storing the pause."""
    conv = conversation()
    await h.database.pool.execute(
        "INSERT INTO conversations (thread_id, platform, workspace_id, channel_id) VALUES ($1, 'test', 'W1', 'C1')",
        conv.thread_id,
    )
    config = {"configurable": {"thread_id": conv.thread_id}, "recursion_limit": 25}
    await h.graph(conv).ainvoke({"messages": [HumanMessage(text)]}, config)


async def test_a_recovered_card_is_not_attributed_to_whoever_writes_next(db_url, registry, tool_log):
    """Alice's call paused, the bot died before storing it; Mallory writes next and must not be able to approve it."""
    model = ScriptedChatModel(replies=[calls(tool_call("send", {"to": "bob", "body": "wire it"})), AIMessage("done")])
    async with open_service(db_url, model, registry) as h:
        await _pause_without_rows(h, "send bob the wire")  # Alice's message
        await h.service.handle_message(message("what's going on?", user="mallory"))
        [card] = h.platform.cards.values()
        with contextlib.suppress(NotPermittedError):
            await h.service.decide(card.approval.id, actor("mallory"), Approve())
        await h.service.tasks.join()
        stored = await h.approvals.get(card.approval.id)
    assert stored is not None and stored.requester_id != "mallory"
    assert tool_log.calls == []


async def test_unknown_tools_and_invalid_arguments_never_run(db_url, registry, tool_log):
    """An unknown tool and a gated call its schema refuses: no card, both answered as errors, nothing runs."""
    model = ScriptedChatModel(
        replies=[
            calls(tool_call("rm_rf", {"path": "/"}), tool_call("send", {"to": 42})),
            AIMessage("understood"),
        ]
    )
    async with open_service(db_url, model, registry) as h:
        await h.service.handle_message(message("do it"))
        await h.service.tasks.join()
    assert h.platform.cards == {} and tool_log.calls == []
    results = [m for m in model.prompts[-1] if m.type == "tool"]
    assert [m.status for m in results] == ["error", "error"]
    assert "rm_rf is not a valid tool" in str(results[0].content)
    assert "invalid arguments for send" in str(results[1].content)
    assert h.platform.answers[-1][1] == "understood"


async def test_an_edit_that_renames_the_tool_or_smuggles_arguments_is_refused(db_url, registry, tool_log):
    """Edits naming another tool, adding an argument or a nested unknown field change nothing."""
    model = ScriptedChatModel(replies=[calls(tool_call("send", {"to": "bob", "body": "hi"})), AIMessage("ok")])
    async with open_service(db_url, model, registry) as h:
        await h.service.handle_message(message("send"))
        [card] = h.platform.cards.values()
        for edited in (
            {"name": "wipe", "args": {"target": "prod"}},
            {"name": "lookup", "args": {"query": "x"}},
            {"name": "send", "args": {"to": "bob", "body": "hi", "bcc": "eve"}},
            {"name": "send", "args": {"to": "bob", "body": "hi", "urgent": "yes please"}},
        ):
            with pytest.raises(InvalidDecisionError):
                await h.service.decide(card.approval.id, actor(), Edit(edited_action=EditedAction(**edited)))
        still = await h.approvals.get(card.approval.id)
        assert still is not None and still.status is ApprovalStatus.PENDING
        await h.service.decide(card.approval.id, actor(), Reject())
        await h.service.tasks.join()
    assert tool_log.calls == []


# --- end to end -----------------------------------------------------------------------------


@pytest.mark.e2e
async def test_a_card_that_failed_to_post_is_posted_again(bot, events, slack: SlackApiStandIn, target):
    """Slack fails the card's chat.postMessage once: the card is posted again at once, without a new
    message; the next message is told that it waits."""
    slack.fail("chat.postMessage", "internal_error")
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    await slack_listeners_done()
    await settle(bot)
    [card] = await wait_card(slack)
    await events.message(CHANNEL, ALICE, "where is the card?", thread_ts=mention.ts)
    await slack.wait_for("chat.postEphemeral", lambda a: a.get("user") == ALICE)
    await settle(bot)
    assert any("waiting for approval" in t for t in ephemerals_to(slack, ALICE))
    assert [c.ts for c in await wait_card(slack)] == [card.ts]  # posted once, not again
    await click(events, slack, ALICE, blocks.ACTION_APPROVE, card)
    await wait_answer(slack, mention.ts)


@pytest.mark.e2e
async def test_the_model_failing_during_a_resume_leaves_the_thread_usable(
    bot, events, slack: SlackApiStandIn, target, gemini: GeminiStandIn
):
    """Gemini is down right after the approval: one clear notice, the request ran once, the next message continues."""
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    [card] = await wait_card(slack)
    gemini.fail_next(3, status=503)
    await click(events, slack, ALICE, blocks.ACTION_APPROVE, card)
    [notice] = await wait_answer(slack, mention.ts, starts="The model is not answering")
    assert "Traceback" not in notice
    await events.message(CHANNEL, ALICE, "try again", thread_ts=mention.ts)
    await wait_answer(slack, mention.ts, starts="You said: try again")
    await settle(bot)
    assert len(target.requests) == 1
    assert "201" in str(gemini.requests[-1].contents)  # the tool's result is in the history the model sees


@pytest.mark.e2e
async def test_a_turn_cut_short_after_the_tool_ran_is_answered_after_a_restart(
    settings, slack: SlackApiStandIn, target: HttpTarget, gemini: GeminiStandIn, model_rules
):
    """SIGTERM while the model reads the tool's result: after the restart the user gets the answer."""
    slow = {"on": True}

    def slow_after_the_tool(request: GeminiRequest):
        return text("Result: late", delay_seconds=5) if request.function_responses and slow["on"] else None

    model_rules.rules.append(slow_after_the_tool)
    quick_stop = settings.server.model_copy(update={"shutdown_grace_s": 0.2})
    stopping = settings.model_copy(update={"server": quick_stop})
    async with BotServer(stopping) as first, sender(first.port) as events:
        mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
        [card] = await wait_card(slack)
        await click(events, slack, ALICE, blocks.ACTION_APPROVE, card)
        await gemini.wait_for_requests(2)
    assert len(target.requests) == 1
    slow["on"] = False
    async with BotServer(settings) as second:
        # Finished by the restart's recovery, or by the upkeep within a minute (no one writes).
        await slack.wait_for(
            "chat.postMessage",
            lambda a: a.get("thread_ts") == mention.ts and str(a.get("text", "")).startswith("Result: "),
            timeout=90,
        )
        await settle(second)
        assert [t for t in posted_texts(slack, mention.ts) if t.startswith("Result: ")]
    assert len(target.requests) == 1


async def test_a_recovered_card_belongs_to_the_author_of_the_paused_message(db_url, registry, tool_log):
    """The pause's rows are lost (a crash before they were stored); the rebuilt card is Alice's, and she may approve it."""
    model = ScriptedChatModel(replies=[calls(tool_call("send", {"to": "bob", "body": "hi"})), AIMessage("done")])
    async with open_service(db_url, model, registry) as h:
        await h.service.handle_message(message("send bob hi", user="alice"))
        await h.database.pool.execute("DELETE FROM approval_cards")
        await h.database.pool.execute("DELETE FROM approvals")
        await h.database.pool.execute("DELETE FROM reviews")
        # As a crash before the rows were stored leaves it: the run's outcome still due.
        await h.database.pool.execute("UPDATE conversations SET running_since = now(), settled = false")
        h.platform.cards.clear()
        await h.service.handle_message(message("anything new?", user="mallory"))
        [card] = h.platform.cards.values()
        assert card.approval.requester_id == "alice"
        with pytest.raises(NotPermittedError):
            await h.service.decide(card.approval.id, actor("mallory"), Approve())
        await h.service.decide(card.approval.id, actor("alice"), Approve())
        await h.service.tasks.join()
    assert len(tool_log.calls) == 1
