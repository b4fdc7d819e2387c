"""`InMemoryConfigStore`: the `ConfigStore` in a process's memory, for tests.

Each method yields to the event loop once at its start, as a database round trip would, then
runs without awaiting: a change and its audit row (`InMemoryAuditStore.append`) are one step, as
in the PostgreSQL store's transaction, and concurrent changes apply one at a time. Values are
kept as PostgreSQL reads them back (settings through a JSON round trip).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from bot.audit.entries import AuditEntry
from bot.audit.memory import InMemoryAuditStore
from bot.base.conversation import Actor
from bot.base.mode import Mode
from bot.policy.audit import change_entry, escalation_json, rule_json, trust_json
from bot.policy.config import ALL, ApproverRule, SettingKey, ToolRule, TrustSetting, WorkspaceConfig
from bot.reviews.escalation.rules import EscalationRule
from bot.tools.server_wide import server_patterns

_K = TypeVar("_K")
_V = TypeVar("_V")


@dataclass(slots=True)
class ConfigTables:
    """The in-memory store's data, keyed like the tables' primary keys.

    Attributes:
        rules: `(platform, workspace_id, channel_id, tool_name) -> rule`.
        approvers: `(platform, workspace_id, tool_name, kind, subject_id) -> entry`, oldest first.
        admins: `(platform, workspace_id, user_id)`.
        settings: `(platform, workspace_id, channel_id, tool_name, key) -> JSON value`.
        trust: `(platform, workspace_id, channel_id, tool_name) -> setting`.
        escalations: `(platform, workspace_id, tool_name) -> rule`.
    """

    rules: dict[tuple[str, str, str, str], ToolRule] = field(default_factory=dict)
    approvers: dict[tuple[str, str, str, str, str], ApproverRule] = field(default_factory=dict)
    admins: set[tuple[str, str, str]] = field(default_factory=set)
    settings: dict[tuple[str, str, str, str, str], Any] = field(default_factory=dict)
    trust: dict[tuple[str, str, str, str], TrustSetting] = field(default_factory=dict)
    escalations: dict[tuple[str, str, str], EscalationRule] = field(default_factory=dict)


class InMemoryConfigStore:
    """A `ConfigStore` over `ConfigTables` (see the module docstring).

    Args:
        audit: the audit log (config rows are appended with their change).
        tables: the data to share with other instances; fresh tables when omitted.
    """

    def __init__(self, audit: InMemoryAuditStore, tables: ConfigTables | None = None) -> None:
        self._audit = audit
        self.tables = tables if tables is not None else ConfigTables()

    async def denied_in_any_workspace(self, platform: str, tool_name: str) -> bool:
        """See `ConfigStore.denied_in_any_workspace`."""
        await asyncio.sleep(0)
        names = (tool_name, *server_patterns(tool_name))
        workspaces = {(p, w) for (p, w, _, _) in self.tables.rules if p == platform}
        return any(
            (rule := self._workspace_rule(workspace, names)) is not None and rule.mode is Mode.DENY
            for workspace in workspaces
        )

    async def could_be_stricter(
        self, platform: str, tool_name: str, *, settings_too: bool, limit: int, besides: str = ""
    ) -> list[str]:
        """See `ConfigStore.could_be_stricter`."""
        await asyncio.sleep(0)
        names = (tool_name, *server_patterns(tool_name))
        t = self.tables
        found = {
            w
            for (p, w, channel, tool), rule in t.rules.items()
            if p == platform and channel == ALL and tool in names and rule.mode is Mode.REVIEW
        }
        if settings_too:
            found |= {
                w
                for (p, w, channel, tool, key), value in t.settings.items()
                if p == platform
                and channel == ALL
                and (tool == ALL or tool in names)
                and (
                    (key == SettingKey.QUORUM.value and not _json_equal(value, 1))
                    or (key == SettingKey.SELF_APPROVAL.value and value is False)
                )
            }
        found.discard(besides)
        return sorted(found)[: max(limit, 0)]

    async def load(self, platform: str, workspace_id: str) -> WorkspaceConfig:
        """See `ConfigStore.load`."""
        await asyncio.sleep(0)
        t, here = self.tables, (platform, workspace_id)
        return WorkspaceConfig(
            platform=platform,
            workspace_id=workspace_id,
            rules={(c, tool): rule for (p, w, c, tool), rule in t.rules.items() if (p, w) == here},
            approvers=tuple(rule for (p, w, *_), rule in t.approvers.items() if (p, w) == here),
            admins=frozenset(user for (p, w, user) in t.admins if (p, w) == here),
            settings={(c, tool, key): _json(v) for (p, w, c, tool, key), v in t.settings.items() if (p, w) == here},
            trust={(c, tool): setting for (p, w, c, tool), setting in t.trust.items() if (p, w) == here},
            escalations={tool: rule for (p, w, tool), rule in t.escalations.items() if (p, w) == here},
        )

    async def set_rule(
        self, actor: Actor, *, channel_id: str, tool_name: str, mode: Mode | None, condition: str | None
    ) -> tuple[ToolRule | None, ToolRule | None]:
        """See `ConfigStore.set_rule`."""
        await asyncio.sleep(0)
        key = (actor.platform, actor.workspace_id, channel_id, tool_name)
        before = self.tables.rules.get(key)
        if (before is None and mode is None) or (
            before is not None and mode is not None and (before.mode, before.condition) == (mode, condition)
        ):
            return before, before  # nothing to change or audit
        after = (
            ToolRule(
                tool_name=tool_name, mode=mode, condition=condition, channel_id=channel_id, updated_by=actor.user_id
            )
            if mode is not None
            else None
        )
        self._audit_change(
            actor,
            setting="policy",
            tool_name=tool_name,
            channel_id=channel_id,
            before=rule_json(before),
            after=rule_json(after),
        )
        _put(self.tables.rules, key, after)
        return before, after

    async def change_approver(self, actor: Actor, rule: ApproverRule, *, add: bool) -> bool:
        """See `ConfigStore.change_approver`."""
        await asyncio.sleep(0)
        key = (actor.platform, actor.workspace_id, rule.tool_name, rule.kind.value, rule.subject_id)
        if (key in self.tables.approvers) == add:
            return False
        entry = {"kind": rule.kind.value, "id": rule.subject_id}
        self._audit_change(
            actor,
            setting="approvers",
            tool_name=rule.tool_name,
            before=None if add else entry,
            after=entry if add else None,
        )
        _put(
            self.tables.approvers,
            key,
            ApproverRule(kind=rule.kind, subject_id=rule.subject_id, tool_name=rule.tool_name) if add else None,
        )
        return True

    async def change_admin(self, actor: Actor, user_id: str, *, add: bool) -> bool:
        """See `ConfigStore.change_admin`."""
        await asyncio.sleep(0)
        key = (actor.platform, actor.workspace_id, user_id)
        if (key in self.tables.admins) == add:
            return False
        self._audit_change(actor, setting="admins", before=None if add else user_id, after=user_id if add else None)
        if add:
            self.tables.admins.add(key)
        else:
            self.tables.admins.discard(key)
        return True

    async def set_setting(
        self, actor: Actor, key: SettingKey, value: Any, *, channel_id: str = ALL, tool_name: str = ALL
    ) -> tuple[Any, Any]:
        """See `ConfigStore.set_setting`."""
        await asyncio.sleep(0)
        ids = (actor.platform, actor.workspace_id, channel_id, tool_name, key.value)
        before = _json(self.tables.settings.get(ids))
        if before == value:
            return before, value  # nothing to change or audit
        stored = _json(value)  # refuses what PostgreSQL's JSON codec refuses, before anything changed
        self._audit_change(
            actor, setting=key.value, tool_name=tool_name, channel_id=channel_id, before=before, after=value
        )
        _put(self.tables.settings, ids, stored)
        return before, value

    async def set_trust(
        self, actor: Actor, *, channel_id: str, tool_name: str, setting: TrustSetting | None
    ) -> tuple[TrustSetting | None, TrustSetting | None]:
        """See `ConfigStore.set_trust`."""
        await asyncio.sleep(0)
        key = (actor.platform, actor.workspace_id, channel_id, tool_name)
        before = self.tables.trust.get(key)
        if trust_json(before) == trust_json(setting):
            return before, before  # nothing to change or audit
        after = (
            replace(setting, channel_id=channel_id, tool_name=tool_name, updated_by=actor.user_id)
            if setting is not None
            else None
        )
        self._audit_change(
            actor,
            setting="trust",
            tool_name=tool_name,
            channel_id=channel_id,
            before=trust_json(before),
            after=trust_json(after),
        )
        _put(self.tables.trust, key, None if after is None else replace(after, matching=tuple(after.matching)))
        return before, after

    async def set_escalation(
        self, actor: Actor, tool_name: str, rule: EscalationRule | None
    ) -> tuple[EscalationRule | None, EscalationRule | None]:
        """See `ConfigStore.set_escalation`."""
        await asyncio.sleep(0)
        key = (actor.platform, actor.workspace_id, tool_name)
        before = self.tables.escalations.get(key)
        if before == rule:
            return before, rule  # nothing to change or audit
        self._audit_change(
            actor,
            setting="escalation",
            tool_name=tool_name,
            before=escalation_json(before),
            after=escalation_json(rule),
        )
        _put(self.tables.escalations, key, None if rule is None else replace(rule, tool_name=tool_name))
        return before, rule

    def _workspace_rule(self, workspace: tuple[str, str], names: tuple[str, ...]) -> ToolRule | None:
        """The workspace-wide rule for the first of `names` that has one (the tool's own before its server's)."""
        for name in names:
            rule = self.tables.rules.get((*workspace, ALL, name))
            if rule is not None:
                return rule
        return None

    def _audit_change(self, actor: Actor, **change: Any) -> None:
        entry: AuditEntry = change_entry(actor, **change)
        self._audit.append(entry)


def _put(table: dict[_K, _V], key: _K, value: _V | None) -> None:
    """Upsert `value` at `key`, or with None delete it (a re-added row goes last, as its `added_at` is newest)."""
    table.pop(key, None)
    if value is not None:
        table[key] = value


def _json(value: Any) -> Any:
    """`value` as a jsonb column reads it back."""
    return None if value is None else json.loads(json.dumps(value))


def _json_equal(value: Any, other: Any) -> bool:
    """Equality as jsonb sees it: `true` is not `1`."""
    return (
        type(value) is type(other) and value == other
        if isinstance(value, bool) or isinstance(other, bool)
        else value == other
    )
