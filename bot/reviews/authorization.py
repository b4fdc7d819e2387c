"""Who may decide an approval (docs/decisions/0006, building on the default in docs/DESIGN.md, Approvals).

- A clicker from another workspace never may.
- The requester may reject their own call; they may approve or edit it unless self-approval is
  off for the tool (which applies even when they are a listed approver).
- When the tool (or the workspace) has an approver list, listed users, members of listed roles
  (Discord) and user groups (Slack), and the requester as above, may decide.
- Without a list: the requester and the workspace's admins (the platform's admins and the
  bot admins added with `/countersign admins add`).
- Once a card escalated (`/countersign escalate`), its target is one more approver of that
  call only: the user, members of the role or user group, or whoever clicks in the channel.
  The requester and self-approval rules above still come first. The escalation's audience may
  approve or reject, never edit: an edit rewrites the call, and that stays with the people the
  workspace made its deciders (approvers, admins) and the requester
  (docs/decisions/0035-dms-and-escalation-audiences.md).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Protocol

from bot.base.conversation import Actor
from bot.base.errors import NotPermittedError
from bot.policy.config import ApproverKind, WorkspaceConfig
from bot.reviews.escalation.rules import EscalationTarget, TargetKind


class Standing(StrEnum):
    """Why someone may decide an approval (the first rule that lets them)."""

    REQUESTER = "requester"
    APPROVER = "approver"
    ADMIN = "admin"
    ESCALATION = "escalation"
    """Only as the target of the card's escalation (audited as such); approve or reject only."""


class Directory(Protocol):
    """What the platform knows about people (implemented by each adapter's `Platform`)."""

    async def is_admin(self, actor: Actor) -> bool:
        """Whether the platform says `actor` administers their workspace."""
        ...

    async def member_of(self, actor: Actor, group_ids: frozenset[str]) -> frozenset[str]:
        """Which of `group_ids` (roles or user groups) `actor` belongs to."""
        ...


class MemberDirectory(Directory, Protocol):
    """A `Directory` that can also look a person up without an interaction of theirs (docs/decisions/0023).

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
    escalated_to: EscalationTarget | None = None,
) -> Standing:
    """Raise unless `actor` may take a decision of `decision_type` on this approval.

    Args:
        actor: the authenticated clicker.
        requester_id: whose message led to the call.
        workspace_id: the approval's workspace.
        tool_name: the call's tool (approver lists and self-approval are per tool).
        decision_type: `approve`, `edit` or `reject` (`open_form` counts as approve).
        config: the workspace's configuration.
        directory: the platform's admin and membership lookups.
        escalated_to: the target of this approval's escalation once it escalated
            (`ApprovalRecord.escalated_audience`), an extra approver of this call; None before.

    Returns:
        Why they may (the escalation only when no other rule lets them).

    Raises:
        NotPermittedError: with reason `other_workspace`, `self_approval_off`,
            `not_an_approver`, `not_requester_or_admin`, or `escalation_no_edit` (an edit by
            someone who may decide the call only as its escalation's audience).
    """
    if actor.workspace_id != workspace_id:
        raise NotPermittedError("other_workspace")
    is_requester = actor.user_id == requester_id
    if is_requester:
        if decision_type == "reject" or config.self_approval(tool_name):
            return Standing.REQUESTER
        raise NotPermittedError("self_approval_off")
    approvers = config.approvers_for(tool_name)
    if not approvers:
        if await is_workspace_admin(actor, config, directory):
            return Standing.ADMIN
        return await _as_audience(actor, escalated_to, decision_type, directory, "not_requester_or_admin")
    if any(a.kind is ApproverKind.USER and a.subject_id == actor.user_id for a in approvers):
        return Standing.APPROVER
    groups = frozenset(a.subject_id for a in approvers if a.kind is not ApproverKind.USER)
    if groups and (actor.groups & groups or await directory.member_of(actor, groups)):
        return Standing.APPROVER
    return await _as_audience(actor, escalated_to, decision_type, directory, "not_an_approver")


async def _as_audience(
    actor: Actor, escalated_to: EscalationTarget | None, decision_type: str, directory: Directory, otherwise: str
) -> Standing:
    """`Standing.ESCALATION` for the escalation's audience, who may approve or reject but not edit.

    Raises:
        NotPermittedError: `escalation_no_edit` for the audience's edit; `otherwise` for anyone else.
    """
    if escalated_to is None or not await in_audience(actor, escalated_to, directory):
        raise NotPermittedError(otherwise)
    if decision_type == "edit":
        raise NotPermittedError("escalation_no_edit")
    return Standing.ESCALATION


async def in_audience(actor: Actor, target: EscalationTarget, directory: Directory) -> bool:
    """Whether `actor` is the audience of an escalation to `target`.

    A user is themselves; a role (Discord) or user group (Slack) counts its members, as approver
    lists do; a channel counts whoever clicked in it (`Actor.channel_id`, from the platform's
    signed payload: only someone who can see the channel can click there).
    """
    if target.kind is TargetKind.USER:
        return actor.user_id == target.subject_id
    if target.kind is TargetKind.CHANNEL:
        return actor.channel_id is not None and actor.channel_id == target.subject_id
    wanted = frozenset({target.subject_id})
    return bool(actor.groups & wanted or await directory.member_of(actor, wanted))
