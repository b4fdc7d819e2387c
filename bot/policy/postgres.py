"""`PostgresConfigStore`: the `ConfigStore` in PostgreSQL (migrations/0002.admin-configuration.sql and later).

Every change takes the row it replaces `FOR UPDATE` (or relies on the primary key's conflict),
so concurrent changes of one setting apply one at a time across replicas, and writes its audit
row on the change's connection, in its transaction. `load` is one statement: one snapshot.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from bot.audit.postgres import PostgresAuditStore
from bot.base.conversation import Actor
from bot.base.mode import Mode
from bot.policy.audit import change_entry, escalation_json, rule_json, trust_json
from bot.policy.config import (
    ALL,
    ApproverKind,
    ApproverRule,
    SettingKey,
    ToolRule,
    TrustSetting,
    WorkspaceConfig,
)
from bot.reviews.escalation.rules import EscalationRule, EscalationTarget, TargetKind
from bot.tools.server_wide import server_patterns


class PostgresConfigStore:
    """A `ConfigStore` on asyncpg (see the module docstring).

    Args:
        pool: the asyncpg pool.
        audit: the audit log (config rows go in the same transaction as the change).
    """

    def __init__(self, pool: asyncpg.Pool, audit: PostgresAuditStore) -> None:
        self._pool = pool
        self._audit = audit

    async def denied_in_any_workspace(self, platform: str, tool_name: str) -> bool:
        """See `ConfigStore.denied_in_any_workspace`."""
        names = [tool_name, *server_patterns(tool_name)]
        async with self._pool.acquire() as connection:
            return bool(
                await connection.fetchval(
                    """SELECT EXISTS (SELECT 1 FROM tool_policies p
                       WHERE p.platform = $1 AND p.channel_id = '' AND p.tool_name = ANY($2::text[])
                         AND p.mode = 'deny'
                         AND NOT EXISTS (SELECT 1 FROM tool_policies q
                              WHERE q.platform = p.platform AND q.workspace_id = p.workspace_id
                                AND q.channel_id = '' AND q.tool_name = ANY($2::text[])
                                AND array_position($2::text[], q.tool_name)
                                    < array_position($2::text[], p.tool_name)))""",
                    platform,
                    names,
                )
            )

    async def could_be_stricter(
        self, platform: str, tool_name: str, *, settings_too: bool, limit: int, besides: str = ""
    ) -> list[str]:
        """See `ConfigStore.could_be_stricter`."""
        rows = await self._pool.fetch(
            """
            SELECT workspace_id FROM tool_policies
             WHERE platform = $1 AND channel_id = '' AND tool_name = ANY($2::text[]) AND mode = 'review'
               AND workspace_id <> $5
            UNION
            SELECT workspace_id FROM settings
             WHERE $3 AND platform = $1 AND channel_id = '' AND (tool_name = '' OR tool_name = ANY($2::text[]))
               AND workspace_id <> $5
               AND ((key = 'quorum' AND value <> '1'::jsonb) OR (key = 'self_approval' AND value = 'false'::jsonb))
            ORDER BY workspace_id
            LIMIT $4
            """,
            platform,
            [tool_name, *server_patterns(tool_name)],
            settings_too,
            limit,
            besides,
        )
        return [row["workspace_id"] for row in rows]

    async def load(self, platform: str, workspace_id: str) -> WorkspaceConfig:
        """See `ConfigStore.load`."""
        row = await self._pool.fetchrow(
            """
            SELECT
              (SELECT coalesce(jsonb_agg(t), '[]') FROM tool_policies t
                WHERE platform = $1 AND workspace_id = $2) AS rules,
              (SELECT coalesce(jsonb_agg(a ORDER BY added_at), '[]') FROM approvers a
                WHERE platform = $1 AND workspace_id = $2) AS approvers,
              (SELECT coalesce(jsonb_agg(b.user_id), '[]') FROM bot_admins b
                WHERE platform = $1 AND workspace_id = $2) AS admins,
              (SELECT coalesce(jsonb_agg(s), '[]') FROM settings s
                WHERE platform = $1 AND workspace_id = $2) AS settings,
              (SELECT coalesce(jsonb_agg(t), '[]') FROM trust_settings t
                WHERE platform = $1 AND workspace_id = $2) AS trust,
              (SELECT coalesce(jsonb_agg(e), '[]') FROM escalations e
                WHERE platform = $1 AND workspace_id = $2) AS escalations
            """,
            platform,
            workspace_id,
        )
        if row is None:  # an aggregate always returns a row
            raise RuntimeError("the configuration query returned no row")
        rules, approvers, settings = row["rules"], row["approvers"], row["settings"]
        return WorkspaceConfig(
            platform=platform,
            workspace_id=workspace_id,
            rules={
                (r["channel_id"], r["tool_name"]): ToolRule(
                    tool_name=r["tool_name"],
                    mode=Mode(r["mode"]),
                    condition=r["condition"],
                    channel_id=r["channel_id"],
                    updated_by=r["updated_by"],
                )
                for r in rules
            },
            approvers=tuple(
                ApproverRule(kind=ApproverKind(r["kind"]), subject_id=r["subject_id"], tool_name=r["tool_name"])
                for r in approvers
            ),
            admins=frozenset(row["admins"]),
            settings={(r["channel_id"], r["tool_name"], r["key"]): r["value"] for r in settings},
            trust={(r["channel_id"], r["tool_name"]): _trust(r) for r in row["trust"]},
            escalations={r["tool_name"]: _escalation(r) for r in row["escalations"]},
        )

    async def set_rule(
        self, actor: Actor, *, channel_id: str, tool_name: str, mode: Mode | None, condition: str | None
    ) -> tuple[ToolRule | None, ToolRule | None]:
        """See `ConfigStore.set_rule`."""
        key = (actor.platform, actor.workspace_id, channel_id, tool_name)
        async with self._pool.acquire() as connection, connection.transaction():
            old = await connection.fetchrow(
                """SELECT * FROM tool_policies
                   WHERE platform = $1 AND workspace_id = $2 AND channel_id = $3 AND tool_name = $4
                   FOR UPDATE""",
                *key,
            )
            if (old is None and mode is None) or (
                old is not None and mode is not None and (old["mode"], old["condition"]) == (mode.value, condition)
            ):
                return (_rule(old) if old else None), (_rule(old) if old else None)  # nothing to change or audit
            if mode is None:
                await connection.execute(
                    """DELETE FROM tool_policies
                       WHERE platform = $1 AND workspace_id = $2 AND channel_id = $3 AND tool_name = $4""",
                    *key,
                )
            else:
                await connection.execute(
                    """INSERT INTO tool_policies
                         (platform, workspace_id, channel_id, tool_name, mode, condition, updated_by)
                       VALUES ($1, $2, $3, $4, $5, $6, $7)
                       ON CONFLICT (platform, workspace_id, channel_id, tool_name) DO UPDATE
                       SET mode = $5, condition = $6, updated_by = $7, updated_at = now()""",
                    *key,
                    mode.value,
                    condition,
                    actor.user_id,
                )
            before = _rule(old) if old else None
            after = (
                ToolRule(
                    tool_name=tool_name, mode=mode, condition=condition, channel_id=channel_id, updated_by=actor.user_id
                )
                if mode is not None
                else None
            )
            await self._audit_change(
                connection,
                actor,
                setting="policy",
                tool_name=tool_name,
                channel_id=channel_id,
                before=rule_json(before),
                after=rule_json(after),
            )
        return before, after

    async def change_approver(self, actor: Actor, rule: ApproverRule, *, add: bool) -> bool:
        """See `ConfigStore.change_approver`."""
        args = (actor.platform, actor.workspace_id, rule.tool_name, rule.kind.value, rule.subject_id)
        async with self._pool.acquire() as connection, connection.transaction():
            if add:
                changed = await connection.fetchval(
                    """INSERT INTO approvers (platform, workspace_id, tool_name, kind, subject_id, added_by)
                       VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING RETURNING true""",
                    *args,
                    actor.user_id,
                )
            else:
                changed = await connection.fetchval(
                    """DELETE FROM approvers WHERE platform = $1 AND workspace_id = $2 AND tool_name = $3
                       AND kind = $4 AND subject_id = $5 RETURNING true""",
                    *args,
                )
            if changed:
                entry = {"kind": rule.kind.value, "id": rule.subject_id}
                await self._audit_change(
                    connection,
                    actor,
                    setting="approvers",
                    tool_name=rule.tool_name,
                    before=None if add else entry,
                    after=entry if add else None,
                )
        return bool(changed)

    async def change_admin(self, actor: Actor, user_id: str, *, add: bool) -> bool:
        """See `ConfigStore.change_admin`."""
        async with self._pool.acquire() as connection, connection.transaction():
            if add:
                changed = await connection.fetchval(
                    """INSERT INTO bot_admins (platform, workspace_id, user_id, added_by) VALUES ($1, $2, $3, $4)
                       ON CONFLICT DO NOTHING RETURNING true""",
                    actor.platform,
                    actor.workspace_id,
                    user_id,
                    actor.user_id,
                )
            else:
                changed = await connection.fetchval(
                    """DELETE FROM bot_admins WHERE platform = $1 AND workspace_id = $2 AND user_id = $3
                       RETURNING true""",
                    actor.platform,
                    actor.workspace_id,
                    user_id,
                )
            if changed:
                await self._audit_change(
                    connection,
                    actor,
                    setting="admins",
                    before=None if add else user_id,
                    after=user_id if add else None,
                )
        return bool(changed)

    async def set_setting(
        self, actor: Actor, key: SettingKey, value: Any, *, channel_id: str = ALL, tool_name: str = ALL
    ) -> tuple[Any, Any]:
        """See `ConfigStore.set_setting`."""
        ids = (actor.platform, actor.workspace_id, channel_id, tool_name, key.value)
        async with self._pool.acquire() as connection, connection.transaction():
            before = await connection.fetchval(
                """SELECT value FROM settings WHERE platform = $1 AND workspace_id = $2 AND channel_id = $3
                   AND tool_name = $4 AND key = $5 FOR UPDATE""",
                *ids,
            )
            if before == value:
                return before, value  # nothing to change or audit
            if value is None:
                await connection.execute(
                    """DELETE FROM settings WHERE platform = $1 AND workspace_id = $2 AND channel_id = $3
                       AND tool_name = $4 AND key = $5""",
                    *ids,
                )
            else:
                await connection.execute(
                    """INSERT INTO settings (platform, workspace_id, channel_id, tool_name, key, value, updated_by)
                       VALUES ($1, $2, $3, $4, $5, $6, $7)
                       ON CONFLICT (platform, workspace_id, channel_id, tool_name, key) DO UPDATE
                       SET value = $6, updated_by = $7, updated_at = now()""",
                    *ids,
                    value,
                    actor.user_id,
                )
            await self._audit_change(
                connection,
                actor,
                setting=key.value,
                tool_name=tool_name,
                channel_id=channel_id,
                before=before,
                after=value,
            )
        return before, value

    async def set_trust(
        self, actor: Actor, *, channel_id: str, tool_name: str, setting: TrustSetting | None
    ) -> tuple[TrustSetting | None, TrustSetting | None]:
        """See `ConfigStore.set_trust`."""
        key = (actor.platform, actor.workspace_id, channel_id, tool_name)
        async with self._pool.acquire() as connection, connection.transaction():
            old = await connection.fetchrow(
                """SELECT * FROM trust_settings
                   WHERE platform = $1 AND workspace_id = $2 AND channel_id = $3 AND tool_name = $4
                   FOR UPDATE""",
                *key,
            )
            before = _trust(old) if old is not None else None
            if trust_json(before) == trust_json(setting):
                return before, before  # nothing to change or audit
            if setting is None:
                await connection.execute(
                    """DELETE FROM trust_settings
                       WHERE platform = $1 AND workspace_id = $2 AND channel_id = $3 AND tool_name = $4""",
                    *key,
                )
                after = None
            else:
                await connection.execute(
                    """INSERT INTO trust_settings (platform, workspace_id, channel_id, tool_name, max_s, matching,
                                                   updated_by)
                       VALUES ($1, $2, $3, $4, $5, $6, $7)
                       ON CONFLICT (platform, workspace_id, channel_id, tool_name) DO UPDATE
                       SET max_s = $5, matching = $6, updated_by = $7, updated_at = now()""",
                    *key,
                    setting.max_s,
                    list(setting.matching),
                    actor.user_id,
                )
                after = replace(setting, channel_id=channel_id, tool_name=tool_name, updated_by=actor.user_id)
            await self._audit_change(
                connection,
                actor,
                setting="trust",
                tool_name=tool_name,
                channel_id=channel_id,
                before=trust_json(before),
                after=trust_json(after),
            )
        return before, after

    async def set_escalation(
        self, actor: Actor, tool_name: str, rule: EscalationRule | None
    ) -> tuple[EscalationRule | None, EscalationRule | None]:
        """See `ConfigStore.set_escalation`."""
        key = (actor.platform, actor.workspace_id, tool_name)
        async with self._pool.acquire() as connection, connection.transaction():
            old = await connection.fetchrow(
                "SELECT * FROM escalations WHERE platform = $1 AND workspace_id = $2 AND tool_name = $3 FOR UPDATE",
                *key,
            )
            before = _escalation(old) if old else None
            if before == rule:
                return before, rule  # nothing to change or audit
            if rule is None:
                await connection.execute(
                    "DELETE FROM escalations WHERE platform = $1 AND workspace_id = $2 AND tool_name = $3", *key
                )
            else:
                await connection.execute(
                    """INSERT INTO escalations (platform, workspace_id, tool_name, after_s, target_kind, target_id,
                         updated_by)
                       VALUES ($1, $2, $3, $4, $5, $6, $7)
                       ON CONFLICT (platform, workspace_id, tool_name) DO UPDATE
                       SET after_s = $4, target_kind = $5, target_id = $6, updated_by = $7, updated_at = now()""",
                    *key,
                    rule.after_s,
                    rule.target.kind.value,
                    rule.target.subject_id,
                    actor.user_id,
                )
            await self._audit_change(
                connection,
                actor,
                setting="escalation",
                tool_name=tool_name,
                before=escalation_json(before),
                after=escalation_json(rule),
            )
        return before, rule

    async def _audit_change(self, connection: PoolConnectionProxy, actor: Actor, **change: Any) -> None:
        await self._audit.record(change_entry(actor, **change), connection=connection)


def _rule(row: asyncpg.Record) -> ToolRule:
    return ToolRule(
        tool_name=row["tool_name"],
        mode=Mode(row["mode"]),
        condition=row["condition"],
        channel_id=row["channel_id"],
        updated_by=row["updated_by"],
    )


def _trust(row: Any) -> TrustSetting:
    """A trust setting from a `trust_settings` row (a record, or its JSON from `load`)."""
    return TrustSetting(
        tool_name=row["tool_name"],
        max_s=int(row["max_s"]),
        matching=tuple(row["matching"] or ()),
        channel_id=row["channel_id"],
        updated_by=row["updated_by"],
    )


def _escalation(row: Any) -> EscalationRule:
    """An `escalations` row (a record, or the object `jsonb_agg` made of one)."""
    return EscalationRule(
        tool_name=row["tool_name"],
        after_s=int(row["after_s"]),
        target=EscalationTarget(kind=TargetKind(row["target_kind"]), subject_id=row["target_id"]),
    )
