"""When pruning and retention run (`bot.upkeep.retention`), with stand-in stores: no database here."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import pytest

from bot.base.tasks import TaskTracker
from bot.upkeep import retention as housekeeping
from bot.upkeep.retention import Housekeeping, RetentionPass
from bot.upkeep.unfinished_work import Upkeep


@dataclass
class FakeStore:
    """Records what was asked; `idle` and `audit` say how much work is waiting."""

    due: list[str] = field(default_factory=list)
    idle: list[str] = field(default_factory=list)
    audit: int = 0
    fail_listing: bool = False
    calls: list[str] = field(default_factory=list)

    async def due_for_pruning(self, *, limit):
        self.calls.append("due_for_pruning")
        if self.fail_listing:
            raise ConnectionError("database down")
        return self.due[:limit]

    async def prune(self, thread_id):
        self.calls.append(f"prune {thread_id}")
        return True

    async def expire_idle_cards(self, *, idle_days, limit):
        self.calls.append("expire_idle_cards")
        return []

    async def idle_conversations(self, *, idle_days, limit):
        self.calls.append("idle_conversations")
        return self.idle[:limit]

    async def delete_if_idle(self, thread_id, *, idle_days):
        self.calls.append(f"delete {thread_id}")
        self.idle.remove(thread_id)
        return True

    async def forget_audit_older_than(self, *, days, limit):
        self.calls.append("forget_audit")
        deleted = min(self.audit, limit)
        self.audit -= deleted
        return deleted


class FreeLocks:
    """Every conversation's lock is free, except those in `held`."""

    def __init__(self, held: set[str] | None = None) -> None:
        self.held = held or set()

    @asynccontextmanager
    async def try_hold(self, thread_id: str) -> AsyncIterator[bool]:
        yield thread_id not in self.held


def keeper(store: FakeStore, locks: FreeLocks | None = None, **days) -> Housekeeping:
    return Housekeeping(store, locks or FreeLocks(), **days)  # type: ignore[arg-type]


async def test_pruning_runs_every_pass_and_skips_held_conversations():
    """Every pass prunes the due conversations whose lock is free; a held one is left for a later pass."""
    store = FakeStore(due=["a", "b"])
    keep = keeper(store, FreeLocks(held={"b"}))
    await keep.run_once()
    await keep.run_once()
    assert store.calls == ["due_for_pruning", "prune a"] * 2  # no retention set: no retention queries


async def test_retention_runs_hourly_unless_a_backlog_is_left(monkeypatch):
    """Retention runs on the first pass, then not before RETENTION_EVERY_S, except while a full batch was done."""
    monkeypatch.setattr(housekeeping, "RETENTION_BATCH", 2)
    store = FakeStore(idle=["a", "b", "c"])
    keep = keeper(store, retention_days=30)
    await keep.run_once()  # deletes a and b: a full batch, so more may be waiting
    await keep.run_once()  # deletes c
    await keep.run_once()  # within the hour: no retention
    assert [c for c in store.calls if c.startswith("delete")] == ["delete a", "delete b", "delete c"]
    assert store.calls.count("idle_conversations") == 2


async def test_audit_retention_alone_deletes_no_conversation():
    """With only AUDIT_RETENTION_DAYS set, a pass deletes old audit rows and touches no conversation."""
    store = FakeStore(idle=["a"], audit=3)
    done = await keeper(store, audit_retention_days=90).apply_retention()
    assert done == RetentionPass(audit_rows=3)
    assert "idle_conversations" not in store.calls and store.idle == ["a"]


async def test_a_failed_pruning_pass_does_not_stop_retention(caplog):
    """The database failing while pruning is logged; retention still runs in the same pass."""
    store = FakeStore(idle=["a"], fail_listing=True)
    await keeper(store, retention_days=30).run_once()
    assert "delete a" in store.calls
    assert "pruning checkpoints failed" in caplog.text


@dataclass
class QuietUpkeepStore:
    async def due_threads(self, *, platforms, max_attempts, everything=False, limit=200):
        return []


@dataclass
class QuietInbox:
    async def forget_older_than(self, hours):
        return 0


async def test_the_upkeep_runs_housekeeping_in_a_loop_of_its_own():
    """Started, the upkeep runs a housekeeping pass every interval (not at once); stopped, it runs none."""
    passes = []

    class Counting:
        async def run_once(self) -> None:
            passes.append(asyncio.get_running_loop().time())

    upkeep = Upkeep(
        QuietUpkeepStore(),  # type: ignore[arg-type]
        QuietInbox(),  # type: ignore[arg-type]
        lambda thread_id: asyncio.sleep(0, result=True),
        TaskTracker(),
        platforms=["test"],
        interval_s=0.05,
        housekeeping=Counting(),  # type: ignore[arg-type]
    )
    upkeep.start()
    assert passes == []
    deadline = asyncio.get_running_loop().time() + 10
    while len(passes) < 2:
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.01)
    await upkeep.stop()
    stopped = len(passes)
    await asyncio.sleep(0.2)
    assert len(passes) == stopped


@pytest.mark.parametrize("days", [None, 7])
async def test_nothing_is_deleted_without_a_retention(days):
    """Without a conversation retention no card is expired and no conversation deleted."""
    store = FakeStore(idle=["a"])
    done = await keeper(store, audit_retention_days=days).apply_retention()
    assert (done.expired, done.deleted) == (0, 0) and store.idle == ["a"]
