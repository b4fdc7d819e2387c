"""ensure_may_decide: the requester and admins may decide; nobody from another workspace."""

from __future__ import annotations

import pytest

from bot.base.conversation import Actor
from bot.base.errors import NotPermittedError
from bot.policy.config import ApproverKind, ApproverRule, SettingKey, WorkspaceConfig
from bot.reviews.authorization import ensure_may_decide

WORKSPACE = "T1"
REQUESTER = "U_ASKER"


class AdminCheck:
    """A real directory that answers from sets and records whom it was asked about."""

    def __init__(self, *admins: str, groups: dict[str, set[str]] | None = None) -> None:
        self.admins = set(admins)
        self.groups = groups or {}
        self.asked: list[str] = []

    async def is_admin(self, actor: Actor) -> bool:
        self.asked.append(actor.user_id)
        return actor.user_id in self.admins

    async def member_of(self, actor: Actor, group_ids: frozenset[str]) -> frozenset[str]:
        return frozenset(g for g in group_ids if actor.user_id in self.groups.get(g, set()))


def actor(user_id: str, *, workspace_id: str = WORKSPACE, is_admin: bool | None = None) -> Actor:
    """A Slack actor in `workspace_id`."""
    return Actor(
        platform="slack",
        workspace_id=workspace_id,
        user_id=user_id,
        display_name=user_id.lower(),
        is_admin=is_admin,
    )


async def decide(
    who: Actor, check: AdminCheck, config: WorkspaceConfig | None = None, decision: str = "approve"
) -> None:
    """Ask whether `who` may decide an approval of `send` REQUESTER made in WORKSPACE."""
    await ensure_may_decide(
        who,
        requester_id=REQUESTER,
        workspace_id=WORKSPACE,
        tool_name="send",
        decision_type=decision,
        config=config or WorkspaceConfig(platform="slack", workspace_id=WORKSPACE),
        directory=check,
    )


async def test_requester_may_decide_without_asking_the_admin_check():
    """The requester is allowed and the platform is not asked whether they are an admin."""
    check = AdminCheck()
    await decide(actor(REQUESTER), check)
    assert check.asked == []


async def test_requester_marked_non_admin_may_still_decide():
    """The requester may decide even when the adapter says they are not an admin."""
    check = AdminCheck()
    await decide(actor(REQUESTER, is_admin=False), check)
    assert check.asked == []


async def test_admin_may_decide_after_asking_the_check():
    """Someone else who the admin check says is an admin is allowed; they were asked once."""
    check = AdminCheck("U_BOSS")
    await decide(actor("U_BOSS"), check)
    assert check.asked == ["U_BOSS"]


async def test_non_admin_is_refused():
    """Someone else who is not an admin is refused with `not_requester_or_admin`."""
    check = AdminCheck("U_BOSS")
    with pytest.raises(NotPermittedError) as info:
        await decide(actor("U_OTHER"), check)
    assert info.value.reason == "not_requester_or_admin"
    assert check.asked == ["U_OTHER"]


async def test_other_workspace_is_refused_even_for_an_admin():
    """An admin of another workspace is refused with `other_workspace`, without asking."""
    check = AdminCheck("U_BOSS")
    with pytest.raises(NotPermittedError) as info:
        await decide(actor("U_BOSS", workspace_id="T2", is_admin=True), check)
    assert info.value.reason == "other_workspace"
    assert check.asked == []


async def test_same_user_id_in_another_workspace_is_refused():
    """The requester's user id from another workspace is not the requester."""
    check = AdminCheck()
    with pytest.raises(NotPermittedError) as info:
        await decide(actor(REQUESTER, workspace_id="T2"), check)
    assert info.value.reason == "other_workspace"


async def test_adapter_admin_flag_true_is_used_without_asking():
    """`Actor.is_admin=True` from the adapter allows without calling the check."""
    check = AdminCheck()  # would say "not an admin" if asked
    await decide(actor("U_BOSS", is_admin=True), check)
    assert check.asked == []


async def test_adapter_admin_flag_false_is_used_without_asking():
    """`Actor.is_admin=False` from the adapter refuses without calling the check."""
    check = AdminCheck("U_BOSS")  # would say "admin" if asked
    with pytest.raises(NotPermittedError) as info:
        await decide(actor("U_BOSS", is_admin=False), check)
    assert info.value.reason == "not_requester_or_admin"
    assert check.asked == []


async def test_admin_check_errors_propagate():
    """A failing admin check is not read as "allowed": its error reaches the caller."""

    class Failing(AdminCheck):
        async def is_admin(self, actor: Actor) -> bool:
            raise ConnectionError("users.info unreachable")

    with pytest.raises(ConnectionError):
        await decide(actor("U_OTHER"), Failing())


def test_not_permitted_error_message_names_the_reason():
    """NotPermittedError carries its reason in `.reason` and in the message."""
    error = NotPermittedError("other_workspace")
    assert error.reason == "other_workspace"
    assert "other_workspace" in str(error)


def configured(*approvers: ApproverRule, self_approval: bool | None = None, admins: frozenset[str] = frozenset()):
    settings = {} if self_approval is None else {("", "send", SettingKey.SELF_APPROVAL.value): self_approval}
    return WorkspaceConfig(
        platform="slack", workspace_id=WORKSPACE, approvers=approvers, admins=admins, settings=settings
    )


async def test_bot_admins_count_as_admins_by_default():
    """A bot admin (added with the admins command) may decide when no approver list exists."""
    await decide(actor("U_BOTADMIN"), AdminCheck(), configured(admins=frozenset({"U_BOTADMIN"})))


async def test_with_an_approver_list_only_listed_people_may_decide():
    """Listed users and group members may decide; a platform admin not on the list may not."""
    config = configured(
        ApproverRule(kind=ApproverKind.USER, subject_id="U_LISTED", tool_name="send"),
        ApproverRule(kind=ApproverKind.GROUP, subject_id="S_OPS", tool_name=""),
    )
    check = AdminCheck("U_BOSS", groups={"S_OPS": {"U_OPS"}})
    await decide(actor("U_LISTED"), check, config)
    with pytest.raises(NotPermittedError) as refused:
        await decide(actor("U_BOSS"), check, config)
    assert refused.value.reason == "not_an_approver"
    # the tool's own list wins over the workspace-wide one, so the group is not consulted for send
    with pytest.raises(NotPermittedError):
        await decide(actor("U_OPS"), check, config)


async def test_workspace_wide_approvers_apply_when_the_tool_has_no_list():
    """A group listed for every tool approves tools without their own list; roles come with the actor."""
    config = configured(ApproverRule(kind=ApproverKind.GROUP, subject_id="S_OPS"))
    await decide(actor("U_OPS"), AdminCheck(groups={"S_OPS": {"U_OPS"}}), config)
    role_holder = Actor(
        platform="discord", workspace_id=WORKSPACE, user_id="42", display_name="r", groups=frozenset({"S_OPS"})
    )
    await decide(role_holder, AdminCheck(), config)


async def test_self_approval_off_refuses_the_requester_even_when_listed():
    """With self-approval off the requester may not approve or edit, even as a listed approver; rejecting stays allowed."""
    config = configured(ApproverRule(kind=ApproverKind.USER, subject_id=REQUESTER), self_approval=False)
    for decision in ("approve", "edit"):
        with pytest.raises(NotPermittedError) as refused:
            await decide(actor(REQUESTER), AdminCheck(), config, decision)
        assert refused.value.reason == "self_approval_off"
    await decide(actor(REQUESTER), AdminCheck(), config, "reject")
