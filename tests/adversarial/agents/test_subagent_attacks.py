"""Attacks on the subagents agent: races, restarts, colliding call ids, hostile models and configs.

Most tests run the service on a real PostgreSQL with one scripted model playing every agent (it
tells them apart by their system prompts, as tests/integration/agents/test_subagents_service.py does);
the progress tests run the real bot through Slack's and Discord's SDKs against the stand-ins,
with the Gemini stand-in playing the shipped subagents (tests/e2e/subagents_script.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from adapters.slack import blocks
from bot.admin.commands import ChangeApprovers, SetAgent, SetExpiry, SetPolicy, SetQuorum, SetSelfApproval
from bot.admin.service import AdminService
from bot.agents import prompts
from bot.agents.subagent_specs import SubagentSpec
from bot.audit.entries import AuditKind, approval_entry
from bot.base.agent_kind import AgentKind
from bot.base.errors import AlreadyDecidedError, ModelErrorKind, NoAnswerReason, NotPermittedError
from bot.base.mode import Mode
from bot.policy.config import ApproverKind
from bot.ports import ModelFailed, ReviewPending
from bot.reviews.decisions import Approve, Reject
from bot.reviews.lifecycle import ApprovalStatus, ReviewStatus
from bot.reviews.store import VoteKind
from tests.e2e.agents.test_subagents_flow import (
    discord_answer,
    discord_mention,
    discord_use_subagents,
    has_buttons,
    slack_answer,
    slack_use_subagents,
)
from tests.e2e.conftest import ALICE, CHANNEL, D_ALICE, D_CHANNEL
from tests.e2e.discord.test_discord_flow import click as discord_click
from tests.e2e.discord.test_discord_flow import settle as discord_settle
from tests.e2e.discord.test_discord_flow import wait_card as discord_wait_card
from tests.e2e.drivers import is_discord_card
from tests.e2e.slack.test_slack_flow import click, settle, wait_card
from tests.e2e.subagents_script import subagents_script
from tests.standins.gemini import GeminiStandIn
from tests.standins.slack_api import SlackApiStandIn
from tests.support.barriers import wait_until_async
from tests.support.http_target import HttpTarget
from tests.support.recording_platform import RecordingPlatform
from tests.support.scripted_model import ScriptedChatModel, calls, tool_call
from tests.support.service import actor, conversation, message, open_service
from tests.support.tools import ToolLog

ALPHA = SubagentSpec(name="alpha", description="Sends for A.", prompt="You are alpha.", tools=("send", "lookup"))
BETA = SubagentSpec(name="beta", description="Sends for B.", prompt="You are beta.", tools=("send",))
SPECS = (ALPHA, BETA)
ADMIN = "UADMIN"


@pytest.fixture
async def gemini(target: HttpTarget) -> AsyncIterator[GeminiStandIn]:
    """The Gemini stand-in playing the supervisor and the shipped subagents (tests/e2e/subagents_script.py)."""
    async with GeminiStandIn(subagents_script(target.url()), api_key="e2e-gemini-key") as server:
        yield server


def role(messages: list[BaseMessage], specs=SPECS) -> str:
    system = str(messages[0].content)
    if prompts.SUPERVISOR_INSTRUCTIONS.strip() in system:
        return "supervisor"
    for spec in specs:
        if system.startswith(spec.prompt):
            return spec.name
    return "react"


def tool_results(messages: list[BaseMessage]) -> list[str]:
    return [str(m.content) for m in messages if isinstance(m, ToolMessage)]


SubScript = Callable[[str, list[BaseMessage]], AIMessage]


def default_sub(who: str, messages: list[BaseMessage]) -> AIMessage:
    last = messages[-1]
    if isinstance(last, ToolMessage):
        return AIMessage(f"{who} reports: " + "; ".join(tool_results(messages)))
    return calls(tool_call("send", {"to": str(last.content), "body": who}), text=f"{who} must send")


def team(
    delegations: Callable[[str], list[tuple[str, str]]], sub: SubScript = default_sub, specs=SPECS
) -> ScriptedChatModel:
    def script(messages: list[BaseMessage]) -> AIMessage:
        who, last = role(messages, specs), messages[-1]
        if who == "supervisor":
            if isinstance(last, ToolMessage):
                return AIMessage("answer: " + " | ".join(tool_results(messages)))
            pairs = delegations(str(last.content))
            return calls(*(tool_call(name, {"query": query}) for name, query in pairs)) if pairs else AIMessage("ok")
        if who == "react":
            return AIMessage(f"react: {last.content}")
        return sub(who, messages)

    return ScriptedChatModel(script=script)


def to_both(text: str) -> list[tuple[str, str]]:
    return [("alpha", f"{text}-a"), ("beta", f"{text}-b")]


def to_alpha(text: str) -> list[tuple[str, str]]:
    return [("alpha", text)]


def pending(h):
    return [c.approval for c in h.platform.cards.values() if c.approval.status is ApprovalStatus.PENDING]


def sent_to(log: ToolLog) -> list[str]:
    return [args["to"] for name, args in log.calls if name == "send"]


async def until(check: Callable[[], bool], *, seconds: float = 30.0) -> None:
    """Wait for `check()` to hold (generous: a busy machine is slow, never wrong)."""
    deadline = asyncio.get_running_loop().time() + seconds
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "timed out waiting"
        await asyncio.sleep(0.05)


def admin(h, registry) -> AdminService:
    return AdminService(
        config=h.config,
        audit=h.audit,
        registry=registry,
        directory_for=lambda name: h.platform,
        subagents=("alpha", "beta"),
    )


class Crash(BaseException):
    """Stands for the process dying inside a tool (not an Exception: nothing in the bot catches it)."""


# --- call ids, tools a subagent does not have, silence --------------------------------------------


async def test_two_subagents_using_the_same_call_id_both_run_once_approved(db_url, registry, tool_log):
    """Two subagents whose models give their calls the same id: each approved call runs, once."""

    def sub(who: str, messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            return AIMessage(f"{who} reports: " + "; ".join(tool_results(messages)))
        return calls(tool_call("send", {"to": str(last.content), "body": who}, "fc-1"))

    model = team(to_both, sub)
    async with open_service(db_url, model, registry, subagents=SPECS, default_agent=AgentKind.SUBAGENTS) as h:
        await h.service.handle_message(message("x"))
        cards = {c.source: c for c in pending(h)}
        assert set(cards) == {"alpha", "beta"}
        await h.service.decide(cards["alpha"].id, actor("alice"), Approve())
        await h.service.tasks.join()
        await h.service.decide(cards["beta"].id, actor("alice"), Approve())
        await h.service.tasks.join()
    assert sorted(sent_to(tool_log)) == ["x-a", "x-b"]
    assert h.platform.answers[-1][1] == "answer: alpha reports: sent to x-a | beta reports: sent to x-b"


async def test_a_call_id_reused_in_a_later_turn_runs_once_approved(db_url, registry, tool_log):
    """A model that reuses a call id in the next turn: the new call is approved and runs."""

    def sub(who: str, messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            return AIMessage(f"{who} reports: " + "; ".join(tool_results(messages)))
        return calls(tool_call("send", {"to": str(last.content), "body": who}, "fc-1"))

    model = team(to_alpha, sub)
    async with open_service(db_url, model, registry, subagents=SPECS, default_agent=AgentKind.SUBAGENTS) as h:
        for text in ("bob", "carol"):
            await h.service.handle_message(message(text))
            [card] = pending(h)
            await h.service.decide(card.id, actor("alice"), Approve())
            await h.service.tasks.join()
    assert sent_to(tool_log) == ["bob", "carol"]
    assert h.platform.answers[-1][1].endswith("alpha reports: sent to carol")


async def test_a_reused_call_id_in_the_react_agent_runs_the_new_approved_call(db_url, registry, tool_log):
    """The ReAct agent's model reuses last turn's call id: the new call is approved and runs (no "already started")."""
    model = ScriptedChatModel(
        replies=[
            calls(tool_call("send", {"to": "bob", "body": "hi"}, "fc-1")),
            AIMessage("sent to bob"),
            calls(tool_call("send", {"to": "carol", "body": "hi"}, "fc-1")),
            AIMessage("sent to carol"),
        ]
    )
    async with open_service(db_url, model, registry) as h:
        for text in ("tell bob", "tell carol"):
            await h.service.handle_message(message(text))
            [card] = pending(h)
            await h.service.decide(card.id, actor("alice"), Approve())
            await h.service.tasks.join()
    assert sent_to(tool_log) == ["bob", "carol"]
    assert "sent to carol" in str(model.prompts[-1][-1].content)


async def test_a_subagent_calling_a_gated_tool_it_does_not_have_gets_no_card(db_url, registry, tool_log):
    """A subagent's model calls a registered, gated tool that is not one of its tools: no card, nothing runs, it is told."""
    gamma = SubagentSpec(name="gamma", description="Looks up.", prompt="You are gamma.", tools=("lookup",))
    model = team(lambda text: [("gamma", text)], specs=(gamma,))
    async with open_service(db_url, model, registry, subagents=(gamma,), default_agent=AgentKind.SUBAGENTS) as h:
        await h.service.handle_message(message("bob"))
        assert h.platform.cards == {}
    assert tool_log.calls == []
    assert h.platform.answers[-1][1] == "answer: gamma reports: Error: send is not a valid tool, try one of: lookup."


