"""`InMemoryAuditStore`: the `AuditStore` in a process's memory, for tests.

Rows are kept as PostgreSQL would read them back: JSON values through a JSON round trip,
arguments in canonical form, `at` set when written. The in-memory stores that write a change with
its audit row call `append` in the same step as the change (no await in between), which is what
the PostgreSQL ones get from writing the row in the change's transaction.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from bot.audit.entries import AuditEntry, AuditKind
from bot.tools.canonical import canonical_values


class InMemoryAuditStore:
    """An `AuditStore` over a list (see the module docstring).

    Args:
        entries: the rows to share with other instances, oldest first; a fresh list when omitted.

    Attributes:
        entries: every row written, oldest first (tests read it).
    """

    def __init__(self, entries: list[AuditEntry] | None = None) -> None:
        self.entries = entries if entries is not None else []

    def append(self, entry: AuditEntry) -> None:
        """Append `entry` now, without yielding to the event loop (for the in-memory stores' changes).

        Raises:
            TypeError: `proposed_args`, `final_args` or `detail` is not JSON-serialisable
                (nothing is appended).
        """
        self.entries.append(
            replace(
                entry,
                proposed_args=_stored_args(entry.proposed_args),
                final_args=_stored_args(entry.final_args),
                detail=json.loads(json.dumps(entry.detail)),
                at=datetime.now(UTC),
            )
        )

    async def record(self, entry: AuditEntry) -> None:
        """See `AuditStore.record`."""
        await asyncio.sleep(0)  # a round trip, so that concurrent callers interleave as on PostgreSQL
        self.append(entry)

    async def recent(
        self,
        workspace_id: str,
        *,
        limit: int = 20,
        tool_name: str | None = None,
        actor_id: str | None = None,
    ) -> list[AuditEntry]:
        """See `AuditStore.recent`."""
        await asyncio.sleep(0)
        rows = [
            entry
            for entry in reversed(self.entries)
            if (entry.workspace_id == workspace_id or (entry.workspace_id == "" and entry.kind is AuditKind.PIN))
            and (tool_name is None or tool_name in (entry.tool_name, _source(entry)))
            and (actor_id is None or entry.actor_id == actor_id)
        ]
        return rows[: max(limit, 0)]


def _stored_args(args: dict[str, Any] | None) -> dict[str, Any] | None:
    if args is None:
        return None
    stored: dict[str, Any] = canonical_values(json.loads(json.dumps(args)))
    return stored


def _source(entry: AuditEntry) -> str | None:
    source = entry.detail.get("source")
    return source if isinstance(source, str) else None
