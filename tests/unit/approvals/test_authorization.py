"""ensure_may_decide: the requester and admins may decide; nobody from another workspace."""

from __future__ import annotations

import pytest

from bot.approvals.authorization import ensure_may_decide
from bot.conversation import Actor
from bot.errors import NotPermittedError

WORKSPACE = "T1"
REQUESTER = "U_ASKER"


class AdminCheck:
    """A real async admin check that answers from a set and records whom it was asked about."""

    def __init__(self, *admins: str) -> None:
        self.admins = set(admins)
        self.asked: list[str] = []

    async def __call__(self, actor: Actor) -> bool:
        self.asked.append(actor.user_id)
        return actor.user_id in self.admins


def actor(user_id: str, *, workspace_id: str = WORKSPACE, is_admin: bool | None = None) -> Actor:
    """A Slack actor in `workspace_id`."""
    return Actor(
        platform="slack",
        workspace_id=workspace_id,
        user_id=user_id,
        display_name=user_id.lower(),
        is_admin=is_admin,
    )


async def decide(who: Actor, check: AdminCheck) -> None:
    """Ask whether `who` may decide an approval REQUESTER made in WORKSPACE."""
    await ensure_may_decide(who, requester_id=REQUESTER, workspace_id=WORKSPACE, is_admin=check)


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

    async def failing(who: Actor) -> bool:
        raise ConnectionError("users.info unreachable")

    with pytest.raises(ConnectionError):
        await ensure_may_decide(
            actor("U_OTHER"), requester_id=REQUESTER, workspace_id=WORKSPACE, is_admin=failing
        )


def test_not_permitted_error_message_names_the_reason():
    """NotPermittedError carries its reason in `.reason` and in the message."""
    error = NotPermittedError("other_workspace")
    assert error.reason == "other_workspace"
    assert "other_workspace" in str(error)
