"""Decision parsing and validation against the pending review and the tools' own schemas."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from langchain_core.tools import BaseTool, tool
from pydantic import BaseModel

from bot.base.errors import InvalidDecisionError
from bot.reviews.decisions import (
    MAX_REASON_CHARS,
    Approve,
    Edit,
    EditedAction,
    Reject,
    check_decision,
    parse_decision,
    validate_decisions,
    validate_tool_args,
)
from bot.reviews.requests import build_review_request


class Item(BaseModel):
    """One order line."""

    sku: str
    qty: int
    gift: bool = False


@tool
def send(to: str, body: str, urgent: bool = False) -> str:
    """Send a message to someone."""
    return f"sent to {to}"


@tool
def order(customer: str, items: list[Item], note: str | None = None) -> str:
    """Place an order."""
    return f"ordered for {customer}"


@tool
def tag(labels: dict[str, list[int]], weight: float | None = None) -> str:
    """Attach labels."""
    return "tagged"


@tool
def ping() -> str:
    """Check the service is up."""
    return "pong"


TOOLS: dict[str, BaseTool] = {t.name: t for t in (send, order, tag, ping)}


def action(name: str, **args: Any) -> dict[str, Any]:
    """An action request as `human_review` builds it."""
    return {"name": name, "args": args, "description": f"call {name}"}


def request(*actions: dict[str, Any], allowed: list[list[str]] | None = None) -> dict[str, Any]:
    """A HITL review request for `actions`, with per-action allowed decisions."""
    allowed = allowed or [["approve", "edit", "reject"]] * len(actions)
    return {
        "action_requests": list(actions),
        "review_configs": [
            {"action_name": a["name"], "allowed_decisions": list(kinds)}
            for a, kinds in zip(actions, allowed, strict=True)
        ],
    }


def edit(name: str, **args: Any) -> dict[str, Any]:
    """A raw edit decision."""
    return {"type": "edit", "edited_action": {"name": name, "args": args}}


# parse_decision --------------------------------------------------------------------------------


def test_parse_approve():
    """`{"type": "approve"}` parses to Approve."""
    assert parse_decision({"type": "approve"}) == Approve()


def test_parse_edit():
    """An edit parses with its edited action's name and args."""
    parsed = parse_decision(edit("send", to="a", body="b"))
    assert isinstance(parsed, Edit)
    assert parsed.edited_action == EditedAction(name="send", args={"to": "a", "body": "b"})


@pytest.mark.parametrize("message", [None, "", "Not now.", "x" * MAX_REASON_CHARS])
def test_parse_reject_with_or_without_message(message):
    """A reject parses with no message, an empty one, or one of up to 2000 characters."""
    raw: dict[str, Any] = {"type": "reject"}
    if message is not None:
        raw["message"] = message
    parsed = parse_decision(raw)
    assert isinstance(parsed, Reject)
    assert parsed.message == message


def test_reject_message_over_limit_is_refused():
    """A reject reason of 2001 characters is refused by the check, naming the message field and the limit."""
    decision = parse_decision({"type": "reject", "message": "x" * (MAX_REASON_CHARS + 1)})
    with pytest.raises(InvalidDecisionError, match=r"reason is too long.*2000") as caught:
        check_decision(decision, {"name": "send", "args": {}}, None)
    assert caught.value.field == "message"
    exact = parse_decision({"type": "reject", "message": "x" * MAX_REASON_CHARS})
    assert check_decision(exact, {"name": "send", "args": {}}, None) == exact


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ({"type": "approve", "extra": 1}, "extra"),
        ({"type": "reject", "message": "no", "by": "me"}, "by"),
        ({"type": "edit", "edited_action": {"name": "send", "args": {}, "x": 1}}, "x"),
        ({"type": "edit", "edited_action": {"name": "send", "args": {}}, "why": "y"}, "why"),
    ],
)
def test_parse_refuses_extra_keys(raw, fragment):
    """Unknown keys in a decision or its edited action are refused, naming the key."""
    with pytest.raises(InvalidDecisionError, match="malformed decision") as info:
        parse_decision(raw)
    assert fragment in info.value.message
    assert "Extra inputs are not permitted" in info.value.message


