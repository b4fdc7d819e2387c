"""The subagents agent through the core service on a real PostgreSQL (docs/decisions/0008).

One scripted model plays every agent; it tells them apart by their system prompts (the
supervisor's carries the delegation instructions, each subagent's starts with its own prompt).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.types import Command

from bot.admin.commands import SetAgent, SetExpiry, SetPolicy, Show
from bot.admin.parse import CommandError
from bot.admin.service import AdminService
from bot.agents import prompts
from bot.agents.subagent_specs import SubagentSpec
from bot.audit.entries import AuditKind, approval_entry
from bot.base.agent_kind import AgentKind
from bot.base.mode import Mode
from bot.ports import ApprovalExpired, ReviewPending
from bot.reviews.decisions import Approve, Edit, EditedAction, Reject
from bot.reviews.lifecycle import ApprovalStatus, ReviewStatus
from bot.reviews.records import NO_LONGER_CONFIGURED
from bot.reviews.store import VoteKind
from bot.turns.runner import TurnRunner
from tests.support.recording_platform import RecordingPlatform
from tests.support.scripted_model import ScriptedChatModel, calls, tool_call
from tests.support.service import WORKSPACE, actor, conversation, message, open_service

ADMIN = "UADMIN"
ALPHA = SubagentSpec(name="alpha", description="Sends for A.", prompt="You are alpha.", tools=("send", "lookup"))
BETA = SubagentSpec(name="beta", description="Sends for B.", prompt="You are beta.", tools=("send",))
SPECS = (ALPHA, BETA)


def role(messages: list[BaseMessage]) -> str:
    """Which agent a prompt belongs to."""
    system = str(messages[0].content)
    if prompts.SUPERVISOR_INSTRUCTIONS.strip() in system:
        return "supervisor"
    for spec in SPECS:
        if system.startswith(spec.prompt):
            return spec.name
    return "react"


def tool_results(messages: list[BaseMessage]) -> list[str]:
    return [str(m.content) for m in messages if isinstance(m, ToolMessage)]


def team(delegations: Callable[[str], list[tuple[str, str]]]) -> ScriptedChatModel:
    """The supervisor delegates what `delegations(user text)` says; subagents `send` to their query.

    After results: a subagent reports them, the supervisor answers "answer: <reports>", and the
    ReAct agent (no delegation instructions, no subagent prompt) answers "react: <text>".
    """

    def script(messages: list[BaseMessage]) -> AIMessage:
        who, last = role(messages), messages[-1]
        if who == "supervisor":
            if isinstance(last, ToolMessage):
                return AIMessage("answer: " + " | ".join(tool_results(messages)))
            pairs = delegations(str(last.content))
            return calls(*(tool_call(name, {"query": query}) for name, query in pairs)) if pairs else AIMessage("ok")
        if who in ("alpha", "beta"):
            if isinstance(last, ToolMessage):
                return AIMessage(f"{who} reports: " + "; ".join(tool_results(messages)))
            return calls(tool_call("send", {"to": str(last.content), "body": who}), text=f"{who} must send")
        return AIMessage(f"react: {last.content}")

    return ScriptedChatModel(script=script)


def to_alpha(text: str) -> list[tuple[str, str]]:
    return [("alpha", text)]


def to_both(text: str) -> list[tuple[str, str]]:
    return [("alpha", f"{text}-a"), ("beta", f"{text}-b")]


def admin(h, registry) -> AdminService:
    return AdminService(
        config=h.config,
        audit=h.audit,
        registry=registry,
        directory_for=lambda name: h.platform,
        subagents=("alpha", "beta"),
    )


def pending(h):
    return [c.approval for c in h.platform.cards.values() if c.approval.status is ApprovalStatus.PENDING]


async def until(check: Callable[[], bool], *, seconds: float = 30.0) -> None:
    """Wait for `check()` to hold (generous: a busy machine is slow, never wrong)."""
    deadline = asyncio.get_running_loop().time() + seconds
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "timed out waiting"
        await asyncio.sleep(0.05)


# --- choosing the agent -----------------------------------------------------------------------


async def test_the_agent_setting_picks_the_graph_per_channel(db_url, registry, tool_log):
    """`agent subagents in #C1`: C1 is answered by the supervisor, C2 by the ReAct agent; show and audit say so."""
    model = team(lambda text: [])
    platform = RecordingPlatform(admins={ADMIN})
    async with open_service(db_url, model, registry, platform, subagents=SPECS) as h:
        service = admin(h, registry)
        changed = await service.execute(actor(ADMIN), SetAgent(agent=AgentKind.SUBAGENTS, channel_id="C1"), here="C1")
        assert changed.changed and changed.before is None and changed.after == "subagents"
        view = await service.execute(actor("bob"), Show(channel_id="C1"))
        other = await service.execute(actor("bob"), Show(channel_id="C2"))
        await h.service.handle_message(message("in ops", conv=conversation("C1")))
        await h.service.handle_message(message("in general", conv=conversation("C2")))
        audit = await h.audit.recent(WORKSPACE)
    assert (view.agent, view.agent_source, view.subagents) == (AgentKind.SUBAGENTS, "channel", ("alpha", "beta"))
    assert (other.agent, other.agent_source) == (AgentKind.REACT, "default")
    assert [role(p) for p in model.prompts] == ["supervisor", "react"]
    assert [text for _, text in h.platform.answers] == ["ok", "react: in general"]
    [change] = [e for e in audit if e.kind is AuditKind.CONFIG]
    assert change.outcome == "agent" and change.detail["after"] == "subagents" and change.detail["channel_id"] == "C1"


async def test_the_default_agent_and_the_workspace_setting(db_url, registry):
    """COUNTERSIGN_AGENT is the default; a workspace-wide `agent react` overrides it; `agent default` undoes that."""
    model = team(lambda text: [])
    platform = RecordingPlatform(admins={ADMIN})
    async with open_service(db_url, model, registry, platform, subagents=SPECS, default_agent=AgentKind.SUBAGENTS) as h:
        await h.service.handle_message(message("one"))
        await admin(h, registry).execute(actor(ADMIN), SetAgent(agent=AgentKind.REACT), here="C1")
        await h.service.handle_message(message("two"))
        undone = await h.admin.execute(actor(ADMIN), SetAgent(agent=None), here="C1")
        view = await h.admin.execute(actor("bob"), Show(channel_id="C1"))
        await h.service.handle_message(message("three"))
    assert [role(p) for p in model.prompts] == ["supervisor", "react", "supervisor"]
    assert undone.changed and (undone.before, undone.after) == ("react", None)
    assert (view.agent, view.agent_source) == (AgentKind.SUBAGENTS, "default")


async def test_a_conversation_changes_agent_only_at_rest(db_url, registry, tool_log):
    """A card of the ReAct agent waits: switching the channel to subagents waits until the card is decided."""
    model = ScriptedChatModel(
        replies=[
            calls(tool_call("send", {"to": "bob", "body": "hi"})),
            AIMessage("sent"),
            AIMessage("supervisor speaking"),
        ]
    )
    platform = RecordingPlatform(admins={ADMIN})
    async with open_service(db_url, model, registry, platform, subagents=SPECS) as h:
        await h.service.handle_message(message("send it"))
        [card] = pending(h)
        await admin(h, registry).execute(actor(ADMIN), SetAgent(agent=AgentKind.SUBAGENTS), here="C1")
        await h.service.handle_message(message("anything?"))
        assert isinstance(h.platform.notices[-1][1], ReviewPending)
        await h.service.decide(card.id, actor("alice"), Approve())
        await h.service.tasks.join()
        await h.service.handle_message(message("next"))
    assert tool_log.calls == [("send", {"to": "bob", "body": "hi", "urgent": False})]
    assert [text for _, text in h.platform.answers] == ["sent", "supervisor speaking"]
    assert prompts.SUPERVISOR_INSTRUCTIONS.strip() in str(model.prompts[-1][0].content)
    # The supervisor reads the conversation so far.
    assert "send it" in " ".join(str(m.content) for m in model.prompts[-1])


async def test_a_subagent_without_its_own_model_uses_the_supervisors(db_url, registry, tool_log):
    """alpha names a model and gets it; beta names none and gets the supervisor's model."""
    specs = (
        SubagentSpec(name="alpha", description="a", prompt="You are alpha.", tools=("lookup",), model="special"),
        BETA,
    )

    def alpha_script(messages: list[BaseMessage]) -> AIMessage:
        return AIMessage("alpha's own model")

    special = ScriptedChatModel(script=alpha_script)
    main = team(lambda text: [("alpha", "a task"), ("beta", "b task")])
    main_script = main.script
    assert main_script is not None
    # beta answers at once here: its model is the supervisor's, which this script plays too.
    main.script = lambda messages: (
        AIMessage("beta on the main model") if role(messages) == "beta" else main_script(messages)
    )
    async with open_service(
        db_url,
        main,
        registry,
        subagents=specs,
        models={"special": special},
        default_agent=AgentKind.SUBAGENTS,
    ) as h:
        await h.service.handle_message(message("go"))
    assert [role(p) for p in special.prompts] == ["alpha"]
    assert sorted(role(p) for p in main.prompts) == ["beta", "supervisor", "supervisor"]
    assert h.platform.answers[-1][1] == "answer: alpha's own model | beta on the main model"


