"""An MCP tool's input schema, rewritten into the parameters Gemini accepts in a function declaration.

MCP servers describe their tools' arguments in JSON Schema of any draft (draft-07 from zod,
2020-12 from pydantic, hand-written ones), and Gemini refuses a whole request, every tool in
it, for one declaration it cannot read. `gemini_parameters` rewrites a server's `inputSchema`
into a plain subset of JSON Schema that Gemini takes as `parametersJsonSchema`, or refuses it
with a reason an operator can act on (docs/decisions/0047-gemini-schemas-for-mcp-tools.md).

The rewrite only ever loosens the schema: any arguments the original accepts, the rewritten one
accepts too, with two exceptions made for the model's sake: a schema without `type` that lists
`properties` is taken as an object (one that lists `items` as an array), and a root union of
objects gives each property the shapes of the branches that name it, not "anything" for a
branch that is merely open to other keys. Constraints Gemini cannot take are moved into
descriptions for the model to read. Calls are validated against the server's original schema,
never against this one.

The output uses only these keywords: `type` (one JSON type name), `description`, `enum` (strings,
on strings only), `format` (`date-time` only), `properties`, `required`, `additionalProperties`
(a schema), `items` (always present on arrays), `anyOf`, `minimum`, `maximum`, `minLength`,
`maxLength`, `minItems` and `maxItems`. It never holds `$ref`, not even as a property name.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeGuard
from urllib.parse import unquote

from bot.base.errors import CountersignError

__all__ = [
    "MAX_ALTERNATIVES",
    "MAX_DEPTH",
    "MAX_DESCRIPTION",
    "MAX_INPUT_DEPTH",
    "MAX_INPUT_VALUES",
    "MAX_NODES",
    "PARAMETER_NAME",
    "UnusableSchemaError",
    "declared_description",
    "gemini_parameters",
]

MAX_DEPTH: Final = 20
"""Nesting levels of schemas (property in property, item in item, ...) once references are inlined."""
MAX_NODES: Final = 2_000
"""Schemas the rewrite may produce or visit for one tool, once references are inlined."""
MAX_ALTERNATIVES: Final = 32
"""Alternatives (`anyOf`, `oneOf`, `allOf` parts and references) at one place in a schema."""
MAX_DESCRIPTION: Final = 1_500
"""Characters of one description; a longer one is cut and ends with an ellipsis."""
MAX_INPUT_DEPTH: Final = 64
"""Nesting levels of JSON values in the schema as the server sent it."""
MAX_INPUT_VALUES: Final = 50_000
"""JSON values (objects, arrays, strings, numbers, ...) in the schema as the server sent it."""
PARAMETER_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
"""What a top-level argument name must fully match: the rule google-genai's `FunctionDeclaration`
documents for parameter names, which the Gemini stand-in in tests enforces."""

_KEPT_FORMATS: Final = frozenset({"date-time"})
"""String formats left in place: the one Google documents as accepted by both schema fields."""
_TYPES: Final = ("object", "array", "string", "integer", "number", "boolean", "null")
_NOT_SHOWN: Final = (
    "not",
    "if",
    "then",
    "else",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
    "propertyNames",
    "patternProperties",
    "contains",
)
"""Keywords whose rules cannot be shown: the description says they exist."""
_ANNOTATIONS: Final = frozenset({"$ref", "description", "default", "deprecated"})
"""What a `$ref` keeps beside it under drafts that ignore its other siblings."""
_LOWER_BOUNDS: Final = frozenset({"minimum", "minLength", "minItems", "minProperties"})
_UPPER_BOUNDS: Final = frozenset({"maximum", "maxLength", "maxItems", "maxProperties"})
_SUBSCHEMAS: Final = frozenset(
    {"items", "additionalProperties", "additionalItems", "contains", "propertyNames", "not", "unevaluatedProperties"}
)
_NOTE_VALUE_CHARS: Final = 200
_NUMBER_TOKEN: Final = re.compile(r"0|[1-9][0-9]*")
_LARGEST_NUMBER: Final = 10**308


class UnusableSchemaError(CountersignError):
    """A tool's input schema cannot be made into parameters Gemini accepts.

    Args:
        reason: Why, in words an operator understands; it completes a sentence such as
            "the tool is left out: ..." (e.g. "its input schema nests deeper than 20 levels
            (at properties.filter)").
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def gemini_parameters(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters Gemini accepts for a tool whose arguments `schema` describes.

    A pure function: `schema` is never changed and nothing in the result is shared with it.
    What is rewritten:

    * the root becomes an object with `properties` (`{}` when it has none); a root union of
      objects becomes one object: every property of every branch, required only when every
      branch requires it, and the description says which sets go together;
    * `$ref` to the same document (`$defs`, `definitions`, any JSON pointer) is inlined, its
      siblings combined with it; a reference back into itself is cut to an open schema (an object
      when it referred to one) that says so; a reference elsewhere (a URL, an anchor, a missing
      target) becomes an open schema that says so;
    * `allOf` parts are merged; `oneOf` becomes `anyOf`; sibling keywords of an `anyOf` go into
      each branch; `anyOf` with `{"type": "null"}` stays as it is (how Gemini reads nullable);
    * `const` becomes `enum`; an `enum` keeps its strings on a string, and its other values
      become typed branches that name them in the description; a `type` list becomes `anyOf`;
      OpenAPI's `nullable: true` becomes a null branch;
    * an array always has `items` (`{}` when the schema had none); an object keeps
      `additionalProperties` only when it is a schema that says something;
    * `$schema`, `$id`, `title`, `examples`, `x-*` and every keyword not listed in the module
      docstring are left out; `format` other than `date-time`, `pattern`, exclusive bounds,
      `multipleOf`, `uniqueItems`, key counts, `default` and `deprecated` are said in the
      description; conditional keywords (`if`, `not`, ...) are named there as rules not shown.

    Args:
        schema: The tool's `inputSchema` as the server sent it (parsed JSON).

    Returns:
        A new JSON Schema for `parametersJsonSchema`: an object whose `properties` are the
        arguments. Notes about the arguments as a whole are in its root `description`, which a
        LangChain tool does not carry to Gemini (see `declared_description`).

    Raises:
        UnusableSchemaError: when the schema is not JSON, is too large or too deep (the limits
            above), does not describe an object of named arguments, cannot be met by any value,
            or has a top-level argument whose name Gemini refuses (`PARAMETER_NAME`).
    """
    if not isinstance(schema, Mapping):
        raise UnusableSchemaError("its input schema is not a JSON object")
    _check_json(schema)
    walk = _Walk(document=schema)
    converted = _convert(schema, walk, 0, ("#",), "")
    if converted is None:
        raise UnusableSchemaError("its input schema accepts no arguments at all")
    parameters = _as_parameters(converted)
    for name in parameters["properties"]:
        if not PARAMETER_NAME.fullmatch(name):
            raise UnusableSchemaError(
                f"its argument {_clip(name)!r} has a name Gemini refuses (an argument name starts with a letter or "
                "an underscore and has at most 64 letters, digits and underscores)"
            )
    return parameters


def declared_description(description: str | None, parameters: Mapping[str, Any]) -> str:
    """The description to give a LangChain tool declared with `parameters` as its `args_schema`.

    langchain-core's `BaseTool.tool_call_schema` replaces a dict schema's root `description` with
    the tool's own, and `bot.agents.model.function_declaration` then drops it, so what
    `gemini_parameters` says about the arguments as a whole travels in the tool's description.

    Args:
        description: The tool's description as the server gave it, if any.
        parameters: What `gemini_parameters` returned for the tool.

    Returns:
        The description followed by the parameters' root description, when there is one.
    """
    parts = [text for text in (description, parameters.get("description")) if isinstance(text, str) and text.strip()]
    return "\n\n".join(text.strip() for text in parts)


# --------------------------------------------------------------------------------------
# The walk
# --------------------------------------------------------------------------------------


@dataclass
class _Walk:
    """State of one rewrite: the document that `$ref`s point into, and the work done so far."""

    document: Mapping[str, Any]
    nodes: int = 0

    @property
    def ref_hides_siblings(self) -> bool:
        """Whether the document's draft ignores the keywords beside a `$ref` (draft-04 to draft-07 do)."""
        draft = self.document.get("$schema")
        return isinstance(draft, str) and any(f"draft-0{n}" in draft for n in (4, 6, 7))


@dataclass
class _Flat:
    """One schema with its `$ref`s and `allOf` parts merged into plain keywords."""

    keywords: dict[str, Any]
    alternatives: list[list[Any]]
    refs: tuple[str, ...]
    notes: list[str] = field(default_factory=list)


def _check_json(schema: Mapping[str, Any]) -> None:
    """Refuse what is not bounded JSON, before the rewrite reads it (so it can never recurse too far)."""
    stack: list[tuple[Any, int]] = [(schema, 1)]
    seen = 0
    while stack:
        value, depth = stack.pop()
        seen += 1
        if seen > MAX_INPUT_VALUES:
            raise UnusableSchemaError(f"its input schema is too large (more than {MAX_INPUT_VALUES} JSON values)")
        if depth > MAX_INPUT_DEPTH:
            raise UnusableSchemaError(f"its input schema nests JSON values deeper than {MAX_INPUT_DEPTH} levels")
        if isinstance(value, Mapping):
            for key, item in value.items():
                if not isinstance(key, str):
                    raise UnusableSchemaError("its input schema is not JSON (an object key is not a string)")
                stack.append((item, depth + 1))
        elif isinstance(value, list | tuple):
            stack.extend((item, depth + 1) for item in value)
        elif _is_number(value) and abs(value) > _LARGEST_NUMBER:
            raise UnusableSchemaError("its input schema holds a number too large for JSON")
        elif value is not None and not isinstance(value, str | bool | int | float):
            raise UnusableSchemaError(f"its input schema is not JSON (it holds a {type(value).__name__})")


def _convert(node: Any, walk: _Walk, depth: int, refs: tuple[str, ...], where: str) -> dict[str, Any] | None:
    """`node` rewritten; None when no value can match it (`false`, an empty `enum`, ...)."""
    if depth > MAX_DEPTH:
        raise UnusableSchemaError(f"its input schema nests deeper than {MAX_DEPTH} levels (at {_place(where)})")
    _count_node(walk)
    flat = _flatten(node, walk, refs, where)
    if flat is None:
        return None
    if flat.alternatives:
        return _convert_alternatives(flat, walk, depth, where)
    return _convert_plain(flat, walk, depth, where)


def _count_node(walk: _Walk) -> None:
    walk.nodes += 1
    if walk.nodes > MAX_NODES:
        raise UnusableSchemaError(
            f"its input schema is too large (more than {MAX_NODES} parts once its references are inlined)"
        )


def _flatten(node: Any, walk: _Walk, refs: tuple[str, ...], where: str) -> _Flat | None:
    """Merge `node`'s `$ref` targets and `allOf` parts into one set of keywords (None: nothing matches)."""
    keywords: dict[str, Any] = {}
    alternatives: list[list[Any]] = []
    notes: list[str] = []
    pending: list[Any] = [node]
    parts = 0
    while pending:
        part = pending.pop(0)
        parts += 1
        if parts > MAX_ALTERNATIVES:
            raise UnusableSchemaError(
                f"its input schema combines more than {MAX_ALTERNATIVES} parts or references at {_place(where)}"
            )
        _count_node(walk)
        if part is True:
            continue
        if part is False:
            return None
        if not isinstance(part, Mapping):
            raise UnusableSchemaError(
                f"its input schema is not valid JSON Schema ({_place(where)} is {_json(part)}, not a schema)"
            )
        rest = dict(part)
        if "$ref" in rest:
            if walk.ref_hides_siblings:
                rest = {key: value for key, value in rest.items() if key in _ANNOTATIONS}
            target, refs, note = _resolve(rest.pop("$ref"), walk, refs, where)
            pending.append(target)
            if note:
                notes.append(note)
        if "allOf" in rest:
            pending.extend(_schema_list(rest.pop("allOf"), where, "allOf"))
        for key in ("anyOf", "oneOf"):
            if key in rest:
                alternatives.append(_schema_list(rest.pop(key), where, key))
        if "const" in rest:
            const = rest.pop("const")
            enum = rest.get("enum")
            rest["enum"] = (
                [value for value in enum if _same(value, const)] if isinstance(enum, list | tuple) else [const]
            )
        keywords = _merge(keywords, rest, where)
    return _Flat(keywords=keywords, alternatives=alternatives, refs=refs, notes=notes)


def _resolve(ref: Any, walk: _Walk, refs: tuple[str, ...], where: str) -> tuple[Any, tuple[str, ...], str | None]:
    """The schema `ref` stands for, the references now being expanded, and a note for the description."""
    if not isinstance(ref, str):
        raise UnusableSchemaError(f"its input schema is not valid JSON Schema ($ref at {_place(where)} is not text)")
    target = _pointer(walk.document, ref)
    if target is _MISSING:
        return True, refs, f"(its shape is defined elsewhere, at {_clip(ref)}, and not shown here)"
    if ref in refs:
        name = "the whole input" if ref == "#" else ref.rsplit("/", 1)[-1]
        note = f"(the same structure as {_clip(name)} again, not expanded further)"
        is_object = isinstance(target, Mapping) and (target.get("type") == "object" or "properties" in target)
        return ({"type": "object"} if is_object else True), refs, note
    return target, (*refs, ref), None


_MISSING: Final = object()


def _pointer(document: Mapping[str, Any], ref: str) -> Any:
    """What a same-document reference (`#`, `#/$defs/X`, `#/properties/a`) points at, else `_MISSING`."""
    if not ref.startswith("#"):
        return _MISSING
    pointer = unquote(ref[1:])
    if pointer == "":
        return document
    if not pointer.startswith("/"):
        return _MISSING  # an anchor (#name): not resolved
    node: Any = document
    for raw in pointer[1:].split("/"):
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and token in node:
            node = node[token]
        elif isinstance(node, list | tuple) and _NUMBER_TOKEN.fullmatch(token) and int(token) < len(node):
            node = node[int(token)]
        else:
            return _MISSING
    return node


def _schema_list(value: Any, where: str, key: str) -> list[Any]:
    if not isinstance(value, list | tuple) or not value:
        raise UnusableSchemaError(
            f"its input schema is not valid JSON Schema ({key} at {_place(where)} is not a non-empty list)"
        )
    return list(value)


def _merge(first: dict[str, Any], second: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Keywords that hold when both `first` and `second` hold (`allOf` of two plain schemas)."""
    merged = dict(first)
    for key, value in second.items():
        if key not in merged:
            merged[key] = value
            continue
        mine = merged[key]
        if _same(mine, value):
            continue
        if key == "type":
            merged[key] = _common_types(mine, value, where)
        elif key == "required" and isinstance(mine, list | tuple) and isinstance(value, list | tuple):
            merged[key] = _unique([*mine, *value])
        elif key == "properties" and isinstance(mine, Mapping) and isinstance(value, Mapping):
            properties = dict(mine)
            for name, schema in value.items():
                properties[name] = {"allOf": [mine[name], schema]} if name in mine else schema
            merged[key] = properties
        elif key == "enum" and isinstance(mine, list | tuple) and isinstance(value, list | tuple):
            merged[key] = [item for item in mine if any(_same(item, other) for other in value)]
        elif key in _LOWER_BOUNDS and _is_number(mine) and _is_number(value):
            merged[key] = max(mine, value)
        elif key in _UPPER_BOUNDS and _is_number(mine) and _is_number(value):
            merged[key] = min(mine, value)
        elif key in _SUBSCHEMAS and not isinstance(mine, list | tuple) and not isinstance(value, list | tuple):
            merged[key] = {"allOf": [mine, value]}
        # Any other keyword keeps its first value: annotations, and rules that are only described.
    return merged


def _common_types(first: Any, second: Any, where: str) -> list[str]:
    """The JSON types both `type` values allow (an integer is a number)."""
    mine, other = _type_names(first, where), _type_names(second, where)
    common = [name for name in mine if name in other or (name == "integer" and "number" in other)]
    common += [name for name in other if name == "integer" and "number" in mine and name not in common]
    if not common:
        raise UnusableSchemaError(
            f"its input schema cannot be met: {_place(where)} must be both {' or '.join(mine)} and {' or '.join(other)}"
        )
    return common


def _type_names(value: Any, where: str) -> list[str]:
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list | tuple) or not names or not all(isinstance(name, str) for name in names):
        raise UnusableSchemaError(
            f"its input schema is not valid JSON Schema (the type at {_place(where)} is not a type name or a list)"
        )
    unknown = [name for name in names if name not in _TYPES]
    if unknown:
        raise UnusableSchemaError(
            f"its input schema uses a type JSON Schema does not have ({_clip(unknown[0])!r} at {_place(where)})"
        )
    return _unique(names)


# --------------------------------------------------------------------------------------
# Rewriting one schema
# --------------------------------------------------------------------------------------


def _convert_alternatives(flat: _Flat, walk: _Walk, depth: int, where: str) -> dict[str, Any] | None:
    """An `anyOf`/`oneOf` node: its other keywords go into every branch, the result is one `anyOf`."""
    combinations = math.prod(len(options) for options in flat.alternatives)
    if combinations > MAX_ALTERNATIVES:
        raise UnusableSchemaError(
            f"its input schema offers more than {MAX_ALTERNATIVES} alternatives at {_place(where)}"
        )
    shared = {key: value for key, value in flat.keywords.items() if key not in ("description", "default", "deprecated")}
    branches = []
    for index, combination in enumerate(itertools.product(*flat.alternatives)):
        branch = _convert({"allOf": [shared, *combination]}, walk, depth + 1, flat.refs, f"{where}.anyOf[{index}]")
        if branch is not None:
            branches.append(branch)
    node = _any_of(branches)
    if node is None:
        return None
    return _described(node, flat.keywords.get("description"), [*flat.notes, *_annotation_notes(flat.keywords)])


def _convert_plain(flat: _Flat, walk: _Walk, depth: int, where: str) -> dict[str, Any] | None:
    keywords = flat.keywords
    types = _type_names(keywords["type"], where) if "type" in keywords else None
    if types is not None and keywords.get("nullable") is True and "null" not in types:
        types.append("null")  # OpenAPI's spelling of "or null"
    if types is None:
        if any(key in keywords for key in ("properties", "required", "additionalProperties", "patternProperties")):
            types = ["object"]
        elif any(key in keywords for key in ("items", "prefixItems")):
            types = ["array"]
    node: dict[str, Any] | None
    enum = keywords.get("enum")
    if isinstance(enum, list | tuple):
        node = _enum(list(enum), types)
    elif types is None:
        node = {}
    else:
        node = _any_of([_typed(name, keywords, walk, depth, flat.refs, where) for name in types])
    if node is None:
        return None
    notes = [*flat.notes, *_constraint_notes(keywords, types), *_annotation_notes(keywords)]
    return _described(node, keywords.get("description"), notes)


def _typed(
    name: str, keywords: Mapping[str, Any], walk: _Walk, depth: int, refs: tuple[str, ...], where: str
) -> dict[str, Any]:
    """The branch of `keywords` for values of JSON type `name`."""
    node: dict[str, Any] = {"type": name}
    if name == "string":
        if keywords.get("format") in _KEPT_FORMATS:
            node["format"] = keywords["format"]
        _copy_counts(keywords, node, ("minLength", "maxLength"))
    elif name in ("integer", "number"):
        for key in ("minimum", "maximum"):
            value = keywords.get(key)
            if _is_number(value) and math.isfinite(value):
                node[key] = value
    elif name == "array":
        _copy_counts(keywords, node, ("minItems", "maxItems"))
        node["items"], empty = _items(keywords, walk, depth, refs, where)
        if empty:
            node["maxItems"] = 0
    elif name == "object":
        node.update(_object(keywords, walk, depth, refs, where))
    return node


def _copy_counts(keywords: Mapping[str, Any], node: dict[str, Any], keys: Sequence[str]) -> None:
    for key in keys:
        value = keywords.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            node[key] = value
        elif isinstance(value, float) and value.is_integer() and value >= 0:
            node[key] = int(value)


def _items(
    keywords: Mapping[str, Any], walk: _Walk, depth: int, refs: tuple[str, ...], where: str
) -> tuple[dict[str, Any], bool]:
    """An array's `items` as one schema (positional ones become `anyOf`), and whether it must be empty."""
    items = keywords.get("items", True)
    positional = keywords.get("prefixItems", [])
    rest = items
    if isinstance(items, list | tuple):  # draft-04 to 2019-09 tuples
        positional, rest = items, keywords.get("additionalItems", True)
    if not isinstance(positional, list | tuple):
        raise UnusableSchemaError(
            f"its input schema is not valid JSON Schema (prefixItems at {_place(where)} is not a list)"
        )
    converted = [
        _convert(item, walk, depth + 1, refs, f"{where}.items[{index}]") for index, item in enumerate(positional)
    ]
    converted.append(_convert(rest, walk, depth + 1, refs, f"{where}.items"))
    options = [option for option in converted if option is not None]
    node = _any_of(options)
    return (node if node is not None else {}), not options


def _object(keywords: Mapping[str, Any], walk: _Walk, depth: int, refs: tuple[str, ...], where: str) -> dict[str, Any]:
    """`properties`, `required` and `additionalProperties` of an object branch."""
    raw = keywords.get("properties", {})
    if not isinstance(raw, Mapping):
        raise UnusableSchemaError(
            f"its input schema is not valid JSON Schema (properties at {_place(where)} is not an object)"
        )
    wanted = keywords.get("required", [])
    required = _unique([name for name in wanted if isinstance(name, str)]) if isinstance(wanted, list | tuple) else []
    properties: dict[str, Any] = {}
    for name in [*raw, *(name for name in required if name not in raw)]:
        place = f"{where}.{name}" if where else name
        if name == "$ref":
            raise UnusableSchemaError(
                f"its input schema has a property named '$ref' (at {_place(place)}), which no declaration can carry"
            )
        converted = _convert(raw.get(name, True), walk, depth + 1, refs, place)
        if converted is None:
            if name in required:
                raise UnusableSchemaError(
                    f"its input schema cannot be met: {_place(place)} is required but allows no value"
                )
            continue
        properties[name] = converted
    node: dict[str, Any] = {}
    if properties:
        node["properties"] = properties
    if required:
        node["required"] = required
    extra = keywords.get("additionalProperties")
    if isinstance(extra, Mapping) and extra and "patternProperties" not in keywords:
        converted = _convert(extra, walk, depth + 1, refs, f"{where}.additionalProperties")
        if converted is not None and set(converted) - {"description"}:
            node["additionalProperties"] = converted
    return node


def _enum(values: list[Any], types: list[str] | None) -> dict[str, Any] | None:
    """An `enum`: strings stay an enum; other values become typed branches named in their description."""
    groups: dict[str, list[Any]] = {}
    for value in values:
        kind = _kind(value)
        if types is None or kind in types or (kind == "integer" and "number" in types):
            groups.setdefault(kind, [])
            if not any(_same(value, seen) for seen in groups[kind]):
                groups[kind].append(value)
    branches: list[dict[str, Any]] = []
    for kind, members in groups.items():
        if kind == "string":
            branches.append({"type": "string", "enum": list(members)})
        elif kind == "null":
            branches.append({"type": "null"})
        elif len(members) == 1:
            branches.append({"type": kind, "description": f"(must be {_json(members[0])})"})
        else:
            branches.append({"type": kind, "description": f"(one of: {', '.join(_json(m) for m in members)})"})
    return _any_of(branches)


def _any_of(branches: list[dict[str, Any]]) -> dict[str, Any] | None:
    """One schema for "any of `branches`": nested unions flattened, duplicates dropped."""
    options: list[dict[str, Any]] = []
    seen: set[str] = set()
    for branch in branches:
        for option in branch["anyOf"] if set(branch) == {"anyOf"} else [branch]:
            if _accepts_anything(option):
                return {}
            key = json.dumps(option, sort_keys=True)
            if key not in seen:
                seen.add(key)
                options.append(option)
    if not options:
        return None
    if len(options) == 1:
        return options[0]
    return {"anyOf": options}


def _accepts_anything(node: Mapping[str, Any]) -> bool:
    return "type" not in node and "anyOf" not in node


def _as_parameters(node: dict[str, Any]) -> dict[str, Any]:
    """The rewritten root as an object of named arguments."""
    if _accepts_anything(node):
        return _described({"type": "object", "properties": {}}, node.get("description"), [])
    branches = node.get("anyOf", [node])
    others = sorted({branch["type"] for branch in branches if branch.get("type") not in ("object", "null")})
    objects = [branch for branch in branches if branch.get("type") == "object"]
    if others or not objects:
        kinds = " or ".join(others or ["null"])
        raise UnusableSchemaError(f"its input schema describes {kinds}, not an object of named arguments")
    root = dict(objects[0]) if len(objects) == 1 else _union_of_objects(objects)
    root.setdefault("properties", {})
    if "anyOf" in node and "description" in node:
        root = _described(root, node["description"], [])
    return root


def _union_of_objects(objects: list[dict[str, Any]]) -> dict[str, Any]:
    """One object for "any of `objects`": every property, required only where every branch requires it."""
    names = _unique([name for branch in objects for name in branch.get("properties", {})])
    properties: dict[str, Any] = {}
    for name in names:
        # A branch without this property is left out even when it is open to other keys: what the
        # model needs is the shape the branches that name it give it.
        options = [
            branch["properties"][name] if name in branch.get("properties", {}) else branch["additionalProperties"]
            for branch in objects
            if name in branch.get("properties", {}) or "additionalProperties" in branch
        ]
        properties[name] = _any_of(options) or {}
    first = objects[0].get("required", [])
    required = [name for name in first if all(name in branch.get("required", []) for branch in objects)]
    root: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        root["required"] = required
    extras = [branch.get("additionalProperties") for branch in objects]
    if all(extra is not None for extra in extras):
        root["additionalProperties"] = _any_of([extra for extra in extras if extra is not None]) or {}
        if not root["additionalProperties"]:
            del root["additionalProperties"]
    sets = " or ".join(
        "(" + ", ".join(branch.get("required") or list(branch.get("properties", {})) or ["no arguments"]) + ")"
        for branch in objects
    )
    descriptions = [branch["description"] for branch in objects if "description" in branch]
    return _described(root, None, [f"Takes one of these sets of arguments: {sets}.", *descriptions])


# --------------------------------------------------------------------------------------
# Descriptions
# --------------------------------------------------------------------------------------


def _constraint_notes(keywords: Mapping[str, Any], types: list[str] | None) -> list[str]:
    """What `keywords` require that the rewritten schema cannot say, in words."""
    notes: list[str] = []
    form = keywords.get("format")
    if isinstance(form, str) and not (form in _KEPT_FORMATS and types is not None and "string" in types):
        notes.append(f"(format: {_clip(form)})")
    pattern = keywords.get("pattern")
    if isinstance(pattern, str):
        notes.append(f"(pattern: {_clip(pattern)})")
    for key, words in (("exclusiveMinimum", "greater than"), ("exclusiveMaximum", "less than")):
        value = keywords.get(key)
        if _is_number(value):
            notes.append(f"({words} {_json(value)})")
        elif value is True:
            bound = keywords.get("minimum" if key == "exclusiveMinimum" else "maximum")
            if _is_number(bound):
                notes.append(f"({words} {_json(bound)})")
    if _is_number(keywords.get("multipleOf")):
        notes.append(f"(a multiple of {_json(keywords['multipleOf'])})")
    if keywords.get("uniqueItems") is True:
        notes.append("(no duplicate items)")
    for key, words in (("minProperties", "at least"), ("maxProperties", "at most")):
        if _is_number(keywords.get(key)):
            notes.append(f"({words} {_json(keywords[key])} keys)")
    hidden = [key for key in _NOT_SHOWN if key in keywords]
    if hidden:
        notes.append(f"(further rules not shown: {', '.join(hidden)})")
    return notes


def _annotation_notes(keywords: Mapping[str, Any]) -> list[str]:
    """`default` and `deprecated`, which JSON Schema does not enforce, in words."""
    notes = []
    if "default" in keywords:
        notes.append(f"(default: {_json(keywords['default'])})")
    if keywords.get("deprecated") is True:
        notes.append("(deprecated)")
    return notes


def _described(node: dict[str, Any], description: Any, notes: list[str]) -> dict[str, Any]:
    """`node` with `description` in front of its own and `notes` after them, within `MAX_DESCRIPTION`."""
    parts = [description.strip()] if isinstance(description, str) and description.strip() else []
    if isinstance(node.get("description"), str):
        parts.append(node["description"])
    parts += notes
    if not parts:
        return node
    text = " ".join(_unique(parts))
    if len(text) > MAX_DESCRIPTION:
        text = text[: MAX_DESCRIPTION - 1] + "…"
    return {**node, "description": text}


def _json(value: Any) -> str:
    return _clip(json.dumps(value, ensure_ascii=False))


def _clip(text: str) -> str:
    return text if len(text) <= _NOTE_VALUE_CHARS else text[: _NOTE_VALUE_CHARS - 1] + "…"


def _place(where: str) -> str:
    return _clip(where) if where else "the top level"


# --------------------------------------------------------------------------------------
# JSON values
# --------------------------------------------------------------------------------------


def _kind(value: Any) -> str:
    """The JSON Schema type of a JSON value (1.0 is an integer, as JSON Schema says)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    return "array"


def _same(first: Any, second: Any) -> bool:
    """JSON equality: `true` is not 1, 1 is 1.0."""
    if isinstance(first, Mapping) and isinstance(second, Mapping):
        return first.keys() == second.keys() and all(_same(first[key], second[key]) for key in first)
    if isinstance(first, list | tuple) and isinstance(second, list | tuple):
        return len(first) == len(second) and all(_same(a, b) for a, b in zip(first, second, strict=True))
    if isinstance(first, bool) or isinstance(second, bool):
        return first is second
    if _is_number(first) and _is_number(second):
        return bool(first == second)
    return type(first) is type(second) and bool(first == second)


def _is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _unique(items: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(items))
