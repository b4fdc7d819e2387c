"""Behind a transaction-mode connection pooler (PgBouncer 1.18, which keeps no prepared statements).

With `DATABASE_PREPARED_STATEMENTS=false` the whole flow works through the pooler: a turn, a
card, a decision, the resume under the conversation's lock, and the tool run exactly once; and
Discord's IDENTIFY spacing (a transaction-scoped lock) holds through it.
"""

from __future__ import annotations

import asyncio
import shutil

import asyncpg
import pytest
from langchain_core.messages import AIMessage

from bot.reviews.decisions import Approve
from bot.storage.start_spacing import StartSpacing
from tests.support.pooler import transaction_pooler
from tests.support.scripted_model import ScriptedChatModel, calls, tool_call
from tests.support.service import actor, conversation, message, open_service
from tests.support.tools import ToolLog, make_test_registry

pytestmark = pytest.mark.skipif(
    shutil.which("pgbouncer") is None and not shutil.which("/usr/sbin/pgbouncer"),
    reason="pgbouncer is not installed (.ci/run installs it)",
)


async def test_the_flow_works_through_a_transaction_mode_pooler(db_url):
    """Message, card, approve, resume, answer: all through PgBouncer in transaction mode."""
    log = ToolLog()
    model = ScriptedChatModel(
        replies=[calls(tool_call("send", {"to": "bob", "body": "hi"})), AIMessage("sent"), AIMessage("and hello")]
    )
    async with (
        transaction_pooler(db_url) as pooled,
        open_service(pooled, model, make_test_registry(log), prepared_statements=False) as h,
    ):
        await h.service.handle_message(message("send bob hi", message_id="1.1"))
        [card] = h.platform.cards.values()
        await h.service.decide(card.approval.id, actor("alice"), Approve())
        await h.service.tasks.join()
        await h.service.handle_message(message("hello", message_id="1.2"))
    assert log.calls == [("send", {"to": "bob", "body": "hi", "urgent": False})]
    assert h.platform.answers == [(conversation().thread_id, "sent"), (conversation().thread_id, "and hello")]


async def test_pruning_and_retention_work_through_a_transaction_mode_pooler(db_url):
    """A prune (one snapshot transaction), a conversation's deletion and an audit deletion, all through PgBouncer."""
    model = ScriptedChatModel(replies=[calls(tool_call("send", {"to": "bob", "body": "hi"})), AIMessage("sent")])
    async with (
        transaction_pooler(db_url) as pooled,
        open_service(
            pooled,
            model,
            make_test_registry(ToolLog()),
            prepared_statements=False,
            retention_days=1,
            audit_retention_days=1,
            prune_every_runs=1,
        ) as h,
    ):
        await h.service.upkeep.stop()  # the passes below are the loop's
        keeper = h.service.housekeeping
        assert keeper is not None
        thread_id = conversation().thread_id
        await h.service.handle_message(message("send bob hi", message_id="1.1"))
        assert await keeper.prune_checkpoints() == 1
        [card] = h.platform.cards.values()
        await h.service.decide(card.approval.id, actor("alice"), Approve())
        await h.service.tasks.join()
        assert await keeper.prune_checkpoints() == 1
        pool = h.database.pool
        await pool.execute("UPDATE conversations SET last_active_at = now() - interval '2 days'")
        await pool.execute(
            "INSERT INTO audit_log (at, kind, workspace_id, outcome) VALUES (now() - interval '2 days', 'config', 'W1', 'old')"
        )
        done = await keeper.apply_retention()
        left = await pool.fetchval("SELECT count(*) FROM checkpoints WHERE thread_id = $1", thread_id)
    assert h.platform.answers == [(thread_id, "sent")]
    assert (done.deleted, done.audit_rows, left) == (1, 1, 0)


async def test_identify_spacing_holds_through_a_transaction_mode_pooler(db_url):
    """Two processes' IDENTIFYs of one bucket, both through PgBouncer in transaction mode: spaced by the interval.

    The starts are read as the database recorded them (a trigger logs every write of
    `session_starts`), not as the test saw `take` return: on a busy machine the first return
    can reach the test later than the second's, and the gap it sees is then shorter than the
    one kept.
    """
    spacing = 1.5
    direct = await asyncpg.connect(db_url)
    try:
        await direct.execute(
            """CREATE TABLE start_log (bucket text, started_at timestamptz);
               CREATE FUNCTION log_start() RETURNS trigger LANGUAGE plpgsql AS
                 $$ BEGIN INSERT INTO start_log VALUES (NEW.bucket, NEW.started_at); RETURN NEW; END $$;
               CREATE TRIGGER log_start AFTER INSERT OR UPDATE ON session_starts
                 FOR EACH ROW EXECUTE FUNCTION log_start();"""
        )
        async with transaction_pooler(db_url) as pooled:
            pools = [
                await asyncpg.create_pool(pooled, min_size=1, max_size=2, statement_cache_size=0) for _ in range(2)
            ]
            try:
                await asyncio.gather(
                    *(asyncio.wait_for(StartSpacing(pool, spacing).take(0), timeout=60) for pool in pools)
                )
            finally:
                for pool in pools:
                    await pool.close()
        first, second = await direct.fetch("SELECT started_at FROM start_log ORDER BY started_at")
    finally:
        await direct.close()
    assert (second["started_at"] - first["started_at"]).total_seconds() >= spacing
