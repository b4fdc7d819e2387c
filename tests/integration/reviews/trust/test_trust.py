"""Trust for a while (docs/decisions/0022) through the core service on a real PostgreSQL.

A scripted model sends `send(to, body)` for "send <to> <body>"; alice asks, `boss` administers.
Each test configures trust with the admin commands, then approves a card with "Approve and
trust" and checks which later calls run without a card.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from bot.admin.commands import ListTrust, RevokeTrust
from bot.admin.parse import CommandError, parse_command
from bot.admin.views import Changed, PolicyView, TrustList, TrustRevoked
from bot.agents import prompts
from bot.agents.subagent_specs import SubagentSpec
from bot.audit.entries import AuditKind
from bot.base.conversation import Actor
from bot.base.errors import AlreadyDecidedError, NotPermittedError, TrustRefusedError
from bot.reviews.decisions import Approve, Reject
from bot.reviews.lifecycle import ApprovalStatus, EscalationStatus
from bot.tools.ledger.store import Claim, TrustUse
from tests.support.barriers import wait_until_async
from tests.support.recording_platform import RecordingPlatform
from tests.support.scripted_model import ScriptedChatModel, calls, tool_call
from tests.support.service import WORKSPACE, actor, conversation, message, open_service

ADMIN = "boss"


def sender() -> ScriptedChatModel:
    """'send <to> <body>' asks for `send`; 'two <to> <body>' for two sends at once; results end the turn."""

    def script(messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            results = [str(m.content) for m in messages if isinstance(m, ToolMessage)]
            return AIMessage("done: " + " | ".join(results))
        words = str(last.content).split()
        if words[:1] == ["send"]:
            return calls(tool_call("send", {"to": words[1], "body": words[2]}))
        if words[:1] == ["two"]:
            return calls(
                tool_call("send", {"to": words[1], "body": words[2]}),
                tool_call("send", {"to": "carol", "body": "other"}),
            )
        return AIMessage("ok")

    return ScriptedChatModel(script=script)


async def admin(h, text: str, who: str = ADMIN, here: str = "C1"):
    return await h.admin.execute(actor(who), parse_command(text), here=here)


async def ask(h, text: str, *, user: str = "alice", conv=None) -> None:
    await h.service.handle_message(message(text, user=user, conv=conv))
    await h.service.tasks.join()


def pending(h):
    return [c.approval for c in h.platform.cards.values() if c.approval.status is ApprovalStatus.PENDING]


async def decide(h, approval, who: str = "alice", *, trust: bool = False):
    decided = await h.service.decide(approval.id, actor(who), Approve(), trust=trust)
    await h.service.tasks.join()
    return decided


def sent(tool_log) -> list[tuple[str, str]]:
    return [(args["to"], args["body"]) for name, args in tool_log.calls if name == "send"]


async def trusted_rows(h):
    return [e for e in await h.audit.recent(WORKSPACE, limit=100) if e.outcome == "trusted"]


async def granted(h, text: str = "send bob hi", who: str = "alice"):
    """Ask for a call and approve its card with "Approve and trust"; return the decided approval."""
    await ask(h, text)
    [card] = pending(h)
    assert card.trust_offer_s is not None
    return await decide(h, card, who, trust=True)


async def test_a_trusted_call_runs_without_a_card_and_is_audited(db_url, registry, tool_log):
    """Approve and trust: the card says so; the same call again runs at once, audited as trusted by the approver."""
    async with open_service(db_url, sender(), registry, RecordingPlatform(admins={ADMIN})) as h:
        changed = await admin(h, "trust send up-to 30m")
        assert isinstance(changed, Changed) and changed.changed
        decided = await granted(h, who=ADMIN)
        assert decided.trust_id is not None and decided.trust_s == 1800
        assert decided.status is ApprovalStatus.APPROVED
        await ask(h, "send bob hi")
        assert pending(h) == [] and sent(tool_log) == [("bob", "hi"), ("bob", "hi")]
        [row] = await trusted_rows(h)
        assert row.actor_id == ADMIN and row.detail["trust_id"] == decided.trust_id
        assert row.proposed_args == {"to": "bob", "body": "hi"}
        grant_row = next(e for e in await h.audit.recent(WORKSPACE, limit=100) if e.outcome == "trust_granted")
        assert grant_row.kind is AuditKind.DECISION and grant_row.actor_id == ADMIN
        assert grant_row.detail["requester_id"] == "alice" and grant_row.detail["matched"]["to"] == "bob"
        assert grant_row.detail["until"]
        config_row = next(e for e in await h.audit.recent(WORKSPACE, limit=100) if e.outcome == "trust")
        assert config_row.detail["after"] == {"up_to_s": 1800, "matching": []}
        assert h.platform.updates[-1].approval.trust_id == decided.trust_id  # the card was redrawn with it


async def test_other_arguments_bring_a_card_unless_only_the_named_ones_must_match(db_url, registry, tool_log):
    """All arguments bound: another body needs a card. `matching to`: another body runs, another `to` does not."""
    async with open_service(db_url, sender(), registry, RecordingPlatform(admins={ADMIN})) as h:
        await admin(h, "trust send up-to 30m")
        await granted(h)
        await ask(h, "send bob other")
        [card] = pending(h)
        await h.service.decide(card.id, actor("alice"), Reject(message="no"))
        await h.service.tasks.join()
        await admin(h, "trust send up-to 30m matching to")
        await granted(h, "send dave hi")
        await ask(h, "send dave different")
        assert pending(h) == []
        await ask(h, "send erin hi")
        assert [c.tool_name for c in pending(h)] == ["send"]
    assert sent(tool_log) == [("bob", "hi"), ("dave", "hi"), ("dave", "different")]


async def test_a_grant_binds_its_requester_and_conversation(db_url, registry, tool_log):
    """The same call by someone else, or in another conversation, brings a card."""
    async with open_service(db_url, sender(), registry, RecordingPlatform(admins={ADMIN})) as h:
        await admin(h, "trust send up-to 30m")
        await granted(h)
        await ask(h, "send bob hi", user="mallory")
        assert len(pending(h)) == 1
    async with open_service(db_url, sender(), registry, RecordingPlatform(admins={ADMIN})) as h:
        await ask(h, "send bob hi", conv=conversation(channel="C1", thread="t2"))
        assert len(pending(h)) == 1
    assert sent(tool_log) == [("bob", "hi")]


async def test_no_trust_offered_or_granted_with_a_quorum_of_two(db_url, registry, tool_log):
    """Quorum 2: the card offers no trust; a forged trust click is refused, audited, and changes nothing."""
    async with open_service(db_url, sender(), registry, RecordingPlatform(admins={ADMIN})) as h:
        await admin(h, "trust send up-to 30m")
        await admin(h, "quorum send 2")
        await ask(h, "send bob hi")
        [card] = pending(h)
        assert card.trust_offer_s is None
        with pytest.raises(TrustRefusedError) as refused:
            await h.service.decide(card.id, actor(ADMIN), Approve(), trust=True)
        assert refused.value.reason == "quorum"
        assert (await h.approvals.get(card.id)).votes == ()
        rows = [e for e in await h.audit.recent(WORKSPACE, limit=50) if e.outcome == "trust_refused"]
        assert rows and rows[0].actor_id == ADMIN
        assert await h.database.pool.fetchval("SELECT count(*) FROM trust_grants") == 0
    assert sent(tool_log) == []


async def test_quorum_raised_after_the_grant_brings_a_card(db_url, registry, tool_log):
    """A grant made at quorum 1 covers nothing once the tool needs two approvals."""
    async with open_service(db_url, sender(), registry, RecordingPlatform(admins={ADMIN})) as h:
        await admin(h, "trust send up-to 30m")
        await granted(h)
        await admin(h, "quorum send 2")
        await ask(h, "send bob hi")
        assert len(pending(h)) == 1
    assert sent(tool_log) == [("bob", "hi")]


async def test_a_denied_tool_never_runs_under_trust(db_url, registry, tool_log):
    """`policy send deny` after the grant: the call is rejected by policy, not run."""
    async with open_service(db_url, sender(), registry, RecordingPlatform(admins={ADMIN})) as h:
        await admin(h, "trust send up-to 30m")
        await granted(h)
        await admin(h, "policy send deny")
        await ask(h, "send bob hi")
        assert pending(h) == []
        assert "Rejected by policy" in h.platform.answers[-1][1]
    assert sent(tool_log) == [("bob", "hi")]


async def test_self_approval_off_ends_a_requesters_own_trust(db_url, registry, tool_log):
    """Alice trusted her own call; with self-approval off her trust no longer covers it (a card), the admin's would."""
    async with open_service(db_url, sender(), registry, RecordingPlatform(admins={ADMIN})) as h:
        await admin(h, "trust send up-to 30m")
        await granted(h, who="alice")
        await admin(h, "self-approval off for send")
        await ask(h, "send bob hi")
        [card] = pending(h)
        with pytest.raises(NotPermittedError):
            await h.service.decide(card.id, actor("alice"), Approve(), trust=True)
        await decide(h, card, ADMIN, trust=True)
        await ask(h, "send bob hi")
        assert pending(h) == []
    assert sent(tool_log) == [("bob", "hi")] * 3


