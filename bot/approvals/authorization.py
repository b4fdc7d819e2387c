"""Who may decide an approval (issue 4, building on the core issue's default).

- A clicker from another workspace never may.
- The requester may reject their own call; they may approve or edit it unless self-approval is
  off for the tool (which applies even when they are a listed approver).
- When the tool (or the workspace) has an approver list, listed users, members of listed roles
  (Discord) and user groups (Slack), and the requester as above, may decide.
- Without a list: the requester and the workspace's admins (the platform's admins and the
  bot admins added with `/countersign admins add`).
"""

from __future__ import annotations

from typing import Protocol

from bot.approvals.config import ApproverKind, WorkspaceConfig
from bot.conversation import Actor
from bot.errors import NotPermittedError


class Directory(Protocol):
    """What the platform knows about people (implemented by each adapter's `Platform`)."""

    async def is_admin(self, actor: Actor) -> bool:
        """Whether the platform says `actor` administers their workspace."""
        ...

    async def member_of(self, actor: Actor, group_ids: frozenset[str]) -> frozenset[str]:
        """Which of `group_ids` (roles or user groups) `actor` belongs to."""
        ...


class MemberDirectory(Directory, Protocol):
    """A `Directory` that can also look a person up without an interaction of theirs (issue 12).

    A trust grant is used when its approver is not there to click: whether they could still
    approve the call is judged from their standing now, as the platform tells it.
    """

    async def member(self, workspace_id: str, user_id: str) -> Actor | None:
        """The person as a member of the workspace now, or None when they are not (or no longer).

        The admin flag and groups are filled in where the platform gives them.
        """
        ...


async def is_workspace_admin(actor: Actor, config: WorkspaceConfig, directory: Directory) -> bool:
    """A bot admin, or an admin by the platform's own rules."""
    if actor.user_id in config.admins:
        return True
    return actor.is_admin if actor.is_admin is not None else await directory.is_admin(actor)


async def ensure_may_decide(
    actor: Actor,
    *,
    requester_id: str,
    workspace_id: str,
    tool_name: str,
    decision_type: str,
    config: WorkspaceConfig,
    directory: Directory,
) -> None:
    """Raise unless `actor` may take a decision of `decision_type` on this approval.

    Args:
        actor: the authenticated clicker.
        requester_id: whose message led to the call.
        workspace_id: the approval's workspace.
        tool_name: the call's tool (approver lists and self-approval are per tool).
        decision_type: `approve`, `edit` or `reject` (`open_form` counts as approve).
        config: the workspace's configuration.
        directory: the platform's admin and membership lookups.

    Raises:
        NotPermittedError: with reason `other_workspace`, `self_approval_off`,
            `not_an_approver` or `not_requester_or_admin`.
    """
    if actor.workspace_id != workspace_id:
        raise NotPermittedError("other_workspace")
    is_requester = actor.user_id == requester_id
    if is_requester:
        if decision_type == "reject" or config.self_approval(tool_name):
            return
        raise NotPermittedError("self_approval_off")
    approvers = config.approvers_for(tool_name)
    if not approvers:
        if await is_workspace_admin(actor, config, directory):
            return
        raise NotPermittedError("not_requester_or_admin")
    if any(a.kind is ApproverKind.USER and a.subject_id == actor.user_id for a in approvers):
        return
    groups = frozenset(a.subject_id for a in approvers if a.kind is not ApproverKind.USER)
    if groups and (actor.groups & groups or await directory.member_of(actor, groups)):
        return
    raise NotPermittedError("not_an_approver")
