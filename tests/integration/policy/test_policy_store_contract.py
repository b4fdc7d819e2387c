"""The `ConfigStore` contract: one suite, run against PostgreSQL and in memory (docs/decisions/0063-store-ports.md).

Every change is written with its audit row, atomically; setting what is already there changes
nothing and audits nothing; each workspace (platform and id) sees only its own configuration.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from bot.audit.memory import InMemoryAuditStore
from bot.audit.postgres import PostgresAuditStore
from bot.audit.store import AuditStore
from bot.base.conversation import Actor
from bot.base.mode import Mode
from bot.policy.config import ApproverKind, ApproverRule, SettingKey, ToolRule, TrustSetting
from bot.policy.memory import InMemoryConfigStore
from bot.policy.postgres import PostgresConfigStore
from bot.policy.store import ConfigStore
from bot.reviews.escalation.rules import EscalationRule, EscalationTarget, TargetKind
from bot.settings import DatabaseSettings
from bot.storage.database import open_database
from tests.support import postgres

ADA = Actor(platform="slack", workspace_id="T1", user_id="U1", display_name="Ada")
BOB = Actor(platform="slack", workspace_id="T1", user_id="U2", display_name="Bob")
OTHER_WS = Actor(platform="slack", workspace_id="T2", user_id="U9", display_name="Eve")
OTHER_PLATFORM = Actor(platform="discord", workspace_id="T1", user_id="U9", display_name="Eve")


@dataclass
class Kit:
    """One backend: the configuration store and the audit log its changes are written to."""

    store: ConfigStore
    audit: AuditStore

    async def changes(self, workspace_id: str = "T1") -> list[tuple[str, str | None, Any, Any]]:
        """The configuration rows of a workspace, oldest first: (setting, tool, before, after)."""
        rows = await self.audit.recent(workspace_id, limit=100)
        return [(r.outcome, r.tool_name, r.detail["before"], r.detail["after"]) for r in reversed(rows)]


@pytest.fixture(params=["postgres", "memory"])
async def kit(request: pytest.FixtureRequest, pg_server: postgres.TestServer) -> AsyncIterator[Kit]:
    """The store under test, on PostgreSQL (a fresh database) or in memory."""
    if request.param == "memory":
        memory_audit = InMemoryAuditStore()
        yield Kit(store=InMemoryConfigStore(memory_audit), audit=memory_audit)
        return
    db_url = await pg_server.create_database()
    try:
        async with open_database(DatabaseSettings(url=db_url, pool_max_size=5), run_migrations=False) as database:
            audit = PostgresAuditStore(database.pool)
            yield Kit(store=PostgresConfigStore(database.pool, audit), audit=audit)
    finally:
        await pg_server.drop_database(db_url)


async def test_a_workspace_without_configuration_loads_empty(kit: Kit):
    config = await kit.store.load("slack", "T1")
    assert (config.platform, config.workspace_id) == ("slack", "T1")
    assert (config.rules, config.approvers, config.admins) == ({}, (), frozenset())
    assert (config.settings, config.trust, config.escalations) == ({}, {}, {})


async def test_set_rule_adds_changes_and_removes_each_audited(kit: Kit):
    store = kit.store
    before, after = await store.set_rule(ADA, channel_id="", tool_name="deploy", mode=Mode.REVIEW, condition=None)
    assert before is None
    assert after == ToolRule(tool_name="deploy", mode=Mode.REVIEW, condition=None, channel_id="", updated_by="U1")
    assert (await store.load("slack", "T1")).rules == {("", "deploy"): after}

    changed = await store.set_rule(BOB, channel_id="", tool_name="deploy", mode=Mode.REVIEW, condition="args.n > 1")
    assert changed == (after, ToolRule(tool_name="deploy", mode=Mode.REVIEW, condition="args.n > 1", updated_by="U2"))
    assert (await store.load("slack", "T1")).rules[("", "deploy")].updated_by == "U2"

    removed = await store.set_rule(ADA, channel_id="", tool_name="deploy", mode=None, condition=None)
    assert removed == (changed[1], None)
    assert (await store.load("slack", "T1")).rules == {}
    assert await kit.changes() == [
        ("policy", "deploy", None, {"mode": "review", "condition": None}),
        ("policy", "deploy", {"mode": "review", "condition": None}, {"mode": "review", "condition": "args.n > 1"}),
        ("policy", "deploy", {"mode": "review", "condition": "args.n > 1"}, None),
    ]


async def test_setting_a_rule_already_there_changes_and_audits_nothing(kit: Kit):
    store = kit.store
    _, rule = await store.set_rule(ADA, channel_id="C1", tool_name="deploy", mode=Mode.DENY, condition=None)
    assert await store.set_rule(BOB, channel_id="C1", tool_name="deploy", mode=Mode.DENY, condition=None) == (
        rule,
        rule,
    )
    assert await store.set_rule(BOB, channel_id="C1", tool_name="other", mode=None, condition=None) == (None, None)
    assert (await store.load("slack", "T1")).rules == {("C1", "deploy"): rule}  # still Ada's
    assert len(await kit.changes()) == 1


async def test_each_workspace_and_platform_sees_its_own(kit: Kit):
    store = kit.store
    await store.set_rule(ADA, channel_id="", tool_name="deploy", mode=Mode.DENY, condition=None)
    await store.change_admin(ADA, "U5", add=True)
    await store.set_setting(ADA, SettingKey.QUORUM, 2)
    for actor in (OTHER_WS, OTHER_PLATFORM):
        config = await store.load(actor.platform, actor.workspace_id)
        assert (config.rules, config.admins, config.settings) == ({}, frozenset(), {})
    assert await kit.changes("T2") == []


async def test_approvers_are_added_once_removed_once_and_load_in_the_order_added(kit: Kit):
    store = kit.store
    carol = ApproverRule(kind=ApproverKind.USER, subject_id="U3")
    ops = ApproverRule(kind=ApproverKind.GROUP, subject_id="S1", tool_name="deploy")
    dave = ApproverRule(kind=ApproverKind.USER, subject_id="U4")
    assert await store.change_approver(ADA, carol, add=True)
    assert await store.change_approver(ADA, ops, add=True)
    assert await store.change_approver(ADA, dave, add=True)
    assert not await store.change_approver(BOB, ops, add=True)
    assert (await store.load("slack", "T1")).approvers == (carol, ops, dave)
    assert await store.change_approver(ADA, carol, add=False)
    assert not await store.change_approver(ADA, carol, add=False)
    assert not await store.change_approver(ADA, ApproverRule(kind=ApproverKind.ROLE, subject_id="U4"), add=False)
    assert (await store.load("slack", "T1")).approvers == (ops, dave)
    assert await kit.changes() == [
        ("approvers", None, None, {"kind": "user", "id": "U3"}),
        ("approvers", "deploy", None, {"kind": "group", "id": "S1"}),
        ("approvers", None, None, {"kind": "user", "id": "U4"}),
        ("approvers", None, {"kind": "user", "id": "U3"}, None),
    ]


async def test_admins_are_added_once_and_removed_once(kit: Kit):
    store = kit.store
    assert await store.change_admin(ADA, "U5", add=True)
    assert not await store.change_admin(BOB, "U5", add=True)
    assert await store.change_admin(ADA, "U6", add=True)
    assert (await store.load("slack", "T1")).admins == {"U5", "U6"}
    assert await store.change_admin(ADA, "U5", add=False)
    assert not await store.change_admin(ADA, "U5", add=False)
    assert (await store.load("slack", "T1")).admins == {"U6"}
    assert await kit.changes() == [
        ("admins", None, None, "U5"),
        ("admins", None, None, "U6"),
        ("admins", None, "U5", None),
    ]


async def test_settings_are_scoped_by_channel_and_tool_and_kept_as_json(kit: Kit):
    store = kit.store
    assert await store.set_setting(ADA, SettingKey.QUORUM, 2, tool_name="deploy") == (None, 2)
    assert await store.set_setting(ADA, SettingKey.AGENT, "supervisor", channel_id="C1") == (None, "supervisor")
    cards = {"routing": "channel", "channel_id": "C9"}
    assert await store.set_setting(ADA, SettingKey.CARDS, cards) == (None, cards)
    assert await store.set_setting(ADA, SettingKey.SELF_APPROVAL, False) == (None, False)
    assert (await store.load("slack", "T1")).settings == {
        ("", "deploy", "quorum"): 2,
        ("C1", "", "agent"): "supervisor",
        ("", "", "cards"): cards,
        ("", "", "self_approval"): False,
    }
    assert await store.set_setting(BOB, SettingKey.QUORUM, 2, tool_name="deploy") == (2, 2)  # already so
    assert await store.set_setting(BOB, SettingKey.QUORUM, 3, tool_name="deploy") == (2, 3)
    assert await store.set_setting(BOB, SettingKey.AGENT, None, channel_id="C1") == ("supervisor", None)
    assert await store.set_setting(BOB, SettingKey.AGENT, None, channel_id="C1") == (None, None)
    assert ("C1", "", "agent") not in (await store.load("slack", "T1")).settings
    changes = await kit.changes()
    assert [c[0] for c in changes] == ["quorum", "agent", "cards", "self_approval", "quorum", "agent"]
    assert changes[4] == ("quorum", "deploy", 2, 3)
    rows = await kit.audit.recent("T1", limit=1)
    assert rows[0].detail == {"platform": "slack", "channel_id": "C1", "before": "supervisor", "after": None}
    assert (rows[0].actor_id, rows[0].actor_name) == ("U2", "Bob")


async def test_trust_settings_are_set_changed_and_removed_each_audited(kit: Kit):
    store = kit.store
    wanted = TrustSetting(tool_name="ignored", max_s=3600, matching=("repo",))
    before, after = await store.set_trust(ADA, channel_id="", tool_name="deploy", setting=wanted)
    assert before is None
    assert after == TrustSetting(tool_name="deploy", max_s=3600, matching=("repo",), channel_id="", updated_by="U1")
    assert (await store.load("slack", "T1")).trust == {("", "deploy"): after}
    same = await store.set_trust(
        BOB, channel_id="", tool_name="deploy", setting=TrustSetting(tool_name="deploy", max_s=3600, matching=("repo",))
    )
    assert same == (after, after)
    off = TrustSetting(tool_name="deploy", max_s=0)
    _, off_here = await store.set_trust(BOB, channel_id="C1", tool_name="deploy", setting=off)
    assert off_here == TrustSetting(tool_name="deploy", max_s=0, channel_id="C1", updated_by="U2")
    assert await store.set_trust(BOB, channel_id="", tool_name="deploy", setting=None) == (after, None)
    assert await store.set_trust(BOB, channel_id="", tool_name="deploy", setting=None) == (None, None)
    assert (await store.load("slack", "T1")).trust == {("C1", "deploy"): off_here}
    assert await kit.changes() == [
        ("trust", "deploy", None, {"up_to_s": 3600, "matching": ["repo"]}),
        ("trust", "deploy", None, {"up_to_s": 0, "matching": []}),
        ("trust", "deploy", {"up_to_s": 3600, "matching": ["repo"]}, None),
    ]


async def test_escalations_are_set_changed_and_removed_each_audited(kit: Kit):
    store = kit.store
    to_ops = EscalationRule(
        tool_name="deploy", after_s=600, target=EscalationTarget(kind=TargetKind.GROUP, subject_id="S1")
    )
    assert await store.set_escalation(ADA, "deploy", to_ops) == (None, to_ops)
    assert await store.set_escalation(BOB, "deploy", to_ops) == (to_ops, to_ops)
    sooner = EscalationRule(
        tool_name="deploy", after_s=60, target=EscalationTarget(kind=TargetKind.USER, subject_id="U7")
    )
    assert await store.set_escalation(BOB, "deploy", sooner) == (to_ops, sooner)
    assert (await store.load("slack", "T1")).escalations == {"deploy": sooner}
    assert await store.set_escalation(BOB, "deploy", None) == (sooner, None)
    assert await store.set_escalation(BOB, "deploy", None) == (None, None)
    assert (await store.load("slack", "T1")).escalations == {}
    assert await kit.changes() == [
        ("escalation", "deploy", None, {"after_s": 600, "to": {"kind": "group", "id": "S1"}}),
        (
            "escalation",
            "deploy",
            {"after_s": 600, "to": {"kind": "group", "id": "S1"}},
            {"after_s": 60, "to": {"kind": "user", "id": "U7"}},
        ),
        ("escalation", "deploy", {"after_s": 60, "to": {"kind": "user", "id": "U7"}}, None),
    ]


async def test_racing_changes_to_one_setting_apply_one_at_a_time(kit: Kit):
    """Of replicas setting the same value at once, one changes it (and audits it); the others find it set."""
    store = kit.store
    await store.set_setting(ADA, SettingKey.QUORUM, 2)
    results = await asyncio.gather(*(store.set_setting(BOB, SettingKey.QUORUM, 3) for _ in range(4)))
    assert sorted(results) == [(2, 3), (3, 3), (3, 3), (3, 3)]
    admins = await asyncio.gather(*(store.change_admin(BOB, "U8", add=True) for _ in range(4)))
    assert sorted(admins) == [False, False, False, True]
    assert [c[0] for c in await kit.changes()] == ["quorum", "quorum", "admins"]


async def test_denied_in_any_workspace_follows_the_tools_own_rule_before_its_servers(kit: Kit):
    store = kit.store
    assert not await store.denied_in_any_workspace("slack", "gh__delete_repo")
    await store.set_rule(OTHER_WS, channel_id="", tool_name="gh__*", mode=Mode.DENY, condition=None)
    assert await store.denied_in_any_workspace("slack", "gh__delete_repo")
    assert not await store.denied_in_any_workspace("discord", "gh__delete_repo")
    assert not await store.denied_in_any_workspace("slack", "shell")
    # The tool's own workspace-wide rule wins over its server's in that workspace.
    await store.set_rule(OTHER_WS, channel_id="", tool_name="gh__delete_repo", mode=Mode.REVIEW, condition=None)
    assert not await store.denied_in_any_workspace("slack", "gh__delete_repo")
    # A channel's deny is not workspace-wide.
    await store.set_rule(ADA, channel_id="C1", tool_name="gh__delete_repo", mode=Mode.DENY, condition=None)
    assert not await store.denied_in_any_workspace("slack", "gh__delete_repo")
    await store.set_rule(ADA, channel_id="", tool_name="gh__delete_repo", mode=Mode.DENY, condition=None)
    assert await store.denied_in_any_workspace("slack", "gh__delete_repo")


async def test_could_be_stricter_lists_review_rules_and_with_settings_too_strict_settings(kit: Kit):
    store = kit.store
    actors = {ws: Actor(platform="discord", workspace_id=ws, user_id="U1", display_name="Ada") for ws in "abcdefg"}
    await store.set_rule(actors["a"], channel_id="", tool_name="gh__*", mode=Mode.REVIEW, condition="true")
    await store.set_rule(actors["b"], channel_id="", tool_name="gh__issues", mode=Mode.REVIEW, condition=None)
    await store.set_rule(actors["c"], channel_id="C1", tool_name="gh__issues", mode=Mode.REVIEW, condition=None)
    await store.set_rule(actors["d"], channel_id="", tool_name="gh__issues", mode=Mode.DENY, condition=None)
    await store.set_setting(actors["e"], SettingKey.QUORUM, 2)
    await store.set_setting(actors["f"], SettingKey.SELF_APPROVAL, False, tool_name="gh__issues")
    await store.set_setting(actors["g"], SettingKey.QUORUM, 1, tool_name="gh__issues")
    await store.set_setting(actors["g"], SettingKey.SELF_APPROVAL, True)
    await store.set_rule(ADA, channel_id="", tool_name="gh__issues", mode=Mode.REVIEW, condition=None)  # slack

    stricter = store.could_be_stricter
    assert await stricter("discord", "gh__issues", settings_too=False, limit=10) == ["a", "b"]
    assert await stricter("discord", "gh__issues", settings_too=True, limit=10) == ["a", "b", "e", "f"]
    assert await stricter("discord", "gh__issues", settings_too=True, limit=3) == ["a", "b", "e"]
    assert await stricter("discord", "gh__issues", settings_too=True, limit=10, besides="b") == ["a", "e", "f"]
    assert await stricter("discord", "shell", settings_too=True, limit=10) == ["e"]
    assert await stricter("discord", "shell", settings_too=False, limit=10) == []