async def test_an_approver_removed_from_the_list_no_longer_trusts(db_url, registry, tool_log):
    """Carol, a listed approver, granted; removed from the list, her trust covers nothing."""
    async with open_service(db_url, sender(), registry, RecordingPlatform(admins={ADMIN})) as h:
        await admin(h, "trust send up-to 30m")
        await admin(h, "approvers add <@UCAROL> for send")
        await granted(h, who="UCAROL")
        await ask(h, "send bob hi")
        assert pending(h) == []
        await admin(h, "approvers remove <@UCAROL> for send")
        await admin(h, "approvers add <@UDAVE> for send")
        await ask(h, "send bob hi")
        assert len(pending(h)) == 1
    assert sent(tool_log) == [("bob", "hi")] * 2


async def test_revoked_and_expired_grants_cover_nothing(db_url, registry, tool_log):
    """`trust revoke <id>` ends a grant at once; an expired one is listed no more and covers nothing."""
    async with open_service(db_url, sender(), registry, RecordingPlatform(admins={ADMIN})) as h:
        await admin(h, "trust send up-to 30m")
        first = await granted(h)
        listed = await admin(h, "trust list")
        assert isinstance(listed, TrustList) and [line.grant.id for line in listed.grants] == [first.trust_id]
        with pytest.raises(NotPermittedError) as refused:
            await admin(h, f"trust revoke {first.trust_id}", who="mallory")
        assert refused.value.reason == "not_a_party"
        revoked = await admin(h, f"trust revoke {first.trust_id}", who="alice")  # the requester may end it
        assert isinstance(revoked, TrustRevoked)
        with pytest.raises(CommandError, match="revoked already"):
            await admin(h, f"trust revoke {first.trust_id}")
        await ask(h, "send bob hi")
        [card] = pending(h)
        second = await decide(h, card, ADMIN, trust=True)
        await h.database.pool.execute(
            "UPDATE trust_grants SET granted_at = granted_at - interval '1 hour', "
            "expires_at = now() - interval '1 second' WHERE id = $1",
            second.trust_id,
        )
        assert (await admin(h, "trust list")).grants == ()
        await ask(h, "send bob hi")
        assert len(pending(h)) == 1
        revokes = [e for e in await h.audit.recent(WORKSPACE, limit=100) if e.outcome == "trust_revoked"]
        assert [e.actor_id for e in revokes] == ["alice"]
    assert sent(tool_log) == [("bob", "hi")] * 2