async def test_a_supervisor_answer_without_text_is_not_silence(db_url, registry, tool_log):
    """alpha's approved send ran, then the supervisor's model returns no text, twice: the conversation is told why."""
    model = team(to_alpha)
    inner = model.script
    assert inner is not None
    model.script = lambda messages: (
        AIMessage("") if role(messages) == "supervisor" and isinstance(messages[-1], ToolMessage) else inner(messages)
    )
    async with open_service(db_url, model, registry, subagents=SPECS, default_agent=AgentKind.SUBAGENTS) as h:
        await h.service.handle_message(message("bob"))
        [card] = pending(h)
        await h.service.decide(card.id, actor("alice"), Approve())
        await h.service.tasks.join()
    assert sent_to(tool_log) == ["bob"]
    assert h.platform.answers == []
    no_answer = ModelFailed(kind=ModelErrorKind.NO_ANSWER, reason=NoAnswerReason.EMPTY)
    assert [n for _, n, _ in h.platform.notices if isinstance(n, ModelFailed)] == [no_answer]
    supervisor_calls = [m for m in model.prompts if role(m) == "supervisor" and isinstance(m[-1], ToolMessage)]
    assert len(supervisor_calls) == 2  # asked once more before giving up


# --- races ----------------------------------------------------------------------------------------


async def test_two_approvers_clicking_two_subagents_cards_at_once(db_url, registry, tool_log):
    """Two subagents' cards decided at the same moment: both calls run once, one answer follows."""
    model = team(to_both)
    async with open_service(db_url, model, registry, subagents=SPECS, default_agent=AgentKind.SUBAGENTS) as h:
        await h.service.handle_message(message("x"))
        cards = {c.source: c for c in pending(h)}
        await asyncio.gather(
            h.service.decide(cards["alpha"].id, actor("alice"), Approve()),
            h.service.decide(cards["beta"].id, actor("alice"), Approve()),
        )
        await h.service.tasks.join()
        reviews = await h.approvals.reviews_in_thread(conversation().thread_id, list(ReviewStatus))
    assert sorted(sent_to(tool_log)) == ["x-a", "x-b"]
    assert [a for _, a in h.platform.answers] == ["answer: alpha reports: sent to x-a | beta reports: sent to x-b"]
    assert [r.status for r in reviews] == [ReviewStatus.DONE, ReviewStatus.DONE]


