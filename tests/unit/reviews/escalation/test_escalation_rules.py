"""Escalation in the state machine and in who may decide (docs/decisions/0023)."""

from __future__ import annotations

import pytest

from bot.base.conversation import Actor
from bot.base.errors import NotPermittedError
from bot.policy.config import ApproverKind, ApproverRule, SettingKey, WorkspaceConfig
from bot.reviews.authorization import Standing, ensure_may_decide
from bot.reviews.escalation.rules import EscalationTarget, TargetKind
from bot.reviews.lifecycle import (
    ESCALATION_TRANSITIONS,
    ApprovalStatus,
    EscalationEvent,
    EscalationStatus,
    LifecycleError,
    batch_open,
    escalation_admits,
    escalation_after,
    escalation_sources,
)
from tests.unit.reviews.test_authorization import REQUESTER, WORKSPACE, AdminCheck, actor


def test_an_escalation_is_claimed_then_posted_and_a_dead_claim_may_be_claimed_again():
    """waiting -claim-> claimed -post-> escalated; claimed may be claimed again (lease); nothing leaves escalated."""
    assert escalation_after(EscalationStatus.WAITING, EscalationEvent.CLAIM) is EscalationStatus.CLAIMED
    assert escalation_after(EscalationStatus.CLAIMED, EscalationEvent.CLAIM) is EscalationStatus.CLAIMED
    assert escalation_after(EscalationStatus.CLAIMED, EscalationEvent.POST) is EscalationStatus.ESCALATED
    for state, event in [
        (EscalationStatus.WAITING, EscalationEvent.POST),
        (EscalationStatus.ESCALATED, EscalationEvent.CLAIM),
        (EscalationStatus.ESCALATED, EscalationEvent.POST),
    ]:
        with pytest.raises(LifecycleError):
            escalation_after(state, event)
    assert escalation_sources(EscalationEvent.CLAIM) == ["waiting", "claimed"]
    assert escalation_sources(EscalationEvent.POST) == ["claimed"]
    assert ESCALATION_TRANSITIONS[EscalationStatus.ESCALATED] == {}


@pytest.mark.parametrize("status", list(ApprovalStatus))
@pytest.mark.parametrize("escalation", [None, *EscalationStatus])
def test_the_target_may_decide_only_a_pending_call_from_the_claim_on(status, escalation):
    """The audience is admitted while the call is pending and its escalation is claimed or posted."""
    expected = status is ApprovalStatus.PENDING and escalation in {EscalationStatus.CLAIMED, EscalationStatus.ESCALATED}
    assert escalation_admits(status, escalation) is expected


def test_batch_buttons_need_two_pending_calls():
    """Approve all / Reject all: only while two or more calls of the pause wait."""
    pending, done = ApprovalStatus.PENDING, ApprovalStatus.APPROVED
    assert not batch_open([pending])
    assert not batch_open([pending, done, done])
    assert batch_open([pending, pending])
    assert batch_open([done, pending, pending])


async def _standing(who: Actor, target: EscalationTarget | None, config: WorkspaceConfig | None = None, **kw):
    return await ensure_may_decide(
        who,
        requester_id=REQUESTER,
        workspace_id=WORKSPACE,
        tool_name="send",
        decision_type=kw.get("decision", "approve"),
        config=config or WorkspaceConfig(platform="slack", workspace_id=WORKSPACE),
        directory=kw.get("check", AdminCheck("U_ADMIN", groups={"S_OPS": {"U_OPS"}})),
        escalated_to=target,
    )