async def test_a_narrower_setting_narrows_live_grants(db_url, registry, tool_log):
    """Shortening up-to or binding more arguments applies to live grants at once; switching trust off ends them."""
    async with open_service(db_url, sender(), registry, RecordingPlatform(admins={ADMIN})) as h:
        await admin(h, "trust send up-to 30m matching to")
        await granted(h)
        await admin(h, "trust send up-to 30m")  # now every argument must match: the grant binds only `to`
        await ask(h, "send bob other")
        assert len(pending(h)) == 1
        listed = await admin(h, "trust list")
        assert [line.applies for line in listed.grants] == [False]
        [card] = pending(h)
        await h.service.decide(card.id, actor("alice"), Reject(message="no"))
        await h.service.tasks.join()
        await admin(h, "trust send up-to 30m")
        await granted(h, "send carol x")
        shown = await admin(h, "show")
        assert isinstance(shown, PolicyView) and {t.tool: t.trust for t in shown.tools}["send"].max_s == 1800
        await admin(h, "trust send off in <#C1>")
        await ask(h, "send carol x")
        assert len(pending(h)) == 1
        shown = await admin(h, "show")
        assert {t.tool: t.trust for t in shown.tools}["send"] is None
        await h.database.pool.execute("UPDATE trust_grants SET granted_at = granted_at - interval '20 minutes'")
        await admin(h, "trust send default in <#C1>")
        await admin(h, "trust send up-to 15m")  # granted 20 minutes ago: past the new up-to
        assert all(not line.applies for line in (await admin(h, "trust list")).grants)
    assert sent(tool_log) == [("bob", "hi"), ("carol", "x")]