# --- cards inside subagents -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("decision", "runs", "report"),
    [
        (Approve(), [("send", {"to": "bob", "body": "alpha", "urgent": False})], "alpha reports: sent to bob"),
        (
            Edit(edited_action=EditedAction(name="send", args={"to": "carol", "body": "alpha"})),
            [("send", {"to": "carol", "body": "alpha", "urgent": False})],
            "alpha reports: sent to carol",
        ),
        (Reject(message="no"), [], "alpha reports: " + prompts.REJECTED_BY_REVIEWER.format(reason="no")),
    ],
)
async def test_a_card_inside_a_subagent(db_url, registry, tool_log, decision, runs, report):
    """The card names the subagent and the requester; the decision applies once; the answer follows."""
    model = team(to_alpha)
    async with open_service(db_url, model, registry, subagents=SPECS, default_agent=AgentKind.SUBAGENTS) as h:
        await h.service.handle_message(message("bob", user="alice"))
        [card] = pending(h)
        assert (card.source, card.tool_name, card.requester_id) == ("alpha", "send", "alice")
        assert card.description == "alpha must send" and card.tool_call_id
        assert tool_log.calls == [] and h.platform.answers == []
        await h.service.decide(card.id, actor("alice"), decision)
        await h.service.tasks.join()
        review = await h.approvals.review(card.review_id)
        audit = await h.audit.recent(WORKSPACE)
        by_subagent = await h.audit.recent(WORKSPACE, tool_name="alpha")
    assert tool_log.calls == runs
    assert by_subagent and all(e.detail["source"] == "alpha" and e.tool_name == "send" for e in by_subagent)
    assert h.platform.answers[-1][1] == f"answer: {report}"
    assert review is not None and review.status is ReviewStatus.DONE and review.source == "alpha"
    assert [role(p) for p in model.prompts] == ["supervisor", "alpha", "alpha", "supervisor"]
    assert any(e.kind is AuditKind.DECISION and e.approval_id == card.id for e in audit)
    # Progress named the subagent while it worked, said it waited, and that it continued after the decision.
    activities = [a for _, a in h.platform.activities]
    assert [a.started for a in activities if a.started] == ["alpha"]
    assert [a.continued for a in activities if a.continued] == ["alpha"]
    assert any(a.waiting == ("alpha",) and not a.subagents for a in activities)


