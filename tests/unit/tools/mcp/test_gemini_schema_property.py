"""gemini_parameters on generated schemas: it only ever refuses in words, never changes its input,
always produces what the Gemini stand-in accepts, and loses no arguments the original accepts."""

from __future__ import annotations

import copy
import os
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from jsonschema.validators import validator_for
from referencing.exceptions import Unresolvable

from bot.tools.mcp.gemini_schema import UnusableSchemaError, gemini_parameters
from tests.standins.gemini import declaration_problem
from tests.unit.tools.mcp.subset import subset_problems

TYPES = ["object", "array", "string", "integer", "number", "boolean", "null"]
NAMES = ["a", "b", "c", "x-y", "$ref", "title", "properties"]
REFS = ["#", "#/$defs/A", "#/$defs/B", "#/definitions/C", "#/properties/a", "#/$defs/Missing", "#anchor", "https://x/y"]
KEYWORDS = [
    "type", "enum", "const", "format", "pattern", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "multipleOf", "minLength", "maxLength", "minItems", "maxItems", "uniqueItems", "description", "title",
    "default", "examples", "$schema", "$id", "$ref", "$defs", "definitions", "nullable", "properties", "required",
    "additionalProperties", "patternProperties", "items", "prefixItems", "additionalItems", "anyOf", "oneOf",
    "allOf", "not", "if", "then", "else", "x-vendor",
]  # fmt: skip

scalars = st.none() | st.booleans() | st.integers(-3, 3) | st.floats(-3, 3, allow_nan=False) | st.text(max_size=3)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=10,
)
bounds = st.integers(-1, 4) | st.floats(-1, 4, allow_nan=False) | st.booleans()


def annotations() -> dict[str, Any]:
    return {
        "description": st.text(max_size=8),
        "title": st.text(max_size=4),
        "default": json_values,
        "examples": st.lists(json_values, max_size=2),
        "$schema": st.just("http://json-schema.org/draft-07/schema#"),
        "$id": st.just("urn:x"),
        "x-vendor": json_values,
        "deprecated": st.booleans(),
    }


def constraints() -> dict[str, Any]:
    return {
        "enum": st.lists(scalars, max_size=4),
        "const": scalars,
        "format": st.sampled_from(["date-time", "date", "uuid", "uri"]),
        "pattern": st.sampled_from(["^a", "b$", "[0-9]"]),
        "minimum": bounds,
        "maximum": bounds,
        "exclusiveMinimum": bounds,
        "exclusiveMaximum": bounds,
        "multipleOf": st.sampled_from([1, 2, 0.5]),
        "minLength": bounds,
        "maxLength": bounds,
        "minItems": bounds,
        "maxItems": bounds,
        "uniqueItems": st.booleans(),
        "nullable": st.booleans(),
        "$ref": st.sampled_from(REFS),
    }


def typed_schemas(child: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A schema whose object and array keywords come with their type (see the module docstring's exceptions)."""
    plain = st.fixed_dictionaries(
        {"type": st.sampled_from(TYPES) | st.lists(st.sampled_from(TYPES), min_size=1, max_size=3)},
        optional={**annotations(), **constraints()},
    )
    objects = st.fixed_dictionaries(
        {"type": st.just("object")},
        optional={
            "properties": st.dictionaries(st.sampled_from(NAMES), child, max_size=3),
            "required": st.lists(st.sampled_from(NAMES), max_size=3),
            "additionalProperties": child,
            "patternProperties": st.dictionaries(st.just("^z"), child, max_size=1),
            **annotations(),
        },
    )
    arrays = st.fixed_dictionaries(
        {"type": st.just("array")},
        optional={
            "items": child,
            "prefixItems": st.lists(child, max_size=2),
            "minItems": bounds,
            "maxItems": bounds,
            **annotations(),
        },
    )
    combined = st.fixed_dictionaries(
        {},
        optional={
            "anyOf": st.lists(child, min_size=1, max_size=3),
            "oneOf": st.lists(child, min_size=1, max_size=3),
            "allOf": st.lists(child, min_size=1, max_size=3),
            "not": child,
            "if": child,
            **annotations(),
            **constraints(),
        },
    )
    return plain | objects | arrays | combined


schemas = st.recursive(st.booleans() | st.fixed_dictionaries({}, optional=constraints()), typed_schemas, max_leaves=8)
definitions = st.dictionaries(st.sampled_from(["A", "B"]), schemas, max_size=2)
roots = st.fixed_dictionaries(
    {"type": st.just("object"), "properties": st.dictionaries(st.sampled_from(NAMES), schemas, max_size=3)},
    optional={
        "required": st.lists(st.sampled_from(NAMES), max_size=3),
        "$defs": definitions,
        "definitions": st.dictionaries(st.just("C"), schemas, max_size=1),
        "additionalProperties": schemas,
        "allOf": st.lists(schemas, min_size=1, max_size=2),
        **annotations(),
    },
)
junk = st.dictionaries(st.sampled_from(KEYWORDS), json_values, max_size=6) | st.dictionaries(
    st.text(max_size=3), json_values, max_size=3
)
instances = st.dictionaries(st.sampled_from(NAMES), json_values, max_size=4)


def rewritten(schema: dict[str, Any]) -> dict[str, Any] | None:
    """The rewrite, or None when refused; checks purity and the stand-in on the way."""
    before = copy.deepcopy(schema)
    reason = None
    try:
        parameters = gemini_parameters(schema)
    except UnusableSchemaError as refused:
        reason, parameters = refused.reason, None
    assert schema == before
    assert parameters is not None or reason
    if parameters is not None:
        assert declaration_problem({"name": "server__tool", "parametersJsonSchema": parameters}) is None
        assert subset_problems(parameters) == []
    return parameters


@settings(
    max_examples=int(os.environ.get("SCHEMA_MAX_EXAMPLES", "100")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(schema=roots | junk)
def test_only_refuses_in_words_never_mutates_and_always_passes_the_stand_in(schema):
    """Any schema is either refused with UnusableSchemaError or rewritten into one the stand-in accepts; the input never changes."""
    rewritten(schema)


@settings(
    max_examples=int(os.environ.get("SCHEMA_MAX_EXAMPLES", "100")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(schema=roots, arguments=st.lists(instances, min_size=1, max_size=4))
def test_arguments_the_original_accepts_stay_valid(schema, arguments):
    """Whatever the server's schema accepts, the rewritten schema accepts too (it only loosens)."""
    parameters = rewritten(schema)
    if parameters is None:
        return
    original = validator_for(schema)(schema)
    loose = Draft202012Validator(parameters)
    for candidate in arguments:
        if verdict(original, candidate):
            assert loose.is_valid(candidate), (candidate, parameters)


def verdict(validator: Any, candidate: Any) -> bool:
    """Whether `validator` accepts `candidate`; False when jsonschema cannot tell."""
    try:
        return bool(validator.is_valid(candidate))
    except (Unresolvable, RecursionError):  # a $ref to a URL, an anchor, a missing entry, or to itself
        return False