async def test_a_grant_binds_what_its_card_said_even_if_the_setting_widened_since(db_url, registry, tool_log):
    """A card that said `to` and `body` are bound: the grant binds them though the setting was widened to `to` meanwhile."""
    async with open_service(db_url, sender(), registry, RecordingPlatform(admins={ADMIN})) as h:
        await admin(h, "trust send up-to 30m matching to,body")
        await ask(h, "send bob hi")
        [card] = [c for c in h.platform.cards.values() if c.approval.is_pending]
        assert card.trust_binds == ("to", "body") and card.trust_leaves_free == ("urgent",)
        await admin(h, "trust send up-to 30m matching to")
        decided = await decide(h, card.approval, ADMIN, trust=True)
        assert decided.trust_matching == ("body", "to")
        await ask(h, "send bob other")  # another body: the card's words bound it, so a card
        assert [c.tool_name for c in pending(h)] == ["send"]
        listed = await admin(h, "trust list")
        assert isinstance(listed, TrustList)
        [line] = listed.grants
        assert line.grant.matching == ("body", "to") and line.free == ("urgent",)


async def test_a_double_click_makes_one_grant(db_url, registry, tool_log):
    """Two "Approve and trust" clicks at once: one approval, one grant; the other click is told it was decided."""
    async with open_service(db_url, sender(), registry, RecordingPlatform(admins={ADMIN})) as h:
        await admin(h, "trust send up-to 30m")
        await ask(h, "send bob hi")
        [card] = pending(h)
        outcomes = await asyncio.gather(
            h.service.decide(card.id, actor("alice"), Approve(), trust=True),
            h.service.decide(card.id, actor(ADMIN), Approve(), trust=True),
            return_exceptions=True,
        )
        await h.service.tasks.join()
        assert sum(isinstance(o, AlreadyDecidedError) for o in outcomes) == 1
        assert await h.database.pool.fetchval("SELECT count(*) FROM trust_grants") == 1
    assert sent(tool_log) == [("bob", "hi")]


async def test_trust_revoked_while_the_call_waits_beside_a_card(db_url, registry, tool_log):
    """Two calls in one answer: the trusted one waits for the other's card; revoked meanwhile, it does not run."""
    async with open_service(db_url, sender(), registry, RecordingPlatform(admins={ADMIN})) as h:
        await admin(h, "trust send up-to 30m matching to")
        first = await granted(h)
        await ask(h, "two bob later")
        [card] = pending(h)  # carol's send needs a card; bob's is trusted
        assert card.proposed_args["to"] == "carol"
        await admin(h, f"trust revoke {first.trust_id}")
        await decide(h, card, ADMIN)
        assert prompts.TRUST_ENDED.format(name="send")[:40] in h.platform.answers[-1][1]
    assert sent(tool_log) == [("bob", "hi"), ("carol", "other")]


async def test_the_admin_commands_check_what_they_are_given(db_url, registry, tool_log):
    """Unknown tools and arguments are refused in words; non-admins cannot change trust; others list their own."""
    async with open_service(db_url, sender(), registry, RecordingPlatform(admins={ADMIN})) as h:
        with pytest.raises(CommandError, match="no argument `host`"):
            await admin(h, "trust send up-to 30m matching host")
        with pytest.raises(CommandError, match="unknown tool"):
            await admin(h, "trust nope up-to 30m")
        with pytest.raises(NotPermittedError):
            await admin(h, "trust send up-to 30m", who="alice")
        await admin(h, "trust send up-to 30m")
        await granted(h)
        mine = await h.admin.execute(actor("alice"), ListTrust(), here="C1")
        theirs = await h.admin.execute(actor("mallory"), ListTrust(), here="C1")
        assert len(mine.grants) == 1 and theirs.grants == () and not theirs.everyone
        with pytest.raises(CommandError, match="no trust"):
            await h.admin.execute(actor(ADMIN), RevokeTrust(grant_id="00000000"), here="C1")