async def test_two_delegations_pause_and_continue_each_as_its_cards_are_decided(db_url, registry, tool_log):
    """Two cards from two subagents at once; each delegation continues as soon as its own card is decided."""
    model = team(to_both)
    async with open_service(db_url, model, registry, subagents=SPECS, default_agent=AgentKind.SUBAGENTS) as h:
        await h.service.handle_message(message("x"))
        cards = {c.source: c for c in pending(h)}
        assert set(cards) == {"alpha", "beta"} and cards["alpha"].review_id != cards["beta"].review_id
        await h.service.decide(cards["beta"].id, actor("alice"), Approve())
        await h.service.tasks.join()
        assert tool_log.calls == [("send", {"to": "x-b", "body": "beta", "urgent": False})]
        assert h.platform.answers == []  # the supervisor waits for alpha's report
        await h.service.handle_message(message("are you there?"))
        notice = h.platform.notices[-1][1]
        assert isinstance(notice, ReviewPending) and [a.id for a in notice.approvals] == [cards["alpha"].id]
        await h.service.decide(cards["alpha"].id, actor("alice"), Approve())
        await h.service.tasks.join()
        reviews = await h.approvals.reviews_in_thread(conversation().thread_id, list(ReviewStatus))
    assert [c[1]["to"] for c in tool_log.calls] == ["x-b", "x-a"]
    assert h.platform.answers == [
        (conversation().thread_id, "answer: alpha reports: sent to x-a | beta reports: sent to x-b")
    ]
    assert [r.status for r in reviews] == [ReviewStatus.DONE, ReviewStatus.DONE]
    assert [role(p) for p in model.prompts].count("beta") == 2  # beta was not run again after alpha's card


