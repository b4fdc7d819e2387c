"""The digest that pins an MCP tool's definition: what counts as a change, and what does not."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bot.tools.mcp.pins import MalformedDefinitionError, ToolDefinition

ENTRY: dict[str, Any] = {
    "name": "create_issue",
    "title": "Create an issue",
    "description": "Create an issue in a repository.",
    "inputSchema": {
        "type": "object",
        "additionalProperties": False,
        "properties": {"repo": {"type": "string", "maxLength": 100}, "title": {"type": "string"}},
        "required": ["repo", "title"],
    },
    "outputSchema": {"type": "object", "properties": {"url": {"type": "string"}}},
    "annotations": {"title": "Create an issue", "readOnlyHint": False, "destructiveHint": False},
    "icons": [{"src": "https://example.test/icon.png"}],
    "_meta": {"fastmcp": {"tags": []}},
}


def definition(entry: dict[str, Any], server: str = "github") -> ToolDefinition:
    return ToolDefinition.from_listing(server, entry)


def reordered(value: Any) -> Any:
    """`value` with every object's keys in reverse order."""
    if isinstance(value, dict):
        return {key: reordered(value[key]) for key in reversed(list(value))}
    if isinstance(value, list):
        return [reordered(item) for item in value]
    return value


def test_the_digest_does_not_depend_on_key_order():
    """The same tool serialised with its keys in another order (another protocol era) has the same digest."""
    other_era = json.loads(json.dumps(reordered(ENTRY)))
    assert list(other_era) != list(ENTRY)
    assert list(other_era["inputSchema"]["properties"]["repo"]) != list(ENTRY["inputSchema"]["properties"]["repo"])
    assert definition(other_era).digest == definition(ENTRY).digest
    assert definition(other_era) == definition(ENTRY)
    assert len(definition(ENTRY).digest) == 64


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("title", "File an issue"),
        ("icons", []),
        ("_meta", {"fastmcp": {"tags": ["new"]}, "team": "x"}),
        ("outputSchema", {"type": "object"}),
        ("execution", {"taskSupport": "optional"}),
    ],
)
def test_display_and_result_fields_are_not_pinned(field: str, value: Any):
    """A new title, icons, _meta, output schema or execution mode is not a change of the tool."""
    assert definition({**ENTRY, field: value}).digest == definition(ENTRY).digest


def test_a_title_change_is_not_a_change_even_inside_the_annotations():
    """FastMCP copies the title into `annotations.title`: relabelling a tool there does not change it either."""
    relabelled = {**ENTRY, "title": "File it", "annotations": {**ENTRY["annotations"], "title": "File it"}}
    assert definition(relabelled).digest == definition(ENTRY).digest


@pytest.mark.parametrize(
    "changed",
    [
        {**ENTRY, "description": "Create an issue in a repository, and close every other."},
        {**ENTRY, "description": None},
        {**ENTRY, "name": "create_issues"},
        {**ENTRY, "inputSchema": {**ENTRY["inputSchema"], "required": ["repo"]}},
        {**ENTRY, "inputSchema": {**ENTRY["inputSchema"], "additionalProperties": True}},
        {**ENTRY, "annotations": {**ENTRY["annotations"], "destructiveHint": True}},
        {**ENTRY, "annotations": {**ENTRY["annotations"], "openWorldHint": True}},
    ],
    ids=["description", "no-description", "name", "required", "additional", "destructive", "open-world"],
)
def test_a_change_of_description_schema_name_or_hints_is_a_change(changed: dict[str, Any]):
    """Anything the model reads or an approver relies on changes the digest."""
    assert definition(changed).digest != definition(ENTRY).digest
    assert definition(changed) != definition(ENTRY)


def test_spellings_of_the_same_value_are_the_same_definition():
    """An integral number written as 100.0, null hints and an empty annotations object change nothing."""
    entry = {**ENTRY, "annotations": {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": None}}
    entry["inputSchema"] = json.loads(
        json.dumps(ENTRY["inputSchema"]).replace('"maxLength": 100', '"maxLength": 100.0')
    )
    assert entry["inputSchema"]["properties"]["repo"]["maxLength"] == 100.0
    assert definition(entry).digest == definition(ENTRY).digest
    bare = {key: value for key, value in ENTRY.items() if key != "annotations"}
    assert definition({**bare, "annotations": {}}).digest == definition(bare).digest
    assert definition({**bare, "annotations": None}).digest == definition(bare).digest


def test_the_digest_is_per_server_and_survives_its_own_stored_form():
    """A definition rebuilt from what the store keeps (`pinned()`) is the same definition."""
    original = definition(ENTRY)
    stored = json.loads(json.dumps(original.pinned()))
    assert definition(stored) == original
    assert definition(ENTRY, server="gitlab") != original
    assert original.registry_name == "github__create_issue"
    assert definition(ENTRY, server="my.server").registry_name == "my_server__create_issue"


@pytest.mark.parametrize(
    ("entry", "words"),
    [
        ({"description": "x", "inputSchema": {}}, "without a name"),
        ({"name": "t", "description": 3, "inputSchema": {}}, "description that is not text"),
        ({"name": "t", "inputSchema": "object"}, "no input schema object"),
        ({"name": "t", "inputSchema": {}, "annotations": ["readOnlyHint"]}, "annotations that are not an object"),
        ({"name": "t", "inputSchema": {"maximum": float("nan")}}, "values JSON cannot carry"),
    ],
)
def test_a_malformed_entry_is_refused_in_words(entry: dict[str, Any], words: str):
    """A listing entry that cannot be a definition raises an error naming the server and the problem."""
    with pytest.raises(MalformedDefinitionError, match=words) as caught:
        definition(entry)
    assert "'github'" in str(caught.value)