SUBAGENT = SubagentSpec(name="ops", description="Sends.", prompt="You are ops.", tools=("send",))


def delegating() -> ScriptedChatModel:
    """The supervisor hands "send <to> <body>" to `ops`, which calls `send`."""

    def script(messages: list[BaseMessage]) -> AIMessage:
        system, last = str(messages[0].content), messages[-1]
        if system.startswith(SUBAGENT.prompt):
            if isinstance(last, ToolMessage):
                return AIMessage("ops reports: " + str(last.content))
            to, body = str(last.content).split()[1:3]
            return calls(tool_call("send", {"to": to, "body": body}))
        if isinstance(last, ToolMessage):
            return AIMessage("answer: " + str(last.content))
        return calls(tool_call("ops", {"query": str(last.content)}))

    return ScriptedChatModel(script=script)


async def test_trust_holds_inside_a_subagent(db_url, registry, tool_log):
    """A grant made on a subagent's card covers the same call by the subagent later; another requester gets a card."""
    from bot.base.agent_kind import AgentKind

    platform = RecordingPlatform(admins={ADMIN})
    async with open_service(
        db_url, delegating(), registry, platform, subagents=(SUBAGENT,), default_agent=AgentKind.SUBAGENTS
    ) as h:
        await admin(h, "trust send up-to 30m")
        await ask(h, "send bob hi")
        [card] = pending(h)
        assert card.source == "ops" and card.trust_offer_s == 1800
        await decide(h, card, ADMIN, trust=True)
        await ask(h, "send bob hi")
        assert pending(h) == []
        await ask(h, "send bob hi", user="mallory")
        assert len(pending(h)) == 1
        [row] = await trusted_rows(h)
        assert row.actor_id == ADMIN
    assert sent(tool_log) == [("bob", "hi")] * 2


async def test_a_card_that_offered_no_trust_cannot_be_trusted(db_url, registry, tool_log):
    """A card opened before trust was set offers none; a (forged) trust click on it is refused and changes nothing."""
    async with open_service(db_url, sender(), registry, RecordingPlatform(admins={ADMIN})) as h:
        await ask(h, "send bob hi")
        [card] = pending(h)
        assert card.trust_offer_s is None
        await admin(h, "trust send up-to 30m")
        with pytest.raises(TrustRefusedError) as refused:
            await h.service.decide(card.id, actor(ADMIN), Approve(), trust=True)
        assert refused.value.reason == "not_offered"
        assert (await h.approvals.get(card.id)).is_pending
        await decide(h, card, ADMIN)  # a plain approval still works
        assert await h.database.pool.fetchval("SELECT count(*) FROM trust_grants") == 0
    assert sent(tool_log) == [("bob", "hi")]


@dataclass
class HeldPlatform(RecordingPlatform):
    """A platform whose `member` lookup (the trust check asks it about the approver) can be held once."""

    hold_after: int | None = None
    """Lookups to let by before holding one; None: hold none."""
    held: asyncio.Event = field(default_factory=asyncio.Event)
    go_on: asyncio.Event = field(default_factory=asyncio.Event)

    async def member(self, workspace_id: str, user_id: str) -> Actor | None:
        if self.hold_after == 0:
            self.hold_after = None
            self.held.set()
            await self.go_on.wait()
        elif self.hold_after is not None:
            self.hold_after -= 1
        return await super().member(workspace_id, user_id)


