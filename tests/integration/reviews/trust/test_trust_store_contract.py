"""The `TrustStore` contract: one suite, run against PostgreSQL and in memory (docs/decisions/0063-store-ports.md).

Grants are made as a vote makes them (`insert_grant` in a transaction; `InMemoryTrustStore.grant`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.audit.entries import AuditKind
from bot.audit.memory import InMemoryAuditStore
from bot.audit.postgres import PostgresAuditStore
from bot.audit.store import AuditStore
from bot.base.conversation import Actor
from bot.reviews.lifecycle import ApprovalStatus, TrustStatus
from bot.reviews.records import ApprovalRecord
from bot.reviews.trust.grants import GRANT_ID_HEX, NewGrant, TrustGrant, key_digest, trust_key
from bot.reviews.trust.memory import InMemoryTrustStore
from bot.reviews.trust.postgres import PostgresTrustStore, insert_grant
from bot.reviews.trust.store import TrustStore
from bot.settings import DatabaseSettings
from bot.storage.database import open_database
from tests.support import postgres

THREAD = "slack:T1:C1:100.1"
ADA = Actor(platform="slack", workspace_id="T1", user_id="U1", display_name="Ada")
BOB = Actor(platform="slack", workspace_id="T1", user_id="U2", display_name="Bob")


def approval(n: int, *, thread_id: str = THREAD, tool_name: str = "deploy", requester_id: str = "U7") -> ApprovalRecord:
    return ApprovalRecord(
        id=f"a{n}",
        review_id=f"r{n}",
        position=0,
        thread_id=thread_id,
        workspace_id=thread_id.split(":")[1],
        tool_call_id=f"call{n}",
        tool_name=tool_name,
        description="Deploy",
        proposed_args={"repo": "bot", "env": "prod"},
        requester_id=requester_id,
        requester_name="Req",
        card_ref=None,
        status=ApprovalStatus.PENDING,
        decided_by_id=None,
        decided_by_name=None,
        decided_at=None,
        final_args=None,
        reason=None,
        created_at=datetime.now(UTC),
        source="ops",
    )


@dataclass
class Kit:
    """One backend: the store, its audit log, how a vote makes a grant, and how time ends one."""

    store: TrustStore
    audit: AuditStore
    make: Callable[[ApprovalRecord, NewGrant, dict[str, Any], Actor], Awaitable[TrustGrant]]
    expire: Callable[[str], Awaitable[None]]

    async def grant(
        self, record: ApprovalRecord, *, duration_s: int = 600, matching: tuple[str, ...] = ("repo",), by: Actor = ADA
    ) -> TrustGrant:
        return await self.make(record, NewGrant(matching=matching, duration_s=duration_s), record.proposed_args, by)


@pytest.fixture(params=["postgres", "memory"])
async def kit(request: pytest.FixtureRequest, pg_server: postgres.TestServer) -> AsyncIterator[Kit]:
    """The store under test, on PostgreSQL (a fresh database) or in memory."""
    if request.param == "memory":
        memory_audit = InMemoryAuditStore()
        memory = InMemoryTrustStore(memory_audit)

        async def memory_make(record: ApprovalRecord, new: NewGrant, args: dict[str, Any], actor: Actor) -> TrustGrant:
            return await memory.grant(record, new, args=args, actor=actor)

        async def memory_expire(grant_id: str) -> None:
            grant = memory.grants[grant_id]
            past = datetime.now(UTC) - timedelta(seconds=1)
            memory.grants[grant_id] = replace(grant, granted_at=past - timedelta(hours=1), expires_at=past)

        yield Kit(store=memory, audit=memory_audit, make=memory_make, expire=memory_expire)
        return
    db_url = await pg_server.create_database()
    try:
        async with open_database(DatabaseSettings(url=db_url, pool_max_size=5), run_migrations=False) as database:
            audit = PostgresAuditStore(database.pool)
            pool = database.pool

            async def postgres_make(
                record: ApprovalRecord, new: NewGrant, args: dict[str, Any], actor: Actor
            ) -> TrustGrant:
                async with pool.acquire() as connection, connection.transaction():
                    return await insert_grant(connection, audit, record, new, args=args, actor=actor)

            async def postgres_expire(grant_id: str) -> None:
                await pool.execute(
                    "UPDATE trust_grants SET granted_at = granted_at - interval '1 hour', "
                    "expires_at = now() - interval '1 second' WHERE id = $1",
                    grant_id,
                )

            yield Kit(store=PostgresTrustStore(pool, audit), audit=audit, make=postgres_make, expire=postgres_expire)
    finally:
        await pg_server.drop_database(db_url)


async def test_a_grant_binds_its_conversation_tool_requester_and_matched_values(kit: Kit):
    record = approval(1)
    grant = await kit.grant(record, duration_s=900)
    assert len(grant.id) == GRANT_ID_HEX and int(grant.id, 16) >= 0
    assert (grant.approval_id, grant.platform, grant.workspace_id, grant.channel_id) == ("a1", "slack", "T1", "C1")
    assert (grant.thread_id, grant.tool_name, grant.source) == (THREAD, "deploy", "ops")
    assert (grant.requester_id, grant.requester_name, grant.granted_by_id, grant.granted_by_name) == (
        "U7",
        "Req",
        "U1",
        "Ada",
    )
    assert grant.matching == ("repo",)
    assert grant.matched == trust_key(record.proposed_args, ("repo",)) == {"repo": "bot"}
    assert grant.matched_digest == key_digest(record.proposed_args, ("repo",), None)
    assert grant.duration_s == 900
    assert grant.revoked_at is None
    assert await kit.store.get(grant.id) == grant
    [row] = await kit.audit.recent("T1")
    assert (row.kind, row.outcome, row.approval_id, row.actor_id) == (AuditKind.DECISION, "trust_granted", "a1", "U1")
    assert row.final_args == record.proposed_args
    assert row.detail["trust_id"] == grant.id and row.detail["source"] == "ops"


async def test_live_for_is_one_conversations_tool_and_requester_newest_first(kit: Kit):
    first = await kit.grant(approval(1))
    second = await kit.grant(approval(2), matching=())
    await kit.grant(approval(3, tool_name="shell"))
    await kit.grant(approval(4, requester_id="U8"))
    await kit.grant(approval(5, thread_id="slack:T1:C1:200.2"))
    grants, now = await kit.store.live_for(THREAD, "deploy", "U7")
    assert [g.id for g in grants] == [second.id, first.id]
    assert second.matched == {"repo": "bot", "env": "prod"}
    assert all(g.status(now) is TrustStatus.LIVE for g in grants)
    assert now.tzinfo is not None
    assert (await kit.store.live_for(THREAD, "deploy", "U9"))[0] == []


async def test_live_for_and_live_in_answer_the_stores_now_even_when_empty(kit: Kit):
    before = datetime.now(UTC) - timedelta(minutes=5)  # the database's clock may differ a little
    grants, now = await kit.store.live_for(THREAD, "deploy", "U7")
    assert grants == [] and before < now < datetime.now(UTC) + timedelta(minutes=5)
    grants, now = await kit.store.live_in("slack", "T1")
    assert grants == [] and before < now < datetime.now(UTC) + timedelta(minutes=5)


async def test_live_in_is_one_workspace_or_channel_soonest_to_expire_first(kit: Kit):
    later = await kit.grant(approval(1), duration_s=3600)
    sooner = await kit.grant(approval(2, tool_name="shell"), duration_s=120)
    elsewhere = await kit.grant(approval(3, thread_id="slack:T1:C2:1.1"), duration_s=600)
    await kit.grant(approval(4, thread_id="slack:T2:C1:1.1"))
    await kit.grant(approval(5, thread_id="discord:T1:C1:1.1"))
    grants, _ = await kit.store.live_in("slack", "T1")
    assert [g.id for g in grants] == [sooner.id, elsewhere.id, later.id]
    grants, _ = await kit.store.live_in("slack", "T1", channel_id="C1")
    assert [g.id for g in grants] == [sooner.id, later.id]
    assert (await kit.store.live_in("slack", "T1", channel_id="C9"))[0] == []


async def test_an_expired_grant_is_not_live_but_can_be_read(kit: Kit):
    grant = await kit.grant(approval(1))
    await kit.expire(grant.id)
    assert (await kit.store.live_for(THREAD, "deploy", "U7"))[0] == []
    assert (await kit.store.live_in("slack", "T1"))[0] == []
    expired = await kit.store.get(grant.id)
    assert expired is not None
    assert expired.status(datetime.now(UTC)) is TrustStatus.EXPIRED
    assert await kit.store.revoke(grant.id, BOB) is None
    assert [row.outcome for row in await kit.audit.recent("T1")] == ["trust_granted"]


async def test_a_revoke_ends_a_live_grant_once_with_its_audit_row(kit: Kit):
    grant = await kit.grant(approval(1))
    revoked = await kit.store.revoke(grant.id, BOB)
    assert revoked is not None
    assert (revoked.id, revoked.revoked_by_id, revoked.revoked_by_name) == (grant.id, "U2", "Bob")
    assert revoked.revoked_at is not None and revoked.status(datetime.now(UTC)) is TrustStatus.REVOKED
    assert await kit.store.get(grant.id) == revoked
    assert (await kit.store.live_for(THREAD, "deploy", "U7"))[0] == []
    assert await kit.store.revoke(grant.id, ADA) is None
    assert await kit.store.revoke("00000000", ADA) is None
    rows = await kit.audit.recent("T1")
    assert [row.outcome for row in rows] == ["trust_revoked", "trust_granted"]
    assert (rows[0].kind, rows[0].actor_id, rows[0].tool_name, rows[0].approval_id) == (
        AuditKind.CONFIG,
        "U2",
        "deploy",
        "a1",
    )
    assert rows[0].detail["trust_id"] == grant.id
    assert (rows[0].detail["platform"], rows[0].detail["channel_id"]) == ("slack", "C1")


async def test_racing_revokes_end_a_grant_once(kit: Kit):
    grant = await kit.grant(approval(1))
    results = await asyncio.gather(*(kit.store.revoke(grant.id, BOB) for _ in range(4)))
    assert sum(result is not None for result in results) == 1
    assert [row.outcome for row in await kit.audit.recent("T1")] == ["trust_revoked", "trust_granted"]


async def test_get_of_an_unknown_id_is_none(kit: Kit):
    assert await kit.store.get("deadbeef") is None
