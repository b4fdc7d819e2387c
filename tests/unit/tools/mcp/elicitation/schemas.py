"""Hypothesis strategies for MCP requested schemas (the restricted subset), sloppy and hostile, with valid content.

`requested_schemas` draws schemas a server may send: every field kind, limits that contradict
each other, defaults that break their own limits, huge or hostile titles and descriptions,
option values that are long, blank, odd or repeated, up to `MAX_FIELDS` fields and
`MAX_OPTIONS` options. `filled_schemas` draws a schema together with content that validates
against it, and makes that content the fields' defaults, for round trips through a modal.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from bot.tools.mcp.elicitation.forms import MAX_FIELDS, MAX_OPTIONS
from tests.adversarial.hostile import hostile_text, huge

HOSTILE = hostile_text(max_atoms=8, surrogates=False)
TEXT = st.one_of(HOSTILE, HOSTILE, st.just(""), huge(HOSTILE, limit=10_000))
"""A title, description or message: hostile, empty, or up to 10k characters."""
OPTION_VALUE = st.one_of(
    HOSTILE, st.sampled_from(["", " ", "a, b", "A", "a", " a ", "0", "1", "x" * 400]), huge(HOSTILE, limit=500)
)
LIMIT = st.one_of(st.none(), st.integers(0, 5), st.integers(0, 5000))
NUMBER = st.one_of(
    st.integers(-(10**6), 10**6),
    st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False),
    st.sampled_from([0.5, 1e-7, 1e300, -1e300, 2**70, 0.1]),
)


def _named(spec: dict[str, Any], draw: st.DrawFn) -> dict[str, Any]:
    if draw(st.booleans()):
        spec["title"] = draw(TEXT)
    if draw(st.booleans()):
        spec["description"] = draw(TEXT)
    return spec


@st.composite
def options_spec(draw: st.DrawFn, *, many: int = MAX_OPTIONS) -> tuple[dict[str, Any], list[str]]:
    """`enum` (maybe with `enumNames`) or `oneOf` const / title, and the option values."""
    values = draw(st.lists(OPTION_VALUE, min_size=1, max_size=many))
    style = draw(st.sampled_from(["enum", "enumNames", "oneOf"]))
    if style == "enum":
        return {"enum": values}, values
    labels = draw(st.lists(TEXT, min_size=len(values), max_size=len(values)))
    if style == "enumNames":
        return {"enum": values, "enumNames": labels}, values
    return {"oneOf": [{"const": v, "title": t} for v, t in zip(values, labels, strict=True)]}, values


@st.composite
def field_spec(draw: st.DrawFn) -> dict[str, Any]:
    """One property of any kind, with limits and a default that may contradict each other."""
    kind = draw(
        st.sampled_from(["text", "email", "uri", "date", "date-time", "number", "integer", "bool", "one", "many"])
    )
    spec: dict[str, Any]
    if kind in ("text", "email", "uri", "date", "date-time"):
        spec = {"type": "string"}
        if kind != "text":
            spec["format"] = kind
        for key in ("minLength", "maxLength"):
            limit = draw(LIMIT)
            if limit is not None:
                spec[key] = limit
        default = draw(
            st.one_of(
                st.none(),
                TEXT,
                st.sampled_from(
                    ["2026-12-24", "2026-12-24T10:00:00+02:00", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59"]
                ),
            )
        )
    elif kind in ("number", "integer"):
        spec = {"type": kind}
        for key in ("minimum", "maximum"):
            if draw(st.booleans()):
                spec[key] = draw(NUMBER)
        if draw(st.integers(0, 4)) == 0:  # outside MCP's subset, but sloppy servers send it
            spec["multipleOf"] = draw(st.sampled_from([0.1, 3, 1e-300]))
        default = draw(st.one_of(st.none(), NUMBER))
    elif kind == "bool":
        spec = {"type": "boolean"}
        default = draw(st.one_of(st.none(), st.booleans()))
    elif kind == "one":
        spec, values = draw(options_spec())
        spec["type"] = "string"
        default = draw(st.one_of(st.none(), st.sampled_from(values), OPTION_VALUE))
    else:
        items, values = draw(options_spec())
        spec = {"type": "array", "items": {"type": "string", **items}}
        for key in ("minItems", "maxItems"):
            limit = draw(st.one_of(st.none(), st.integers(0, 30)))
            if limit is not None:
                spec[key] = limit
        default = draw(st.one_of(st.none(), st.lists(st.sampled_from(values), max_size=30)))
    if default is not None:
        spec["default"] = default
    return _named(spec, draw)


@st.composite
def requested_schemas(draw: st.DrawFn) -> dict[str, Any]:
    """A requested schema of up to `MAX_FIELDS` fields of any kind, some required."""
    names = draw(st.lists(st.one_of(HOSTILE, st.sampled_from(["", " ", "n" * 300])), max_size=MAX_FIELDS, unique=True))
    properties = {name: draw(field_spec()) for name in names}
    required = [name for name in names if draw(st.booleans())]
    return {"type": "object", "properties": properties, "required": required}


PLAIN = st.text(st.characters(codec="utf-8", exclude_categories=["Cs", "Cc", "Zl", "Zp"]), min_size=1, max_size=40)
"""Text a person types: any printable characters."""


@st.composite
def filled_field(draw: st.DrawFn) -> tuple[dict[str, Any], Any]:
    """One property of any kind and a value valid for it, set as its default."""
    kind = draw(st.sampled_from(["text", "email", "date", "date-time", "number", "integer", "bool", "one", "many"]))
    spec: dict[str, Any]
    value: Any
    if kind == "text":
        value = draw(PLAIN.filter(lambda text: text.strip() == text and text.strip()))
        spec = {"type": "string", "minLength": draw(st.integers(0, len(value)))}
        if draw(st.booleans()):
            spec["maxLength"] = len(value) + draw(st.integers(0, 300))
    elif kind == "email":
        value, spec = "ann@example.com", {"type": "string", "format": "email"}
    elif kind == "date":
        value, spec = draw(st.dates()).isoformat(), {"type": "string", "format": "date"}
    elif kind == "date-time":
        moment = draw(st.integers(1_000_000_000, 9_999_999_999))
        from datetime import UTC, datetime

        value = datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        spec = {"type": "string", "format": "date-time"}
    elif kind in ("number", "integer"):
        if kind == "integer":
            value = draw(st.integers(-(10**12), 10**12))
        else:
            value = draw(st.one_of(st.integers(-(10**9), 10**9), st.sampled_from([0.5, 1e-7, -2.25, 0.1, 1234.5678])))
        spec = {"type": kind}
        if draw(st.booleans()):
            spec["minimum"] = value - draw(st.integers(0, 10))
        if draw(st.booleans()):
            spec["maximum"] = value + draw(st.integers(0, 10))
    elif kind == "bool":
        value, spec = draw(st.booleans()), {"type": "boolean"}
    else:
        values = draw(st.lists(OPTION_VALUE, min_size=1, max_size=MAX_OPTIONS, unique=True))
        labels = draw(
            st.lists(st.one_of(HOSTILE, huge(HOSTILE, limit=300)), min_size=len(values), max_size=len(values))
        )
        options = {"oneOf": [{"const": v, "title": t} for v, t in zip(values, labels, strict=True)]}
        # Over 25 options Discord asks in a text box, where a blank value cannot be typed.
        pickable = [v for v in values if v.strip()] if len(values) > 25 else values
        if not pickable:
            values, pickable = [*values, "v"], ["v"]
            options = {"oneOf": [*options["oneOf"], {"const": "v", "title": "v"}]}
        if kind == "one":
            value, spec = draw(st.sampled_from(pickable)), {"type": "string", **options}
        else:
            picked = draw(st.sets(st.sampled_from(pickable), min_size=1, max_size=min(len(pickable), 30)))
            value = [v for v in values if v in picked]
            spec = {"type": "array", "items": {"type": "string", **options}, "minItems": 1, "maxItems": len(value)}
    spec["default"] = value
    return _named(spec, draw), value


@st.composite
def filled_schemas(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    """A requested schema whose every field has a valid default, and that content."""
    names = draw(st.lists(PLAIN, min_size=1, max_size=MAX_FIELDS, unique=True))
    properties: dict[str, Any] = {}
    content: dict[str, Any] = {}
    for name in names:
        properties[name], content[name] = draw(filled_field())
    required = [name for name in names if draw(st.booleans())]
    return {"type": "object", "properties": properties, "required": required}, content
