"""Audit entries: who did what to which tool call, and what was refused."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from bot.base.conversation import storable_text
from bot.reviews.decisions import storable_problem

if TYPE_CHECKING:
    from bot.base.conversation import Actor
    from bot.reviews.records import ApprovalRecord


class AuditKind(StrEnum):
    """The kinds of audit rows (DESIGN.md "Approvals", docs/decisions/0006; escalations, docs/decisions/0023)."""

    DECISION = "decision"
    REFUSED = "refused"
    EXPIRY = "expiry"
    CONFIG = "config"
    ESCALATION = "escalation"
    """A card posted to its escalation target (when, to whom); decisions of that audience are
    `decision` rows with `detail["via"] == "escalation"`."""
    PIN = "pin"
    """An MCP tool's definition pinned at first sight, held when its server changed or added it,
    or accepted by an admin (`bot.tools.mcp.pins.audit`)."""
    QUESTION = "question"
    """An MCP server's question put to a requester (`asked`), and what became of it (`answered`
    with the action and the names of the fields filled in, never their values; `expired`,
    `stopped`), `bot.tools.mcp.elicitation.store`."""


MAX_REFUSED_ARGS_CHARS = 4000
"""Characters of JSON kept of arguments an approver sent that were refused (`refused_args`): about
what Discord's edit form takes; the arguments a call runs with are bounded where they enter."""


def refused_args(args: Mapping[str, Any]) -> dict[str, Any]:
    """What an audit row keeps of arguments that were refused (an approver's edit): as sent, or bounded.

    Such arguments passed no check: they may be as long as the form allowed (or any length at
    the terminal), or hold what jsonb cannot (U+0000, a lone surrogate, an integer beyond 64
    bits, deep nesting). Those are kept as `{"json": <their JSON text>}`, cut after
    `MAX_REFUSED_ARGS_CHARS` characters with "…", so the refusal is always recorded.
    """
    text = json.dumps(args, ensure_ascii=False, default=str)
    if storable_problem(args) is None and len(text) <= MAX_REFUSED_ARGS_CHARS:
        return dict(args)
    text = storable_text(text)
    return {"json": text if len(text) <= MAX_REFUSED_ARGS_CHARS else text[:MAX_REFUSED_ARGS_CHARS] + "…"}


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditEntry:
    """One append-only audit row.

    Attributes:
        kind: the row's kind.
        workspace_id: the workspace it concerns.
        outcome: e.g. `approved`, `edited`, `rejected`, `not_permitted`, `invalid`,
            `already_decided`.
        actor_id / actor_name: who acted (None for the system, e.g. an expiry).
        detail: anything else worth keeping, JSON-serialisable.
    """

    kind: AuditKind
    workspace_id: str
    outcome: str
    thread_id: str | None = None
    approval_id: str | None = None
    tool_name: str | None = None
    actor_id: str | None = None
    actor_name: str | None = None
    proposed_args: dict[str, Any] | None = None
    final_args: dict[str, Any] | None = None
    reason: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    at: datetime | None = None


def approval_entry(
    kind: AuditKind, approval: ApprovalRecord, outcome: str, *, actor: Actor | None = None, **fields: Any
) -> AuditEntry:
    """An audit row about one approval: its workspace, thread, id, tool and proposed arguments.

    The subagent that asked for the call, if any, is kept in `detail["source"]`.

    Args:
        kind: decision, refused, expiry or escalation.
        approval: the approval concerned.
        outcome: see `AuditEntry.outcome`.
        actor: who acted; None for the system.
        fields: any other `AuditEntry` field (`reason`, `detail`, `final_args`).
    """
    if approval.source:
        fields["detail"] = {"source": approval.source, **fields.get("detail", {})}
    return AuditEntry(
        kind=kind,
        workspace_id=approval.workspace_id,
        thread_id=approval.thread_id,
        approval_id=approval.id,
        tool_name=approval.tool_name,
        actor_id=actor.user_id if actor else None,
        actor_name=actor.display_name if actor else None,
        outcome=outcome,
        proposed_args=approval.proposed_args,
        **fields,
    )