async def test_a_double_click_on_a_subagent_card_decides_once(db_url, registry, tool_log):
    """The same card approved twice at once and then rejected: one decision, one run."""
    model = team(to_alpha)
    async with open_service(db_url, model, registry, subagents=SPECS, default_agent=AgentKind.SUBAGENTS) as h:
        await h.service.handle_message(message("bob"))
        [card] = pending(h)
        outcomes = await asyncio.gather(
            h.service.decide(card.id, actor("alice"), Approve()),
            h.service.decide(card.id, actor("alice"), Approve()),
            return_exceptions=True,
        )
        await h.service.tasks.join()
        with pytest.raises(AlreadyDecidedError):
            await h.service.decide(card.id, actor("alice"), Reject(message="late"))
        await h.service.tasks.join()
    assert sum(isinstance(o, Exception) for o in outcomes) == 1
    assert sent_to(tool_log) == ["bob"]
    assert len(h.platform.answers) == 1


async def test_two_clicks_and_a_message_at_once(db_url, registry, tool_log):
    """Both subagents' cards approved while a new message arrives: each call once, one answer, the message not lost."""
    model = team(lambda text: [] if text == "status?" else to_both(text))
    async with open_service(db_url, model, registry, subagents=SPECS, default_agent=AgentKind.SUBAGENTS) as h:
        await h.service.handle_message(message("x"))
        cards = {c.source: c for c in pending(h)}
        await asyncio.gather(
            h.service.decide(cards["alpha"].id, actor("alice"), Approve()),
            h.service.handle_message(message("status?")),
            h.service.decide(cards["beta"].id, actor("alice"), Approve()),
        )
        await h.service.tasks.join()
    assert sorted(sent_to(tool_log)) == ["x-a", "x-b"]
    answers = [a for _, a in h.platform.answers]
    assert answers[0] == "answer: alpha reports: sent to x-a | beta reports: sent to x-b"
    assert answers[1:] in ([], ["ok"])
    assert len(answers) == 2 or isinstance(h.platform.notices[-1][1], ReviewPending)


async def test_an_expiry_racing_a_click_inside_a_subagent_decides_once(db_url, registry, tool_log):
    """alpha's card expires while it is clicked: exactly one of them decides; the call runs at most once; one answer."""
    model = team(to_alpha)
    platform = RecordingPlatform(admins={ADMIN})
    async with open_service(db_url, model, registry, platform, subagents=SPECS, default_agent=AgentKind.SUBAGENTS) as h:
        await admin(h, registry).execute(actor(ADMIN), SetExpiry(seconds=3600), here="C1")
        await h.service.handle_message(message("bob"))
        [card] = pending(h)
        await h.database.pool.execute(
            "UPDATE approvals SET expires_at = now() + interval '50 milliseconds' WHERE id = $1", card.id
        )
        h.service.expiry.wake()
        for _ in range(40):
            try:
                await h.service.decide(card.id, actor("alice"), Approve())
            except AlreadyDecidedError:
                break
            await asyncio.sleep(0.005)
        await until(lambda: bool(h.platform.answers))
        await h.service.tasks.join()
        stored = await h.approvals.get(card.id)
    assert stored is not None and stored.status in (ApprovalStatus.APPROVED, ApprovalStatus.EXPIRED)
    assert sent_to(tool_log) == (["bob"] if stored.status is ApprovalStatus.APPROVED else [])
    assert len(h.platform.answers) == 1


async def test_a_second_card_in_one_delegation_while_a_sibling_waits(db_url, registry, tool_log):
    """alpha needs two cards in a row while beta's waits: every call runs once, one answer at the end."""

    def sub(who: str, messages: list[BaseMessage]) -> AIMessage:
        done = tool_results(messages)
        if who == "alpha" and len(done) == 1:
            return calls(tool_call("send", {"to": "second", "body": who}))
        if done:
            return AIMessage(f"{who} reports: " + "; ".join(done))
        return calls(tool_call("send", {"to": str(messages[-1].content), "body": who}))

    model = team(to_both, sub)
    async with open_service(db_url, model, registry, subagents=SPECS, default_agent=AgentKind.SUBAGENTS) as h:
        await h.service.handle_message(message("x"))
        cards = {c.source: c for c in pending(h)}
        await h.service.decide(cards["alpha"].id, actor("alice"), Approve())
        await h.service.tasks.join()
        now = {c.proposed_args["to"]: c for c in pending(h)}
        assert set(now) == {"x-b", "second"}
        await h.service.decide(now["x-b"].id, actor("alice"), Approve())
        await h.service.tasks.join()
        assert h.platform.answers == []
        await h.service.decide(now["second"].id, actor("alice"), Approve())
        await h.service.tasks.join()
        reviews = await h.approvals.reviews_in_thread(conversation().thread_id, list(ReviewStatus))
    assert sent_to(tool_log) == ["x-a", "x-b", "second"]
    assert [a for _, a in h.platform.answers] == [
        "answer: alpha reports: sent to x-a; sent to second | beta reports: sent to x-b"
    ]
    assert [r.status for r in reviews] == [ReviewStatus.DONE] * 3


async def test_a_new_message_while_a_subagent_card_waits_is_refused_and_then_answered(db_url, registry, tool_log):
    """A message while alpha waits gets the pending note; after the click, the next message is answered."""
    model = team(lambda text: [] if text == "thanks" else [("alpha", text)])
    async with open_service(db_url, model, registry, subagents=SPECS, default_agent=AgentKind.SUBAGENTS) as h:
        await h.service.handle_message(message("bob"))
        [card] = pending(h)
        await h.service.handle_message(message("hello?"))
        assert isinstance(h.platform.notices[-1][1], ReviewPending)
        await h.service.decide(card.id, actor("alice"), Approve())
        await h.service.tasks.join()
        await h.service.handle_message(message("thanks"))
    assert sent_to(tool_log) == ["bob"]
    assert [a for _, a in h.platform.answers] == ["answer: alpha reports: sent to bob", "ok"]


