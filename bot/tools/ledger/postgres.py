"""The tool-run ledger in PostgreSQL (see `bot.tools.ledger.store`)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import asyncpg

from bot.audit.entries import AuditEntry, AuditKind
from bot.audit.postgres import PostgresAuditStore
from bot.reviews.digest import args_digest
from bot.reviews.lifecycle import ApprovalStatus
from bot.reviews.postgres import PostgresApprovalStore
from bot.reviews.records import ApprovalRecord
from bot.reviews.trust.grants import key_digest
from bot.reviews.trust.postgres import live_grant_locked
from bot.tools.ledger.store import Claim, Round, ToolResult, TrustUse

log = logging.getLogger(__name__)


OnMarked = Callable[[ApprovalRecord], Awaitable[None]]

GATE_OPEN = (ApprovalStatus.APPROVED, ApprovalStatus.EDITED)
"""The decided states whose approved arguments may run."""


class PostgresLedger:
    """Claims tool calls in the `tool_runs` table, behind the approvals gate.

    Args:
        pool: the asyncpg pool.
        approvals: where a reviewed call's approved digest is read, and decided calls are marked;
            on the same database as `pool` (the claim reads the approvals table in its own statement).
        on_marked: called with the approval of a decided call once it is marked, so that its
            card can say so (the service redraws it): `outcome_unknown` for a call found
            started before (cut short by a crash or a shutdown) or cancelled by a Stop while it
            ran, `definition_changed` for one refused because its MCP tool's definition is no
            longer its card's. A failure there is logged.
        audit: where a run under a trust grant is recorded ("trusted by", docs/decisions/0022); without
            it, no call runs under a grant.
    """

    def __init__(
        self,
        pool: asyncpg.Pool,
        approvals: PostgresApprovalStore,
        on_marked: OnMarked | None = None,
        *,
        audit: PostgresAuditStore | None = None,
    ) -> None:
        self._pool = pool
        self._approvals = approvals
        self._audit = audit
        self._on_marked = on_marked

    async def claim(
        self,
        *,
        thread_id: str,
        tool_call_id: str,
        tool_name: str,
        args: Mapping[str, Any],
        reviewed: bool,
        trust: TrustUse | None = None,
        definition: str | None = None,
    ) -> Claim:
        """GRANTED once per call, and for a reviewed call only with its approved arguments and definition.

        A stored approval is checked whatever `reviewed` says (a call someone decided on runs
        only as decided, under the definition its card was made under); a `reviewed` call
        without one is refused (see `bot.tools.ledger.store`), unless it names a trust grant
        (`_claim_trusted`). A call claimed before is answered as such (ASKED, FINISHED or
        ALREADY_STARTED) even if its tool changed since: it is never run twice.

        The usual claim (a call never claimed, its approval or its absence letting it run) is
        one statement (`_claim_at_once`); every other answer is worked out below it, in the
        rare case that statement claims nothing.
        """
        digest = args_digest(args)
        if await self._claim_at_once(thread_id, tool_call_id, tool_name, reviewed, digest, definition):
            return Claim.GRANTED
        if await self.rounds(thread_id=thread_id, tool_call_id=tool_call_id):
            return Claim.ASKED
        gate = await self._approvals.gate(thread_id, tool_call_id)
        if gate is None and reviewed and trust is not None:
            return await self._claim_trusted(thread_id, tool_call_id, tool_name, args, trust, definition)
        if gate is None and reviewed:
            log.error(
                "refusing to run %s: it was held for review but no decision is stored (tool_call_id=%s thread_id=%s)",
                tool_name,
                tool_call_id,
                thread_id,
            )
            return Claim.NOT_APPROVED
        changed = False
        if gate is not None:
            if gate.status not in GATE_OPEN or gate.approved != digest:
                log.error(
                    "refusing to run %s: review %s does not cover these arguments (tool_call_id=%s thread_id=%s)",
                    tool_name,
                    gate.status.value,
                    tool_call_id,
                    thread_id,
                )
                return Claim.NOT_APPROVED
            changed = gate.definition != definition
        if changed and not await self.started(thread_id=thread_id, tool_call_id=tool_call_id):
            log.warning(
                "not running %s: its definition changed since its card was made (tool_call_id=%s thread_id=%s)",
                tool_name,
                tool_call_id,
                thread_id,
            )
            await self._mark(self._approvals.mark_definition_changed(thread_id, tool_call_id))
            return Claim.DEFINITION_CHANGED
        # The gate let the call run although the first statement claimed nothing: a decision
        # came in between. A call its changed tool finds claimed before is answered below.
        if not changed and await self._claim_at_once(thread_id, tool_call_id, tool_name, reviewed, digest, definition):
            return Claim.GRANTED
        if await self.recorded(thread_id=thread_id, tool_call_id=tool_call_id) is not None:
            return Claim.FINISHED
        if gate is not None:
            await self._mark(self._approvals.mark_outcome_unknown(thread_id, tool_call_id))
        return Claim.ALREADY_STARTED

    async def _claim_at_once(
        self,
        thread_id: str,
        tool_call_id: str,
        tool_name: str,
        reviewed: bool,
        digest: str,
        definition: str | None,
    ) -> bool:
        """Claim a call in one round trip when its gate lets it run as it stands; False otherwise.

        The call is claimed when it was never claimed and either its latest approval is
        approved or edited for exactly `digest` under `definition`, or it has no approval and
        its policy needs no review. False changes nothing: `claim` then answers why (or claims
        under a trust grant). The statement reads the gate and inserts from one snapshot, as
        the separate reads did one after the other.
        """
        return bool(
            await self._pool.fetchval(
                """
                WITH gate AS (
                    SELECT status, approved_digest, definition_digest FROM approvals
                    WHERE thread_id = $1 AND tool_call_id = $2 ORDER BY created_at DESC LIMIT 1
                )
                INSERT INTO tool_runs (thread_id, tool_call_id, tool_name)
                SELECT $1, $2, $3
                WHERE CASE WHEN EXISTS (SELECT 1 FROM gate)
                           THEN EXISTS (SELECT 1 FROM gate WHERE status = ANY($5::text[]) AND approved_digest = $6
                                        AND definition_digest IS NOT DISTINCT FROM $7)
                           ELSE NOT $4 END
                ON CONFLICT DO NOTHING RETURNING true
                """,
                thread_id,
                tool_call_id,
                tool_name,
                reviewed,
                [status.value for status in GATE_OPEN],
                digest,
                definition,
            )
        )

    async def _claim_trusted(
        self,
        thread_id: str,
        tool_call_id: str,
        tool_name: str,
        args: Mapping[str, Any],
        trust: TrustUse,
        definition: str | None,
    ) -> Claim:
        """Claim a reviewed call under a trust grant: the grant's own digest check, then the claim.

        One transaction: the grant is read live and locked against a revoke in flight
        (`live_grant_locked`); a call claimed before is never run again (FINISHED or
        ALREADY_STARTED, as for any call); a call of a turn whose stop is recorded does not
        start (STOPPED: the stop's transaction and this claim are ordered by the conversation's
        row, so a trusted call is claimed before a stop or not at all, although decision 0021's
        signal may reach this replica up to a second later); otherwise the grant must be of this
        conversation, tool and requester and bind exactly the values of `args` (the same
        canonical arguments and digest an approval binds, decision 0010) under the tool's
        `definition` (`key_digest`), and the claim and its audit row ("trusted", by the grant's
        approver) are written together.
        """
        if self._audit is None:
            log.error("refusing to run %s under trust: no audit log (tool_call_id=%s)", tool_name, tool_call_id)
            return Claim.NOT_APPROVED
        async with self._pool.acquire() as connection, connection.transaction():
            # The conversation's row first (the order a stop and the retention sweep take):
            # KEY SHARE makes a stop's `FOR UPDATE` wait for this claim, and this claim see a
            # stop committed before it, while the run's own updates of the row go on.
            stopped = await connection.fetchval(
                "SELECT stop_requested_at IS NOT NULL FROM conversations WHERE thread_id = $1 FOR KEY SHARE",
                thread_id,
            )
            grant = await live_grant_locked(connection, trust.grant_id)
            before = await connection.fetchval(
                "SELECT result IS NOT NULL FROM tool_runs WHERE thread_id = $1 AND tool_call_id = $2",
                thread_id,
                tool_call_id,
            )
            if before is not None:  # claimed before (a re-run after a crash): never run twice
                return Claim.FINISHED if before else Claim.ALREADY_STARTED
            if stopped:  # nobody approved this call itself: a stopped turn starts no trusted call
                log.info(
                    "not running %s under trust %s: the turn was stopped (tool_call_id=%s thread_id=%s)",
                    tool_name,
                    trust.grant_id,
                    tool_call_id,
                    thread_id,
                )
                return Claim.STOPPED
            if (
                grant is None
                or grant.thread_id != thread_id
                or grant.tool_name != tool_name
                or grant.requester_id != trust.requester_id
                or key_digest(args, grant.matching, definition) != grant.matched_digest
            ):
                log.error(
                    "refusing to run %s: trust %s does not cover it now (tool_call_id=%s thread_id=%s)",
                    tool_name,
                    trust.grant_id,
                    tool_call_id,
                    thread_id,
                )
                return Claim.NOT_APPROVED
            claimed = await connection.fetchval(
                """INSERT INTO tool_runs (thread_id, tool_call_id, tool_name, trust_grant_id) VALUES ($1, $2, $3, $4)
                   ON CONFLICT DO NOTHING RETURNING true""",
                thread_id,
                tool_call_id,
                tool_name,
                grant.id,
            )
            if not claimed:  # pragma: no cover - the thread lock admits one runner; a race claims once
                return Claim.ALREADY_STARTED
            await self._audit.record(
                AuditEntry(
                    kind=AuditKind.DECISION,
                    workspace_id=grant.workspace_id,
                    thread_id=thread_id,
                    approval_id=grant.approval_id,
                    tool_name=tool_name,
                    actor_id=grant.granted_by_id,
                    actor_name=grant.granted_by_name,
                    outcome="trusted",
                    proposed_args=dict(args),
                    detail={"trust_id": grant.id, "tool_call_id": tool_call_id, "requester_id": grant.requester_id},
                ),
                connection=connection,
            )
        log.info("%s runs under trust %s (tool_call_id=%s thread_id=%s)", tool_name, grant.id, tool_call_id, thread_id)
        return Claim.GRANTED

    async def record(self, *, thread_id: str, tool_call_id: str, result: ToolResult, cut_short: bool = False) -> None:
        """See `ToolRunLedger.record`; a call cut short by a stop marks its approval's outcome unknown."""
        await self._pool.execute(
            "UPDATE tool_runs SET finished_at = now(), result = $3 WHERE thread_id = $1 AND tool_call_id = $2",
            thread_id,
            tool_call_id,
            {"content": result.content, "status": result.status},
        )
        if cut_short:
            await self._mark(self._approvals.mark_outcome_unknown(thread_id, tool_call_id))

    async def recorded(self, *, thread_id: str, tool_call_id: str) -> ToolResult | None:
        """See `ToolRunLedger.recorded`."""
        stored = await self._pool.fetchval(
            "SELECT result FROM tool_runs WHERE thread_id = $1 AND tool_call_id = $2", thread_id, tool_call_id
        )
        if not isinstance(stored, dict):
            return None
        return ToolResult(content=stored["content"], status=str(stored.get("status") or "success"))

    async def started(self, *, thread_id: str, tool_call_id: str) -> bool:
        """See `ToolRunLedger.started`."""
        return bool(
            await self._pool.fetchval(
                "SELECT EXISTS (SELECT 1 FROM tool_runs WHERE thread_id = $1 AND tool_call_id = $2)",
                thread_id,
                tool_call_id,
            )
        )

    async def claim_round(self, *, thread_id: str, tool_call_id: str, number: int) -> bool:
        """See `ToolRunLedger.claim_round`."""
        return bool(
            await self._pool.fetchval(
                """INSERT INTO tool_run_rounds (thread_id, tool_call_id, round) VALUES ($1, $2, $3)
                   ON CONFLICT DO NOTHING RETURNING true""",
                thread_id,
                tool_call_id,
                number,
            )
        )

    async def record_round(self, *, thread_id: str, tool_call_id: str, number: int, asked: Mapping[str, Any]) -> None:
        """See `ToolRunLedger.record_round`."""
        await self._pool.execute(
            """INSERT INTO tool_run_rounds (thread_id, tool_call_id, round, asked) VALUES ($1, $2, $3, $4)
               ON CONFLICT (thread_id, tool_call_id, round) DO UPDATE SET asked = EXCLUDED.asked""",
            thread_id,
            tool_call_id,
            number,
            dict(asked),
        )

    async def rounds(self, *, thread_id: str, tool_call_id: str) -> list[Round]:
        """See `ToolRunLedger.rounds`."""
        rows = await self._pool.fetch(
            "SELECT round, asked FROM tool_run_rounds WHERE thread_id = $1 AND tool_call_id = $2 ORDER BY round",
            thread_id,
            tool_call_id,
        )
        return [Round(number=row["round"], asked=row["asked"]) for row in rows]

    async def _mark(self, marking: Awaitable[ApprovalRecord | None]) -> None:
        """Mark a decided call's approval (`marking`), then let its card say so (`on_marked`)."""
        approval = await marking
        if approval is None or self._on_marked is None:
            return
        try:
            await self._on_marked(approval)
        except Exception:
            log.exception("could not show what became of approval %s", approval.id)
