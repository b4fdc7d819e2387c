"""The tool-run ledger in PostgreSQL (see `bot.tools.ledger`)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import asyncpg

from bot.approvals.digest import args_digest
from bot.approvals.lifecycle import ApprovalStatus
from bot.approvals.records import ApprovalRecord
from bot.storage.approval_store import ApprovalStore
from bot.tools.ledger import Claim, ToolResult

log = logging.getLogger(__name__)


OnOutcomeUnknown = Callable[[ApprovalRecord], Awaitable[None]]


class PostgresLedger:
    """Claims tool calls in the `tool_runs` table, behind the approvals gate.

    Args:
        pool: the asyncpg pool.
        approvals: where a reviewed call's approved digest is read.
        on_outcome_unknown: called with the approval of a decided call found started before
            (cut short by a crash or a shutdown), or cancelled by a Stop while it ran, once it
            is marked `outcome_unknown`, so that its card can say so (the service redraws it).
            A failure there is logged.
    """

    def __init__(
        self, pool: asyncpg.Pool, approvals: ApprovalStore, on_outcome_unknown: OnOutcomeUnknown | None = None
    ) -> None:
        self._pool = pool
        self._approvals = approvals
        self.on_outcome_unknown = on_outcome_unknown

    async def claim(
        self, *, thread_id: str, tool_call_id: str, tool_name: str, args: Mapping[str, Any], reviewed: bool
    ) -> Claim:
        """GRANTED once per call, and for a reviewed call only with its approved arguments.

        A stored approval is checked whatever `reviewed` says (a call someone decided on runs
        only as decided); a `reviewed` call without one is refused (see `bot.tools.ledger`).
        """
        gate = await self._approvals.gate(thread_id, tool_call_id)
        if gate is None and reviewed:
            log.error(
                "refusing to run %s: it was held for review but no decision is stored (tool_call_id=%s thread_id=%s)",
                tool_name,
                tool_call_id,
                thread_id,
            )
            return Claim.NOT_APPROVED
        if gate is not None:
            status, approved = gate
            if status not in (ApprovalStatus.APPROVED, ApprovalStatus.EDITED) or approved != args_digest(args):
                log.error(
                    "refusing to run %s: review %s does not cover these arguments (tool_call_id=%s thread_id=%s)",
                    tool_name,
                    status.value,
                    tool_call_id,
                    thread_id,
                )
                return Claim.NOT_APPROVED
        claimed = await self._pool.fetchval(
            """
            INSERT INTO tool_runs (thread_id, tool_call_id, tool_name) VALUES ($1, $2, $3)
            ON CONFLICT DO NOTHING RETURNING true
            """,
            thread_id,
            tool_call_id,
            tool_name,
        )
        if claimed:
            return Claim.GRANTED
        if await self.recorded(thread_id=thread_id, tool_call_id=tool_call_id) is not None:
            return Claim.FINISHED
        if gate is not None:
            await self._outcome_unknown(thread_id, tool_call_id)
        return Claim.ALREADY_STARTED

    async def record(self, *, thread_id: str, tool_call_id: str, result: ToolResult, cut_short: bool = False) -> None:
        """See `ToolRunLedger.record`; a call cut short by a stop marks its approval's outcome unknown."""
        await self._pool.execute(
            "UPDATE tool_runs SET finished_at = now(), result = $3 WHERE thread_id = $1 AND tool_call_id = $2",
            thread_id,
            tool_call_id,
            {"content": result.content, "status": result.status},
        )
        if cut_short:
            await self._outcome_unknown(thread_id, tool_call_id)

    async def recorded(self, *, thread_id: str, tool_call_id: str) -> ToolResult | None:
        """See `ToolRunLedger.recorded`."""
        stored = await self._pool.fetchval(
            "SELECT result FROM tool_runs WHERE thread_id = $1 AND tool_call_id = $2", thread_id, tool_call_id
        )
        if not isinstance(stored, dict):
            return None
        return ToolResult(content=stored["content"], status=str(stored.get("status") or "success"))

    async def _outcome_unknown(self, thread_id: str, tool_call_id: str) -> None:
        approval = await self._approvals.mark_outcome_unknown(thread_id, tool_call_id)
        if approval is None or self.on_outcome_unknown is None:
            return
        try:
            await self.on_outcome_unknown(approval)
        except Exception:
            log.exception("could not show that approval %s may not have taken effect", approval.id)
