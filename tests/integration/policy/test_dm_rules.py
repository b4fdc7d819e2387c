"""A DM with the bot is never laxer than the servers its requester shares with it, on a real PostgreSQL.

The DM is `test:dm:D1`; servers S1 and S2 are workspaces of the same platform whose rules are
written with the configuration store (as `/countersign` would). alice asks in the DM; the
`RecordingPlatform` says who is a member of which server, or fails the lookup.
"""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from adapters.discord import messages as discord_msg
from adapters.discord.errors import error_text
from bot.agents import prompts
from bot.base.conversation import DM_WORKSPACE, Actor, ConversationRef, IncomingMessage
from bot.base.errors import NotPermittedError
from bot.base.mode import Mode
from bot.policy.config import SettingKey, TrustSetting
from bot.policy.dm_rules import MAX_SERVERS
from bot.ports import AskElsewhere
from bot.reviews.decisions import Approve
from bot.reviews.lifecycle import ApprovalStatus
from bot.reviews.records import DENIED_BY_POLICY
from tests.support.recording_platform import RecordingPlatform
from tests.support.scripted_model import ScriptedChatModel, calls, tool_call
from tests.support.service import open_service

DM = ConversationRef(platform="test", workspace_id=DM_WORKSPACE, channel_id="D1")