async def test_a_card_shows_while_a_sibling_delegation_still_works(db_url, registry, tool_log):
    """beta's card is posted while slow alpha is still working, not when the whole step ends."""
    platform = RecordingPlatform()

    def slow_alpha(messages: list[BaseMessage]) -> AIMessage:
        return AIMessage(f"alpha saw {len(platform.cards)} card(s)")

    slow = ScriptedChatModel(script=slow_alpha, delay_s=2.0)
    specs = (
        SubagentSpec(name="alpha", description="a", prompt="You are alpha.", tools=("lookup",), model="slow"),
        BETA,
    )
    async with open_service(
        db_url,
        team(to_both),
        registry,
        platform,
        subagents=specs,
        models={"slow": slow},
        default_agent=AgentKind.SUBAGENTS,
    ) as h:
        await h.service.handle_message(message("x"))
        [card] = pending(h)
        assert card.source == "beta"
        await h.service.decide(card.id, actor("alice"), Approve())
        await h.service.tasks.join()
    assert h.platform.answers[-1][1] == "answer: alpha saw 1 card(s) | beta reports: sent to x-b"


async def test_a_review_left_done_with_its_pause_pending_is_resumed(db_url, registry, tool_log):
    """A review marked done while its interrupt still waits (an older version did that) does not block the thread forever.

    Such a conversation comes from before migration 0012, so it is not `settled` and its next
    message settles it the long way."""
    async with open_service(db_url, team(to_alpha), registry, subagents=SPECS, default_agent=AgentKind.SUBAGENTS) as h:
        await h.service.handle_message(message("bob"))
        [card] = pending(h)
        entry = approval_entry(AuditKind.DECISION, card, "approve", actor=actor("alice"))
        await h.approvals.vote(card.id, actor=actor("alice"), kind=VoteKind.APPROVE, quorum=1, audit=entry)
        await h.database.pool.execute("UPDATE reviews SET status = 'done' WHERE id = $1::uuid", card.review_id)
        await h.database.pool.execute("UPDATE conversations SET settled = false")  # as migration 0012 leaves it
        await h.service.handle_message(message("hello?"))
        await h.service.tasks.join()
        [fresh] = await h.approvals.pending_in_thread(conversation().thread_id)
    assert tool_log.calls == [("send", {"to": "bob", "body": "alpha", "urgent": False})]
    assert [text for _, text in h.platform.answers] == ["answer: alpha reports: sent to bob"]
    assert fresh.proposed_args["to"] == "hello?"  # the new message reached the agent
    assert not any(isinstance(n, ReviewPending) for _, n, _ in h.platform.notices)


async def test_a_restart_between_card_and_click_inside_a_subagent(db_url, registry, tool_log):
    """The bot stops with a subagent's card waiting; after a start the click resumes the subagent in place."""
    model = team(to_alpha)
    async with open_service(db_url, model, registry, subagents=SPECS, default_agent=AgentKind.SUBAGENTS) as h:
        await h.service.handle_message(message("bob"))
        [card] = pending(h)
    fresh = team(to_alpha)
    async with open_service(db_url, fresh, registry, subagents=SPECS, default_agent=AgentKind.SUBAGENTS) as h:
        await h.service.decide(card.id, actor("alice"), Approve())
        await h.service.tasks.join()
    assert tool_log.calls == [("send", {"to": "bob", "body": "alpha", "urgent": False})]
    assert [role(p) for p in fresh.prompts] == ["alpha", "supervisor"]  # continued, not restarted
    assert h.platform.answers[-1][1] == "answer: alpha reports: sent to bob"


