"""gemini_parameters: each rewrite and each refusal, on small schemas."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from bot.base.errors import CountersignError
from bot.tools.mcp.gemini_schema import (
    MAX_ALTERNATIVES,
    MAX_DESCRIPTION,
    MAX_NODES,
    UnusableSchemaError,
    declared_description,
    gemini_parameters,
)
from tests.standins.gemini import schema_problem
from tests.unit.tools.mcp.subset import subset_problems


def rewrite(schema: dict[str, Any]) -> dict[str, Any]:
    """The rewrite, checked against the subset and the stand-in on the way."""
    result = gemini_parameters(schema)
    assert subset_problems(result) == []
    assert schema_problem(result) is None
    return result


def one(schema: dict[str, Any]) -> dict[str, Any]:
    """The rewrite of `schema` as the only property of an object."""
    return rewrite({"type": "object", "properties": {"p": schema}})["properties"]["p"]


def refusal(schema: Any) -> str:
    with pytest.raises(UnusableSchemaError) as caught:
        gemini_parameters(schema)
    assert caught.value.reason == str(caught.value)
    return caught.value.reason


def test_error_is_a_countersign_error_with_a_reason():
    """UnusableSchemaError belongs to the core's error root and carries its reason."""
    error = UnusableSchemaError("its input schema is not a JSON object")
    assert isinstance(error, CountersignError)
    assert error.reason == "its input schema is not a JSON object"


# --- the root ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "schema",
    [{}, {"type": "object"}, {"type": "object", "properties": {}, "required": []}, {"additionalProperties": False}],
)
def test_a_root_without_arguments_is_an_empty_object(schema):
    """A tool without arguments is declared as an object with empty properties."""
    assert rewrite(schema) == {"type": "object", "properties": {}}


def test_a_root_with_properties_but_no_type_is_an_object():
    """`type: object` is added when the root only lists properties."""
    assert rewrite({"properties": {"q": {"type": "string"}}, "required": ["q"]}) == {
        "type": "object",
        "properties": {"q": {"type": "string"}},
        "required": ["q"],
    }


def test_a_nullable_root_object_is_the_object():
    """A root that may also be null declares the object (arguments are always an object)."""
    assert rewrite({"type": ["object", "null"], "properties": {"a": {"type": "string"}}}) == {
        "type": "object",
        "properties": {"a": {"type": "string"}},
    }


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        ({"type": "string"}, "describes string, not an object of named arguments"),
        ({"type": "array", "items": {"type": "string"}}, "describes array, not an object"),
        ({"anyOf": [{"type": "object"}, {"type": "integer"}]}, "describes integer, not an object"),
        ({"type": "null"}, "describes null, not an object"),
        (False, "not a JSON object"),
        ({"not": {}, "type": "object", "properties": {"a": False}, "required": ["a"]}, "a is required"),
        ({"allOf": [{"type": "object"}, {"type": "string"}]}, "must be both object and string"),
    ],
)
def test_a_root_that_is_not_named_arguments_is_refused(schema, words):
    """A schema that cannot be an object of named arguments is refused, saying what it describes."""
    assert words in refusal(schema)


