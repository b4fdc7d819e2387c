"""The pin store contract, run against PostgreSQL (a real server) and the in-memory store alike.

A "worker" is a store of its own over the same data: for PostgreSQL, one on its own pools, as
another worker process or replica (or the process after a restart) has; for the in-memory
store, another instance over the same `PinTables`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

import pytest

from bot.audit.entries import AuditEntry, AuditKind
from bot.audit.postgres import PostgresAuditStore
from bot.base.conversation import Actor
from bot.settings import DatabaseSettings
from bot.storage.database import open_database
from bot.tools.mcp.pins import (
    AcceptPlan,
    AcceptRefusal,
    AcceptRefused,
    ChangeKind,
    InMemoryPinStore,
    PinStore,
    PinTables,
    PostgresPinStore,
    ServerPins,
    ToolDefinition,
    accept_server,
    check_call,
    observe,
)
from bot.tools.mcp.pins.rules import plan_accept
from tests.support import postgres

SERVER = "github"
ADMIN = Actor(platform="slack", workspace_id="T1", user_id="UADMIN", display_name="Ada", is_admin=True)


def tool(name: str, description: str = "Does a thing.", **changes: Any) -> ToolDefinition:
    entry: dict[str, Any] = {
        "name": name,
        "title": name.title(),
        "description": description,
        "inputSchema": {"type": "object", "properties": {"repo": {"type": "string"}}, "required": ["repo"]},
        "annotations": {"readOnlyHint": True},
        **changes,
    }
    return ToolDefinition.from_listing(SERVER, entry)


A, B, C = tool("a"), tool("b"), tool("c")
A2 = tool("a", "Does a thing, then deletes the repository.")
A3 = tool("a", "Does something else again.")


@dataclass
class Kit:
    """One store backend: `worker()` gives a store over the same data; `audited()` the pin audit rows."""

    worker: Callable[[], Awaitable[PinStore]]
    audited: Callable[[], Awaitable[list[AuditEntry]]]


@pytest.fixture(params=["postgres", "memory"])
async def kit(request: pytest.FixtureRequest, pg_server: postgres.TestServer) -> AsyncIterator[Kit]:
    """The store under test, on PostgreSQL (a fresh database) or in memory."""
    if request.param == "memory":
        tables = PinTables()

        async def memory_worker() -> PinStore:
            return InMemoryPinStore(tables)

        async def memory_audited() -> list[AuditEntry]:
            return list(tables.audit)

        yield Kit(worker=memory_worker, audited=memory_audited)
        return
    db_url = await pg_server.create_database()
    async with AsyncExitStack() as stack:
        stack.push_async_callback(pg_server.drop_database, db_url)
        settings = DatabaseSettings(url=db_url, pool_max_size=3)
        database = await stack.enter_async_context(open_database(settings, run_migrations=False))

        async def postgres_worker() -> PinStore:
            # Its own pools, as another worker process, replica or restarted process has.
            other = await stack.enter_async_context(open_database(settings, run_migrations=False))
            return PostgresPinStore(other.pool, PostgresAuditStore(other.pool))

        async def postgres_audited() -> list[AuditEntry]:
            rows = await database.pool.fetch("SELECT * FROM audit_log WHERE kind = 'pin' ORDER BY id")
            return [
                AuditEntry(
                    kind=AuditKind(row["kind"]),
                    workspace_id=row["workspace_id"],
                    outcome=row["outcome"],
                    tool_name=row["tool_name"],
                    actor_id=row["actor_id"],
                    actor_name=row["actor_name"],
                    reason=row["reason"],
                    detail=row["detail"],
                )
                for row in rows
            ]

        yield Kit(worker=postgres_worker, audited=postgres_audited)


def outcomes(entries: Sequence[AuditEntry]) -> list[tuple[str, str | None]]:
    return [(entry.outcome, entry.tool_name) for entry in entries]


class LoadedTogether:
    """A store whose first `load` returns only once every party has loaded: they judge the same state."""

    def __init__(self, store: PinStore, barrier: asyncio.Barrier) -> None:
        self._store = store
        self._barrier: asyncio.Barrier | None = barrier

    async def load(self, server: str) -> ServerPins:
        state = await self._store.load(server)
        if self._barrier is not None:
            barrier, self._barrier = self._barrier, None
            await asyncio.wait_for(barrier.wait(), timeout=60)
        return state

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


async def test_first_sight_pins_every_tool_and_audits_it(kit: Kit):
    """A server never seen: its tools are offered and pinned, one `pinned` audit row each."""
    store = await kit.worker()
    seen = await observe(store, SERVER, [A, B])
    assert seen.review.first_sight and seen.review.offered == (A, B) and seen.notice is None
    state = await store.load(SERVER)
    assert state.seen and dict(state.pins) == {"a": A, "b": B} and not state.holds
    assert outcomes(await kit.audited()) == [("pinned", "github__a"), ("pinned", "github__b")]
    entry = (await kit.audited())[0]
    assert entry.kind is AuditKind.PIN and entry.detail["digest"] == A.digest and entry.actor_id is None


async def test_an_unchanged_listing_is_offered_and_records_nothing(kit: Kit):
    """The same tools listed again (another title is no change) are offered; nothing new is written."""
    store = await kit.worker()
    await observe(store, SERVER, [A, B])
    relisted = [ToolDefinition.from_listing(SERVER, {**A.pinned(), "title": "Renamed"}), B]
    again = await observe(store, SERVER, relisted)
    assert not again.review.first_sight and again.review.offered == (A, B) and again.notice is None
    assert len(await kit.audited()) == 2
    assert await check_call(store, A) is None


async def test_a_changed_tool_is_held_on_every_worker_and_the_admins_told_once(kit: Kit):
    """A changed definition is held: refused on a worker that has not listed it yet; one message, one `held` row."""
    store, other = await kit.worker(), await kit.worker()
    await observe(store, SERVER, [A, B])
    changed = await observe(store, SERVER, [A2, B])
    assert changed.review.offered == (B,)
    assert changed.notice is not None
    assert [(c.tool, c.kind, c.changed) for c in changed.notice.changes] == [
        ("a", ChangeKind.CHANGED, ("description",))
    ]
    assert changed.notice.accept_command == "/countersign mcp accept github"
    refusal = await check_call(other, A)  # the other worker still lists the pinned definition
    assert refusal is not None and "/countersign mcp accept github" in refusal
    assert await check_call(other, B) is None
    assert (await observe(other, SERVER, [A2, B])).notice is None
    assert (await observe(store, SERVER, [A2, B])).notice is None
    held_rows = [e for e in await kit.audited() if e.outcome == "held"]
    assert outcomes(held_rows) == [("held", "github__a")]
    assert held_rows[0].reason == "changed: description"
    assert held_rows[0].detail["pinned_digest"] == A.digest and held_rows[0].detail["digest"] == A2.digest


async def test_a_new_tool_on_a_seen_server_is_held(kit: Kit):
    """A tool added after the first sight is held as new, also on a server first seen with no tools."""
    store = await kit.worker()
    await observe(store, SERVER, [A])
    added = await observe(store, SERVER, [A, B])
    assert added.review.offered == (A,)
    assert added.notice is not None and [(c.tool, c.kind) for c in added.notice.changes] == [("b", ChangeKind.NEW)]
    assert await check_call(store, B) is not None
    await observe(store, "empty", [])
    later = await observe(store, "empty", [ToolDefinition.from_listing("empty", A.pinned())])
    assert later.review.offered == () and later.notice is not None


async def test_a_gone_tool_is_remembered_unchanged_offered_changed_held(kit: Kit):
    """A tool that disappears keeps its pin: back unchanged it is offered, back changed it is held."""
    store = await kit.worker()
    await observe(store, SERVER, [A, B])
    gone = await observe(store, SERVER, [B])
    assert gone.review.gone == ("a",) and gone.notice is None
    back = await observe(store, SERVER, [A, B])
    assert back.review.offered == (A, B) and back.notice is None
    await observe(store, SERVER, [B])
    back_changed = await observe(store, SERVER, [A2, B])
    assert back_changed.review.offered == (B,)
    assert back_changed.notice is not None and back_changed.notice.changes[0].tool == "a"


async def test_a_hold_is_lifted_when_the_server_lists_the_pinned_definition_again(kit: Kit):
    """A change undone before anyone accepted it: the tool is offered again, on every worker."""
    store, other = await kit.worker(), await kit.worker()
    await observe(store, SERVER, [A])
    await observe(store, SERVER, [A2])
    assert await check_call(other, A) is not None
    undone = await observe(store, SERVER, [A])
    assert undone.review.offered == (A,) and undone.notice is None
    assert await check_call(other, A) is None
    assert not (await other.load(SERVER)).holds
    assert (await observe(store, SERVER, [A2])).notice is None  # told about that definition already


async def test_holds_survive_a_restart(kit: Kit):
    """A store opened afresh (a restarted process) refuses the held tool and does not tell the admins again."""
    store = await kit.worker()
    await observe(store, SERVER, [A, B])
    await observe(store, SERVER, [A2, B])
    restarted = await kit.worker()
    state = await restarted.load(SERVER)
    assert list(state.holds) == ["a"] and state.holds["a"].definition == A2 and state.holds["a"].noticed
    assert state.pins["a"] == A
    assert await check_call(restarted, A) is not None
    assert await check_call(restarted, A2) is not None
    after = await observe(restarted, SERVER, [A2, B])
    assert after.review.offered == (B,) and after.notice is None


async def test_accept_pins_what_the_admins_were_shown(kit: Kit):
    """Accepting pins the held definitions, lifts the holds on every worker and audits the diff and its digest."""
    store, other = await kit.worker(), await kit.worker()
    await observe(store, SERVER, [A, B])
    await observe(store, SERVER, [A2, B, C])
    accepted = await accept_server(store, SERVER, [A2, B, C], ADMIN)
    assert isinstance(accepted, AcceptPlan)
    assert [(c.tool, c.kind) for c in accepted.changes] == [("a", ChangeKind.CHANGED), ("c", ChangeKind.NEW)]
    assert accepted.changes[0].description == ("-Does a thing.", "+Does a thing, then deletes the repository.")
    assert await check_call(other, A2) is None and await check_call(other, C) is None
    assert await check_call(other, A) is not None  # the old definition is not what is pinned now
    state = await other.load(SERVER)
    assert dict(state.pins) == {"a": A2, "b": B, "c": C} and not state.holds
    offered = await observe(other, SERVER, [A2, B, C])
    assert offered.review.offered == (A2, B, C) and offered.notice is None
    rows = [e for e in await kit.audited() if e.outcome == "accepted"]
    assert outcomes(rows) == [("accepted", "github__a"), ("accepted", "github__c")]
    assert (rows[0].actor_id, rows[0].workspace_id, rows[0].reason) == ("UADMIN", "T1", "changed: description")
    assert rows[0].detail["diff_digest"] == accepted.changes[0].digest
    assert rows[0].detail["digest"] == A2.digest and rows[0].detail["pinned_digest"] == A.digest
    nothing = await accept_server(store, SERVER, [A2, B, C], ADMIN)
    assert nothing == AcceptRefused(server=SERVER, reason=AcceptRefusal.NOTHING_HELD)


async def test_accept_is_refused_when_the_definition_changed_again_after_the_admin_looked(kit: Kit):
    """What the admin saw is held no more: the accept pins nothing, and the new change is held and told."""
    store, other = await kit.worker(), await kit.worker()
    await observe(store, SERVER, [A, B])
    await observe(store, SERVER, [A2, B])
    shown = plan_accept(await store.load(SERVER), [A2, B])  # what the admin read
    assert isinstance(shown, AcceptPlan)
    await observe(other, SERVER, [A3, B])  # the server changes again; another worker holds it
    assert await store.accept(shown, ADMIN) is False
    state = await store.load(SERVER)
    assert state.pins["a"] == A and state.holds["a"].definition == A3
    # Through the command: the server lists yet another definition than the one held and told.
    a4 = tool("a", "A fourth definition.")
    refused = await accept_server(store, SERVER, [a4, B], ADMIN)
    assert isinstance(refused, AcceptRefused)
    assert (refused.reason, refused.tools) == (AcceptRefusal.CHANGED_AGAIN, ("a",))
    assert refused.notice is not None and refused.notice.changes[0].after_digest == a4.digest
    assert (await store.load(SERVER)).pins["a"] == A
    assert not [e for e in await kit.audited() if e.outcome == "accepted"]
    accepted = await accept_server(store, SERVER, [a4, B], ADMIN)
    assert isinstance(accepted, AcceptPlan) and accepted.definitions == (a4,)


async def test_racing_workers_record_one_first_sight_and_send_one_message_per_change(kit: Kit):
    """Two workers judging the same listings at once: one first sight, one message per change, one row each."""
    store, other = await kit.worker(), await kit.worker()

    async def race(listed: list[ToolDefinition]) -> list[Any]:
        barrier = asyncio.Barrier(2)
        # Both load before either writes, so both see the same state and both try to record it.
        return list(
            await asyncio.gather(
                observe(LoadedTogether(store, barrier), SERVER, listed),  # type: ignore[arg-type]
                observe(LoadedTogether(other, barrier), SERVER, listed),  # type: ignore[arg-type]
            )
        )

    first = await race([A, B])
    assert sorted(o.review.first_sight for o in first) == [False, True]  # the loser judged the winner's pins
    assert all(o.review.offered == (A, B) for o in first)
    assert outcomes(await kit.audited()) == [("pinned", "github__a"), ("pinned", "github__b")]
    changed = await race([A2, B, C])
    notices = [o.notice for o in changed if o.notice is not None]
    assert len(notices) == 1
    assert sorted(c.tool for c in notices[0].changes) == ["a", "c"]
    again = await race([A3, B, C])
    notices = [o.notice for o in again if o.notice is not None]
    assert len(notices) == 1 and [c.tool for c in notices[0].changes] == ["a"]
    held_rows = [(e.tool_name, e.detail["digest"]) for e in await kit.audited() if e.outcome == "held"]
    assert sorted(held_rows) == sorted([("github__a", A2.digest), ("github__c", C.digest), ("github__a", A3.digest)])


async def test_racing_accepts_pin_once(kit: Kit):
    """Two admins accepting the same change at once: one accept pins it, the other pins nothing."""
    store, other = await kit.worker(), await kit.worker()
    await observe(store, SERVER, [A])
    await observe(store, SERVER, [A2])
    results = await asyncio.gather(accept_server(store, SERVER, [A2], ADMIN), accept_server(other, SERVER, [A2], ADMIN))
    assert sum(isinstance(r, AcceptPlan) for r in results) == 1
    refused = [r for r in results if isinstance(r, AcceptRefused)]
    assert refused[0].reason in {AcceptRefusal.STALE, AcceptRefusal.NOTHING_HELD}
    assert len([e for e in await kit.audited() if e.outcome == "accepted"]) == 1