@pytest.mark.parametrize(
    "raw",
    [
        None,
        "approve",
        42,
        [],
        {},
        {"type": "maybe"},
        {"type": "APPROVE"},
        {"type": "edit"},
        {"type": "edit", "edited_action": {"name": "send"}},
        {"type": "edit", "edited_action": {"args": {}}},
        {"type": "edit", "edited_action": {"name": "send", "args": ["a"]}},
        {"type": "edit", "edited_action": {"name": 3, "args": {}}},
        {"type": "reject", "message": 5},
    ],
)
def test_parse_refuses_malformed_shapes(raw):
    """Anything that is not one of the three HITL shapes is refused."""
    with pytest.raises(InvalidDecisionError, match="malformed decision"):
        parse_decision(raw)


def test_parse_error_is_not_chained():
    """The pydantic error is not attached, so no internal detail leaks into logs or replies."""
    with pytest.raises(InvalidDecisionError) as info:
        parse_decision({"type": "nope"})
    assert info.value.__cause__ is None
    assert info.value.__suppress_context__ is True


# check_decision --------------------------------------------------------------------------------


@pytest.mark.parametrize("decision", [Approve(), Reject(message="no")])
def test_check_passes_approve_and_reject_through(decision):
    """Approve and reject need no tool and come back unchanged."""
    assert check_decision(decision, action("send", to="a", body="b"), None) is decision


def test_check_accepts_a_valid_edit():
    """An edit with valid args for the same tool is returned with the args as given."""
    decision = parse_decision(edit("send", to="ops@example.com", body="hi"))
    checked = check_decision(decision, action("send", to="a", body="b"), send)
    assert isinstance(checked, Edit)
    assert checked.edited_action.name == "send"
    assert checked.edited_action.args == {"to": "ops@example.com", "body": "hi"}


def test_check_refuses_a_tool_rename():
    """An edit that names another tool is refused with field `name`."""
    decision = parse_decision(edit("ping"))
    with pytest.raises(InvalidDecisionError, match="cannot change the tool") as info:
        check_decision(decision, action("send", to="a", body="b"), send)
    assert info.value.field == "name"
    assert "'send'" in info.value.message
    assert "'ping'" in info.value.message


def test_check_refuses_an_edit_for_a_vanished_tool():
    """An edit for a tool that is no longer registered is refused with field `name`."""
    decision = parse_decision(edit("send", to="a", body="b"))
    with pytest.raises(InvalidDecisionError, match="not available") as info:
        check_decision(decision, action("send", to="a", body="b"), None)
    assert info.value.field == "name"


def test_check_refuses_invalid_edited_args():
    """An edit whose args fail the tool's schema is refused with the argument path."""
    decision = parse_decision(edit("send", to="a", body="b", urgent="very"))
    with pytest.raises(InvalidDecisionError) as info:
        check_decision(decision, action("send", to="a", body="b"), send)
    assert info.value.field == "args.urgent"


# validate_tool_args ----------------------------------------------------------------------------


def test_valid_args_are_returned_as_given():
    """Valid args come back as given: only the keys sent, no defaults filled in."""
    args = {"to": "a", "body": "b"}
    assert validate_tool_args(send, args) == {"to": "a", "body": "b"}


def test_optional_args_may_be_given_or_omitted():
    """Optional arguments may be omitted, given, or given as null where the type allows."""
    assert validate_tool_args(send, {"to": "a", "body": "b", "urgent": True})["urgent"] is True
    items = [{"sku": "A1", "qty": 2}]
    assert validate_tool_args(order, {"customer": "c", "items": items, "note": None})
    assert validate_tool_args(tag, {"labels": {"x": [1, 2]}, "weight": 0.5})


def test_tool_without_arguments_accepts_empty_args():
    """A tool without parameters accepts `{}`."""
    assert validate_tool_args(ping, {}) == {}


def test_tool_without_arguments_refuses_any_argument():
    """A tool without parameters refuses any argument and says it has none."""
    with pytest.raises(InvalidDecisionError, match="none") as info:
        validate_tool_args(ping, {"x": 1})
    assert info.value.field == "args.x"


def test_unknown_argument_is_refused_with_its_name():
    """An argument name the tool lacks is refused, naming it and the real arguments."""
    with pytest.raises(InvalidDecisionError) as info:
        validate_tool_args(send, {"to": "a", "body": "b", "colour": "red"})
    assert info.value.field == "args.colour"
    assert "'colour'" in info.value.message
    assert "to, body, urgent" in info.value.message


def test_several_unknown_arguments_report_the_first_alphabetically():
    """With several unknown names, the first in sorted order is named (deterministic)."""
    with pytest.raises(InvalidDecisionError) as info:
        validate_tool_args(send, {"to": "a", "body": "b", "zeta": 1, "alpha": 2})
    assert info.value.field == "args.alpha"