async def test_a_claimed_review_is_resumed_after_a_restart(db_url, registry, tool_log):
    """Decided, then the bot died before resuming: the next start resumes the subagent by itself."""
    model = team(to_alpha)
    async with open_service(db_url, model, registry, subagents=SPECS, default_agent=AgentKind.SUBAGENTS) as h:
        await h.service.handle_message(message("bob"))
        [card] = pending(h)
        # Record the decision the way a click does, without the resume that follows it.
        entry = approval_entry(AuditKind.DECISION, card, "approve", actor=actor("alice"))
        result = await h.approvals.vote(card.id, actor=actor("alice"), kind=VoteKind.APPROVE, quorum=1, audit=entry)
        assert result.review_complete
    fresh = team(to_alpha)
    async with open_service(db_url, fresh, registry, subagents=SPECS, default_agent=AgentKind.SUBAGENTS) as h:
        await h.service.recover()
        await h.service.tasks.join()
        review = await h.approvals.review(card.review_id)
    assert tool_log.calls == [("send", {"to": "bob", "body": "alpha", "urgent": False})]
    assert review is not None and review.status is ReviewStatus.DONE
    assert h.platform.answers[-1][1] == "answer: alpha reports: sent to bob"


async def test_expiry_inside_a_subagent(db_url, registry, tool_log):
    """A subagent's card expires: the call is rejected as expired, the requester told, the turn finishes."""
    model = team(to_alpha)
    platform = RecordingPlatform(admins={ADMIN})
    async with open_service(db_url, model, registry, platform, subagents=SPECS, default_agent=AgentKind.SUBAGENTS) as h:
        await admin(h, registry).execute(actor(ADMIN), SetExpiry(seconds=3600), here="C1")
        await h.service.handle_message(message("bob", user="alice"))
        [card] = pending(h)
        await h.database.pool.execute("UPDATE approvals SET expires_at = now() WHERE id = $1", card.id)
        h.service.expiry.wake()
        await until(lambda: bool(h.platform.answers))
        await h.service.tasks.join()
        stored = await h.approvals.get(card.id)
    assert stored is not None and stored.status is ApprovalStatus.EXPIRED
    assert tool_log.calls == []
    assert any(isinstance(n, ApprovalExpired) and who == "alice" for _, n, who in h.platform.notices)
    assert h.platform.answers[-1][1] == "answer: alpha reports: Rejected: expired without a decision."


@pytest.mark.parametrize(
    "after_restart",
    [
        pytest.param((BETA,), id="subagent-removed"),
        pytest.param(
            (SubagentSpec(name="alpha", description="a", prompt="You are alpha.", tools=("lookup",)), BETA),
            id="tool-removed",
        ),
    ],
)
async def test_a_card_that_can_no_longer_run_is_rejected_when_approved(
    db_url, registry, tool_log, caplog, after_restart
):
    """After a restart without the card's subagent (or its tool): a warning at start; Approve records a rejection that says why."""
    async with open_service(db_url, team(to_alpha), registry, subagents=SPECS, default_agent=AgentKind.SUBAGENTS) as h:
        await h.service.handle_message(message("bob"))
        [card] = pending(h)
    model = team(to_alpha)
    async with open_service(db_url, model, registry, subagents=after_restart, default_agent=AgentKind.SUBAGENTS) as h:
        with caplog.at_level("WARNING", logger="bot.service"):
            await h.service.recover()
        decided = await h.service.decide(card.id, actor("alice"), Approve())
        await h.service.tasks.join()
        audit = await h.audit.recent(WORKSPACE)
    assert decided.status is ApprovalStatus.REJECTED and decided.reason == NO_LONGER_CONFIGURED
    assert tool_log.calls == []
    assert f"card {card.id} waits for subagent alpha's tool send, which is no longer configured" in caplog.text
    assert any(e.approval_id == card.id and e.outcome == "rejected" for e in audit)
    assert h.platform.answers  # the turn finished; the supervisor answered


# --- the ledger fails closed at any depth -----------------------------------------------------


