"""function_declaration: each tool's own JSON Schema reaches Gemini as parametersJsonSchema."""

from __future__ import annotations

from typing import Any

from langchain_core.tools import tool
from pydantic import BaseModel

from bot.agents.model import function_declaration
from bot.settings import ToolSettings
from bot.tools.http_request import make_http_request_tool


@tool
def fetch(method: str, url: str, headers: dict[str, str] | None = None, body: Any = None) -> str:
    """Fetch a URL."""
    return ""


class Address(BaseModel):
    """A postal address."""

    street: str
    city: str


@tool
def ship(title: str, to: Address, copies: list[Address] | None = None) -> str:
    """Ship a parcel."""
    return ""


@tool
def ping() -> str:
    """Check the service."""
    return "pong"


def keys_anywhere(node: Any, key: str, *, skip_properties: bool = True) -> list[Any]:
    """Values of `key` anywhere in a JSON Schema, not counting property names."""
    found: list[Any] = []
    if isinstance(node, dict):
        for name, value in node.items():
            if name == "properties" and skip_properties and isinstance(value, dict):
                for prop in value.values():
                    found += keys_anywhere(prop, key)
                continue
            if name == key:
                found.append(value)
            found += keys_anywhere(value, key)
    elif isinstance(node, list):
        for item in node:
            found += keys_anywhere(item, key)
    return found


def test_declaration_carries_name_description_and_json_schema():
    """The declaration has the tool's name and description and a JSON Schema, not `parameters`."""
    declaration = function_declaration(fetch)
    assert declaration.name == "fetch"
    assert declaration.description == "Fetch a URL."
    assert declaration.parameters is None
    assert declaration.parameters_json_schema is not None
    dumped = declaration.model_dump(by_alias=True, exclude_none=True)
    assert "parametersJsonSchema" in dumped
    assert "parameters" not in dumped


def test_headers_are_an_object_of_strings_or_null():
    """`headers: dict[str, str] | None` is an object with string values, inside anyOf with null."""
    schema = function_declaration(fetch).parameters_json_schema
    headers = schema["properties"]["headers"]
    assert {"type": "object", "additionalProperties": {"type": "string"}} in headers["anyOf"]
    assert {"type": "null"} in headers["anyOf"]
    assert len(headers["anyOf"]) == 2


def test_free_form_body_is_not_forced_to_string():
    """`body: Any` is not declared as a STRING (a JSON value must stay a JSON value)."""
    schema = function_declaration(fetch).parameters_json_schema
    body = schema["properties"]["body"]
    assert body.get("type") not in ("string", "STRING")
    assert "string" not in str(body.get("type", "")).lower()


def test_required_and_top_level_shape():
    """Only arguments without a default are required; the schema is an object."""
    schema = function_declaration(fetch).parameters_json_schema
    assert schema["type"] == "object"
    assert schema["required"] == ["method", "url"]
    assert list(schema["properties"]) == ["method", "url", "headers", "body"]
    assert schema["properties"]["method"] == {"type": "string"}


def test_no_title_keys_but_a_property_named_title_is_kept():
    """Generated `title`s are removed everywhere; an argument called `title` survives."""
    schema = function_declaration(ship).parameters_json_schema
    assert keys_anywhere(schema, "title") == []
    assert keys_anywhere(function_declaration(fetch).parameters_json_schema, "title") == []
    assert schema["properties"]["title"] == {"type": "string"}
    assert "title" in schema["required"]


def test_nested_models_are_inlined_without_refs():
    """Nested models are inlined: no `$ref` and no `$defs` remain."""
    schema = function_declaration(ship).parameters_json_schema
    assert "$defs" not in schema
    assert keys_anywhere(schema, "$ref") == []
    to = schema["properties"]["to"]
    assert to["type"] == "object"
    assert set(to["properties"]) == {"street", "city"}
    assert to["required"] == ["street", "city"]
    copies = schema["properties"]["copies"]
    array = next(option for option in copies["anyOf"] if option.get("type") == "array")
    assert set(array["items"]["properties"]) == {"street", "city"}


def test_schema_description_is_not_repeated():
    """The tool description is on the declaration only, not duplicated inside the schema."""
    schema = function_declaration(ship).parameters_json_schema
    assert "description" not in schema
    assert function_declaration(ship).description == "Ship a parcel."


def test_tool_without_arguments_gets_an_empty_object_schema():
    """A tool without parameters is declared as an object with no properties."""
    schema = function_declaration(ping).parameters_json_schema
    assert schema["type"] == "object"
    assert schema["properties"] == {}
    assert not schema.get("required")


def test_real_http_request_tool_declaration():
    """The built-in http_request is declared with method, url, headers and body as DESIGN.md says."""
    http = make_http_request_tool(ToolSettings(http_allowed_hosts=("example.com",)))
    declaration = function_declaration(http)
    assert declaration.name == "http_request"
    assert declaration.parameters is None
    schema = declaration.parameters_json_schema
    assert schema["type"] == "object"
    assert list(schema["properties"]) == ["method", "url", "headers", "body"]
    assert schema["required"] == ["method", "url"]
    assert keys_anywhere(schema, "title") == []
    assert keys_anywhere(schema, "$ref") == []
    method = schema["properties"]["method"]
    assert method["type"] == "string"
    assert {"GET", "HEAD", "POST"} <= set(method["enum"])
    headers = schema["properties"]["headers"]
    assert {"type": "object", "additionalProperties": {"type": "string"}} in headers["anyOf"]
    assert {"type": "null"} in headers["anyOf"]
    body = schema["properties"]["body"]
    assert "type" not in body
    body_types = {option.get("type") for option in body["anyOf"]}
    assert {"object", "array", "string", "number", "boolean"} <= body_types
    for name in ("method", "url", "headers", "body"):
        assert schema["properties"][name]["description"]
