"""`InMemoryLedger`: the `ToolRunLedger` in a process's memory, for graph tests."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.tools.ledger.store import Claim, Round, ToolResult, TrustUse


class InMemoryLedger:
    """A process-local ledger without an approvals gate, for graph tests.

    Graph tests resume with decisions directly, with no approvals table, so `reviewed` is
    not checked here; `bot.tools.ledger.postgres.PostgresLedger` is the one that checks it.
    """

    def __init__(self) -> None:
        self._claimed: set[tuple[str, str]] = set()
        self._results: dict[tuple[str, str], ToolResult] = {}
        self._rounds: dict[tuple[str, str], dict[int, Mapping[str, Any] | None]] = {}

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
        """See `ToolRunLedger.claim` (neither `reviewed`, `trust` nor `definition` is checked here)."""
        key = (thread_id, tool_call_id)
        if key in self._claimed and self._rounds.get(key):
            return Claim.ASKED
        if key in self._claimed:
            return Claim.FINISHED if key in self._results else Claim.ALREADY_STARTED
        self._claimed.add(key)
        return Claim.GRANTED

    async def record(self, *, thread_id: str, tool_call_id: str, result: ToolResult, cut_short: bool = False) -> None:
        """See `ToolRunLedger.record` (a call never claimed keeps nothing, as PostgreSQL updates only a claim's row)."""
        key = (thread_id, tool_call_id)
        if key in self._claimed:
            self._results[key] = result

    async def recorded(self, *, thread_id: str, tool_call_id: str) -> ToolResult | None:
        """See `ToolRunLedger.recorded`."""
        return self._results.get((thread_id, tool_call_id))

    async def started(self, *, thread_id: str, tool_call_id: str) -> bool:
        """See `ToolRunLedger.started`."""
        return (thread_id, tool_call_id) in self._claimed

    async def claim_round(self, *, thread_id: str, tool_call_id: str, number: int) -> bool:
        """See `ToolRunLedger.claim_round`."""
        rounds = self._rounds.setdefault((thread_id, tool_call_id), {})
        if number in rounds:
            return False
        rounds[number] = None
        return True

    async def record_round(self, *, thread_id: str, tool_call_id: str, number: int, asked: Mapping[str, Any]) -> None:
        """See `ToolRunLedger.record_round`."""
        self._rounds.setdefault((thread_id, tool_call_id), {})[number] = dict(asked)

    async def rounds(self, *, thread_id: str, tool_call_id: str) -> list[Round]:
        """See `ToolRunLedger.rounds`."""
        rounds = self._rounds.get((thread_id, tool_call_id), {})
        return [Round(number=number, asked=rounds[number]) for number in sorted(rounds)]
