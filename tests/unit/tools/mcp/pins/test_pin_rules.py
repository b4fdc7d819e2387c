"""The rules of pinned definitions, as pure functions: offered, pinned, held, gone, accepted; and the diff."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from bot.tools.mcp.pins import (
    AcceptPlan,
    AcceptRefusal,
    AcceptRefused,
    ChangeKind,
    DuplicateToolError,
    ServerPins,
    ToolDefinition,
    ValueChange,
)
from bot.tools.mcp.pins.diff import DESCRIPTION_LINES, SCHEMA_CHANGES, describe_change
from bot.tools.mcp.pins.rules import Hold, call_refusal, held_reason, plan_accept, review_listing

SERVER = "github"
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def tool(name: str, description: str = "Does a thing.", **changes: Any) -> ToolDefinition:
    entry: dict[str, Any] = {
        "name": name,
        "description": description,
        "inputSchema": {"type": "object", "properties": {"repo": {"type": "string"}}, "required": ["repo"]},
        "annotations": {"readOnlyHint": True},
        **changes,
    }
    return ToolDefinition.from_listing(SERVER, entry)


def pinned(*definitions: ToolDefinition, holds: dict[str, Hold] | None = None) -> ServerPins:
    return ServerPins(server=SERVER, seen=True, pins={d.name: d for d in definitions}, holds=holds or {})


def hold(definition: ToolDefinition, *, noticed: bool = True) -> Hold:
    return Hold(definition=definition, held_at=NOW, noticed=noticed)


A, B = tool("a"), tool("b")
A2 = tool("a", "Does a thing, then deletes the repository.")
A3 = tool("a", "Does something else again.")


def test_first_sight_pins_and_offers_every_tool():
    """A server never seen: all its tools are pinned now and offered."""
    review = review_listing(ServerPins(server=SERVER), [A, B])
    assert review.first_sight
    assert review.pin == review.offered == (A, B)
    assert review.held == review.hold == review.notify == ()


def test_unchanged_tools_are_offered_and_nothing_is_written():
    """Every tool listed as pinned: offered, nothing to record."""
    review = review_listing(pinned(A, B), [B, A])
    assert not review.first_sight
    assert review.offered == (B, A)
    assert (review.pin, review.held, review.hold, review.release, review.notify, review.gone) == ((),) * 6


def test_a_changed_tool_is_held_and_told_once():
    """A pinned tool listed with another definition is held, to be recorded and told; the others stay offered."""
    review = review_listing(pinned(A, B), [A2, B])
    assert review.offered == (B,)
    assert [(t.definition, t.pinned, t.kind) for t in review.held] == [(A2, A, ChangeKind.CHANGED)]
    assert review.hold == (A2,)
    assert review.notify == review.held
    again = review_listing(pinned(A, B, holds={"a": hold(A2)}), [A2, B])
    assert again.held == review.held
    assert again.hold == again.notify == ()


def test_a_hold_never_told_is_told_on_the_next_listing():
    """A hold recorded whose message nobody claimed (a crash in between) is to be told, not recorded again."""
    review = review_listing(pinned(A, holds={"a": hold(A2, noticed=False)}), [A2])
    assert review.hold == ()
    assert [t.definition for t in review.notify] == [A2]


def test_a_hold_changed_again_is_recorded_and_told_again():
    """A held tool that changes once more is a new change: recorded with its new digest and told."""
    review = review_listing(pinned(A, holds={"a": hold(A2)}), [A3])
    assert review.hold == (A3,)
    assert [t.definition for t in review.notify] == [A3]


def test_a_new_tool_on_a_server_with_pins_is_held():
    """A tool never pinned on a server seen before is held as new, even when the first sight had no tools."""
    review = review_listing(pinned(A), [A, B])
    assert review.offered == (A,)
    assert [(t.definition, t.pinned, t.kind) for t in review.held] == [(B, None, ChangeKind.NEW)]
    empty_first_sight = review_listing(pinned(), [A])
    assert not empty_first_sight.first_sight
    assert [t.kind for t in empty_first_sight.held] == [ChangeKind.NEW]


def test_a_gone_tool_is_remembered_and_offered_again_unchanged_or_held_changed():
    """A pinned tool not listed is gone (not held); back unchanged it is offered, back changed it is held."""
    state = pinned(A, B)
    gone = review_listing(state, [B])
    assert gone.gone == ("a",)
    assert gone.offered == (B,) and gone.held == ()
    assert review_listing(state, [A, B]).offered == (A, B)
    back_changed = review_listing(state, [A2, B])
    assert [t.definition for t in back_changed.held] == [A2]


def test_a_hold_is_lifted_when_the_pinned_definition_is_listed_again():
    """A held tool listed as pinned again is offered, and its stored hold is to be released."""
    review = review_listing(pinned(A, holds={"a": hold(A2)}), [A])
    assert review.offered == (A,)
    assert review.release == (A,)
    assert review.held == ()


def test_a_listing_naming_a_tool_twice_or_another_server_is_refused():
    """A server listing one name twice cannot be judged; a definition of another server is a caller's error."""
    with pytest.raises(DuplicateToolError, match="'github' lists these tools more than once: a"):
        review_listing(pinned(A), [A, A2])
    with pytest.raises(ValueError, match="gitlab"):
        review_listing(pinned(A), [ToolDefinition.from_listing("gitlab", {"name": "a", "inputSchema": {}})])


