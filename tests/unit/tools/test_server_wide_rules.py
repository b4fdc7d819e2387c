"""Which setting decides an MCP tool: its own, its server's (`<server>__*`), the workspace's; channel before workspace."""

from __future__ import annotations

from bot.base.mode import Mode
from bot.policy.config import ALL, ApproverKind, ApproverRule, SettingKey, ToolRule, TrustSetting, WorkspaceConfig
from bot.tools.server_wide import covers, pattern_server, server_patterns

TOOL = "gh__delete_repo"


def config(**parts) -> WorkspaceConfig:
    return WorkspaceConfig(platform="test", workspace_id="W", **parts)


def rule(name: str, mode: Mode, channel: str = ALL) -> dict[tuple[str, str], ToolRule]:
    return {(channel, name): ToolRule(tool_name=name, mode=mode, channel_id=channel)}


def test_names_of_a_server():
    """`a__b__c` is the tool `b__c` of `a` (a server's name has no `__`); a built-in name and a pattern have none."""
    assert server_patterns("a__b__c") == ("a__*",) and server_patterns("a___c") == ("a__*",)
    assert server_patterns("calculator") == () and server_patterns("gh__*") == ()
    assert pattern_server("gh__*") == "gh" and pattern_server("__*") is None and pattern_server("gh__x") is None
    assert covers(("gh__*",), TOOL) and covers((TOOL,), TOOL) and not covers(("other__*",), TOOL)


def test_a_tools_own_rule_beats_its_servers_in_any_place():
    """The tool's workspace rule beats the server's channel rule; the server's channel rule beats its workspace rule."""
    both = config(rules={**rule(TOOL, Mode.DENY), **rule("gh__*", Mode.AUTO, "C1")})
    assert both.rule_for(TOOL, "C1").mode is Mode.DENY
    server_only = config(rules={**rule("gh__*", Mode.REVIEW), **rule("gh__*", Mode.AUTO, "C1")})
    assert server_only.rule_for(TOOL, "C1").mode is Mode.AUTO and server_only.rule_for(TOOL, "C2").mode is Mode.REVIEW
    assert server_only.rule_for("gh__list", "C2").server_wide and server_only.rule_for("other__x", "C1") is None


def test_per_tool_settings_fall_back_to_the_server_then_the_workspace():
    """Quorum, expiry, approvers, trust and the read-only hint: the tool's, else the server's, else the workspace's."""
    alice = ApproverRule(kind=ApproverKind.USER, subject_id="alice", tool_name="gh__*")
    bob = ApproverRule(kind=ApproverKind.USER, subject_id="bob", tool_name=TOOL)
    carol = ApproverRule(kind=ApproverKind.USER, subject_id="carol")
    settings = {
        (ALL, "gh__*", SettingKey.QUORUM.value): 2,
        (ALL, ALL, SettingKey.QUORUM.value): 3,
        (ALL, TOOL, SettingKey.EXPIRY_S.value): 0,
        (ALL, "gh__*", SettingKey.EXPIRY_S.value): 600,
        (ALL, "gh__*", SettingKey.READ_ONLY_AUTO.value): True,
    }
    trust = {
        ("C1", "gh__*"): TrustSetting(tool_name="gh__*", max_s=0, channel_id="C1"),
        (ALL, "gh__*"): TrustSetting(tool_name="gh__*", max_s=1800),
    }
    c = config(approvers=(alice, bob, carol), settings=settings, trust=trust)
    assert c.quorum(TOOL) == 2 and c.quorum("calculator") == 3
    assert c.expiry_s(TOOL) is None and c.expiry_s("gh__list") == 600
    assert c.approvers_for(TOOL) == (bob,) and c.approvers_for("gh__list") == (alice,)
    assert c.approvers_for("calculator") == (carol,)
    assert c.trust_for("gh__list", "C1") is None and c.trust_for("gh__list", "C2").max_s == 1800
    assert c.read_only_auto("gh__list") and not c.read_only_auto("calculator")