async def test_a_subagent_call_with_other_arguments_than_approved_does_not_run(db_url, registry, tool_log):
    """The card was approved for bob; a resume that edits the call to eve (bypassing the card) runs nothing."""
    model = team(to_alpha)
    async with open_service(db_url, model, registry, subagents=SPECS, default_agent=AgentKind.SUBAGENTS) as h:
        conv = conversation()
        await h.service.handle_message(message("bob"))
        [card] = pending(h)
        graph = h.graph(conv, AgentKind.SUBAGENTS)
        state = await graph.aget_state({"configurable": {"thread_id": conv.thread_id}})
        [interrupt] = state.interrupts
        # The approval of bob is recorded, then someone resumes the graph directly with other arguments.
        entry = approval_entry(AuditKind.DECISION, card, "approve", actor=actor("alice"))
        await h.approvals.vote(card.id, actor=actor("alice"), kind=VoteKind.APPROVE, quorum=1, audit=entry)
        edit = {"type": "edit", "edited_action": {"name": "send", "args": {"to": "eve", "body": "alpha"}}}
        cfg = {"configurable": {"thread_id": conv.thread_id}, "recursion_limit": 25}
        result = await graph.ainvoke(Command(resume={interrupt.id: {"decisions": [edit]}}), cfg)
    assert tool_log.calls == []
    assert prompts.NOT_APPROVED_MESSAGE in result["messages"][-2].content


async def test_a_reviewed_subagent_call_without_a_stored_decision_does_not_run(db_url, registry, tool_log):
    """Resuming a subagent's pause directly, with no review stored at all, runs nothing: nothing decided it."""
    model = team(to_alpha)
    async with open_service(db_url, model, registry, subagents=SPECS) as h:
        conv = conversation()
        await h.database.pool.execute(
            "INSERT INTO conversations (thread_id, platform, workspace_id, channel_id, agent) "
            "VALUES ($1, 'test', 'W1', 'C1', 'subagents')",
            conv.thread_id,
        )
        graph = h.graph(conv, AgentKind.SUBAGENTS)
        cfg = {"configurable": {"thread_id": conv.thread_id}, "recursion_limit": 25}
        first = await graph.ainvoke({"messages": [HumanMessage("bob")]}, cfg)
        [interrupt] = first["__interrupt__"]
        result = await graph.ainvoke(Command(resume={interrupt.id: {"decisions": [{"type": "approve"}]}}), cfg)
    assert tool_log.calls == []
    assert prompts.NOT_APPROVED_MESSAGE in result["messages"][-2].content


async def test_a_policy_naming_a_subagent_says_it_is_not_a_tool(db_url, registry):
    """`policy alpha review` is refused with a reason that says alpha is a subagent; nothing changes."""
    async with open_service(db_url, team(to_alpha), registry, RecordingPlatform(admins={ADMIN}), subagents=SPECS) as h:
        with pytest.raises(CommandError, match="`alpha` is a subagent, not a tool"):
            await h.admin.execute(actor(ADMIN), SetPolicy(tool="alpha", mode=Mode.REVIEW), here="C1")
        audit = await h.audit.recent(WORKSPACE)
    assert not [e for e in audit if e.kind is AuditKind.CONFIG]


async def test_a_pause_not_stored_in_time_gets_its_card_at_the_end_of_the_run(db_url, registry, tool_log, monkeypatch):
    """The supervisor's checkpoint never showed a subagent's pause during the run: its card is posted once the run is over, and works.

    The supervisor writes its checkpoints in the background (`durability="async"`), so the
    runner looks for each pause in the checkpoint before opening its review (`_pause_stored`);
    one never seen there in time is opened by the run's end.
    """
    looked: list[str] = []

    async def never_stored(self, conversation, graph, interrupt) -> bool:
        looked.append(interrupt.id)
        return False

    monkeypatch.setattr(TurnRunner, "_pause_stored", never_stored)
    model = team(to_alpha)
    async with open_service(db_url, model, registry, subagents=SPECS, default_agent=AgentKind.SUBAGENTS) as h:
        await h.service.handle_message(message("bob", user="alice", message_id="14.1"))
        [card] = pending(h)
        assert looked and not await h.database.pool.fetchval(
            "SELECT running_since IS NOT NULL FROM conversations WHERE thread_id = $1", conversation().thread_id
        )  # the card is the run's delivered outcome
        await h.service.decide(card.id, actor("alice"), Approve())
        await h.service.tasks.join()
    assert len(h.platform.cards) == 1
    assert tool_log.calls == [("send", {"to": "bob", "body": "alpha", "urgent": False})]
    assert h.platform.answers[-1][1] == "answer: alpha reports: sent to bob"
