"""The audit rows of configuration changes, written by the configuration stores with each change.

Each change is one `config` row: `outcome` names the setting (`policy`, `approvers`, `admins`,
`trust`, `escalation`, or a `SettingKey`), `detail` holds the platform, the channel (None:
workspace-wide) and the value before and after, in the JSON shapes below.
"""

from __future__ import annotations

from typing import Any

from bot.audit.entries import AuditEntry, AuditKind
from bot.base.conversation import Actor
from bot.policy.config import ALL, ToolRule, TrustSetting
from bot.reviews.escalation.rules import EscalationRule


def change_entry(
    actor: Actor, *, setting: str, before: Any, after: Any, tool_name: str = ALL, channel_id: str = ALL
) -> AuditEntry:
    """The row of `actor` changing `setting` (for `tool_name` in `channel_id`) from `before` to `after` (JSON)."""
    return AuditEntry(
        kind=AuditKind.CONFIG,
        workspace_id=actor.workspace_id,
        tool_name=tool_name or None,
        actor_id=actor.user_id,
        actor_name=actor.display_name,
        outcome=setting,
        detail={
            "platform": actor.platform,
            "channel_id": channel_id or None,
            "before": before,
            "after": after,
        },
    )


def rule_json(rule: ToolRule | None) -> dict[str, Any] | None:
    """A tool rule as its audit rows show it."""
    if rule is None:
        return None
    return {"mode": rule.mode.value, "condition": rule.condition}


def trust_json(setting: TrustSetting | None) -> dict[str, Any] | None:
    """A trust setting as its audit rows show it (also what tells two settings apart)."""
    if setting is None:
        return None
    return {"up_to_s": setting.max_s, "matching": list(setting.matching)}


def escalation_json(rule: EscalationRule | None) -> dict[str, Any] | None:
    """An escalation as its audit rows show it."""
    if rule is None:
        return None
    return {"after_s": rule.after_s, "to": {"kind": rule.target.kind.value, "id": rule.target.subject_id}}
