"""`InMemoryTrustStore`: the `TrustStore` in a process's memory, for tests.

Its clock is the process's (`datetime.now(UTC)`) where PostgreSQL's is the database's. Each
method yields to the event loop once at its start, as a database round trip would, then runs
without awaiting, so that a change and its audit row are one step, as in a transaction. Grants
are made by `grant`, the twin of `bot.reviews.trust.postgres.insert_grant` (which a vote calls
in its transaction).
"""

from __future__ import annotations

import asyncio
import json
import secrets
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.audit.memory import InMemoryAuditStore
from bot.base.conversation import Actor, ConversationRef
from bot.reviews.records import ApprovalRecord
from bot.reviews.trust.audit import granted_entry, revoked_entry
from bot.reviews.trust.grants import GRANT_ID_HEX, NewGrant, TrustGrant, key_digest, trust_key
from bot.tools.canonical import canonical_values


class InMemoryTrustStore:
    """A `TrustStore` over a dict (see the module docstring).

    Args:
        audit: the audit log (a grant's and a revoke's rows are appended with the change).

    Attributes:
        grants: grant id to grant, in the order made (tests may read or replace them).
    """

    def __init__(self, audit: InMemoryAuditStore) -> None:
        self._audit = audit
        self.grants: dict[str, TrustGrant] = {}

    async def grant(self, approval: ApprovalRecord, new: NewGrant, *, args: dict[str, Any], actor: Actor) -> TrustGrant:
        """Make the grant of an approval that `actor` just approved alone, with its audit row.

        The in-memory `insert_grant` (see it for the arguments), for an in-memory vote.

        Raises:
            ValueError: the approval has a grant already (nothing changed).
        """
        await asyncio.sleep(0)
        if any(grant.approval_id == approval.id for grant in self.grants.values()):
            raise ValueError(f"approval {approval.id} has a trust grant already")
        conversation = ConversationRef.from_thread_id(approval.thread_id)
        grant_id = secrets.token_hex(GRANT_ID_HEX // 2)
        while grant_id in self.grants:  # a new id on the (rare) clash with an existing one
            grant_id = secrets.token_hex(GRANT_ID_HEX // 2)
        now = datetime.now(UTC)
        grant = TrustGrant(
            id=grant_id,
            approval_id=approval.id,
            platform=conversation.platform,
            workspace_id=approval.workspace_id,
            channel_id=conversation.channel_id,
            thread_id=approval.thread_id,
            tool_name=approval.tool_name,
            source=approval.source,
            requester_id=approval.requester_id,
            requester_name=approval.requester_name,
            matching=tuple(new.matching),
            matched=canonical_values(json.loads(json.dumps(trust_key(args, new.matching)))),
            matched_digest=key_digest(args, new.matching, approval.definition),
            granted_by_id=actor.user_id,
            granted_by_name=actor.display_name,
            granted_at=now,
            expires_at=now + timedelta(seconds=new.duration_s),
        )
        entry = granted_entry(approval, grant, args=args, actor=actor)
        self._audit.append(entry)  # first: it refuses what PostgreSQL would, before anything changed
        self.grants[grant.id] = grant
        return grant

    async def live_for(self, thread_id: str, tool_name: str, requester_id: str) -> tuple[list[TrustGrant], datetime]:
        """See `TrustStore.live_for`."""
        await asyncio.sleep(0)
        now = datetime.now(UTC)
        live = [
            grant
            for grant in reversed(self.grants.values())
            if (grant.thread_id, grant.tool_name, grant.requester_id) == (thread_id, tool_name, requester_id)
            and _live(grant, now)
        ]
        return sorted(live, key=lambda grant: grant.granted_at, reverse=True), now

    async def live_in(
        self, platform: str, workspace_id: str, *, channel_id: str | None = None
    ) -> tuple[list[TrustGrant], datetime]:
        """See `TrustStore.live_in`."""
        await asyncio.sleep(0)
        now = datetime.now(UTC)
        live = [
            grant
            for grant in self.grants.values()
            if (grant.platform, grant.workspace_id) == (platform, workspace_id)
            and (channel_id is None or grant.channel_id == channel_id)
            and _live(grant, now)
        ]
        return sorted(live, key=lambda grant: (grant.expires_at, grant.id)), now

    async def get(self, grant_id: str) -> TrustGrant | None:
        """See `TrustStore.get`."""
        await asyncio.sleep(0)
        return self.grants.get(grant_id)

    async def revoke(self, grant_id: str, actor: Actor) -> TrustGrant | None:
        """See `TrustStore.revoke`."""
        await asyncio.sleep(0)
        grant = self.grants.get(grant_id)
        if grant is None or not _live(grant, datetime.now(UTC)):
            return None
        revoked = replace(
            grant, revoked_at=datetime.now(UTC), revoked_by_id=actor.user_id, revoked_by_name=actor.display_name
        )
        self._audit.append(revoked_entry(revoked, actor))
        self.grants[grant_id] = revoked
        return revoked


def _live(grant: TrustGrant, now: datetime) -> bool:
    return grant.revoked_at is None and grant.expires_at > now