def model() -> ScriptedChatModel:
    """'send <to>' asks for `send` (review by default); 'lookup <q>' for `lookup` (auto); results end the turn."""

    def script(messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            return AIMessage("done: " + " | ".join(str(m.content) for m in messages if isinstance(m, ToolMessage)))
        words = str(last.content).split()
        if words[:1] == ["send"]:
            return calls(tool_call("send", {"to": words[1], "body": "hi", "urgent": words[2:] == ["urgent"]}))
        if words[:1] == ["lookup"]:
            return calls(tool_call("lookup", {"query": words[1]}))
        return AIMessage("ok")

    return ScriptedChatModel(script=script)


def admin_of(workspace: str) -> Actor:
    return Actor(platform="test", workspace_id=workspace, user_id="boss", display_name="boss")


def in_dm(user: str = "alice") -> Actor:
    return Actor(platform="test", workspace_id=DM_WORKSPACE, user_id=user, display_name=user)


async def ask(h, text: str, user: str = "alice") -> None:
    await h.service.handle_message(IncomingMessage(actor=in_dm(user), conversation=DM, text=text))
    await h.service.tasks.join()


async def strict(h, workspace: str, tool: str = "send") -> None:
    """`workspace` needs two approvals for `tool`, and nobody approves their own call there."""
    await h.config.set_setting(admin_of(workspace), SettingKey.QUORUM, 2, tool_name=tool)
    await h.config.set_setting(admin_of(workspace), SettingKey.SELF_APPROVAL, False)


def cards(h) -> list:
    return [c.approval for c in h.platform.cards.values()]


def told(h) -> list[AskElsewhere]:
    return [notice for _, notice, _ in h.platform.notices if isinstance(notice, AskElsewhere)]


def sent(tool_log) -> list[dict]:
    return [args for name, args in tool_log.calls if name == "send"]


async def test_a_call_a_shared_server_would_have_someone_else_decide_is_refused_in_the_dm(db_url, registry, tool_log):
    """S1 (alice is a member) needs another approver; S2 (she is not) too: no card, one notice naming S1, the model hears "rejected"."""
    platform = RecordingPlatform(servers={"S1": {"alice"}, "S2": {"bob"}})
    async with open_service(db_url, model(), registry, platform) as h:
        await strict(h, "S1")
        await strict(h, "S2")
        await ask(h, "send bob")
        assert cards(h) == [] and sent(tool_log) == []
        assert told(h) == [AskElsewhere(tool_name="send", workspace_ids=("S1",))]
        [recipient] = [who for _, notice, who in platform.notices if isinstance(notice, AskElsewhere)]
        assert recipient == "alice"
        [(_, answer)] = platform.answers
        assert prompts.REJECTED_BY_POLICY.format(name="send") in answer


async def test_a_dm_follows_the_defaults_when_no_shared_server_is_stricter(db_url, registry, tool_log):
    """S1 is strict but alice is not in it: her DM card is hers to approve, as before."""
    platform = RecordingPlatform(servers={"S1": {"bob"}})
    async with open_service(db_url, model(), registry, platform) as h:
        await strict(h, "S1")
        await ask(h, "send bob")
        [card] = cards(h)
        await h.service.decide(card.id, in_dm(), Approve())
        await h.service.tasks.join()
        assert len(sent(tool_log)) == 1 and told(h) == []


async def test_a_shared_servers_review_rule_puts_a_card_in_the_dm(db_url, registry, tool_log):
    """`lookup` runs at once by default; S1 reviews it (alice may approve her own there): the DM gets a card, not a refusal."""
    platform = RecordingPlatform(servers={"S1": {"alice"}})
    async with open_service(db_url, model(), registry, platform) as h:
        await h.config.set_rule(admin_of("S1"), channel_id="", tool_name="lookup", mode=Mode.REVIEW, condition=None)
        await ask(h, "lookup weather")
        [card] = cards(h)
        assert card.tool_name == "lookup" and told(h) == [] and tool_log.calls == []
        await h.service.decide(card.id, in_dm(), Approve())
        await h.service.tasks.join()
        assert [name for name, _ in tool_log.calls] == ["lookup"]


async def test_a_servers_condition_is_judged_on_the_call(db_url, registry, tool_log):
    """S1 reviews `send` only when urgent, with a quorum of two: a plain send gets the DM's card, an urgent one is refused."""
    platform = RecordingPlatform(servers={"S1": {"alice"}})
    async with open_service(db_url, model(), registry, platform) as h:
        await h.config.set_rule(
            admin_of("S1"), channel_id="", tool_name="send", mode=Mode.REVIEW, condition="args.urgent"
        )
        await h.config.set_setting(admin_of("S1"), SettingKey.QUORUM, 2, tool_name="send")
        await ask(h, "send bob urgent")
        assert cards(h) == [] and told(h) == [AskElsewhere(tool_name="send", workspace_ids=("S1",))]
        await ask(h, "send bob")
        [card] = cards(h)
        assert card.args_under_vote["urgent"] is False


async def test_a_failed_membership_lookup_refuses_the_call(db_url, registry, tool_log):
    """Whether alice is in S1 cannot be told: the call is refused as unchecked (fail closed), and she is told so."""
    platform = RecordingPlatform(unreachable={"S1"})
    async with open_service(db_url, model(), registry, platform) as h:
        await strict(h, "S1")
        await ask(h, "send bob")
        assert cards(h) == [] and sent(tool_log) == []
        assert told(h) == [AskElsewhere(tool_name="send", unchecked=True)]


async def test_an_unreachable_server_that_would_only_review_brings_a_card(db_url, registry, tool_log):
    """S1 reviews `lookup` (alice could approve it there) and cannot be asked: the DM gets a card, not a refusal."""
    platform = RecordingPlatform(unreachable={"S1"})
    async with open_service(db_url, model(), registry, platform) as h:
        await h.config.set_rule(admin_of("S1"), channel_id="", tool_name="lookup", mode=Mode.REVIEW, condition=None)
        await ask(h, "lookup weather")
        [card] = cards(h)
        assert card.tool_name == "lookup" and told(h) == [] and tool_log.calls == []


async def test_more_servers_than_the_bound_refuse_the_call(db_url, registry, tool_log):
    """More than `MAX_SERVERS` servers could be stricter: none is looked up, and the call is refused as unchecked."""
    platform = RecordingPlatform(servers={f"S{n:02d}": {"bob"} for n in range(MAX_SERVERS + 1)})
    async with open_service(db_url, model(), registry, platform) as h:
        for workspace in platform.servers:
            await h.config.set_setting(admin_of(workspace), SettingKey.QUORUM, 2)
        await ask(h, "send bob")
        assert cards(h) == [] and platform.lookups == []
        assert told(h) == [AskElsewhere(tool_name="send", unchecked=True)]


async def test_memberships_are_remembered_between_calls(db_url, registry, tool_log):
    """Two DM calls a minute apart at most: the platform is asked about alice's membership of S1 once."""
    platform = RecordingPlatform(servers={"S1": {"alice"}})
    async with open_service(db_url, model(), registry, platform) as h:
        await strict(h, "S1")
        await ask(h, "send bob")
        await ask(h, "send carol")
        assert platform.lookups == [("S1", "alice")]
        assert len(told(h)) == 2  # one per run


async def test_a_dm_card_approved_after_a_shared_server_became_strict_is_rejected(db_url, registry, tool_log):
    """alice's DM card waits; S1 (hers) then needs another approver: her approval records a rejection, nothing runs."""
    platform = RecordingPlatform(servers={"S1": {"alice"}})
    async with open_service(db_url, model(), registry, platform) as h:
        await ask(h, "send bob")
        [card] = cards(h)
        await strict(h, "S1")
        decided = await h.service.decide(card.id, in_dm(), Approve())
        await h.service.tasks.join()
        assert decided.status is ApprovalStatus.REJECTED and decided.reason == DENIED_BY_POLICY
        assert sent(tool_log) == []


async def test_a_trust_grant_in_a_dm_covers_nothing_a_shared_server_would_refuse(db_url, registry, tool_log):
    """A trust setting stored for the DM (no command makes one) and a grant: once S1 is strict, the next call is refused, not run."""
    platform = RecordingPlatform(servers={"S1": {"alice"}})
    async with open_service(db_url, model(), registry, platform) as h:
        await h.config.set_trust(
            in_dm("boss"), channel_id="", tool_name="send", setting=TrustSetting(tool_name="send", max_s=3600)
        )
        await ask(h, "send bob")
        [card] = cards(h)
        await h.service.decide(card.id, in_dm(), Approve(), trust=True)
        await h.service.tasks.join()
        await ask(h, "send bob")  # covered by the grant: no card
        assert len(sent(tool_log)) == 2 and len(cards(h)) == 1
        await strict(h, "S1")
        await ask(h, "send bob")
        assert len(sent(tool_log)) == 2 and len(cards(h)) == 1
        assert told(h) == [AskElsewhere(tool_name="send", workspace_ids=("S1",))]


async def test_only_the_requester_opens_all_arguments_of_a_dm_card(db_url, registry, tool_log):
    """mallory, in her own DM (the same workspace id `dm`), is refused alice's DM card's arguments, audited; alice sees them."""
    async with open_service(db_url, model(), registry, RecordingPlatform()) as h:
        await ask(h, "send bob")
        [card] = cards(h)
        with pytest.raises(NotPermittedError) as refused:
            await h.service.shown_arguments(card.id, in_dm("mallory"))
        assert refused.value.reason == "other_dm"
        assert "someone else's DM" in error_text(refused.value)
        elsewhere = Actor(platform="other", workspace_id=DM_WORKSPACE, user_id="alice", display_name="alice")
        with pytest.raises(NotPermittedError, match="other_workspace"):
            await h.service.shown_arguments(card.id, elsewhere)
        approval, arguments = await h.service.shown_arguments(card.id, in_dm())
        assert approval.id == card.id and arguments.as_dict() == {"to": "bob", "body": "hi", "urgent": False}
        refusals = await h.database.pool.fetch(
            "SELECT actor_id, outcome FROM audit_log WHERE kind = 'refused' AND approval_id = $1 ORDER BY id", card.id
        )
    assert [(r["actor_id"], r["outcome"]) for r in refusals] == [
        ("mallory", "not_permitted"),
        ("alice", "not_permitted"),
    ]
    assert discord_msg.REFUSED_OTHER_DM in error_text(refused.value) and sent(tool_log) == []


async def test_a_servers_deny_of_an_mcp_server_holds_in_dms_unless_the_tool_has_its_own_rule(db_url, registry):
    """`notes__* deny` in S1 denies `notes__add` in every DM; S1's own `notes__add review` lifts that, and is listed."""
    async with open_service(db_url, model(), registry) as h:
        await h.config.set_rule(admin_of("S1"), channel_id="", tool_name="notes__*", mode=Mode.DENY, condition=None)
        await h.config.set_rule(admin_of("S2"), channel_id="", tool_name="notes__*", mode=Mode.REVIEW, condition=None)
        assert await h.config.denied_in_any_workspace("test", "notes__add") is True
        assert await h.config.denied_in_any_workspace("test", "other__add") is False
        stricter = await h.config.could_be_stricter("test", "notes__add", settings_too=False, limit=5)
        assert stricter == ["S2"]
        await h.config.set_rule(admin_of("S1"), channel_id="", tool_name="notes__add", mode=Mode.REVIEW, condition=None)
        assert await h.config.denied_in_any_workspace("test", "notes__add") is False
        stricter = await h.config.could_be_stricter("test", "notes__add", settings_too=False, limit=5)
        assert stricter == ["S1", "S2"]