def test_a_root_union_of_objects_becomes_one_object():
    """Branches' properties are merged, required only where all require, and the sets are described."""
    result = rewrite(
        {
            "oneOf": [
                {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
                {
                    "type": "object",
                    "properties": {"name": {"type": "string"}, "id": {"type": "integer"}},
                    "required": ["name"],
                },
            ]
        }
    )
    assert result["properties"] == {
        "id": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
        "name": {"type": "string"},
    }
    assert "required" not in result
    assert result["description"] == "Takes one of these sets of arguments: (id) or (name)."


def test_declared_description_carries_the_root_notes():
    """The tool's description gets the notes about the arguments as a whole appended."""
    parameters = rewrite({"anyOf": [{"properties": {"a": {}}, "required": ["a"]}, {"properties": {"b": {}}}]})
    assert declared_description("Find a thing.", parameters) == (
        "Find a thing.\n\nTakes one of these sets of arguments: (a) or (b)."
    )
    assert declared_description(None, {"type": "object", "properties": {}}) == ""
    assert declared_description("  Find.  ", {"description": " "}) == "Find."


# --- references -----------------------------------------------------------------------------


def test_refs_are_inlined_from_defs_definitions_and_pointers():
    """`$defs`, draft-07 `definitions` and plain JSON pointers are inlined; no `$ref` remains."""
    result = rewrite(
        {
            "type": "object",
            "$defs": {"Id": {"type": "string", "minLength": 3}},
            "definitions": {"Count": {"type": "integer", "minimum": 0}},
            "properties": {
                "id": {"$ref": "#/$defs/Id", "description": "The id"},
                "count": {"$ref": "#/definitions/Count"},
                "again": {"$ref": "#/properties/count"},
                "slash": {"$ref": "#/$defs/a~1b"},
            },
        }
        | {"$defs": {"Id": {"type": "string", "minLength": 3}, "a/b": {"type": "boolean"}}}
    )
    assert result["properties"] == {
        "id": {"type": "string", "minLength": 3, "description": "The id"},
        "count": {"type": "integer", "minimum": 0},
        "again": {"type": "integer", "minimum": 0},
        "slash": {"type": "boolean"},
    }


def test_draft_07_ignores_the_keywords_beside_a_ref():
    """Before 2019-09 a `$ref` replaces its siblings, so only their description is kept; later drafts merge them."""
    schema = {
        "type": "object",
        "definitions": {"N": {"type": "number"}},
        "properties": {"n": {"$ref": "#/definitions/N", "type": "integer", "description": "A count"}},
    }
    assert rewrite({**schema, "$schema": "http://json-schema.org/draft-07/schema#"})["properties"]["n"] == {
        "type": "number",
        "description": "A count",
    }
    assert rewrite(schema)["properties"]["n"] == {"type": "integer", "description": "A count"}


def test_a_recursive_ref_is_cut_to_a_described_open_object():
    """A tree is expanded once, then cut to an object that says it repeats."""
    result = rewrite(
        {
            "$defs": {
                "Node": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "kids": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
                    },
                }
            },
            "type": "object",
            "properties": {"tree": {"$ref": "#/$defs/Node"}},
        }
    )
    kids = result["properties"]["tree"]["properties"]["kids"]
    assert kids["items"] == {
        "type": "object",
        "description": "(the same structure as Node again, not expanded further)",
    }


def test_a_ref_to_the_whole_schema_is_cut_at_once():
    """`#` points at the root, which is already being expanded."""
    result = rewrite({"type": "object", "properties": {"next": {"$ref": "#"}}})
    assert result["properties"]["next"] == {
        "type": "object",
        "description": "(the same structure as the whole input again, not expanded further)",
    }


@pytest.mark.parametrize(
    "ref", ["https://example.com/schemas/user.json", "#user", "#/$defs/Missing", "other.json#/x", "#/properties/7"]
)
def test_a_ref_that_cannot_be_followed_becomes_an_open_schema_that_says_so(ref):
    """External, anchor and missing references accept any value and name where the shape lives."""
    assert one({"$ref": ref, "description": "The user"}) == {
        "description": f"The user (its shape is defined elsewhere, at {ref}, and not shown here)"
    }


# --- unions, intersections, constants -------------------------------------------------------


def test_anyof_with_null_stays_nullable():
    """pydantic's `X | None` keeps its null branch; `default` and `title` become words or go."""
    assert one({"anyOf": [{"type": "string"}, {"type": "null"}], "default": None, "title": "Note"}) == {
        "anyOf": [{"type": "string"}, {"type": "null"}],
        "description": "(default: null)",
    }


