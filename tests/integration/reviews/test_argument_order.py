"""What is shown is what runs, key order included: nested objects keep the order the call runs in.

Real PostgreSQL (the arguments' round trip through the approvals, the audit log and the trust
grants), the real core and the real `http_request` tool against a local HTTP target. PostgreSQL's
`jsonb` orders an object's keys by length, then bytes: stored so, headers sent as `X-Sudo,
Authorization, Content-Type` came back as `x-sudo, content-type, authorization`, a body sent as
`zeta, alpha, mid, b` as `b, mid, zeta, alpha` (docs/decisions/0034-arguments-approvers-can-see.md).
"""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage

from bot.admin.parse import parse_command
from bot.admin.views import AuditPage, TrustList
from bot.audit.entries import AuditKind
from bot.reviews.decisions import Approve, Edit, EditedAction
from bot.reviews.lifecycle import ApprovalStatus
from bot.settings import ToolSettings
from bot.tools.builtin import builtin_tools
from bot.tools.registry import ToolRegistry
from tests.support.http_target import HttpTarget
from tests.support.recording_platform import RecordingPlatform
from tests.support.scripted_model import ScriptedChatModel, calls, tool_call
from tests.support.service import actor, message, open_service

ADMIN = "boss"
HEADERS = {"X-Sudo": "1", "Authorization": "Bearer t", "Content-Type": "application/json"}
BODY = {"zeta": 1, "alpha": 2, "mid": 3, "b": [{"yy": 1, "x": 2}]}


@pytest.fixture
async def target():
    async with HttpTarget() as server:
        yield server


def _registry(target: HttpTarget) -> ToolRegistry:
    return ToolRegistry(builtin_tools(ToolSettings(http_allowed_hosts=(target.host,))))


def _post(target: HttpTarget) -> ScriptedChatModel:
    """A POST with headers and a body whose keys jsonb would reorder, then an answer."""
    args = {"body": BODY, "headers": HEADERS, "url": target.url("/things"), "method": "POST"}
    return ScriptedChatModel(replies=[calls(tool_call("http_request", args)), AIMessage("done")])


def _keys(value: object) -> list[object]:
    """Every object's keys, depth first, in order: what a reader of `value` sees."""
    if isinstance(value, dict):
        return [list(value), *(k for item in value.values() for k in _keys(item))]
    if isinstance(value, list):
        return [k for item in value for k in _keys(item)]
    return []


async def _card(h):
    await h.service.handle_message(message("post it"))
    [card] = [c for c in h.platform.cards.values() if c.approval.status is ApprovalStatus.PENDING]
    return card


async def test_the_card_the_edit_form_and_the_audit_show_nested_keys_in_the_order_they_are_sent(db_url, target):
    """Headers and body on the card, in the Edit form's prefill and in `audit` keep the order the request is sent in."""
    sent_order = _keys({"headers": {name.lower(): v for name, v in HEADERS.items()}, "body": BODY})
    async with open_service(db_url, _post(target), _registry(target), RecordingPlatform(admins={ADMIN})) as h:
        card = await _card(h)
        shown = card.under_vote.as_dict()
        assert list(shown) == ["method", "url", "headers", "body"]  # the tool's order at the top
        assert _keys({"headers": shown["headers"], "body": shown["body"]}) == sent_order
        prefill = h.service.arranged("http_request", card.approval.args_under_vote).as_dict()
        assert _keys({"headers": prefill["headers"], "body": prefill["body"]}) == sent_order
        await h.service.decide(card.approval.id, actor("alice"), Approve())
        await h.service.tasks.join()
        audit = await h.admin.execute(actor(ADMIN), parse_command("audit http_request"), here="C1")
    [request] = target.requests
    ours = [name.lower() for name in request.headers if name.lower() in {"x-sudo", "authorization", "content-type"}]
    assert ours == ["x-sudo", "authorization", "content-type"]
    assert _keys(request.json) == _keys(BODY)
    assert isinstance(audit, AuditPage)
    [decision] = [e for e in audit.entries if e.kind is AuditKind.DECISION]
    assert list(decision.final_args or {}) == ["method", "url", "headers", "body"]
    assert _keys({"headers": (decision.final_args or {})["headers"], "body": BODY}) == sent_order


async def test_an_edited_body_runs_and_is_shown_in_the_order_its_editor_wrote(db_url, target):
    """An edit's body keys run in the order its editor wrote them, and the decided card shows that order."""
    edited = {"method": "POST", "url": target.url("/things"), "body": {"mid": 3, "zeta": 9, "alpha": 2, "b": []}}
    edit = Edit(edited_action=EditedAction(name="http_request", args=edited))
    async with open_service(db_url, _post(target), _registry(target), RecordingPlatform(admins={ADMIN})) as h:
        card = await _card(h)
        await h.service.decide(card.approval.id, actor("alice"), edit)
        await h.service.tasks.join()
        [decided] = [c for c in h.platform.cards.values() if c.approval.id == card.approval.id]
    assert decided.approval.status is ApprovalStatus.EDITED
    assert list(decided.shown.as_dict()["body"]) == ["mid", "zeta", "alpha", "b"]
    [request] = target.requests
    assert list(request.json) == ["mid", "zeta", "alpha", "b"]


async def test_a_trust_grant_lists_what_it_binds_in_the_order_it_was_approved(db_url, target):
    """`trust list` shows the bound arguments in the tool's order, nested keys as the approved call sent them."""
    async with open_service(db_url, _post(target), _registry(target), RecordingPlatform(admins={ADMIN})) as h:
        await h.admin.execute(actor(ADMIN), parse_command("trust http_request up-to 30m"), here="C1")
        card = await _card(h)
        await h.service.decide(card.approval.id, actor("alice"), Approve(), trust=True)
        await h.service.tasks.join()
        listed = await h.admin.execute(actor(ADMIN), parse_command("trust list"), here="C1")
    assert isinstance(listed, TrustList)
    [line] = listed.grants
    assert list(line.grant.matched) == ["method", "url", "headers", "body"]
    assert _keys(line.grant.matched["body"]) == _keys(BODY)
    assert list(line.grant.matched["headers"]) == ["x-sudo", "authorization", "content-type"]


async def test_an_edit_that_only_reorders_the_proposal_keeps_the_order_that_runs(db_url, target):
    """An edit equal to the proposal but for key order is no edit: the call runs as proposed, and the card shows that order."""
    async with open_service(db_url, _post(target), _registry(target), RecordingPlatform(admins={ADMIN})) as h:
        card = await _card(h)
        proposal = card.approval.proposed_args
        reordered = {**proposal, "body": dict(reversed(list(BODY.items())))}
        edit = Edit(edited_action=EditedAction(name="http_request", args=reordered))
        await h.service.decide(card.approval.id, actor("alice"), edit)
        await h.service.tasks.join()
        [decided] = [c for c in h.platform.cards.values() if c.approval.id == card.approval.id]
    [request] = target.requests
    assert decided.approval.status is ApprovalStatus.APPROVED
    assert list(request.json) == list(BODY) == list(decided.shown.as_dict()["body"])
