"""Schemas shaped like well-known public MCP servers' (tests/unit/tools/mcp/schema_corpus.py) against Gemini's rules."""

from __future__ import annotations

import copy

import pytest
from jsonschema import Draft202012Validator
from jsonschema.validators import validator_for

from bot.tools.mcp.gemini_schema import UnusableSchemaError, gemini_parameters
from tests.standins.gemini import declaration_problem
from tests.unit.tools.mcp.schema_corpus import (
    FETCH,
    LINEAR_CREATE_ISSUE,
    PYDANTIC_CREATE_ORDER,
    UNUSABLE,
    USABLE,
    ZOD_ROOT_UNION,
    Unusable,
    Usable,
)
from tests.unit.tools.mcp.subset import subset_problems


def declared(entry: Usable, parameters: object) -> dict[str, object]:
    return {"name": entry.tool, "description": "A tool.", "parametersJsonSchema": parameters}


@pytest.mark.parametrize("entry", USABLE, ids=lambda entry: entry.tool)
def test_the_rewritten_schema_is_accepted_by_the_gemini_stand_in(entry: Usable):
    """Every usable server schema becomes a declaration the stand-in (Google's known refusals) accepts."""
    parameters = gemini_parameters(entry.schema)
    assert declaration_problem(declared(entry, parameters)) is None
    assert subset_problems(parameters) == []


@pytest.mark.parametrize("entry", USABLE, ids=lambda entry: entry.tool)
def test_arguments_the_server_accepts_stay_valid(entry: Usable):
    """Arguments valid under the server's own schema are valid under the rewritten one too."""
    original = validator_for(entry.schema)(entry.schema)
    rewritten = Draft202012Validator(gemini_parameters(entry.schema))
    for arguments in entry.valid_arguments:
        original.validate(arguments)
        assert list(rewritten.iter_errors(arguments)) == [], arguments


@pytest.mark.parametrize("entry", USABLE, ids=lambda entry: entry.tool)
def test_the_servers_schema_is_left_as_it_was(entry: Usable):
    """The rewrite reads the server's schema and never changes it."""
    before = copy.deepcopy(entry.schema)
    gemini_parameters(entry.schema)
    assert entry.schema == before


def test_most_raw_schemas_would_fail_every_model_call():
    """Sent as they come, the zod and pydantic schemas are refused by the stand-in, as Google refuses them."""
    refused = {entry.tool for entry in USABLE if declaration_problem(declared(entry, entry.schema))}
    assert refused == {
        "github__create_pull_request_review",
        "filesystem__edit_file",
        "filesystem__list_allowed_directories",
        "filesystem__read_multiple_files",
        "atlassian__getJiraIssue",
        "linear__create_issue",
        "linear__list_issues",
        "sentry__search_issues",
        "sentry__update_issue",
        "postgres__execute_sql",
        "memory__create_entities",
        "memory__delete_relations",
        "shop__create_order",
        "notion__search",
        "calendar__find_event",
    }


@pytest.mark.parametrize("entry", UNUSABLE, ids=lambda entry: entry.tool)
def test_an_unusable_schema_is_refused_with_its_reason(entry: Unusable):
    """A schema that cannot be declared is refused with words an operator can act on."""
    with pytest.raises(UnusableSchemaError) as caught:
        gemini_parameters(entry.schema)
    assert entry.reason in caught.value.reason


def test_what_gemini_cannot_check_is_still_told_to_the_model():
    """Moved constraints, enums of numbers, references and recursion survive as words."""
    linear = gemini_parameters(LINEAR_CREATE_ISSUE.schema)["properties"]
    assert linear["priority"] == {
        "type": "integer",
        "description": "0 = No priority, 1 = Urgent, 2 = High, 3 = Normal, 4 = Low (one of: 0, 1, 2, 3, 4)",
    }
    assert linear["dueDate"] == {"type": "string", "description": "Due date in ISO format (format: date)"}
    assert linear["estimate"] == {"type": "number", "description": "(greater than 0)"}

    fetch = gemini_parameters(FETCH.schema)["properties"]
    assert fetch["url"] == {"type": "string", "minLength": 1, "description": "URL to fetch (format: uri)"}
    assert fetch["max_length"]["description"] == (
        "Maximum number of characters to return. (greater than 0) (less than 1000000) (default: 5000)"
    )

    order = gemini_parameters(PYDANTIC_CREATE_ORDER.schema)
    properties = order["properties"]
    assert properties["ship_to"]["description"] == "Where the parcel goes"
    assert properties["ship_to"]["properties"]["country"]["description"] == '(pattern: ^[A-Z]{2}$) (default: "NL")'
    assert properties["priority"] == {
        "type": "string",
        "enum": ["low", "normal", "high"],
        "description": '(default: "normal")',
    }
    category = next(option for option in properties["category"]["anyOf"] if option["type"] == "object")
    assert category["properties"]["children"]["items"] == {
        "type": "object",
        "description": "(the same structure as Category again, not expanded further)",
    }
    assert properties["tags"] == {"type": "object", "additionalProperties": {"type": "integer"}}
    assert properties["deliver_after"]["anyOf"][0] == {"type": "string", "format": "date-time"}
    line = properties["lines"]["items"]["properties"]
    assert line["size"] == {"type": "integer", "description": "(one of: 36, 38, 40)"}
    assert line["gift"] == {"type": "boolean", "description": "(must be true)"}

    calendar = gemini_parameters(ZOD_ROOT_UNION.schema)
    assert calendar["description"] == "Takes one of these sets of arguments: (event_id) or (title)."
    assert set(calendar["properties"]) == {"event_id", "title", "day"}