def test_oneof_becomes_anyof_and_siblings_go_into_each_branch():
    """Keywords beside a union apply to every branch."""
    assert one({"type": "object", "properties": {"a": {"type": "string"}}, "oneOf": [{"required": ["a"]}, {}]}) == {
        "anyOf": [
            {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
            {"type": "object", "properties": {"a": {"type": "string"}}},
        ]
    }


def test_a_union_with_an_open_branch_is_open():
    """A union one of whose branches takes anything takes anything."""
    assert one({"anyOf": [{"type": "string"}, {}], "description": "Any"}) == {"description": "Any"}


def test_allof_parts_are_merged():
    """Properties and required lists add up; bounds take the tighter value; types intersect."""
    assert one(
        {
            "allOf": [
                {"type": "object", "properties": {"a": {"type": "number", "maximum": 9}}, "required": ["a"]},
                {"properties": {"a": {"type": "integer", "maximum": 5}, "b": {"type": "string"}}, "required": ["b"]},
            ]
        }
    ) == {
        "type": "object",
        "properties": {"a": {"type": "integer", "maximum": 5}, "b": {"type": "string"}},
        "required": ["a", "b"],
    }


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"const": "fast"}, {"type": "string", "enum": ["fast"]}),
        ({"type": "number", "const": 100}, {"type": "integer", "description": "(must be 100)"}),
        ({"const": True}, {"type": "boolean", "description": "(must be true)"}),
        ({"const": None}, {"type": "null"}),
        ({"enum": ["a", "b"], "const": "b"}, {"type": "string", "enum": ["b"]}),
    ],
)
def test_const_becomes_enum_or_says_its_value(schema, expected):
    """A string constant is a one-value enum; any other constant is its type, named in words."""
    assert one(schema) == expected


def test_non_string_enums_become_typed_branches():
    """Numbers, booleans and null leave the enum (Gemini takes strings only) but stay allowed."""
    assert one({"enum": [1, 2, "a", None, True]}) == {
        "anyOf": [
            {"type": "integer", "description": "(one of: 1, 2)"},
            {"type": "string", "enum": ["a"]},
            {"type": "null"},
            {"type": "boolean", "description": "(must be true)"},
        ]
    }
    assert one({"type": "integer", "enum": [36, 38], "description": "Size"}) == {
        "type": "integer",
        "description": "Size (one of: 36, 38)",
    }


def test_enum_values_of_another_type_than_declared_are_dropped():
    """Values the `type` rules out can never be valid, so they are not offered."""
    assert one({"type": "string", "enum": ["a", 1, None]}) == {"type": "string", "enum": ["a"]}


def test_a_type_list_becomes_anyof_with_each_types_keywords():
    """`type: [string, integer]` splits into branches that keep their own constraints."""
    assert one({"type": ["string", "integer", "null"], "minLength": 2, "maximum": 9}) == {
        "anyOf": [{"type": "string", "minLength": 2}, {"type": "integer", "maximum": 9}, {"type": "null"}]
    }


def test_openapi_nullable_becomes_a_null_branch():
    """OpenAPI's `nullable: true` means the same as a null branch."""
    assert one({"type": "string", "nullable": True}) == {"anyOf": [{"type": "string"}, {"type": "null"}]}


# --- objects and arrays ---------------------------------------------------------------------


def test_additional_properties():
    """A map keeps its value schema; `false`, `true` and `{}` say nothing Gemini needs."""
    assert one({"type": "object", "additionalProperties": {"type": "string"}}) == {
        "type": "object",
        "additionalProperties": {"type": "string"},
    }
    for extra in (False, True, {}):
        assert one({"type": "object", "properties": {"a": {}}, "additionalProperties": extra}) == {
            "type": "object",
            "properties": {"a": {}},
        }


def test_pattern_properties_leave_the_object_open():
    """With patternProperties the object takes other keys freely (and says rules are not shown)."""
    assert one(
        {
            "type": "object",
            "patternProperties": {"^x-": {"type": "integer"}},
            "additionalProperties": {"type": "string"},
        }
    ) == {"type": "object", "description": "(further rules not shown: patternProperties)"}


def test_required_names_missing_from_properties_are_declared():
    """A required name without a schema is declared as taking any value."""
    assert rewrite({"type": "object", "required": ["token"]}) == {
        "type": "object",
        "properties": {"token": {}},
        "required": ["token"],
    }