async def test_each_kind_of_target_admits_its_audience_and_nobody_else():
    """A user is themselves, a group counts its members, a role the actor's roles, a channel the click's channel."""
    user = EscalationTarget(kind=TargetKind.USER, subject_id="U_DAVE")
    group = EscalationTarget(kind=TargetKind.GROUP, subject_id="S_OPS")
    role = EscalationTarget(kind=TargetKind.ROLE, subject_id="R_OPS")
    channel = EscalationTarget(kind=TargetKind.CHANNEL, subject_id="C_ESC")
    assert await _standing(actor("U_DAVE"), user) is Standing.ESCALATION
    assert await _standing(actor("U_OPS"), group) is Standing.ESCALATION
    roled = Actor(
        platform="discord", workspace_id=WORKSPACE, user_id="9", display_name="r", groups=frozenset({"R_OPS"})
    )
    assert await _standing(roled, role) is Standing.ESCALATION
    clicked = Actor(platform="slack", workspace_id=WORKSPACE, user_id="U_X", display_name="x", channel_id="C_ESC")
    assert await _standing(clicked, channel) is Standing.ESCALATION
    for who, target in [
        (actor("U_BOB"), user),
        (actor("U_BOB"), group),
        (actor("U_BOB"), role),
        (Actor(platform="slack", workspace_id=WORKSPACE, user_id="U_X", display_name="x", channel_id="C1"), channel),
        (actor("U_X"), channel),
        (actor("U_DAVE"), None),
    ]:
        with pytest.raises(NotPermittedError):
            await _standing(who, target)


async def test_the_escalation_adds_an_approver_but_changes_no_other_rule():
    """Admins stay admins, listed approvers stay approvers, a requester with self-approval off is still refused."""
    dave = EscalationTarget(kind=TargetKind.USER, subject_id=REQUESTER)
    assert await _standing(actor("U_ADMIN"), dave) is Standing.ADMIN
    listed = WorkspaceConfig(
        platform="slack",
        workspace_id=WORKSPACE,
        approvers=(ApproverRule(kind=ApproverKind.USER, subject_id="U_LISTED", tool_name="send"),),
    )
    assert await _standing(actor("U_LISTED"), dave, listed) is Standing.APPROVER
    strict = WorkspaceConfig(
        platform="slack", workspace_id=WORKSPACE, settings={("", "send", SettingKey.SELF_APPROVAL.value): False}
    )
    with pytest.raises(NotPermittedError) as refused:
        await _standing(actor(REQUESTER), dave, strict)
    assert refused.value.reason == "self_approval_off"
    assert await _standing(actor(REQUESTER), dave, strict, decision="reject") is Standing.REQUESTER
    other = Actor(platform="slack", workspace_id="T2", user_id="U_DAVE", display_name="d")
    with pytest.raises(NotPermittedError) as foreign:
        await _standing(other, EscalationTarget(kind=TargetKind.USER, subject_id="U_DAVE"))
    assert foreign.value.reason == "other_workspace"


async def test_the_escalation_audience_may_approve_or_reject_but_not_edit():
    """Only as the escalation's audience: approve and reject count, edit is refused; an approver or admin there may edit."""
    dave = EscalationTarget(kind=TargetKind.USER, subject_id="U_DAVE")
    listed = WorkspaceConfig(
        platform="slack",
        workspace_id=WORKSPACE,
        approvers=(ApproverRule(kind=ApproverKind.USER, subject_id="U_LISTED", tool_name="send"),),
    )
    for config in (None, listed):
        for decision in ("approve", "reject"):
            assert await _standing(actor("U_DAVE"), dave, config, decision=decision) is Standing.ESCALATION
        with pytest.raises(NotPermittedError) as refused:
            await _standing(actor("U_DAVE"), dave, config, decision="edit")
        assert refused.value.reason == "escalation_no_edit"
    assert await _standing(actor("U_ADMIN"), dave, decision="edit") is Standing.ADMIN
    assert await _standing(actor("U_LISTED"), dave, listed, decision="edit") is Standing.APPROVER
    assert await _standing(actor(REQUESTER), dave, decision="edit") is Standing.REQUESTER
    with pytest.raises(NotPermittedError) as outsider:
        await _standing(actor("U_BOB"), dave, listed, decision="edit")
    assert outsider.value.reason == "not_an_approver"
