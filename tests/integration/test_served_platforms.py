"""A process takes only the work of the platforms it serves (docs/decisions/0031).

Several processes may share one database and serve different platforms: a `countersign chat` run
against a Slack deployment's database, or replicas split by platform. A card's expiry, its
escalation, a resume and a message left unanswered all end in posts on the conversation's
platform; a process without it would fail each one and count the failures as attempts, until
the work was given up.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from langchain_core.messages import AIMessage

from bot.admin.commands import SetEscalation, SetExpiry
from bot.admin.service import AdminService
from bot.reviews.escalation.rules import EscalationTarget, TargetKind
from bot.reviews.lifecycle import ApprovalStatus
from bot.turns.inbox import inbox_key
from bot.turns.inbox_postgres import PostgresInbox
from tests.support.barriers import wait_until
from tests.support.recording_platform import RecordingPlatform
from tests.support.scripted_model import ScriptedChatModel, calls, tool_call
from tests.support.service import actor, conversation, message, open_service

ADMIN = "boss"


async def test_a_process_leaves_the_work_of_a_platform_it_does_not_serve_to_one_that_does(db_url, registry, tool_log):
    """A card past its expiry and its escalation, and a message left unanswered, in a conversation
    of a platform this process does not serve: not expired, escalated or tried here, no attempt
    counted; the next process that serves that platform finishes all of it."""
    model = ScriptedChatModel(replies=[calls(tool_call("send", {"to": "bob", "body": "hi"}))])
    left = message("anyone?", conv=conversation("C2"), message_id="4.1")
    async with open_service(db_url, model, registry, RecordingPlatform(admins={ADMIN})) as theirs:
        admin = AdminService(
            config=theirs.config, audit=theirs.audit, registry=registry, directory_for=lambda name: theirs.platform
        )
        for command in (
            SetExpiry(seconds=3600),
            SetEscalation(tool="send", after_s=1800, target=EscalationTarget(kind=TargetKind.USER, subject_id="carol")),
        ):
            await admin.execute(actor(ADMIN), command, here="C1")
        await theirs.service.handle_message(message("send"))
        [card] = [c.approval for c in theirs.platform.cards.values()]
        assert await PostgresInbox(theirs.database.pool).accept(inbox_key(left) or "", left) is None
    # Their process is gone; its card and the unanswered message are overdue.
    past = datetime.now(UTC) - timedelta(seconds=1)
    async with open_service(db_url, model, registry, RecordingPlatform(name="console")) as here:
        pool = here.database.pool
        await pool.execute(
            "UPDATE approvals SET escalate_at = $1, expires_at = $1::timestamptz + interval '1 hour'", past
        )
        await pool.execute("UPDATE inbox SET retry_at = now()")
        assert await here.service.escalation.sweep() == 0
        assert await here.service.escalation.next_due() is None
        await pool.execute("UPDATE approvals SET expires_at = $1", past)
        assert await here.service.expiry.sweep() == 0
        assert await here.service.expiry.next_due() is None
        assert await here.service.recover() == []
        await here.service.tasks.join()
        assert await pool.fetchval("SELECT status FROM approvals WHERE id = $1", card.id) == "pending"
        assert await pool.fetchval("SELECT escalation FROM approvals WHERE id = $1", card.id) == "waiting"
        assert await pool.fetchval("SELECT (status, attempts) FROM inbox WHERE event_key = $1", inbox_key(left)) == (
            "accepted",
            0,
        )
        assert here.platform.answers == [] and here.platform.notices == [] and here.platform.updates == []
    model.replies.extend([AIMessage("late but answered"), AIMessage("it expired")])
    async with open_service(db_url, model, registry, RecordingPlatform(admins={ADMIN})) as again:
        await wait_until(lambda: len(again.platform.answers) == 2, "both answers from a process that serves them")
        await again.service.tasks.join()
        assert (await again.approvals.get(card.id)).status is ApprovalStatus.EXPIRED
    assert sorted(text for _, text in again.platform.answers) == ["it expired", "late but answered"]
    assert tool_log.calls == []
