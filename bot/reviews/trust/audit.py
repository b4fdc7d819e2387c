"""The audit rows of trust grants, written by the trust stores with their changes.

A grant's row (`trust_granted`, kind `decision`) goes with the vote that made it; a revoke's
(`trust_revoked`, kind `config`) with the revoke. Both keep `grant_detail`.
"""

from __future__ import annotations

from typing import Any

from bot.audit.entries import AuditEntry, AuditKind, approval_entry
from bot.base.conversation import Actor
from bot.reviews.records import ApprovalRecord
from bot.reviews.trust.grants import TrustGrant


def grant_detail(grant: TrustGrant) -> dict[str, Any]:
    """What an audit row keeps about a grant: its id, whose calls, which values, by whom, until when."""
    return {
        "trust_id": grant.id,
        "requester_id": grant.requester_id,
        "matching": list(grant.matching) or "all",
        "matched": grant.matched,
        "granted_by_id": grant.granted_by_id,
        "until": grant.expires_at.isoformat(),
    }


def granted_entry(approval: ApprovalRecord, grant: TrustGrant, *, args: dict[str, Any], actor: Actor) -> AuditEntry:
    """The row of a grant `actor` made approving `approval` with `args` (canonical)."""
    return approval_entry(
        AuditKind.DECISION,
        approval,
        "trust_granted",
        actor=actor,
        final_args=args,
        detail=grant_detail(grant),
    )


def revoked_entry(grant: TrustGrant, actor: Actor) -> AuditEntry:
    """The row of `actor` revoking `grant`."""
    return AuditEntry(
        kind=AuditKind.CONFIG,
        workspace_id=grant.workspace_id,
        thread_id=grant.thread_id,
        approval_id=grant.approval_id,
        tool_name=grant.tool_name,
        actor_id=actor.user_id,
        actor_name=actor.display_name,
        outcome="trust_revoked",
        detail={**grant_detail(grant), "platform": grant.platform, "channel_id": grant.channel_id},
    )