# --- restarts and crashes -------------------------------------------------------------------------


async def test_a_restart_between_two_subagents_cards(db_url, registry, tool_log):
    """alpha's card decided, restart, beta's card decided: both ran once, one answer."""
    model = team(to_both)
    async with open_service(db_url, model, registry, subagents=SPECS, default_agent=AgentKind.SUBAGENTS) as h:
        await h.service.handle_message(message("x"))
        cards = {c.source: c for c in pending(h)}
        await h.service.decide(cards["alpha"].id, actor("alice"), Approve())
        await h.service.tasks.join()
    fresh = team(to_both)
    async with open_service(db_url, fresh, registry, subagents=SPECS, default_agent=AgentKind.SUBAGENTS) as h:
        await h.service.decide(cards["beta"].id, actor("alice"), Approve())
        await h.service.tasks.join()
    assert sorted(sent_to(tool_log)) == ["x-a", "x-b"]
    assert [role(p) for p in fresh.prompts] == ["beta", "supervisor"]
    assert h.platform.answers[-1][1] == "answer: alpha reports: sent to x-a | beta reports: sent to x-b"


async def test_a_restart_without_the_subagent_that_waits(db_url, registry, tool_log):
    """The waiting subagent is gone after a restart: the click is not lost silently, the turn still answers."""
    model = team(to_alpha)
    async with open_service(db_url, model, registry, subagents=SPECS, default_agent=AgentKind.SUBAGENTS) as h:
        await h.service.handle_message(message("bob"))
        [card] = pending(h)
    fresh = team(to_alpha, specs=(BETA,))
    async with open_service(db_url, fresh, registry, subagents=(BETA,), default_agent=AgentKind.SUBAGENTS) as h:
        await h.service.decide(card.id, actor("alice"), Approve())
        await h.service.tasks.join()
        await h.service.handle_message(message("next"))
        review = await h.approvals.review(card.review_id)
    assert tool_log.calls == []
    assert review is not None and review.status is ReviewStatus.DONE
    assert len(h.platform.answers) == 2


async def test_a_restart_with_the_waiting_tool_removed_from_the_subagent(db_url, registry, tool_log):
    """alpha no longer has `send` after a restart: the approved call does not run; the turn answers."""
    model = team(to_alpha)
    async with open_service(db_url, model, registry, subagents=SPECS, default_agent=AgentKind.SUBAGENTS) as h:
        await h.service.handle_message(message("bob"))
        [card] = pending(h)
    shrunk = (SubagentSpec(name="alpha", description="a", prompt="You are alpha.", tools=("lookup",)), BETA)
    fresh = team(to_alpha, specs=shrunk)
    async with open_service(db_url, fresh, registry, subagents=shrunk, default_agent=AgentKind.SUBAGENTS) as h:
        await h.service.decide(card.id, actor("alice"), Approve())
        await h.service.tasks.join()
        await h.service.handle_message(message("next"))
    assert tool_log.calls == []
    assert len(h.platform.answers) == 2


async def test_a_restart_as_a_react_only_bot_keeps_the_subagent_card_working(db_url, registry, tool_log):
    """The conversation's card came from a subagent; after a restart the channel is set to react: the click still resumes it."""
    model = team(to_alpha)
    async with open_service(db_url, model, registry, subagents=SPECS, default_agent=AgentKind.SUBAGENTS) as h:
        await h.service.handle_message(message("bob"))
        [card] = pending(h)
    fresh = team(to_alpha)
    async with open_service(db_url, fresh, registry, subagents=SPECS, default_agent=AgentKind.REACT) as h:
        await h.service.decide(card.id, actor("alice"), Approve())
        await h.service.tasks.join()
        await h.service.handle_message(message("next"))
    assert sent_to(tool_log) == ["bob"]
    assert [a for _, a in h.platform.answers] == ["answer: alpha reports: sent to bob", "react: next"]


async def test_a_claimed_review_resumed_after_a_restart_while_its_sibling_waits(db_url, registry, tool_log):
    """alpha's card decided, the bot died before resuming; after the start alpha continues, beta's card still works."""
    model = team(to_both)
    async with open_service(db_url, model, registry, subagents=SPECS, default_agent=AgentKind.SUBAGENTS) as h:
        await h.service.handle_message(message("x"))
        cards = {c.source: c for c in pending(h)}
        entry = approval_entry(AuditKind.DECISION, cards["alpha"], "approve", actor=actor("alice"))
        voted = await h.approvals.vote(
            cards["alpha"].id, actor=actor("alice"), kind=VoteKind.APPROVE, quorum=1, audit=entry
        )
        assert voted.review_complete
    fresh = team(to_both)
    async with open_service(db_url, fresh, registry, subagents=SPECS, default_agent=AgentKind.SUBAGENTS) as h:
        await h.service.recover()
        await h.service.tasks.join()
        assert sent_to(tool_log) == ["x-a"] and h.platform.answers == []
        await h.service.decide(cards["beta"].id, actor("alice"), Approve())
        await h.service.tasks.join()
        reviews = await h.approvals.reviews_in_thread(conversation().thread_id, list(ReviewStatus))
    assert sent_to(tool_log) == ["x-a", "x-b"]
    assert [a for _, a in h.platform.answers] == ["answer: alpha reports: sent to x-a | beta reports: sent to x-b"]
    assert [r.status for r in reviews] == [ReviewStatus.DONE, ReviewStatus.DONE]


