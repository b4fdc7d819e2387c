"""Property (docs/decisions/0022): no sequence of grants, revokes, policy changes, time and calls lets a call run
without either a card decision or a live trust grant that covers exactly its tool, conversation,
requester and matched arguments.

The core service on a real PostgreSQL, each example in a workspace of its own. Steps are drawn
from: a call (requester, conversation, arguments), answered at once when it brings a card (approve,
approve and trust, or reject, by one of four people; a refused click is followed by the
requester's reject); the trust setting (up to 10 or 30 minutes, binding every argument or only
`to`, or off); quorum 1 or 2; `deny`; self-approval; an approver list; revoking a grant; and time
passing (grants moved into the past in the database, the only clock the bot reads).

The oracle is a plain model of the rules in docs/decisions/0022, written without the code's helpers: a grant
covers a call while it is neither revoked nor past its own duration or the current setting's
up-to, the setting binds no more arguments than the grant, conversation, requester and bound
values are equal, the tool is not denied, the quorum is 1, and its approver could approve the
call alone now. Every call is checked both ways: it runs without a card exactly when the oracle
finds a covering grant, and then its audit row names one.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from bot.admin.parse import CommandError, parse_command
from bot.base.conversation import Actor, ConversationRef, IncomingMessage
from bot.base.errors import CountersignError
from bot.reviews.decisions import Approve, Reject
from bot.reviews.lifecycle import ApprovalStatus
from tests.support.recording_platform import RecordingPlatform
from tests.support.scripted_model import ScriptedChatModel, calls, tool_call
from tests.support.service import open_service

ADMIN = "boss"
PEOPLE = ["alice", "bob", ADMIN, "UCAROL"]


def sender() -> ScriptedChatModel:
    def script(messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            return AIMessage("done")
        _, to, body = str(last.content).split()
        return calls(tool_call("send", {"to": to, "body": body}))

    return ScriptedChatModel(script=script)


@dataclass
class Grant:
    id: str
    conv: str
    requester: str
    matching: tuple[str, ...]
    values: dict[str, Any]
    granter: str
    duration: int
    elapsed: int = 0
    revoked: bool = False


@dataclass
class World:
    trust: tuple[int, tuple[str, ...]] | None = None
    quorum: int = 1
    deny: bool = False
    self_approval: bool = True
    approvers: set[str] = field(default_factory=set)
    grants: list[Grant] = field(default_factory=list)

    def may_approve(self, who: str, requester: str) -> bool:
        if who == requester:
            return self.self_approval
        if self.approvers:
            return who in self.approvers
        return who == ADMIN

    def covers(self, g: Grant, conv: str, requester: str, args: dict[str, Any]) -> bool:
        if g.revoked or g.elapsed >= g.duration or self.trust is None:
            return False
        up_to, wanted = self.trust
        if g.elapsed >= up_to:
            return False
        if g.matching and (not wanted or not set(wanted) <= set(g.matching)):
            return False
        if (g.conv, g.requester) != (conv, requester):
            return False
        key = {name: args.get(name) for name in g.matching} if g.matching else dict(args)
        if key != g.values:
            return False
        return not self.deny and self.quorum == 1 and self.may_approve(g.granter, requester)


call_step = st.tuples(
    st.just("call"),
    st.sampled_from(["alice", "alice", "bob"]),
    st.sampled_from(["C1", "C1", "C2"]),
    st.sampled_from(["x", "x", "y"]),
    st.sampled_from(["p", "p", "q"]),
    st.sampled_from(["approve", "trust", "trust", "reject"]),
    st.sampled_from([*PEOPLE, "alice", ADMIN]),
)
setting = st.tuples(st.sampled_from(["10m", "30m"]), st.sampled_from([(), ("to",)]))
steps = st.lists(
    st.one_of(
        *[call_step] * 5,
        *[st.tuples(st.just("again"))] * 4,
        st.tuples(st.just("setting"), st.sampled_from(["10m", "30m", "off"]), st.sampled_from([(), ("to",)])),
        st.tuples(st.just("quorum"), st.sampled_from([1, 2])),
        st.tuples(st.just("deny"), st.booleans()),
        st.tuples(st.just("self"), st.booleans()),
        st.tuples(st.just("approvers"), st.booleans()),
        st.tuples(st.just("revoke"), st.integers(0, 5)),
        st.tuples(st.just("time"), st.sampled_from([5, 10, 25])),
    ),
    min_size=3,
    max_size=16,
)


@settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(initial=setting, steps=steps)
@example(
    initial=("30m", ("to",)),
    steps=[
        ("call", "alice", "C1", "x", "p", "trust", "alice"),
        ("call", "alice", "C1", "x", "q", "approve", "alice"),  # only `to` bound: runs under trust
        ("call", "bob", "C1", "x", "p", "reject", "bob"),  # another requester: a card
        ("self", False),
        ("call", "alice", "C1", "x", "p", "trust", ADMIN),  # her own trust no longer: a card; boss trusts
        ("time", 25),
        ("call", "alice", "C1", "x", "p", "approve", "alice"),  # boss's grant, 25 of 30 minutes: runs
        ("setting", "10m", ("to",)),  # the up-to shrinks below its age: a card
        ("call", "alice", "C1", "x", "p", "reject", "alice"),
    ],
)
async def test_property_nothing_runs_without_a_card_decision_or_an_exactly_covering_trust(
    db_url, registry, tool_log, initial, steps
):
    """Each call runs without a card iff a live grant covers it exactly now; trusted runs name such a grant."""
    workspace = f"W{uuid.uuid4().hex[:12]}"
    platform = RecordingPlatform(admins={ADMIN})
    world = World()
    steps = [("setting", *initial), *steps]

    def person(user: str) -> Actor:
        return Actor(platform="test", workspace_id=workspace, user_id=user, display_name=user)

    def where(channel: str) -> ConversationRef:
        return ConversationRef(platform="test", workspace_id=workspace, channel_id=channel)

    async with open_service(db_url, sender(), registry, platform) as h:

        async def admin(text: str) -> None:
            await h.admin.execute(person(ADMIN), parse_command(text), here="C1")

        def pending() -> list[Any]:
            return [
                c.approval
                for c in platform.cards.values()
                if c.approval.status is ApprovalStatus.PENDING and c.approval.workspace_id == workspace
            ]

        async def trusted_rows() -> list[Any]:
            rows = await h.database.pool.fetch(
                "SELECT detail FROM audit_log WHERE workspace_id = $1 AND outcome = 'trusted' ORDER BY id", workspace
            )
            return [row["detail"] for row in rows]

        last_call: tuple[Any, ...] | None = None
        for drawn in steps:
            step = last_call if drawn[0] == "again" and last_call is not None else drawn
            kind = step[0]
            if kind == "call":
                last_call = step
                _, requester, channel, to, body, choice, decider = step
                conv = where(channel).thread_id
                args = {"to": to, "body": body}
                covering = {g.id for g in world.grants if world.covers(g, conv, requester, args)}
                ran_before, trusted_before = len(tool_log.calls), len(await trusted_rows())
                await h.service.handle_message(
                    IncomingMessage(actor=person(requester), conversation=where(channel), text=f"send {to} {body}")
                )
                await h.service.tasks.join()
                cards = pending()
                ran = len(tool_log.calls) > ran_before
                if world.deny:
                    assert not ran and not cards, step
                    continue
                if any(g.conv == conv and g.requester == requester for g in world.grants):
                    event("a call where a grant was not enough")
                if covering:
                    event("a call ran under trust")
                    assert ran and not cards, (step, world)
                    trusted = await trusted_rows()
                    assert len(trusted) == trusted_before + 1 and trusted[-1]["trust_id"] in covering, step
                    continue
                assert not ran and len(cards) == 1, (step, world)
                [card] = cards
                decision = Reject(message="no") if choice == "reject" else Approve()
                trusting = choice == "trust"
                try:
                    decided = await h.service.decide(card.id, person(decider), decision, trust=trusting)
                except CountersignError:
                    decided = None
                await h.service.tasks.join()
                if decided is not None and decided.trust_id is not None:
                    # Only a permitted approver's single approval, where trust is set, makes a grant.
                    assert world.trust is not None and world.quorum == 1 and not world.deny
                    assert world.may_approve(decider, requester)
                    up_to, matching = world.trust
                    values = {name: args.get(name) for name in matching} if matching else dict(args)
                    world.grants.append(Grant(decided.trust_id, conv, requester, matching, values, decider, up_to))
                    event("a trust was granted")
                if decided is None or decided.is_pending:
                    await h.service.decide(card.id, person(requester), Reject(message="cleared"))
                    await h.service.tasks.join()
                assert not pending()
            elif kind == "setting":
                _, up_to, matching = step
                if up_to == "off":
                    await admin("trust send off")
                    world.trust = None
                else:
                    names = f" matching {','.join(matching)}" if matching else ""
                    await admin(f"trust send up-to {up_to}{names}")
                    world.trust = (int(up_to[:-1]), matching)
            elif kind == "quorum":
                await admin(f"quorum send {step[1]}")
                world.quorum = step[1]
            elif kind == "deny":
                await admin("policy send deny" if step[1] else "policy send default")
                world.deny = step[1]
            elif kind == "self":
                await admin(f"self-approval {'on' if step[1] else 'off'} for send")
                world.self_approval = step[1]
            elif kind == "approvers":
                await admin(f"approvers {'add' if step[1] else 'remove'} <@UCAROL> for send")
                world.approvers = {"UCAROL"} if step[1] else set()
            elif kind == "revoke" and world.grants:
                grant = world.grants[step[1] % len(world.grants)]
                try:
                    await admin(f"trust revoke {grant.id}")
                except CommandError:
                    assert grant.revoked or grant.elapsed >= grant.duration  # it had ended already
                grant.revoked = True
            elif kind == "time":
                await h.database.pool.execute(
                    "UPDATE trust_grants SET granted_at = granted_at - make_interval(mins => $2), "
                    "expires_at = expires_at - make_interval(mins => $2) WHERE workspace_id = $1",
                    workspace,
                    step[1],
                )
                for grant in world.grants:
                    grant.elapsed += step[1]