def test_a_call_goes_only_with_the_pinned_definition_and_no_hold_anywhere():
    """A call is refused, with the accept command in the model's words, when held by this or any process."""
    assert call_refusal(pinned(A), A) is None
    refusal = call_refusal(pinned(A), A2)
    assert refusal is not None
    assert "/countersign mcp accept github" in refusal and "github__a" in refusal and "Nothing was sent" in refusal
    assert call_refusal(pinned(A, holds={"a": hold(A2)}), A) is not None  # another worker saw the change
    assert call_refusal(pinned(A), B) is not None
    assert call_refusal(ServerPins(server=SERVER), A) is not None


def test_a_held_tool_is_named_as_users_see_it_with_the_exact_accept_command():
    """A server key with a dot: the model reads `<server>__<tool>` and the accept command in tool-name spelling."""
    entry = {"name": "create", "description": "Opens a ticket.", "inputSchema": {"type": "object"}}
    held = ToolDefinition.from_listing("my.tickets", entry)
    state = ServerPins(server="my.tickets", seen=True)
    for said in (call_refusal(state, held), held_reason("my.tickets", "my_tickets__create")):
        assert said is not None
        assert "my_tickets__create" in said and "/countersign mcp accept my_tickets" in said, said
        assert "my.tickets" not in said and "'create'" not in said, said


def test_accept_pins_the_held_definitions_that_were_shown():
    """The plan pins every held definition, a gone one included, with what changed in each."""
    state = pinned(A, holds={"a": hold(A2), "b": hold(B)})
    plan = plan_accept(state, [A2, B])
    assert isinstance(plan, AcceptPlan)
    assert plan.definitions == (A2, B)
    assert plan.shown == {"a": A2.digest, "b": B.digest}
    assert [(c.tool, c.kind, c.changed) for c in plan.changes] == [
        ("a", ChangeKind.CHANGED, ("description",)),
        ("b", ChangeKind.NEW, ("description", "input schema", "hints")),
    ]
    gone_meanwhile = plan_accept(state, [A2])
    assert isinstance(gone_meanwhile, AcceptPlan)
    assert gone_meanwhile.definitions == (A2, B)


def test_accept_is_refused_for_what_the_admins_were_not_shown():
    """A held tool listed otherwise by now, or a change no listing held yet, refuses the accept; no holds: nothing."""
    state = pinned(A, B, holds={"a": hold(A2)})
    changed_again = plan_accept(state, [A3, B])
    assert changed_again == AcceptRefused(server=SERVER, reason=AcceptRefusal.CHANGED_AGAIN, tools=("a",))
    unrecorded = plan_accept(state, [A2, tool("b", "Changed meanwhile.")])
    assert isinstance(unrecorded, AcceptRefused) and unrecorded.tools == ("b",)
    assert plan_accept(pinned(A, B), [A, B]) == AcceptRefused(server=SERVER, reason=AcceptRefusal.NOTHING_HELD)
    assert plan_accept(ServerPins(server=SERVER), [A]) == AcceptRefused(
        server=SERVER, reason=AcceptRefusal.NOTHING_HELD
    )


def test_the_diff_shows_description_lines_schema_paths_and_hints():
    """A changed tool's diff: the description as - and + lines, the schema by JSON path, the hints by name."""
    before = tool("a", "Creates an issue.\nSafe to retry.")
    after = tool(
        "a",
        "Creates an issue.\nDeletes the repository first.",
        inputSchema={
            "type": "object",
            "properties": {"repo": {"type": "string"}, "force": {"type": "boolean", "default": None}},
            "required": ["repo", "force"],
        },
        annotations={"readOnlyHint": False, "destructiveHint": True},
    )
    change = describe_change(before, after)
    assert change.changed == ("description", "input schema", "hints")
    assert change.description == (" Creates an issue.", "-Safe to retry.", "+Deletes the repository first.")
    assert change.schema == (
        ValueChange("$.properties.force.default", None, "null"),
        ValueChange("$.properties.force.type", None, '"boolean"'),
        ValueChange("$.required", '["repo"]', '["repo","force"]'),
    )
    assert change.hints == (
        ValueChange("destructiveHint", None, "true"),
        ValueChange("readOnlyHint", "true", "false"),
    )
    assert (change.before_digest, change.after_digest, change.left_out) == (before.digest, after.digest, 0)
    assert len(change.digest) == 64 and change.as_json()["kind"] == "changed"


def test_the_diff_is_bounded():
    """A server rewriting a huge description and schema gets a diff of bounded size, saying how much was cut."""
    huge = tool(
        "a",
        "\n".join(f"line {i} " + "x" * 500 for i in range(100)),
        inputSchema={"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(100)}},
    )
    change = describe_change(tool("a", "short"), huge)
    assert len(change.description) == DESCRIPTION_LINES
    assert all(len(line) <= 200 for line in change.description)
    assert len(change.schema) == SCHEMA_CHANGES
    assert change.left_out > 100
    new = describe_change(None, huge)
    assert new.kind is ChangeKind.NEW and new.before_digest is None
    assert new.schema[0] == ValueChange("$.properties.p0.type", None, '"string"')
