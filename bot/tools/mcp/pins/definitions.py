"""An MCP tool's definition as a server lists it, and the digest that pins it.

A server describes each tool with a listing entry (`tools/list`), e.g.
`{"name": "create_issue", "title": "Create issue", "description": "...", "inputSchema": {...},
"outputSchema": {...}, "annotations": {"readOnlyHint": false, ...}, "icons": [...], "_meta": {...}}`.
What the model reads and what an approver approves is the tool's name, its description, its
input schema and its hints (annotations); those are pinned
(docs/decisions/0043-pinned-mcp-definitions.md). The rest is left out of the digest:

- `title`, `icons` and `annotations.title` are display names and pictures: renaming a tool's
  label changes nothing it does or is allowed to do (FastMCP copies the title into
  `annotations.title`, so that one must go too, or every relabel would hold the tool).
- `_meta` is free-form data for clients and servers (FastMCP puts its tags there); servers
  may change it on every listing.
- `outputSchema` and `execution` describe the result and how a call is carried out, not what a
  call asks the server to do.

Hashing the raw listing would not do: the same tool serialises with its keys in a different
order in the two protocol eras (2025-11-25 and 2026-07-28), so the digest is taken over
canonical JSON (`canonical_json`).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from bot.tools.mcp.config import registry_name

PINNED_FIELDS: Final = ("name", "description", "inputSchema", "annotations")
"""The listing fields a digest covers, by their wire names."""

UNPINNED_ANNOTATIONS: Final = frozenset({"title"})
"""Annotation keys left out of the digest (display names, see the module docstring)."""


class MalformedDefinitionError(ValueError):
    """A listing entry that cannot be a tool definition (no name, a schema that is not an object, ...).

    Args:
        server: the server's key.
        problem: what is wrong, in words (names the tool when it has a name).
    """

    def __init__(self, server: str, problem: str) -> None:
        super().__init__(f"MCP server {server!r} lists a malformed tool: {problem}")
        self.server = server
        self.problem = problem


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolDefinition:
    """One tool of one MCP server, reduced to what is pinned.

    Build it with `from_listing`. Two definitions are equal when their server and digest are:
    the value is hashable although it holds dicts (do not mutate them).

    Attributes:
        server: the server's key, as written in the `mcpServers` file.
        name: the tool's name as the server lists it (not the `<server>__<tool>` name).
        description: the tool's description; None when the server gives none.
        input_schema: the tool's JSON Schema for its arguments (an object schema), as listed.
        annotations: the tool's annotations without `title` and without keys whose value is
            null, e.g. `{"readOnlyHint": True, "openWorldHint": False}`; hints the server
            omits are simply absent (MCP's defaults are not filled in).
        digest: SHA-256 (64 hex digits) of the canonical JSON of the pinned fields
            (`definition_digest`).
    """

    server: str
    name: str
    description: str | None
    input_schema: Mapping[str, Any]
    annotations: Mapping[str, Any]
    digest: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "digest", definition_digest(self.pinned()))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ToolDefinition):
            return NotImplemented
        return (self.server, self.digest) == (other.server, other.digest)

    def __hash__(self) -> int:
        return hash((self.server, self.digest))

    @classmethod
    def from_listing(cls, server: str, entry: Mapping[str, Any]) -> ToolDefinition:
        """The definition in one `tools/list` entry, by its wire (camelCase) keys.

        Args:
            server: the server's key.
            entry: the entry as a plain mapping, e.g. `tool.model_dump(by_alias=True,
                mode="json")` of an `mcp_types.Tool`, or a stored `pinned()` mapping. Fields
                other than `PINNED_FIELDS` are ignored.

        Raises:
            MalformedDefinitionError: no non-empty string `name`; a `description` that is
                neither a string nor null; an `inputSchema` that is not an object; annotations
                that are not an object; or values JSON cannot carry (NaN, infinities, non-string
                keys).
        """
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise MalformedDefinitionError(server, "a tool without a name")
        description = entry.get("description")
        if description is not None and not isinstance(description, str):
            raise MalformedDefinitionError(server, f"{name!r} has a description that is not text")
        schema = entry.get("inputSchema")
        if not isinstance(schema, Mapping):
            raise MalformedDefinitionError(server, f"{name!r} has no input schema object")
        annotations = entry.get("annotations") or {}
        if not isinstance(annotations, Mapping):
            raise MalformedDefinitionError(server, f"{name!r} has annotations that are not an object")
        try:
            # A deep copy through JSON: the value owns its data, and only JSON gets in.
            schema_copy = json.loads(canonical_json(schema))
            kept = {k: v for k, v in annotations.items() if k not in UNPINNED_ANNOTATIONS and v is not None}
            annotations_copy = json.loads(canonical_json(kept))
        except (TypeError, ValueError) as exc:
            raise MalformedDefinitionError(server, f"{name!r} has values JSON cannot carry ({exc})") from None
        return cls(
            server=server, name=name, description=description, input_schema=schema_copy, annotations=annotations_copy
        )

    def pinned(self) -> dict[str, Any]:
        """The pinned fields by their wire names (`PINNED_FIELDS`): what the digest covers and the store keeps.

        `annotations` is null when the tool has none, so that a server that starts sending an
        empty annotations object has not changed the tool.
        """
        return {
            "name": self.name,
            "description": self.description,
            "inputSchema": dict(self.input_schema),
            "annotations": dict(self.annotations) or None,
        }

    @property
    def registry_name(self) -> str:
        """The name the model calls, cards show and `/countersign` commands take: `<server>__<tool>`.

        `bot.tools.mcp.config.registry_name` of the server and the tool's listed name.
        """
        return registry_name(self.server, self.name)


def canonical_json(value: Any) -> str:
    """`value` as canonical JSON: sorted keys, no insignificant whitespace, numbers by value.

    Numbers count by their value: an integral float is written as the integer (`1.0` as `1`),
    since a server in another language (or era) may write the same schema either way. Text is
    kept as UTF-8 (no escapes of non-ASCII characters), so the digest does not depend on the serialiser's
    escaping either.

    Raises:
        ValueError: for NaN or infinities, which JSON cannot carry.
        TypeError: for values that are not JSON (sets, bytes, non-string keys, ...).
    """
    return json.dumps(_by_value(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def definition_digest(pinned: Mapping[str, Any]) -> str:
    """SHA-256, in hex, of the canonical JSON of a definition's pinned fields (`ToolDefinition.pinned`)."""
    return hashlib.sha256(canonical_json(pinned).encode()).hexdigest()


def _by_value(value: Any) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, str | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} is not a JSON number")
        return int(value) if value.is_integer() else value
    if isinstance(value, Mapping):
        if not all(isinstance(key, str) for key in value):
            raise TypeError("object keys must be strings")
        return {key: _by_value(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_by_value(item) for item in value]
    raise TypeError(f"{type(value).__name__} is not JSON")
