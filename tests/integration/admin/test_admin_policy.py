"""Admin configuration on a real PostgreSQL: commands, policy, approvers, quorum, expiry."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, ToolMessage
from pydantic import SecretStr

from bot.admin.commands import (
    ChangeAdmins,
    ChangeApprovers,
    SetCards,
    SetExpiry,
    SetPolicy,
    SetQuorum,
    SetScope,
    SetSelfApproval,
    Show,
    ShowAudit,
)
from bot.admin.parse import CommandError, parse_command
from bot.admin.service import AdminService
from bot.admin.views import AuditPage, Changed, PolicyView
from bot.audit.entries import AuditEntry, AuditKind
from bot.base.errors import AlreadyVotedError, NotPermittedError
from bot.base.mode import Mode
from bot.policy.conditions import InvalidConditionError
from bot.policy.config import ApproverKind, CardRouting, ConversationScope
from bot.ports import ApprovalExpired, CardsElsewhere
from bot.reviews.decisions import Approve, Edit, EditedAction, Reject
from bot.reviews.lifecycle import ApprovalStatus, ReviewStatus
from bot.reviews.store import VoteKind
from bot.settings import ToolSettings
from bot.tools.builtin import builtin_tools
from bot.tools.registry import ToolRegistry
from tests.support.barriers import wait_until
from tests.support.recording_platform import RecordingPlatform
from tests.support.scripted_model import ScriptedChatModel, calls, tool_call
from tests.support.service import WORKSPACE, actor, conversation, message, open_service

ADMIN = "boss"


def admin_service(h, registry) -> AdminService:
    return AdminService(config=h.config, audit=h.audit, registry=registry, directory_for=lambda name: h.platform)


def send(to: str = "bob", body: str = "hi"):
    return tool_call("send", {"to": to, "body": body})


async def configure(h, registry, *commands, who: str = ADMIN):
    service = admin_service(h, registry)
    return [await service.execute(actor(who), c, here="C1") for c in commands]


def pending(h):
    return [c.approval for c in h.platform.cards.values() if c.approval.status is ApprovalStatus.PENDING]


# --- commands and permissions -------------------------------------------------------------


async def test_setting_what_is_already_there_changes_nothing_and_is_not_audited(db_url, registry):
    """`policy send default` with no rule, or the same quorum twice: "nothing to change", no audit row."""
    async with open_service(db_url, ScriptedChatModel(replies=[]), registry, RecordingPlatform(admins={ADMIN})) as h:
        first = await configure(h, registry, parse_command("policy send default"), parse_command("quorum send 2"))
        again = await configure(h, registry, parse_command("quorum send 2"), parse_command("policy lookup deny"))
        same = await configure(h, registry, parse_command("policy lookup deny"))
        rows = await h.database.pool.fetchval("SELECT count(*) FROM audit_log WHERE kind = 'config'")
    assert [r.changed for r in first + again + same] == [False, True, False, True, False]
    assert rows == 2


async def test_each_command_changes_the_configuration_and_is_audited(db_url, registry):
    """Every configuring command changes what `show` reports and leaves a config audit row with before/after."""
    model = ScriptedChatModel(replies=[])
    async with open_service(db_url, model, registry, RecordingPlatform(admins={ADMIN})) as h:
        replies = await configure(
            h,
            registry,
            parse_command("policy send review when args.to != 'team'"),
            parse_command("policy lookup deny in <#C9|ops>"),
            parse_command("approvers add <@UCAROL> for send"),
            parse_command("approvers add <!subteam^S1|@ops>"),
            parse_command("admins add <@UDAVE>"),
            parse_command("quorum send 2"),
            parse_command("self-approval off for send"),
            parse_command("expiry 30m"),
            parse_command("expiry off for send"),
            parse_command("cards channel <#C5|approvals>"),
            parse_command("scope channel in <#C9>"),
        )
        assert all(isinstance(r, Changed) and r.changed for r in replies)
        view = (await configure(h, registry, Show(channel_id="C9")))[0]
        assert isinstance(view, PolicyView)
        lines = {t.tool: t for t in view.tools}
        assert (lines["send"].mode, lines["send"].condition, lines["send"].source) == (
            Mode.REVIEW,
            "args.to != 'team'",
            "workspace",
        )
        assert (lines["lookup"].mode, lines["lookup"].source) == (Mode.DENY, "channel")
        assert (lines["wipe"].mode, lines["wipe"].source) == (Mode.DENY, "built-in")
        assert lines["send"].quorum == 2 and not lines["send"].self_approval and lines["send"].expiry_s is None
        assert [a.subject_id for a in lines["send"].approvers] == ["UCAROL"]
        assert [a.subject_id for a in view.workspace_approvers] == ["S1"]
        assert view.admins == ("UDAVE",) and view.expiry_s == 1800
        assert view.cards.routing is CardRouting.CHANNEL and view.cards.channel_id == "C5"
        assert view.scope is ConversationScope.CHANNEL
        elsewhere = (await configure(h, registry, Show(channel_id="C1")))[0]
        assert {t.tool: t.mode for t in elsewhere.tools}["lookup"] is Mode.AUTO
        audit = await h.audit.recent(WORKSPACE, limit=50)
    configs = [e for e in audit if e.kind is AuditKind.CONFIG]
    assert len(configs) == 11
    assert all(e.actor_id == ADMIN for e in configs)
    policy_row = next(e for e in configs if e.outcome == "policy" and e.tool_name == "send")
    assert policy_row.detail["before"] is None and policy_row.detail["after"]["mode"] == "review"


async def test_default_restores_the_built_in_and_removals_work(db_url, registry):
    """`policy <tool> default`, `approvers remove` and `admins remove` undo changes; repeating one changes nothing."""
    async with open_service(db_url, ScriptedChatModel(), registry, RecordingPlatform(admins={ADMIN})) as h:
        await configure(h, registry, SetPolicy(tool="lookup", mode=Mode.REVIEW), ChangeAdmins(add=True, user_id="UD"))
        [back, gone, again] = await configure(
            h,
            registry,
            SetPolicy(tool="lookup", mode=None),
            ChangeAdmins(add=False, user_id="UD"),
            ChangeAdmins(add=False, user_id="UD"),
        )
        view = (await configure(h, registry, Show()))[0]
    assert back.before == "review" and back.after is None
    assert gone.changed and not again.changed
    assert {t.tool: t.source for t in view.tools}["lookup"] == "built-in" and view.admins == ()


@pytest.mark.parametrize(
    "command",
    [
        SetPolicy(tool="send", mode=Mode.AUTO),
        ChangeApprovers(add=True, kind=ApproverKind.USER, subject_id="U1"),
        ChangeAdmins(add=True, user_id="U1"),
        SetQuorum(tool="send", count=2),
        SetSelfApproval(allowed=False),
        SetExpiry(seconds=60),
        SetCards(routing=CardRouting.DM),
        SetScope(scope=ConversationScope.CHANNEL),
        ShowAudit(),
    ],
)
async def test_non_admins_are_refused_and_nothing_changes(db_url, registry, command):
    """Everything but help and show is refused for non-admins, audited, and changes nothing."""
    async with open_service(db_url, ScriptedChatModel(), registry, RecordingPlatform(admins={ADMIN})) as h:
        with pytest.raises(NotPermittedError) as refused:
            await configure(h, registry, command, who="mallory")
        assert refused.value.reason == "not_an_admin"
        assert isinstance((await configure(h, registry, Show(), who="mallory"))[0], PolicyView)
        rows = await h.database.pool.fetchval(
            "SELECT (SELECT count(*) FROM tool_policies) + (SELECT count(*) FROM approvers) + "
            "(SELECT count(*) FROM bot_admins) + (SELECT count(*) FROM settings)"
        )
        audit = await h.audit.recent(WORKSPACE)
    assert rows == 0
    assert [(e.kind, e.outcome, e.actor_id) for e in audit] == [(AuditKind.REFUSED, "not_an_admin", "mallory")]


async def test_bot_admins_may_configure(db_url, registry):
    """A user added with `admins add` may configure even though the platform says they are no admin."""
    async with open_service(db_url, ScriptedChatModel(), registry, RecordingPlatform(admins={ADMIN})) as h:
        await configure(h, registry, ChangeAdmins(add=True, user_id="helper"))
        [changed] = await configure(h, registry, SetQuorum(tool="send", count=3), who="helper")
    assert changed.after == 3


@pytest.mark.parametrize(
    ("text", "error", "expected"),
    [
        ("policy teleport review", CommandError, "unknown tool `teleport`"),
        ("policy send review when args.to ==", InvalidConditionError, "not a valid CEL expression"),
        ("policy send review when args.recipient == 'x'", InvalidConditionError, "no argument 'recipient'"),
        ("policy send review when secrets.key == 'x'", InvalidConditionError, "unknown name 'secrets'"),
        ("quorum nothing 2", CommandError, "unknown tool"),
        ("approvers add <@U1> for nothing", CommandError, "unknown tool"),
    ],
)
async def test_invalid_settings_are_refused_at_save(db_url, registry, text, error, expected):
    """An unknown tool, an invalid condition or an unknown argument name is refused with the reason; nothing is stored."""
    async with open_service(db_url, ScriptedChatModel(), registry, RecordingPlatform(admins={ADMIN})) as h:
        with pytest.raises(error, match=expected):
            await configure(h, registry, parse_command(text))
        assert await h.database.pool.fetchval("SELECT count(*) FROM tool_policies") == 0


@pytest.mark.parametrize(
    ("tool", "condition", "expected"),
    [
        (
            "http_request",
            "has(args.headers) && 'X-Sudo' in args.headers",
            "header names are compared in lower case: write 'x-sudo'",
        ),
        ("http_request", "args.method == 'delete'", "methods are compared in upper case: write 'DELETE'"),
        (
            "send_email",
            "args.to.exists(a, a == 'Bob@X.example')",
            "addresses are compared in lower case: write 'bob@x.example'",
        ),
    ],
)
async def test_a_condition_that_could_never_match_the_canonical_case_is_refused_at_save(
    db_url, tool, condition, expected
):
    """A header name or an address in capitals, a method in small letters: refused with what to write; the fix is saved."""
    registry = ToolRegistry(builtin_tools(ToolSettings(smtp_url=SecretStr("smtp://mail.example:25"))))
    async with open_service(db_url, ScriptedChatModel(), registry, RecordingPlatform(admins={ADMIN})) as h:
        with pytest.raises(InvalidConditionError) as refused:
            await configure(h, registry, parse_command(f"policy {tool} review when {condition}"))
        assert refused.value.message == expected
        assert await h.database.pool.fetchval("SELECT count(*) FROM tool_policies") == 0
        fixed = condition.replace("'X-Sudo'", "'x-sudo'").replace("'delete'", "'DELETE'").replace("Bob@X", "bob@x")
        [changed] = await configure(h, registry, parse_command(f"policy {tool} review when {fixed}"))
        assert isinstance(changed, Changed) and changed.changed
        assert await h.database.pool.fetchval("SELECT condition FROM tool_policies") == fixed


async def test_audit_filters_by_tool_and_user(db_url, registry):
    """`audit` lists decisions and changes newest first, filtered by tool and user."""
    model = ScriptedChatModel(replies=[calls(send()), AIMessage("done")])
    async with open_service(db_url, model, registry, RecordingPlatform(admins={ADMIN})) as h:
        await configure(h, registry, SetQuorum(tool="lookup", count=2))
        await h.service.handle_message(message("send"))
        [approval] = pending(h)
        await h.service.decide(approval.id, actor("alice"), Approve())
        await h.service.tasks.join()
        [by_tool] = await configure(h, registry, ShowAudit(tool="send"))
        [by_user] = await configure(h, registry, ShowAudit(user_id=ADMIN))
    assert isinstance(by_tool, AuditPage)
    assert [(e.kind, e.outcome) for e in by_tool.entries] == [(AuditKind.DECISION, "approved")]
    assert [(e.kind, e.outcome, e.tool_name) for e in by_user.entries] == [(AuditKind.CONFIG, "quorum", "lookup")]


# --- policy in action -----------------------------------------------------------------------


async def test_a_condition_routes_get_past_review_and_post_to_review(db_url, tool_log):
    """`policy fetch review when args.method != 'GET'`: a GET runs at once, a POST waits for a card."""
    from langchain_core.tools import tool

    from bot.tools.registry import ToolRegistry, ToolSpec

    @tool
    async def fetch(method: str, url: str) -> str:
        """Fetch a URL."""
        tool_log.calls.append(("fetch", {"method": method, "url": url}))
        return "ok"

    registry = ToolRegistry([ToolSpec(tool=fetch, default_mode=Mode.AUTO)])
    replies = [
        calls(tool_call("fetch", {"method": "GET", "url": "u"})),
        AIMessage("got it"),
        calls(tool_call("fetch", {"method": "POST", "url": "u"})),
    ]
    async with open_service(
        db_url, ScriptedChatModel(replies=replies), registry, RecordingPlatform(admins={ADMIN})
    ) as h:
        await configure(h, registry, parse_command("policy fetch review when \"args.method != 'GET'\""))
        await h.service.handle_message(message("get"))
        assert tool_log.calls == [("fetch", {"method": "GET", "url": "u"})]
        assert pending(h) == []
        await h.service.handle_message(message("post"))
        [card] = pending(h)
    assert card.proposed_args["method"] == "POST"
    assert len(tool_log.calls) == 1


async def test_a_condition_that_fails_at_run_time_requires_review(db_url, tool_log, registry):
    """A condition reading an argument the call lacks fails closed: the call needs review."""
    replies = [calls(tool_call("lookup", {"query": "x"}))]
    async with open_service(
        db_url, ScriptedChatModel(replies=replies), registry, RecordingPlatform(admins={ADMIN})
    ) as h:
        await configure(h, registry, parse_command("policy lookup review when args.query.missing == 1"))
        await h.service.handle_message(message("look"))
        assert [a.tool_name for a in pending(h)] == ["lookup"]
    assert tool_log.calls == []


async def test_a_denied_tool_is_rejected_by_policy_without_a_card(db_url, registry, tool_log):
    """`policy send deny`: no card, the model reads that policy rejected it."""
    model = ScriptedChatModel(replies=[calls(send()), AIMessage("cannot send")])
    async with open_service(db_url, model, registry, RecordingPlatform(admins={ADMIN})) as h:
        await configure(h, registry, SetPolicy(tool="send", mode=Mode.DENY))
        await h.service.handle_message(message("send"))
    assert h.platform.cards == {} and tool_log.calls == []
    assert any(isinstance(m, ToolMessage) and "Rejected by policy" in m.content for m in model.prompts[-1])
    assert h.platform.answers[-1][1] == "cannot send"


async def test_a_policy_change_while_a_card_waits_does_not_shift_decisions(db_url, registry, tool_log):
    """A tool beside a waiting card switched to review: the decision still applies to the reviewed call.

    The waiting `auto` call is read against the policy again before it runs; now needing
    review, it is not run and the model is told to call it again (no card appears out of
    turn, and no decision moves to another call).
    """
    model = ScriptedChatModel(replies=[calls(tool_call("lookup", {"query": "a"}), send()), AIMessage("done")])
    async with open_service(db_url, model, registry, RecordingPlatform(admins={ADMIN})) as h:
        await h.service.handle_message(message("both"))
        [card] = pending(h)
        await configure(h, registry, SetPolicy(tool="lookup", mode=Mode.REVIEW))
        await h.service.decide(card.id, actor("alice"), Reject(message="no"))
        await h.service.tasks.join()
    assert tool_log.calls == []
    results = {m.name: str(m.content) for m in model.prompts[-1] if m.type == "tool"}
    assert "now needs approval" in results["lookup"] and "no" in results["send"]


async def test_approving_a_call_whose_tool_is_now_denied_rejects_it(db_url, registry, tool_log):
    """The policy is evaluated again at decision time: a tool switched to deny is rejected by policy."""
    model = ScriptedChatModel(replies=[calls(send()), AIMessage("ok")])
    async with open_service(db_url, model, registry, RecordingPlatform(admins={ADMIN})) as h:
        await h.service.handle_message(message("send"))
        [card] = pending(h)
        await configure(h, registry, SetPolicy(tool="send", mode=Mode.DENY))
        decided = await h.service.decide(card.id, actor("alice"), Approve())
        await h.service.tasks.join()
    assert decided.status is ApprovalStatus.REJECTED and "denied by policy" in (decided.reason or "")
    assert tool_log.calls == []


# --- approvers, self-approval, quorum --------------------------------------------------------


async def test_approver_lists_replace_the_default(db_url, registry, tool_log):
    """With an approver list, an admin who is not listed is refused and a listed group member decides."""
    model = ScriptedChatModel(replies=[calls(send()), AIMessage("done")])
    platform = RecordingPlatform(admins={ADMIN}, groups={"S_OPS": {"olga"}})
    async with open_service(db_url, model, registry, platform) as h:
        await configure(
            h, registry, ChangeApprovers(add=True, kind=ApproverKind.GROUP, subject_id="S_OPS", tool="send")
        )
        await h.service.handle_message(message("send", user="alice"))
        [card] = pending(h)
        with pytest.raises(NotPermittedError, match="not_an_approver"):
            await h.service.decide(card.id, actor(ADMIN), Approve())
        await h.service.decide(card.id, actor("olga"), Approve())
        await h.service.tasks.join()
    assert len(tool_log.calls) == 1


async def test_self_approval_off_forbids_the_requester(db_url, registry, tool_log):
    """With self-approval off, the requester's approval is refused; an admin's is accepted."""
    model = ScriptedChatModel(replies=[calls(send()), AIMessage("done")])
    async with open_service(db_url, model, registry, RecordingPlatform(admins={ADMIN})) as h:
        await configure(h, registry, SetSelfApproval(allowed=False))
        await h.service.handle_message(message("send", user="alice"))
        [card] = pending(h)
        with pytest.raises(NotPermittedError, match="self_approval_off"):
            await h.service.decide(card.id, actor("alice"), Approve())
        await h.service.decide(card.id, actor(ADMIN), Approve())
        await h.service.tasks.join()
    assert len(tool_log.calls) == 1


async def test_quorum_of_two_counts_a_double_click_once(db_url, registry, tool_log):
    """Quorum 2: the same person twice counts once (refused); a second person decides; the card shows the tally."""
    model = ScriptedChatModel(replies=[calls(send()), AIMessage("done")])
    async with open_service(db_url, model, registry, RecordingPlatform(admins={ADMIN, "carol"})) as h:
        await configure(h, registry, SetQuorum(tool="send", count=2))
        await h.service.handle_message(message("send", user="alice"))
        [card] = pending(h)
        first = await h.service.decide(card.id, actor("alice"), Approve())
        assert first.is_pending and first.votes == ("alice",) and first.quorum == 2
        results = await asyncio.gather(
            h.service.decide(card.id, actor("alice"), Approve()),
            h.service.decide(card.id, actor("alice"), Approve()),
            return_exceptions=True,
        )
        assert all(isinstance(r, AlreadyVotedError) for r in results)
        await h.service.tasks.join()
        assert tool_log.calls == []
        assert h.platform.updates[-1].approval.votes == ("alice",)
        done = await h.service.decide(card.id, actor("carol"), Approve())
        await h.service.tasks.join()
    assert done.status is ApprovalStatus.APPROVED and done.votes == ("alice", "carol")
    assert len(tool_log.calls) == 1


class _ClickedWhilePosting(RecordingPlatform):
    """A platform whose `post_card` returns only after `vote` ran: a click between the post and the stored card reference."""

    vote: Callable[[str], Awaitable[object]] | None = None

    async def post_card(self, target, card):
        ref = await super().post_card(target, card)
        if self.vote is not None:
            vote, self.vote = self.vote, None
            await vote(card.approval.id)
        return ref


async def test_a_vote_made_before_the_card_reference_is_stored_is_still_drawn(db_url, registry, tool_log):
    """Quorum 2: an approval that lands while the card is being posted shows on the card ("1 of 2")."""
    model = ScriptedChatModel(replies=[calls(send()), AIMessage("done")])
    platform = _ClickedWhilePosting(admins={ADMIN})
    async with open_service(db_url, model, registry, platform) as h:
        await configure(h, registry, SetQuorum(tool="send", count=2))
        platform.vote = lambda approval_id: h.service.decide(approval_id, actor("alice"), Approve())
        await h.service.handle_message(message("send", user="alice"))
        await h.service.tasks.join()
        [card] = pending(h)
    assert card.votes == ("alice",)
    assert tool_log.calls == []


async def test_an_edit_needs_the_quorum_again_and_only_the_edited_args_run(db_url, registry, tool_log):
    """Quorum 2: an edit replaces the arguments under vote; earlier approvals no longer count."""
    model = ScriptedChatModel(replies=[calls(send("bob")), AIMessage("done")])
    async with open_service(db_url, model, registry, RecordingPlatform(admins={ADMIN, "carol"})) as h:
        await configure(h, registry, SetQuorum(tool="send", count=2))
        await h.service.handle_message(message("send", user="alice"))
        [card] = pending(h)
        await h.service.decide(card.id, actor("alice"), Approve())
        edit = Edit(edited_action=EditedAction(name="send", args={"to": "eve", "body": "hi"}))
        edited = await h.service.decide(card.id, actor(ADMIN), edit)
        assert edited.is_pending and edited.votes == (ADMIN,) and edited.args_under_vote["to"] == "eve"
        done = await h.service.decide(card.id, actor("alice"), Approve())
        await h.service.tasks.join()
    assert done.status is ApprovalStatus.EDITED
    assert [args["to"] for _, args in tool_log.calls] == ["eve"]


async def test_a_call_runs_only_with_the_approved_digest(db_url, registry, tool_log):
    """The tool node refuses a reviewed call whose arguments differ from the approved ones."""
    model = ScriptedChatModel(replies=[calls(send("bob")), AIMessage("refused")])
    async with open_service(db_url, model, registry) as h:
        await h.service.handle_message(message("send"))
        [card] = pending(h)
        assert card.tool_call_id is not None
        claim = await h.ledger.claim(
            thread_id=card.thread_id,
            tool_call_id=card.tool_call_id,
            tool_name="send",
            args={"to": "bob", "body": "hi"},
            reviewed=True,
        )
        assert claim.value == "not_approved"  # still pending
        await h.service.decide(card.id, actor("alice"), Approve())
        other = await h.ledger.claim(
            thread_id=card.thread_id,
            tool_call_id=card.tool_call_id,
            tool_name="send",
            args={"to": "mallory", "body": "x"},
            reviewed=True,
        )
        await h.service.tasks.join()
    assert other.value == "not_approved"
    assert len(tool_log.calls) == 1


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(
    quorum=st.integers(1, 3),
    votes=st.lists(
        st.tuples(st.sampled_from(["ann", "ben", "cid", "dan"]), st.sampled_from(["approve", "edit-a", "edit-b"])),
        min_size=1,
        max_size=7,
    ),
)
async def test_property_no_vote_sequence_decides_without_the_quorum(db_url, registry, quorum, votes):
    """For any sequence of approvals and edits, an approval is decided only once `quorum` different people approved the same arguments."""
    model = ScriptedChatModel(script=lambda msgs: calls(send()) if len(msgs) == 2 else AIMessage("ok"))
    async with open_service(db_url, model, registry, RecordingPlatform()) as h:
        where = conversation(f"P-{uuid.uuid4().hex}")  # each example its own conversation
        await h.service.handle_message(message("send", conv=where))
        [card] = await h.approvals.pending_in_thread(where.thread_id)
        support: dict[str, set[str]] = {}  # approvals per version of the arguments
        current = "proposal"
        for voter, kind in votes:
            entry = AuditEntry(kind=AuditKind.DECISION, workspace_id=WORKSPACE, outcome="x")
            version = current if kind == "approve" else kind
            try:
                if kind == "approve":
                    result = await h.approvals.vote(
                        card.id, actor=actor(voter), kind=VoteKind.APPROVE, quorum=quorum, audit=entry
                    )
                else:
                    result = await h.approvals.vote(
                        card.id,
                        actor=actor(voter),
                        kind=VoteKind.EDIT,
                        quorum=quorum,
                        audit=entry,
                        args={"to": kind, "body": "x"},
                    )
            except AlreadyVotedError:
                assert kind == "approve" and voter in support.get(version, set())
                continue
            current = version
            support.setdefault(current, set()).add(voter)
            if result.decided:
                assert len(support[current]) >= quorum
                assert result.approval.votes and len(set(result.approval.votes)) >= quorum
                break
            assert len(support[current]) < quorum
        await h.service.tasks.join()


# --- expiry -----------------------------------------------------------------------------------


async def test_expiry_fires_with_no_traffic(db_url, registry, tool_log):
    """A card expires on time with nothing else happening: Expired, requester told, model reads why."""
    model = ScriptedChatModel(replies=[calls(send()), AIMessage("it expired")])
    async with open_service(db_url, model, registry, RecordingPlatform(admins={ADMIN})) as h:
        await configure(h, registry, SetExpiry(seconds=10))
        await h.service.handle_message(message("send", user="alice"))
        [card] = pending(h)
        assert card.expires_at is not None
        await h.database.pool.execute("UPDATE approvals SET expires_at = now() + interval '1 second'")
        h.service.expiry.wake()
        await wait_until(lambda: bool(h.platform.answers), "the expiry's answer")
        await h.service.tasks.join()
        stored = await h.approvals.get(card.id)
        audit = await h.audit.recent(WORKSPACE)
    assert stored.status is ApprovalStatus.EXPIRED
    assert tool_log.calls == []
    assert any(isinstance(n, ApprovalExpired) and who == "alice" for _, n, who in h.platform.notices)
    assert h.platform.updates[-1].approval.status is ApprovalStatus.EXPIRED
    results = [str(m.content) for m in model.prompts[-1] if isinstance(m, ToolMessage)]
    assert results == ["Rejected: expired without a decision."]  # no reviewer said it
    assert h.platform.answers[-1][1] == "it expired"
    assert any(e.kind is AuditKind.EXPIRY for e in audit)


async def test_expiry_survives_a_restart(db_url, registry, tool_log):
    """A card that comes due while the bot is down expires when it starts again."""
    model = ScriptedChatModel(replies=[calls(send()), AIMessage("expired while down")])
    async with open_service(db_url, model, registry, RecordingPlatform(admins={ADMIN})) as h:
        await configure(h, registry, SetExpiry(seconds=3600))
        await h.service.handle_message(message("send"))
        [card] = pending(h)
    await _set_expiry(db_url, datetime.now(UTC) - timedelta(seconds=1))
    async with open_service(db_url, model, registry, RecordingPlatform(admins={ADMIN})) as restarted:
        await wait_until(lambda: bool(restarted.platform.answers), "the expiry's answer after the restart")
        await restarted.service.tasks.join()
        review = await restarted.approvals.review(card.review_id)
    assert (await _status(db_url, card.id)) == "expired"
    assert review.status is ReviewStatus.DONE
    assert restarted.platform.answers[-1][1] == "expired while down"
    assert tool_log.calls == []


async def _set_expiry(db_url: str, moment: datetime) -> None:
    import asyncpg

    connection = await asyncpg.connect(db_url)
    try:
        await connection.execute("UPDATE approvals SET expires_at = $1 WHERE status = 'pending'", moment)
    finally:
        await connection.close()


async def _status(db_url: str, approval_id: str) -> str:
    import asyncpg

    connection = await asyncpg.connect(db_url)
    try:
        return await connection.fetchval("SELECT status FROM approvals WHERE id = $1", approval_id)
    finally:
        await connection.close()


# --- card routing ------------------------------------------------------------------------------


async def test_cards_go_to_the_approvals_channel_with_a_line_in_the_conversation(db_url, registry):
    """`cards channel #approvals`: the card is posted there and the conversation is told where."""
    model = ScriptedChatModel(replies=[calls(send())])
    async with open_service(db_url, model, registry, RecordingPlatform(admins={ADMIN})) as h:
        await configure(h, registry, SetCards(routing=CardRouting.CHANNEL, channel_id="CAPPROVALS"))
        await h.service.handle_message(message("send"))
    [target] = h.platform.targets.values()
    assert target.channel_id == "CAPPROVALS" and target.conversation.thread_id == conversation().thread_id
    [(thread_id, notice, _)] = [n for n in h.platform.notices if isinstance(n[1], CardsElsewhere)]
    assert thread_id == conversation().thread_id and notice.channel_id == "CAPPROVALS"


async def test_cards_go_to_listed_approvers_dms(db_url, registry, tool_log):
    """`cards dm`: one copy per listed approver; deciding on one redraws every copy."""
    model = ScriptedChatModel(replies=[calls(send()), AIMessage("done")])
    async with open_service(db_url, model, registry, RecordingPlatform(admins={ADMIN})) as h:
        await configure(
            h,
            registry,
            SetCards(routing=CardRouting.DM),
            ChangeApprovers(add=True, kind=ApproverKind.USER, subject_id="carol"),
            ChangeApprovers(add=True, kind=ApproverKind.USER, subject_id="dave"),
        )
        await h.service.handle_message(message("send"))
        assert sorted(t.user_id for t in h.platform.targets.values()) == ["carol", "dave"]
        approval_id = next(iter(h.platform.cards.values())).approval.id
        await h.service.decide(approval_id, actor("dave"), Approve())
        await h.service.tasks.join()
    assert all(c.approval.status is ApprovalStatus.APPROVED for c in h.platform.cards.values())
    assert len(h.platform.updates) == 2


async def test_dm_cards_reach_group_members_but_not_a_requester_who_may_not_approve(db_url, registry):
    """`cards dm` with a user group: each member gets a copy, once; with self-approval off, not the requester."""
    model = ScriptedChatModel(replies=[calls(send())])
    platform = RecordingPlatform(admins={ADMIN}, groups={"SOPS": {"alice", "carol", "erin"}})
    async with open_service(db_url, model, registry, platform) as h:
        await configure(
            h,
            registry,
            SetCards(routing=CardRouting.DM),
            SetSelfApproval(allowed=False),
            ChangeApprovers(add=True, kind=ApproverKind.USER, subject_id="carol"),
            ChangeApprovers(add=True, kind=ApproverKind.GROUP, subject_id="SOPS"),
        )
        await h.service.handle_message(message("send", user="alice"))
    assert sorted(t.user_id for t in h.platform.targets.values()) == ["carol", "erin"]
    assert [n for n in h.platform.notices if isinstance(n[1], CardsElsewhere)]


async def test_dm_routing_with_nobody_to_list_keeps_the_card_in_the_conversation(db_url, registry):
    """`cards dm` when only a role nobody can list approves: the card stays where the request was made."""
    model = ScriptedChatModel(replies=[calls(send())])
    async with open_service(db_url, model, registry, RecordingPlatform(admins={ADMIN})) as h:
        await configure(
            h,
            registry,
            SetCards(routing=CardRouting.DM),
            ChangeApprovers(add=True, kind=ApproverKind.ROLE, subject_id="777"),
        )
        await h.service.handle_message(message("send"))
    [target] = h.platform.targets.values()
    assert target.user_id is None and target.channel_id is None
    assert not [n for n in h.platform.notices if isinstance(n[1], CardsElsewhere)]