async def test_a_stop_recorded_elsewhere_keeps_a_trusted_call_from_starting(db_url, registry, tool_log):
    """Stop beside Trust: a turn stopped (on another replica) while its trusted call was being checked runs nothing.

    Replica A plans the call as covered (`llm_call`), then checks the grant again right before
    it runs (`tool_node`); the stop is recorded on replica B while A asks the platform about the
    approver, and A's check goes on at once, before A's own watch can have heard of the stop.
    The ledger's claim reads the stop with the claim: the call does not start, its result says
    the turn was stopped, and no `trusted` run is audited.
    """
    platform = HeldPlatform(admins={ADMIN})
    async with (
        open_service(db_url, sender(), registry, platform) as a,
        open_service(db_url, sender(), registry, RecordingPlatform(admins={ADMIN})) as b,
    ):
        await admin(a, "trust send up-to 30m")
        await granted(a, who=ADMIN)
        platform.hold_after = 1  # llm_call's check passes; the one right before the run is held
        a.service.submit_message(message("send bob hi"))
        await asyncio.wait_for(platform.held.wait(), 60)
        await b.service.stop_turn(actor("alice"), conversation=conversation())
        platform.go_on.set()
        await a.service.tasks.join()
        assert pending(a) == []
        assert await trusted_rows(a) == []
        state = await a.graph(conversation()).aget_state({"configurable": {"thread_id": conversation().thread_id}})
        [*_, result] = [m for m in state.values["messages"] if isinstance(m, ToolMessage)]
        assert result.status == "error" and "stopped this turn before the call ran" in result.text
    assert sent(tool_log) == [("bob", "hi")]  # the granted card's call only


async def test_the_claim_of_a_trusted_call_reads_the_stop(db_url, registry, tool_log):
    """The ledger: a trusted call of a stopped turn is not claimed; one claimed before the stop keeps its answer."""
    async with open_service(db_url, sender(), registry, RecordingPlatform(admins={ADMIN})) as h:
        await admin(h, "trust send up-to 30m")
        await granted(h, who=ADMIN)
        grant_id = await h.database.pool.fetchval("SELECT id FROM trust_grants")
        call = {
            "thread_id": conversation().thread_id,
            "tool_name": "send",
            "args": {"to": "bob", "body": "hi"},
            "reviewed": True,
            "trust": TrustUse(grant_id=grant_id, requester_id="alice"),
        }
        assert await h.ledger.claim(tool_call_id="before", **call) is Claim.GRANTED
        await h.database.pool.execute(
            "UPDATE conversations SET stop_requested_at = now(), stopped_by_id = 'alice', stopped_by_name = 'alice' "
            "WHERE thread_id = $1",
            conversation().thread_id,
        )
        assert await h.ledger.claim(tool_call_id="after", **call) is Claim.STOPPED
        assert await h.ledger.claim(tool_call_id="before", **call) is Claim.ALREADY_STARTED  # never run twice
        assert len(await trusted_rows(h)) == 1


async def test_the_audience_of_an_escalated_card_cannot_trust_it(db_url, registry, tool_log):
    """Trust beside escalation: dave may decide the escalated card, but not trust the tool; nothing changes on refusal."""
    async with open_service(db_url, sender(), registry, RecordingPlatform(admins={ADMIN})) as h:
        await admin(h, "trust send up-to 30m")
        await admin(h, "escalate send after 10m to <@UDAVE>")
        await ask(h, "send bob hi")
        [card] = pending(h)
        assert card.trust_offer_s == 1800 and card.escalation is EscalationStatus.WAITING
        await h.database.pool.execute("UPDATE approvals SET escalate_at = now() - interval '1 second'")
        h.service.escalation.wake()
        await wait_until_async(lambda: _escalated(h, card.id), "the card escalated to dave", timeout=60)
        with pytest.raises(TrustRefusedError) as refused:
            await h.service.decide(card.id, actor("UDAVE"), Approve(), trust=True)
        assert refused.value.reason == "escalation"
        assert (await h.approvals.get(card.id)).is_pending
        decided = await decide(h, card, "UDAVE")
        assert decided.status is ApprovalStatus.APPROVED and decided.trust_id is None
        assert await h.database.pool.fetchval("SELECT count(*) FROM trust_grants") == 0
        audit = await h.audit.recent(WORKSPACE, limit=100)
        assert any(e.outcome == "trust_refused" and e.actor_id == "UDAVE" for e in audit)
    assert sent(tool_log) == [("bob", "hi")]


async def _escalated(h, approval_id: str) -> bool:
    stored = await h.approvals.get(approval_id)
    return stored is not None and stored.escalation is EscalationStatus.ESCALATED
