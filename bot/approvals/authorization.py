"""Who may decide an approval.

Until admin configuration exists (issue 4), the rule is the issue's default: the person whose
message led to the tool call, and the workspace's admins and owners. Everyone else is refused.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from bot.conversation import Actor
from bot.errors import NotPermittedError

AdminCheck = Callable[[Actor], Awaitable[bool]]
"""Asks the platform whether an actor administers their workspace (e.g. Slack `users.info`)."""


async def ensure_may_decide(
    actor: Actor, *, requester_id: str, workspace_id: str, is_admin: AdminCheck
) -> None:
    """Raise unless `actor` may decide an approval requested by `requester_id`.

    Args:
        actor: the authenticated clicker.
        requester_id: platform user id of the person who asked the agent.
        workspace_id: the approval's workspace; a clicker from another workspace is refused.
        is_admin: consulted only when the actor is not the requester and the adapter did not
            already say (`Actor.is_admin`).

    Raises:
        NotPermittedError: `other_workspace` or `not_requester_or_admin`.
    """
    if actor.workspace_id != workspace_id:
        raise NotPermittedError("other_workspace")
    if actor.user_id == requester_id:
        return
    admin = actor.is_admin if actor.is_admin is not None else await is_admin(actor)
    if not admin:
        raise NotPermittedError("not_requester_or_admin")