def test_missing_required_argument_is_refused():
    """A missing required argument is refused with its path."""
    with pytest.raises(InvalidDecisionError, match="Field required") as info:
        validate_tool_args(send, {"to": "a"})
    assert info.value.field == "args.body"


@pytest.mark.parametrize(
    ("the_tool", "args", "field"),
    [
        (send, {"to": 5, "body": "b"}, "args.to"),
        (send, {"to": "a", "body": "b", "urgent": "very"}, "args.urgent"),
        (order, {"customer": "c", "items": "lots"}, "args.items"),
        (order, {"customer": "c", "items": [{"sku": "A", "qty": "two"}]}, "args.items.0.qty"),
        (
            order,
            {"customer": "c", "items": [{"sku": "A", "qty": 1}, {"qty": 1}]},
            "args.items.1.sku",
        ),
        (order, {"customer": "c", "items": [], "note": 7}, "args.note"),
        (tag, {"labels": {"a": [1, "x"]}}, "args.labels.a.1"),
        (tag, {"labels": {"a": 1}}, "args.labels.a"),
        (tag, {"labels": {}, "weight": "heavy"}, "args.weight"),
    ],
)
def test_wrong_types_are_refused_with_the_field_path(the_tool, args, field):
    """A value of the wrong type is refused; `field` is the dotted path into the args."""
    with pytest.raises(InvalidDecisionError, match=f"invalid arguments for {the_tool.name}") as info:
        validate_tool_args(the_tool, args)
    assert info.value.field == field


def test_edited_args_must_have_the_json_types_the_model_sees():
    """A number written as a string is refused (the tool's JSON Schema says integer), so what runs is what was typed."""
    with pytest.raises(InvalidDecisionError, match=r"items\.0\.qty") as refused:
        validate_tool_args(order, {"customer": "c", "items": [{"sku": "A", "qty": "2"}]})
    assert refused.value.field == "args.items.0.qty"
    args = {"customer": "c", "items": [{"sku": "A", "qty": 2}]}
    assert validate_tool_args(order, args) == args


def test_unknown_nested_key_is_refused():
    """A misspelt key inside a nested argument is refused like a top-level one."""
    with pytest.raises(InvalidDecisionError):
        validate_tool_args(order, {"customer": "c", "items": [{"sku": "A", "qty": 1, "gfit": True}]})


def test_an_edit_the_tool_would_refuse_is_refused_with_the_tools_reason():
    """`http_request` to a host not on the allow-list: refused at the edit, saying why; allowed hosts pass."""
    from bot.settings import ToolSettings
    from bot.tools.http_request import make_http_request_tool

    http = make_http_request_tool(ToolSettings(http_allowed_hosts=("api.example.com",)))
    with pytest.raises(InvalidDecisionError, match=r"host evil\.com is not allowed") as refused:
        validate_tool_args(http, {"method": "DELETE", "url": "http://evil.com/"})
    assert refused.value.field == "args"
    ok = {"method": "DELETE", "url": "https://api.example.com/things/1"}
    assert validate_tool_args(http, ok) == ok
    assert validate_tool_args(http, {"method": "DELETE", "url": "http://evil.com/"}, tool_checks=False)


# validate_decisions ----------------------------------------------------------------------------


def test_validate_decisions_one_per_action_in_order():
    """One decision per action is validated and returned in order."""
    review = request(action("send", to="a", body="b"), action("ping"), action("send", to="c", body="d"))
    checked = validate_decisions(
        [{"type": "approve"}, {"type": "reject", "message": "no"}, edit("send", to="x", body="y")],
        review,
        TOOLS,
    )
    assert checked[0] == Approve()
    assert checked[1] == Reject(message="no")
    assert isinstance(checked[2], Edit)
    assert checked[2].edited_action.args == {"to": "x", "body": "y"}


@pytest.mark.parametrize("count", [0, 1, 3])
def test_validate_decisions_count_mismatch(count):
    """Fewer or more decisions than actions are refused, stating both numbers."""
    review = request(action("send", to="a", body="b"), action("ping"))
    with pytest.raises(InvalidDecisionError, match=f"expected 2 decision.*got {count}"):
        validate_decisions([{"type": "approve"}] * count, review, TOOLS)


def test_validate_decisions_empty_request_and_no_decisions():
    """An empty review with no decisions validates to an empty list."""
    assert validate_decisions([], {"action_requests": [], "review_configs": []}, TOOLS) == []