def test_a_property_that_allows_no_value_is_left_out():
    """An optional property whose schema is `false` is not offered."""
    assert rewrite({"type": "object", "properties": {"a": False, "b": True}}) == {
        "type": "object",
        "properties": {"b": {}},
    }


def test_arrays_always_have_items():
    """An array without items takes any items; tuples become a union of their positions."""
    assert one({"type": "array"}) == {"type": "array", "items": {}}
    assert one({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "items": False}) == {
        "type": "array",
        "items": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
    }
    assert one({"type": "array", "items": [{"type": "integer"}], "additionalItems": {"type": "string"}}) == {
        "type": "array",
        "items": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
    }
    assert one({"type": "array", "items": False}) == {"type": "array", "items": {}, "maxItems": 0}


def test_items_without_type_is_an_array():
    """A schema that only lists items is an array."""
    assert one({"items": {"type": "string"}}) == {"type": "array", "items": {"type": "string"}}


# --- keywords Gemini does not take ----------------------------------------------------------


def test_noise_is_left_out():
    """`$schema`, `$id`, `title`, `examples`, vendor keys and unknown keywords do not reach Gemini."""
    assert rewrite(
        {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": "urn:x",
            "$comment": "c",
            "title": "Args",
            "x-fastmcp-wrap-result": True,
            "type": "object",
            "properties": {
                "title": {
                    "type": "string",
                    "title": "Title",
                    "examples": ["x"],
                    "x-mcp-header": "X-Title",
                    "readOnly": True,
                }
            },
            "propertyOrdering": ["title"],
        }
    ) == {"type": "object", "properties": {"title": {"type": "string"}}}


