"""`PostgresTrustStore`: the `TrustStore` in PostgreSQL (`trust_grants`, migrations/0010.trust.sql).

A grant is LIVE while `revoked_at IS NULL AND expires_at > now()` (`bot.reviews.lifecycle`):
every read and the revoke say so in SQL, with the database's clock, and nothing is cached, so a
revoke committed on one replica is seen by the next call on any replica. Grants are made inside
the vote's transaction (`insert_grant`, called by `ApprovalStore.vote`), and a run claimed under
a grant locks it against a revoke (`live_grant_locked`, `bot.tools.ledger.postgres`).
"""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import Any

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from bot.audit.postgres import PostgresAuditStore
from bot.base.conversation import Actor, ConversationRef
from bot.reviews.records import ApprovalRecord
from bot.reviews.trust.audit import granted_entry, revoked_entry
from bot.reviews.trust.grants import GRANT_ID_HEX, NewGrant, TrustGrant, key_digest, trust_key
from bot.tools.canonical import canonical_values


class PostgresTrustStore:
    """A `TrustStore` on asyncpg (see the module docstring).

    Args:
        pool: the asyncpg pool.
        audit: the audit log (a revoke's row goes in the revoke's transaction).
    """

    def __init__(self, pool: asyncpg.Pool, audit: PostgresAuditStore) -> None:
        self._pool = pool
        self._audit = audit

    async def live_for(self, thread_id: str, tool_name: str, requester_id: str) -> tuple[list[TrustGrant], datetime]:
        """See `TrustStore.live_for` (one indexed read)."""
        rows = await self._pool.fetch(
            """SELECT *, now() AS now FROM trust_grants
                WHERE thread_id = $1 AND tool_name = $2 AND requester_id = $3
                  AND revoked_at IS NULL AND expires_at > now()
                ORDER BY granted_at DESC""",
            thread_id,
            tool_name,
            requester_id,
        )
        now = rows[0]["now"] if rows else await self._now()
        return [_grant(row) for row in rows], now

    async def live_in(
        self, platform: str, workspace_id: str, *, channel_id: str | None = None
    ) -> tuple[list[TrustGrant], datetime]:
        """See `TrustStore.live_in`."""
        rows = await self._pool.fetch(
            """SELECT *, now() AS now FROM trust_grants
                WHERE platform = $1 AND workspace_id = $2 AND ($3::text IS NULL OR channel_id = $3)
                  AND revoked_at IS NULL AND expires_at > now()
                ORDER BY expires_at, id""",
            platform,
            workspace_id,
            channel_id,
        )
        now = rows[0]["now"] if rows else await self._now()
        return [_grant(row) for row in rows], now

    async def get(self, grant_id: str) -> TrustGrant | None:
        """See `TrustStore.get`."""
        row = await self._pool.fetchrow("SELECT * FROM trust_grants WHERE id = $1", grant_id)
        return _grant(row) if row is not None else None

    async def revoke(self, grant_id: str, actor: Actor) -> TrustGrant | None:
        """See `TrustStore.revoke`.

        The update names the one state a revoke may leave (LIVE), so two revokes, or a revoke and
        an expiry, cannot both end it.
        """
        async with self._pool.acquire() as connection, connection.transaction():
            row = await connection.fetchrow(
                """UPDATE trust_grants SET revoked_at = now(), revoked_by_id = $2, revoked_by_name = $3
                   WHERE id = $1 AND revoked_at IS NULL AND expires_at > now() RETURNING *""",
                grant_id,
                actor.user_id,
                actor.display_name,
            )
            if row is None:
                return None
            grant = _grant(row)
            await self._audit.record(revoked_entry(grant, actor), connection=connection)
        return grant

    async def _now(self) -> datetime:
        now: datetime = await self._pool.fetchval("SELECT now()")
        return now


async def insert_grant(
    connection: PoolConnectionProxy,
    audit: PostgresAuditStore,
    approval: ApprovalRecord,
    new: NewGrant,
    *,
    args: dict[str, Any],
    actor: Actor,
) -> TrustGrant:
    """Make the grant of an approval that `actor` just approved alone, with its audit row.

    Called inside the transaction that decided the approval (`ApprovalStore.vote`), so the card's
    approval and its grant are one step: both or neither, at most one grant per card (the
    approval id is unique in the table, and a second click finds the card decided).

    Args:
        connection: the vote's connection, in its transaction.
        audit: the audit store.
        approval: the approval as it was before the vote (thread, tool, requester).
        new: the grant's matching names and duration.
        args: the arguments the vote approved (canonical), whose `trust_key` the grant binds,
            under the MCP tool's definition the card was made under (`approval.definition`).
        actor: the approver.
    """
    conversation = ConversationRef.from_thread_id(approval.thread_id)
    matched = trust_key(args, new.matching)
    row = None
    while row is None:  # a new id on the (rare) clash with an existing one
        row = await connection.fetchrow(
            """
            INSERT INTO trust_grants (id, approval_id, platform, workspace_id, channel_id, thread_id, tool_name,
                source, requester_id, requester_name, matching, matched, matched_digest, granted_by_id,
                granted_by_name, expires_at)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15,
                now() + make_interval(secs => $16))
            ON CONFLICT (id) DO NOTHING
            RETURNING *
            """,
            secrets.token_hex(GRANT_ID_HEX // 2),
            approval.id,
            conversation.platform,
            approval.workspace_id,
            conversation.channel_id,
            approval.thread_id,
            approval.tool_name,
            approval.source,
            approval.requester_id,
            approval.requester_name,
            list(new.matching),
            matched,
            key_digest(args, new.matching, approval.definition),
            actor.user_id,
            actor.display_name,
            new.duration_s,
        )
    grant = _grant(row)
    await audit.record(granted_entry(approval, grant, args=args, actor=actor), connection=connection)
    return grant


async def live_grant_locked(connection: PoolConnectionProxy, grant_id: str) -> TrustGrant | None:
    """The grant if it is live, locked against a concurrent revoke until the caller's transaction ends.

    `FOR SHARE` waits for a revoke in flight and then reads its outcome, so a run claimed under
    a grant was claimed while the grant was live (`bot.tools.ledger.postgres`).
    """
    row = await connection.fetchrow(
        "SELECT * FROM trust_grants WHERE id = $1 AND revoked_at IS NULL AND expires_at > now() FOR SHARE", grant_id
    )
    return _grant(row) if row is not None else None


def _grant(row: asyncpg.Record) -> TrustGrant:
    return TrustGrant(
        id=row["id"],
        approval_id=row["approval_id"],
        platform=row["platform"],
        workspace_id=row["workspace_id"],
        channel_id=row["channel_id"],
        thread_id=row["thread_id"],
        tool_name=row["tool_name"],
        source=row["source"],
        requester_id=row["requester_id"],
        requester_name=row["requester_name"],
        matching=tuple(row["matching"] or ()),
        # The same canonical numbers the approvals read back (`canonical_values`).
        matched=canonical_values(row["matched"]),
        matched_digest=row["matched_digest"],
        granted_by_id=row["granted_by_id"],
        granted_by_name=row["granted_by_name"],
        granted_at=row["granted_at"],
        expires_at=row["expires_at"],
        revoked_at=row["revoked_at"],
        revoked_by_id=row["revoked_by_id"],
        revoked_by_name=row["revoked_by_name"],
    )