def test_validate_decisions_enforces_allowed_decisions():
    """A decision type the review config does not allow is refused, listing what is allowed."""
    review = request(action("send", to="a", body="b"), allowed=[["approve", "reject"]])
    with pytest.raises(InvalidDecisionError, match="'edit' is not allowed") as info:
        validate_decisions([edit("send", to="x", body="y")], review, TOOLS)
    assert "approve, reject" in info.value.message
    assert validate_decisions([{"type": "reject"}], review, TOOLS) == [Reject()]


def test_validate_decisions_allowed_is_per_action():
    """Each action has its own allowed decisions, matched by position."""
    review = request(
        action("send", to="a", body="b"),
        action("ping"),
        allowed=[["approve", "edit", "reject"], ["reject"]],
    )
    validate_decisions([{"type": "approve"}, {"type": "reject"}], review, TOOLS)
    with pytest.raises(InvalidDecisionError, match=r"decision 2: 'approve' is not allowed"):
        validate_decisions([{"type": "approve"}, {"type": "approve"}], review, TOOLS)


def test_validate_decisions_falls_back_to_config_by_name():
    """When configs are not in action order, the config with the action's name applies."""
    review = {
        "action_requests": [action("send", to="a", body="b"), action("ping")],
        "review_configs": [
            {"action_name": "ping", "allowed_decisions": ["approve"]},
            {"action_name": "send", "allowed_decisions": ["reject"]},
        ],
    }
    assert validate_decisions([{"type": "reject"}, {"type": "approve"}], review, TOOLS) == [
        Reject(),
        Approve(),
    ]
    with pytest.raises(InvalidDecisionError, match="not allowed"):
        validate_decisions([{"type": "approve"}, {"type": "approve"}], review, TOOLS)


def test_validate_decisions_malformed_decision_is_refused():
    """A malformed decision anywhere in the list refuses the whole resume value."""
    review = request(action("send", to="a", body="b"), action("ping"))
    with pytest.raises(InvalidDecisionError, match="malformed"):
        validate_decisions([{"type": "approve"}, {"type": "yes"}], review, TOOLS)


def test_validate_decisions_checks_edits_against_the_schema():
    """An edit with a wrong type inside a whole resume value is refused with its field path."""
    review = request(action("order", customer="c", items=[]))
    bad = edit("order", customer="c", items=[{"sku": "A", "qty": "many"}])
    with pytest.raises(InvalidDecisionError) as info:
        validate_decisions([bad], review, TOOLS)
    assert info.value.field == "args.items.0.qty"


def test_validate_decisions_refuses_rename_in_an_edit():
    """An edit naming a different tool than its action is refused."""
    review = request(action("send", to="a", body="b"))
    with pytest.raises(InvalidDecisionError, match="cannot change the tool") as info:
        validate_decisions([edit("ping")], review, TOOLS)
    assert info.value.field == "name"


def test_validate_decisions_edit_of_unregistered_tool_is_refused():
    """An edit for an action whose tool is not in `tools` is refused."""
    review = request(action("gone", x=1))
    with pytest.raises(InvalidDecisionError, match="not available"):
        validate_decisions([edit("gone", x=1)], review, TOOLS)
    assert validate_decisions([{"type": "approve"}], review, TOOLS) == [Approve()]


def test_validate_decisions_accepts_a_request_built_by_build_review_request():
    """The payload the review node really builds validates all three decision kinds."""
    calls = [
        {"name": "send", "args": {"to": "a", "body": "b"}, "id": "c1", "type": "tool_call"},
        {"name": "tag", "args": {"labels": {}}, "id": "c2", "type": "tool_call"},
        {"name": "ping", "args": {}, "id": "c3", "type": "tool_call"},
    ]
    review = build_review_request(calls, TOOLS)
    checked = validate_decisions(
        [edit("send", to="z", body="b"), {"type": "approve"}, {"type": "reject"}], review, TOOLS
    )
    assert [d.type for d in checked] == ["edit", "approve", "reject"]


def test_the_digest_counts_numbers_by_value():
    """1.0 and 1, a huge float and the integer jsonb gives back for it, digest alike; other values and bools do not."""
    from bot.reviews.digest import args_digest

    huge = 2.0**70
    assert args_digest({"n": huge}) == args_digest({"n": int(Decimal(repr(huge)))})
    assert args_digest({"n": 1}) == args_digest({"n": 1.0})
    assert args_digest({"n": [0.5, {"m": 2}]}) == args_digest({"n": [0.50, {"m": 2.0}]})
    assert args_digest({"n": 1}) != args_digest({"n": 2})
    assert args_digest({"n": True}) != args_digest({"n": 1})
    assert args_digest({"n": "1"}) != args_digest({"n": 1})