def test_constraints_gemini_does_not_take_are_said_in_the_description():
    """Formats, patterns, exclusive bounds, multiples and the like become words the model reads."""
    assert one(
        {
            "type": "string",
            "description": "The key.",
            "format": "uuid",
            "pattern": "^[a-f0-9-]+$",
            "default": "0000",
            "deprecated": True,
        }
    ) == {
        "type": "string",
        "description": 'The key. (format: uuid) (pattern: ^[a-f0-9-]+$) (default: "0000") (deprecated)',
    }
    assert one({"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10, "multipleOf": 2}) == {
        "type": "integer",
        "description": "(greater than 0) (less than 10) (a multiple of 2)",
    }
    assert one({"type": "number", "minimum": 1, "exclusiveMinimum": True}) == {
        "type": "number",
        "minimum": 1,
        "description": "(greater than 1)",
    }
    assert one({"type": "array", "items": {}, "uniqueItems": True, "contains": {"const": 1}}) == {
        "type": "array",
        "items": {},
        "description": "(no duplicate items) (further rules not shown: contains)",
    }
    assert one({"type": "object", "minProperties": 1, "if": {}, "then": {}}) == {
        "type": "object",
        "description": "(at least 1 keys) (further rules not shown: if, then)",
    }


def test_date_time_is_the_one_format_kept():
    """`date-time` stays a format; `date` is said in words."""
    assert one({"type": "string", "format": "date-time"}) == {"type": "string", "format": "date-time"}
    assert one({"type": "string", "format": "date"}) == {"type": "string", "description": "(format: date)"}


def test_long_descriptions_are_cut():
    """A description longer than the limit ends with an ellipsis at the limit."""
    description = one({"type": "string", "description": "x" * 5000})["description"]
    assert len(description) == MAX_DESCRIPTION
    assert description.endswith("…")


# --- names, limits, purity -------------------------------------------------------------------


@pytest.mark.parametrize("name", ["api-version", "foo.bar", "1st", "名前", "p" * 65, ""])
def test_an_argument_name_gemini_refuses_is_refused(name):
    """A top-level argument must be a name Gemini takes; the refusal names it."""
    assert f"its argument {name!r} has a name Gemini refuses" in refusal(
        {"type": "object", "properties": {name: {"type": "string"}}}
    )


def test_nested_property_names_are_kept():
    """Names inside an argument are data keys, not parameters: they stay as the server wrote them."""
    assert one({"type": "object", "properties": {"x-api-key": {"type": "string"}}}) == {
        "type": "object",
        "properties": {"x-api-key": {"type": "string"}},
    }


def test_a_property_named_ref_is_refused():
    """`$ref` cannot be a property name anywhere: reference resolvers would read it as a reference."""
    assert "has a property named '$ref' (at p.$ref)" in refusal(
        {"type": "object", "properties": {"p": {"type": "object", "properties": {"$ref": {"type": "string"}}}}}
    )


def _nested(levels: int) -> dict[str, Any]:
    node: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        node = {"type": "object", "properties": {"a": node}}
    return node


def test_depth_is_bounded():
    """Twenty levels are fine; more are refused, naming where."""
    rewrite(_nested(20))
    assert refusal(_nested(21)).startswith("its input schema nests deeper than 20 levels (at a.a.a.")


def test_input_depth_and_size_are_bounded_before_anything_is_read():
    """A value nested deeper than any schema needs, or an enormous schema, is refused at once."""
    deep: Any = "x"
    for _ in range(5000):
        deep = [deep]
    assert "nests JSON values deeper than 64 levels" in refusal({"type": "object", "default": deep})
    assert "too large (more than 50000 JSON values)" in refusal({"type": "object", "enum": list(range(60_000))})


def test_exponential_references_are_bounded():
    """References that double at each level are refused once the work passes the limit."""
    defs = {"L0": {"type": "string"}}
    for level in range(1, 16):
        below = {"$ref": f"#/$defs/L{level - 1}"}
        defs[f"L{level}"] = {"type": "object", "properties": {"a": below, "b": below}}
    reason = refusal({"type": "object", "$defs": defs, "properties": {"x": {"$ref": "#/$defs/L15"}}})
    assert reason == f"its input schema is too large (more than {MAX_NODES} parts once its references are inlined)"


def test_too_many_alternatives_are_refused():
    """Unions that multiply past the limit are refused, naming where."""
    union = {"anyOf": [{"type": "string"}, {"type": "integer"}]}
    schema = {"type": "object", "properties": {"p": {"allOf": [union] * 6}}}
    assert refusal(schema) == f"its input schema offers more than {MAX_ALTERNATIVES} alternatives at p"


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        ({"type": "object", "properties": []}, "properties at the top level is not an object"),
        ({"type": "object", "properties": {"a": {"anyOf": []}}}, "anyOf at a is not a non-empty list"),
        ({"type": "object", "properties": {"a": {"type": "file"}}}, "a type JSON Schema does not have ('file' at a)"),
        ({"type": "object", "properties": {"a": 3}}, "(a is 3, not a schema)"),
        ({"type": "object", "properties": {"a": {"$ref": 3}}}, "$ref at a is not text"),
        ({"type": "object", 1: "x"}, "not JSON (an object key is not a string)"),
        ({"type": "object", "default": {1, 2}}, "not JSON (it holds a set)"),
        ({"type": "object", "default": 10**400}, "a number too large"),
    ],
)
def test_invalid_json_schema_is_refused_in_words(schema, words):
    """What is not JSON Schema at all is refused, saying what and where."""
    assert words in refusal(schema)


def test_the_input_is_never_changed_nor_shared():
    """The server's schema stays as it was, and changing the result cannot change it."""
    schema = {
        "$defs": {
            "A": {"type": "object", "properties": {"v": {"enum": ["x", 1]}}, "additionalProperties": {"type": "string"}}
        },
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/A"}, "b": {"type": "array", "items": {"$ref": "#/$defs/A"}}},
        "required": ["a"],
    }
    before = copy.deepcopy(schema)
    result = gemini_parameters(schema)
    assert schema == before
    result["properties"]["a"]["properties"]["v"]["anyOf"][0]["enum"].append("y")
    result["properties"]["a"]["additionalProperties"]["type"] = "integer"
    result["required"].append("b")
    assert schema == before
    assert gemini_parameters(schema) == gemini_parameters(before)
