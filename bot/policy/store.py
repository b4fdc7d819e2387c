"""The port the admin configuration is kept behind: `PostgresConfigStore` in production, `InMemoryConfigStore` in tests.

A workspace's configuration (`WorkspaceConfig`): tool rules, approvers, bot admins, scalar
settings (quorum, self-approval, expiry, cards, scope, the agent per channel, ...), trust
settings and escalations. Every change is written with its audit row (`bot.policy.audit`),
atomically: both or neither. Setting what is already there changes nothing and audits nothing.
Both implementations pass one contract suite
(tests/integration/policy/test_policy_store_contract.py; docs/decisions/0063-store-ports.md).
"""

from __future__ import annotations

from typing import Any, Protocol

from bot.base.conversation import Actor
from bot.base.mode import Mode
from bot.policy.config import ALL, ApproverRule, SettingKey, ToolRule, TrustSetting, WorkspaceConfig
from bot.reviews.escalation.rules import EscalationRule


class ConfigStore(Protocol):
    """Reads a workspace's configuration and applies audited changes."""

    async def denied_in_any_workspace(self, platform: str, tool_name: str) -> bool:
        """Whether any workspace of `platform` switched `tool_name` off workspace-wide (`deny`).

        By the tool's own rule, or by its MCP server's (`<server>__*`) where the tool has no
        workspace-wide rule of its own (`WorkspaceConfig.rule_for`).
        """
        ...

    async def could_be_stricter(
        self, platform: str, tool_name: str, *, settings_too: bool, limit: int, besides: str = ""
    ) -> list[str]:
        """Workspaces of `platform` whose stored configuration could make `tool_name` stricter than the defaults.

        For a Discord DM, which follows the defaults unless a server the requester shares with
        the bot is stricter (`bot.policy.dm_rules`). A workspace is listed when it has a
        workspace-wide `review` rule for the tool or its MCP server (`<server>__*`), with or
        without a condition, or, with `settings_too`, a workspace-wide quorum above one or
        self-approval off, for the tool, its server or every tool. Whether it is stricter for a
        given call is for the caller to judge from its whole configuration: this only never
        misses one. `deny` rules are not listed (`denied_in_any_workspace` answers for them).

        Args:
            platform: e.g. `discord`.
            tool_name: the tool.
            settings_too: list workspaces by their quorum and self-approval settings as well
                (the call needs review under the defaults, so those settings decide who may
                approve it).
            limit: at most this many ids, in id order.
            besides: a workspace id never listed (the DM's own, `dm`).

        Returns:
            Workspace ids.
        """
        ...

    async def load(self, platform: str, workspace_id: str) -> WorkspaceConfig:
        """The whole configuration of one workspace, one consistent snapshot (read per message, call, click).

        Approvers are in the order they were added; setting values are as JSON reads them back.
        """
        ...

    async def set_rule(
        self, actor: Actor, *, channel_id: str, tool_name: str, mode: Mode | None, condition: str | None
    ) -> tuple[ToolRule | None, ToolRule | None]:
        """Set (or with `mode=None`, remove) a tool rule in `actor`'s workspace; return (before, after).

        Setting what is already there writes nothing and records no change (before == after).
        """
        ...

    async def change_approver(self, actor: Actor, rule: ApproverRule, *, add: bool) -> bool:
        """Add or remove an approver entry in `actor`'s workspace; return whether anything changed."""
        ...

    async def change_admin(self, actor: Actor, user_id: str, *, add: bool) -> bool:
        """Add or remove a bot admin of `actor`'s workspace; return whether anything changed."""
        ...

    async def set_setting(
        self, actor: Actor, key: SettingKey, value: Any, *, channel_id: str = ALL, tool_name: str = ALL
    ) -> tuple[Any, Any]:
        """Set (or with `value=None`, remove) a scalar setting (a JSON value); return (before, after).

        Setting what is already there writes nothing and records no change (before == after).
        """
        ...

    async def set_trust(
        self, actor: Actor, *, channel_id: str, tool_name: str, setting: TrustSetting | None
    ) -> tuple[TrustSetting | None, TrustSetting | None]:
        """Set (or with `setting=None`, remove) a tool's trust setting here; return (before, after).

        Setting what is already there (same duration and argument names) writes nothing and
        records no change (before == after, both as stored). Live grants are not touched: each
        call checks them against the setting in force then (`bot.reviews.trust.grants.still_fits`),
        so a narrower setting narrows them at once.
        """
        ...

    async def set_escalation(
        self, actor: Actor, tool_name: str, rule: EscalationRule | None
    ) -> tuple[EscalationRule | None, EscalationRule | None]:
        """Set (or with `rule=None`, remove) a tool's escalation; return (before, after).

        Setting what is already there writes nothing and records no change (before == after).
        Cards already waiting keep the escalation they were opened with.
        """
        ...