async def test_a_claimed_review_of_a_removed_subagent_is_finished_after_a_restart(db_url, registry, tool_log):
    """Decided, then a restart without that subagent: recovery finishes the turn, nothing runs, the review is done."""
    model = team(to_alpha)
    async with open_service(db_url, model, registry, subagents=SPECS, default_agent=AgentKind.SUBAGENTS) as h:
        await h.service.handle_message(message("bob"))
        [card] = pending(h)
        entry = approval_entry(AuditKind.DECISION, card, "approve", actor=actor("alice"))
        await h.approvals.vote(card.id, actor=actor("alice"), kind=VoteKind.APPROVE, quorum=1, audit=entry)
    fresh = team(to_alpha, specs=(BETA,))
    async with open_service(db_url, fresh, registry, subagents=(BETA,), default_agent=AgentKind.SUBAGENTS) as h:
        await h.service.recover()
        await h.service.tasks.join()
        review = await h.approvals.review(card.review_id)
    assert tool_log.calls == []
    assert review is not None and review.status is ReviewStatus.DONE
    assert h.platform.answers[-1][1] == "answer: " + prompts.UNKNOWN_SUBAGENT.format(name="alpha", available="beta")


async def test_two_subagent_pauses_lost_before_their_rows_are_rebuilt(db_url, registry, tool_log):
    """Both delegations paused and the bot died before storing them: the next message rebuilds both cards."""
    model = team(to_both)
    async with open_service(db_url, model, registry, subagents=SPECS, default_agent=AgentKind.SUBAGENTS) as h:
        await h.service.handle_message(message("x", user="alice"))
        await h.database.pool.execute("DELETE FROM approval_cards")
        await h.database.pool.execute("DELETE FROM approvals")
        await h.database.pool.execute("DELETE FROM reviews")
        # As the crash before the rows were stored leaves it: the run's outcome still due.
        await h.database.pool.execute("UPDATE conversations SET running_since = now(), settled = false")
        h.platform.cards.clear()
        await h.service.handle_message(message("hello?", user="mallory"))
        cards = pending(h)
        assert sorted(c.source for c in cards) == ["alpha", "beta"]
        assert {c.requester_id for c in cards} == {"alice"}
        for card in cards:
            await h.service.decide(card.id, actor("alice"), Approve())
            await h.service.tasks.join()
    assert sorted(sent_to(tool_log)) == ["x-a", "x-b"]
    assert len(h.platform.answers) == 1


