"""The plain JSON Schema subset `gemini_parameters` promises to produce, as a checker for tests."""

from __future__ import annotations

from typing import Any

SUBSET_KEYWORDS = frozenset(
    {
        "type",
        "description",
        "enum",
        "format",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "anyOf",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
    }
)
JSON_TYPES = frozenset({"object", "array", "string", "integer", "number", "boolean", "null"})


def subset_problems(schema: Any, where: str = "") -> list[str]:
    """Every place where `schema` leaves the subset the module docstring of gemini_schema lists."""
    if not isinstance(schema, dict):
        return [f"{where or 'root'}: not an object"]
    found = [f"{where}.{key}" for key in schema if key not in SUBSET_KEYWORDS]
    kind = schema.get("type")
    if kind is not None and kind not in JSON_TYPES:
        found.append(f"{where}.type: {kind!r}")
    if "enum" in schema and (kind != "string" or not all(isinstance(v, str) for v in schema["enum"])):
        found.append(f"{where}.enum on {kind!r}")
    if "format" in schema and schema["format"] != "date-time":
        found.append(f"{where}.format {schema['format']!r}")
    if kind == "array" and "items" not in schema:
        found.append(f"{where}: array without items")
    if "description" in schema and not isinstance(schema["description"], str):
        found.append(f"{where}.description not text")
    for name, child in (schema.get("properties") or {}).items():
        if name == "$ref":
            found.append(f"{where}.properties: a property named $ref")
        found += subset_problems(child, f"{where}.properties[{name}]")
    for index, child in enumerate(schema.get("anyOf") or []):
        found += subset_problems(child, f"{where}.anyOf[{index}]")
    for key in ("items", "additionalProperties"):
        if key in schema:
            found += subset_problems(schema[key], f"{where}.{key}")
    return found