async def test_a_crash_inside_a_subagents_tool_round_does_not_rerun_the_subagent(db_url, registry, tool_log):
    """The bot dies while alpha's tool runs; the next message finishes the round: no second model call, no second run."""
    crashing = {"on": True}

    def sub(who: str, messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            return AIMessage(f"{who} reports: " + "; ".join(tool_results(messages)))
        return calls(tool_call("lookup", {"query": str(last.content)}))

    model = team(lambda text: [] if text == "and now?" else [("alpha", text)], sub)
    original = registry.get("lookup").tool.coroutine

    async def lookup(query: str) -> str:
        result = await original(query)
        if crashing["on"]:
            crashing["on"] = False
            raise Crash()
        return result

    registry.get("lookup").tool.coroutine = lookup
    async with open_service(db_url, model, registry, subagents=SPECS, default_agent=AgentKind.SUBAGENTS) as h:
        with pytest.raises(Crash):
            await h.service.handle_message(message("tea"))
        await h.service.handle_message(message("and now?"))
    assert tool_log.calls == [("lookup", {"query": "tea"})]
    assert [role(p) for p in model.prompts][:3] == ["supervisor", "alpha", "alpha"]
    assert h.platform.answers[0][1] == "answer: alpha reports: " + prompts.ALREADY_STARTED_MESSAGE


async def test_a_crash_in_one_delegation_does_not_redo_its_finished_sibling(db_url, registry, tool_log):
    """alpha finished while beta's tool crashed the bot: the repair runs beta's round only; alpha is not asked again."""
    crashing = {"on": True}

    def sub(who: str, messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            return AIMessage(f"{who} reports: " + "; ".join(tool_results(messages)))
        if who == "alpha":
            return calls(tool_call("lookup", {"query": str(last.content)}))
        return calls(tool_call("explode", {"reason": str(last.content)}))

    specs = (ALPHA, SubagentSpec(name="beta", description="b", prompt="You are beta.", tools=("explode",)))
    model = team(lambda text: [] if text == "and now?" else to_both(text), sub, specs=specs)
    original = registry.get("explode").tool.coroutine
    harness: list = []  # the service, once it is open

    async def alpha_saved() -> bool:
        # alpha's report is among the writes saved for the supervisor's step (its task is done).
        return bool(
            await harness[0].database.pool.fetchval(
                "SELECT count(*) FROM checkpoint_writes WHERE thread_id = $1 AND position($2 in blob) > 0",
                conversation().thread_id,
                b"alpha reports",
            )
        )

    async def explode(reason: str) -> str:
        if crashing["on"]:
            crashing["on"] = False
            await wait_until_async(alpha_saved, "alpha's report being saved")  # alpha finishes first
            raise Crash()
        return await original(reason)

    registry.get("explode").tool.coroutine = explode
    async with open_service(db_url, model, registry, subagents=specs, default_agent=AgentKind.SUBAGENTS) as h:
        harness.append(h)
        with pytest.raises(Crash):
            await h.service.handle_message(message("x"))
        await h.service.handle_message(message("and now?"))
    assert tool_log.calls == [("lookup", {"query": "x-a"})]
    assert [role(p, specs) for p in model.prompts].count("alpha") == 2
    assert (
        h.platform.answers[0][1]
        == "answer: alpha reports: found x-a | beta reports: " + prompts.ALREADY_STARTED_MESSAGE
    )


# --- policy and admin settings inside subagents ---------------------------------------------------


async def test_quorum_and_self_approval_apply_inside_a_subagent(db_url, registry, tool_log):
    """quorum send 2 and self-approval off: the requester cannot approve alpha's card; two others must."""
    model = team(to_alpha)
    platform = RecordingPlatform(admins={ADMIN})
    async with open_service(db_url, model, registry, platform, subagents=SPECS, default_agent=AgentKind.SUBAGENTS) as h:
        service = admin(h, registry)
        await service.execute(actor(ADMIN), SetQuorum(tool="send", count=2), here="C1")
        await service.execute(actor(ADMIN), SetSelfApproval(allowed=False), here="C1")
        await h.service.handle_message(message("bob", user="alice"))
        [card] = pending(h)
        with pytest.raises(NotPermittedError):
            await h.service.decide(card.id, actor("alice"), Approve())
        first = await h.service.decide(card.id, actor(ADMIN), Approve())
        await h.service.tasks.join()
        assert first.is_pending and tool_log.calls == []
        await h.service.decide(card.id, actor("root", is_admin=True), Approve())
        await h.service.tasks.join()
    assert sent_to(tool_log) == ["bob"]


async def test_an_approver_list_for_a_tool_applies_to_a_subagents_card(db_url, registry, tool_log):
    """`approvers add bob for send`: carol may not decide alpha's card, bob may, and the call runs once."""
    model = team(to_alpha)
    platform = RecordingPlatform(admins={ADMIN})
    async with open_service(db_url, model, registry, platform, subagents=SPECS, default_agent=AgentKind.SUBAGENTS) as h:
        await admin(h, registry).execute(
            actor(ADMIN), ChangeApprovers(add=True, kind=ApproverKind.USER, subject_id="bob", tool="send"), here="C1"
        )
        await h.service.handle_message(message("dave", user="alice"))
        [card] = pending(h)
        with pytest.raises(NotPermittedError):
            await h.service.decide(card.id, actor("carol"), Approve())
        await h.service.decide(card.id, actor("bob"), Approve())
        await h.service.tasks.join()
    assert sent_to(tool_log) == ["dave"]


async def test_a_deny_set_while_a_subagent_card_waits_stops_the_call(db_url, registry, tool_log):
    """send switched to deny while alpha's card waits: the approval is a policy rejection; nothing runs."""
    model = team(to_alpha)
    platform = RecordingPlatform(admins={ADMIN})
    async with open_service(db_url, model, registry, platform, subagents=SPECS, default_agent=AgentKind.SUBAGENTS) as h:
        await h.service.handle_message(message("bob"))
        [card] = pending(h)
        await admin(h, registry).execute(actor(ADMIN), SetPolicy(tool="send", mode=Mode.DENY), here="C1")
        decided = await h.service.decide(card.id, actor("alice"), Approve())
        await h.service.tasks.join()
    assert decided.status is ApprovalStatus.REJECTED
    assert tool_log.calls == []
    assert len(h.platform.answers) == 1


async def test_switching_to_react_while_a_subagent_card_waits(db_url, registry, tool_log):
    """`agent react` while alpha waits: the click resumes alpha; the next message goes to the ReAct agent."""
    model = team(to_alpha)
    platform = RecordingPlatform(admins={ADMIN})
    async with open_service(db_url, model, registry, platform, subagents=SPECS, default_agent=AgentKind.SUBAGENTS) as h:
        await h.service.handle_message(message("bob"))
        [card] = pending(h)
        await admin(h, registry).execute(actor(ADMIN), SetAgent(agent=AgentKind.REACT), here="C1")
        await h.service.handle_message(message("hm?"))
        assert isinstance(h.platform.notices[-1][1], ReviewPending)
        await h.service.decide(card.id, actor("alice"), Approve())
        await h.service.tasks.join()
        await h.service.handle_message(message("next"))
    assert sent_to(tool_log) == ["bob"]
    assert [a for _, a in h.platform.answers] == ["answer: alpha reports: sent to bob", "react: next"]


# --- hostile models and configurations ------------------------------------------------------------


async def test_the_same_subagent_called_twice_in_one_answer_pauses_twice(db_url, registry, tool_log):
    """alpha is called twice in one answer: two cards, each decided on its own, each call once."""
    model = team(lambda text: [("alpha", "ann"), ("alpha", "ben")])
    async with open_service(db_url, model, registry, subagents=SPECS, default_agent=AgentKind.SUBAGENTS) as h:
        await h.service.handle_message(message("x"))
        cards = pending(h)
        assert len(cards) == 2 and len({c.review_id for c in cards}) == 2
        by_to = {c.proposed_args["to"]: c for c in cards}
        await h.service.decide(by_to["ben"].id, actor("alice"), Approve())
        await h.service.tasks.join()
        await h.service.decide(by_to["ann"].id, actor("alice"), Reject(message="no"))
        await h.service.tasks.join()
    assert sent_to(tool_log) == ["ben"]
    assert h.platform.answers[-1][1] == (
        "answer: alpha reports: " + prompts.REJECTED_BY_REVIEWER.format(reason="no") + " | alpha reports: sent to ben"
    )


async def test_a_subagent_looping_on_gated_calls_stops_at_its_round_cap(db_url, registry, tool_log):
    """Every resume gets fresh steps, but a subagent that asks for a card forever gets at most its cap of rounds."""

    def sub(who: str, messages: list[BaseMessage]) -> AIMessage:
        if str(messages[0].content).endswith(prompts.SUBAGENT_CLOSING):
            return AIMessage("gave up")
        return calls(tool_call("send", {"to": f"n{len(messages)}", "body": who}))

    specs = (SubagentSpec(name="alpha", description="a", prompt="You are alpha.", tools=("send",), step_limit=8),)
    model = team(to_alpha, sub, specs=specs)
    async with open_service(db_url, model, registry, subagents=specs, default_agent=AgentKind.SUBAGENTS) as h:
        await h.service.handle_message(message("go"))
        clicks = 0
        while cards := pending(h):
            clicks += 1
            assert clicks <= 5
            await h.service.decide(cards[0].id, actor("alice"), Approve())
            await h.service.tasks.join()
    assert clicks == len(tool_log.calls) == 2
    assert h.platform.answers[-1][1] == "answer: gave up"


@pytest.mark.parametrize(
    "name", ["llm_call", "delegate", "human_review", "tool_node", "__start__", "messages", "__end__"]
)
async def test_a_subagent_named_like_a_graph_node_or_channel_works(db_url, registry, tool_log, name):
    """A subagent may be named like a LangGraph node or channel: its card and report work."""
    spec = SubagentSpec(name=name, description="d", prompt="You are odd.", tools=("send",))
    model = team(lambda text: [(name, text)], specs=(spec,))
    async with open_service(db_url, model, registry, subagents=(spec,), default_agent=AgentKind.SUBAGENTS) as h:
        await h.service.handle_message(message("bob"))
        [card] = pending(h)
        assert card.source == name
        await h.service.decide(card.id, actor("alice"), Approve())
        await h.service.tasks.join()
    assert sent_to(tool_log) == ["bob"]
    assert h.platform.answers[-1][1] == f"answer: {name} reports: sent to bob"


# --- progress on the platforms --------------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.parametrize("method", ["chat.postMessage", "chat.update", "chat.delete", "reactions.add"])
async def test_slack_progress_failures_do_not_silence_the_answer(bot, events, slack: SlackApiStandIn, target, method):
    """Slack refuses the progress message (rate limit, a deleted message) or the hourglass: the answer is still posted."""
    await slack_use_subagents(events, slack)
    if method == "chat.postMessage":
        slack.rate_limit(method, times=3, retry_after=1)
    elif method == "reactions.add":
        slack.fail(method, "message_not_found")
    else:
        slack.fail(method, "message_not_found", times=5)
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> get")
    answer = await slack_answer(slack, mention.ts)
    assert answer.startswith("Result: researcher reported: Report: ")
    assert [r.method for r in target.requests] == ["GET"]


@pytest.mark.e2e
@pytest.mark.parametrize("method", ["chat.postMessage", "chat.delete", "reactions.add", "reactions.remove"])
async def test_slack_network_failures_of_progress_do_not_lose_the_answer(
    bot, events, slack: SlackApiStandIn, target, method
):
    """The connection drops on a progress call (the hourglass, the progress message): the answer is still posted."""
    await slack_use_subagents(events, slack)
    slack.disconnect(method, times=3)  # the client retries a dropped connection twice
    ts = slack.add_message(CHANNEL, user=ALICE, text="<@UBOT> get")  # so the hourglass can be added and removed
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> get", ts=ts)
    answer = await slack_answer(slack, mention.ts)
    assert answer.startswith("Result: researcher reported: Report: ")
    assert [r.method for r in target.requests] == ["GET"]
    await settle(bot)

    async def dropped() -> bool:  # the hourglass comes off in the background, after the answer
        return any(c.error == "disconnected" for c in slack.calls_to(method))

    await wait_until_async(dropped, f"a dropped {method}")


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("method", "path", "status", "code"),
    [
        ("POST", r"/channels/\d+/typing", 403, 50013),
        ("POST", r"/channels/\d+/typing", 400, 0),
        ("DELETE", r"/channels/\d+/messages/\d+", 404, 10008),
        ("PATCH", r"/channels/\d+/messages/\d+", 404, 10008),
    ],
)
async def test_discord_progress_failures_do_not_silence_the_answer(
    discord_bot, discord_api, target, method, path, status, code
):
    """Discord refuses the typing indicator or the status line (deleted, forbidden): the answer is still posted."""
    await discord_use_subagents(discord_bot, discord_api)
    discord_api.fail_next(method, path, status=status, code=code, times=3)
    await discord_mention(discord_api, D_ALICE, "get")
    answer = await discord_answer(discord_api)
    assert answer.startswith("Result: researcher reported: Report: ")
    assert [r.method for r in target.requests] == ["GET"]


RATE_LIMIT_S = 40
"""A long `Retry-After` on the progress updates; the card must not wait it out."""


@pytest.mark.e2e
async def test_slack_a_rate_limited_progress_update_does_not_hold_up_the_card(
    bot, events, slack: SlackApiStandIn, target
):
    """chat.update answers 429 with a long Retry-After: the run goes on, the card is posted well before the wait ends."""
    await slack_use_subagents(events, slack)
    slack.rate_limit("chat.update", times=1, retry_after=RATE_LIMIT_S)
    started = asyncio.get_running_loop().time()
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> check and post gizmo")
    await slack.wait_for("chat.postMessage", has_buttons, timeout=RATE_LIMIT_S)
    assert asyncio.get_running_loop().time() - started < RATE_LIMIT_S
    assert [r.method for r in target.requests] == ["GET"]
    [card] = await wait_card(slack)
    await click(events, slack, ALICE, blocks.ACTION_APPROVE, card)
    answer = await slack_answer(slack, mention.ts)
    assert "operator reported" in answer and [r.method for r in target.requests] == ["GET", "POST"]
    remaining = [m.get("text", "") for m in slack.messages(CHANNEL, thread_ts=mention.ts)]
    assert not any("is working" in t for t in remaining), remaining


@pytest.mark.e2e
async def test_discord_a_rate_limited_status_line_does_not_hold_up_the_card(discord_bot, discord_api, target):
    """Editing the status line answers 429 with a long Retry-After: the card is posted well before the wait ends."""
    await discord_use_subagents(discord_bot, discord_api)
    discord_api.rate_limit("PATCH", r"/channels/\d+/messages/\d+", retry_after=RATE_LIMIT_S, times=1)
    started = asyncio.get_running_loop().time()
    await discord_mention(discord_api, D_ALICE, "check and post gizmo")
    await discord_api.wait_for_request(
        "POST", rf"/channels/{D_CHANNEL}/messages$", is_discord_card, timeout=RATE_LIMIT_S
    )
    assert asyncio.get_running_loop().time() - started < RATE_LIMIT_S
    assert [r.method for r in target.requests] == ["GET"]
    [card] = await discord_wait_card(discord_api)
    await discord_click(discord_api, card, D_ALICE, "approve")
    answer = await discord_answer(discord_api)
    assert "operator reported" in answer and [r.method for r in target.requests] == ["GET", "POST"]
    remaining = [m.get("content", "") for m in discord_api.messages(D_CHANNEL)]
    assert not any("is working" in t for t in remaining), remaining


_CARD_REF_LOCK = 7_311_204
_CARD_REFS_WAIT_FOR_THE_TEST = f"""
    CREATE FUNCTION wait_for_the_test() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN PERFORM pg_advisory_xact_lock({_CARD_REF_LOCK}); RETURN NULL; END $$;
    CREATE TRIGGER wait_for_the_test BEFORE INSERT ON approval_cards
        FOR EACH STATEMENT EXECUTE FUNCTION wait_for_the_test();
"""


@pytest.mark.e2e
async def test_discord_a_click_before_the_card_reference_is_stored_does_not_wait_out_a_rate_limit(
    discord_bot, discord_api, target, db_url
):
    """The status line's edit answers 429 with a long Retry-After, and Alice's Approve is applied
    before the card's message id is stored: the card is redrawn once it is (the decision's own
    redraw found no card), but the run does not wait out the Retry-After for it.

    discord.py queues edits of one channel's messages in one rate-limit bucket, so that redraw
    waits behind the status line's edit, which waits until the run ends. Found by CI: the run
    held its own end for the whole Retry-After and the answer came 40 s late.
    """
    import asyncpg

    from tests.support.barriers import another_session_waits_for_a_lock

    await discord_use_subagents(discord_bot, discord_api)
    holder = await asyncpg.connect(db_url)
    try:
        await holder.execute(_CARD_REFS_WAIT_FOR_THE_TEST)
        holding = holder.transaction()
        await holding.start()
        await holder.execute("SELECT pg_advisory_xact_lock($1)", _CARD_REF_LOCK)
        discord_api.rate_limit("PATCH", r"/channels/\d+/messages/\d+", retry_after=RATE_LIMIT_S, times=1)
        started = asyncio.get_running_loop().time()
        await discord_mention(discord_api, D_ALICE, "check and post gizmo")
        await discord_api.wait_for_request(
            "POST", rf"/channels/{D_CHANNEL}/messages$", is_discord_card, timeout=RATE_LIMIT_S
        )
        await wait_until_async(lambda: another_session_waits_for_a_lock(holder), "the card reference waiting")
        [card] = await discord_wait_card(discord_api)
        await discord_click(discord_api, card, D_ALICE, "approve")
        await wait_until_async(
            lambda: holder.fetchval("SELECT count(*) = 1 FROM approvals WHERE status = 'approved'"),
            "the approval decided",
        )
        await holding.rollback()
        answer = await discord_answer(discord_api)
        assert asyncio.get_running_loop().time() - started < RATE_LIMIT_S, "the run waited out the Retry-After"
        assert "operator reported" in answer and [r.method for r in target.requests] == ["GET", "POST"]
        await discord_settle(discord_bot)
        redrawn = discord_api.message(card.message_id)
        custom_ids = [b.get("custom_id", "") for row in redrawn.get("components") or [] for b in row["components"]]
        assert not any(i.startswith("cs:approve:") for i in custom_ids), "the decided card still offers Approve"
    finally:
        await holder.close()


@pytest.mark.e2e
async def test_discord_a_rate_limited_card_redraw_does_not_hold_up_the_run(discord_bot, discord_api, target):
    """The approved card's redraw answers 429 with a long Retry-After: the run goes on and answers well before the wait ends."""
    await discord_use_subagents(discord_bot, discord_api)
    await discord_mention(discord_api, D_ALICE, "check and post gizmo")
    [card] = await discord_wait_card(discord_api)
    await discord_settle(discord_bot)  # the paused run's status line is done with
    discord_api.rate_limit("PATCH", rf"/channels/{card.channel}/messages/{card.message_id}", retry_after=RATE_LIMIT_S)
    started = asyncio.get_running_loop().time()
    await discord_click(discord_api, card, D_ALICE, "approve")
    answer = await discord_answer(discord_api)
    assert asyncio.get_running_loop().time() - started < RATE_LIMIT_S
    assert "operator reported" in answer and [r.method for r in target.requests] == ["GET", "POST"]


@pytest.mark.e2e
async def test_slack_a_rate_limited_card_redraw_does_not_hold_up_the_run(bot, events, slack: SlackApiStandIn, target):
    """chat.update of the approved card answers 429 with a long Retry-After: the run goes on and answers well before the wait ends."""
    await slack_use_subagents(events, slack)
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> check and post gizmo")
    [card] = await wait_card(slack)
    await settle(bot)  # the paused run's progress message is done with
    slack.rate_limit("chat.update", times=1, retry_after=RATE_LIMIT_S)
    started = asyncio.get_running_loop().time()
    await click(events, slack, ALICE, blocks.ACTION_APPROVE, card)
    answer = await slack_answer(slack, mention.ts)
    assert asyncio.get_running_loop().time() - started < RATE_LIMIT_S
    assert "operator reported" in answer and [r.method for r in target.requests] == ["GET", "POST"]


@pytest.mark.e2e
async def test_slack_a_rate_limited_progress_delete_does_not_hold_up_the_answer(
    bot, events, slack: SlackApiStandIn, target
):
    """chat.delete of the progress message answers 429 with a long Retry-After: the answer is posted without waiting it out."""
    await slack_use_subagents(events, slack)
    slack.rate_limit("chat.delete", times=1, retry_after=RATE_LIMIT_S)
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> get")
    answer = await slack_answer(slack, mention.ts)
    assert answer.startswith("Result: researcher reported: Report: ")
