"""What changed between a pinned definition and the one a server lists now, readable and bounded.

The admins' message about a held tool and the reply to `/countersign mcp accept <server>` show
it, and the audit log keeps it with the accept: the description as a line diff, the input
schema as the JSON paths whose values changed, and the hints (annotations) that changed. Each
part is cut to a fixed number of lines so that a server that rewrites a long schema cannot
flood a channel or the audit log; `left_out` says how many lines were cut.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any, Final

from bot.tools.mcp.pins.definitions import ToolDefinition, canonical_json

DESCRIPTION_LINES: Final = 20
"""Lines of a description's diff kept per tool."""
SCHEMA_CHANGES: Final = 20
"""Changed JSON paths of an input schema kept per tool."""
HINT_CHANGES: Final = 10
"""Changed annotations kept per tool."""
LINE_CHARS: Final = 200
"""Characters of one description line kept (longer lines end in `…`)."""
VALUE_CHARS: Final = 120
"""Characters of one schema or hint value kept, as JSON (longer ones end in `…`)."""

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ABSENT: Final = object()


class ChangeKind(StrEnum):
    """Why a listed definition differs from what is pinned."""

    NEW = "new"
    """The server lists a tool that was never pinned (on a server that has pins)."""
    CHANGED = "changed"
    """The tool was pinned with another definition."""


@dataclass(frozen=True, slots=True)
class ValueChange:
    """One value that changed.

    Attributes:
        path: a JSON path into the input schema (`$.properties.repo.type`,
            `$.required[0]`, `$["odd key"]`), or an annotation's name (`readOnlyHint`).
        before: the old value as JSON, shortened to `VALUE_CHARS`; None when it was absent.
        after: the new value likewise; None when it is gone.
    """

    path: str
    before: str | None
    after: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class DefinitionChange:
    """How one tool's listed definition differs from its pin.

    Attributes:
        server: the server's key.
        tool: the tool's name as the server lists it.
        kind: new or changed.
        before_digest: the pinned digest; None for a new tool.
        after_digest: the digest of the definition listed now.
        changed: which parts differ, in this order: `description`, `input schema`, `hints`
            (a new tool: every part it has).
        description: the description's line diff without its headers: each line starts with
            `-` (removed), `+` (added) or a space (kept, as context), and `…` lines separate
            hunks; at most `DESCRIPTION_LINES`.
        schema: the changed schema paths, at most `SCHEMA_CHANGES`.
        hints: the changed annotations, at most `HINT_CHANGES`.
        left_out: how many description lines, schema paths and hints were cut.
    """

    server: str
    tool: str
    kind: ChangeKind
    before_digest: str | None
    after_digest: str
    changed: tuple[str, ...]
    description: tuple[str, ...]
    schema: tuple[ValueChange, ...]
    hints: tuple[ValueChange, ...]
    left_out: int

    def as_json(self) -> dict[str, Any]:
        """This change as plain JSON values (for an audit row's detail)."""
        data = asdict(self)
        data["kind"] = self.kind.value
        data["description"] = list(self.description)
        data["changed"] = list(self.changed)
        return data

    @property
    def digest(self) -> str:
        """SHA-256, in hex, of the canonical JSON of this change as shown (`as_json`)."""
        return hashlib.sha256(canonical_json(self.as_json()).encode()).hexdigest()


def describe_change(before: ToolDefinition | None, after: ToolDefinition) -> DefinitionChange:
    """How `after` differs from `before`, bounded (see the module docstring).

    Args:
        before: the pinned definition; None for a tool never pinned.
        after: the definition listed now (same server and tool name as `before`).

    Raises:
        ValueError: when `before` is another server's or another tool's definition.
    """
    if before is not None and (before.server, before.name) != (after.server, after.name):
        raise ValueError(f"cannot compare {before.server}/{before.name} with {after.server}/{after.name}")
    old_description = before.description if before else None
    old_schema: Mapping[str, Any] = before.input_schema if before else {}
    old_hints: Mapping[str, Any] = before.annotations if before else {}
    changed = tuple(
        part
        for part, differs in (
            ("description", old_description != after.description),
            ("input schema", canonical_json(old_schema) != canonical_json(after.input_schema)),
            ("hints", canonical_json(old_hints) != canonical_json(after.annotations)),
        )
        if differs
    )
    lines = _description_lines(old_description, after.description)
    schema = list(_schema_changes(old_schema, after.input_schema, "$"))
    hints = [
        ValueChange(key, _shown(old_hints, key), _shown(after.annotations, key))
        for key in sorted(set(old_hints) | set(after.annotations))
        if key not in old_hints
        or key not in after.annotations
        or canonical_json(old_hints[key]) != canonical_json(after.annotations[key])
    ]
    left_out = sum(
        max(0, len(kept) - limit)
        for kept, limit in ((lines, DESCRIPTION_LINES), (schema, SCHEMA_CHANGES), (hints, HINT_CHANGES))
    )
    return DefinitionChange(
        server=after.server,
        tool=after.name,
        kind=ChangeKind.NEW if before is None else ChangeKind.CHANGED,
        before_digest=before.digest if before else None,
        after_digest=after.digest,
        changed=changed,
        description=tuple(lines[:DESCRIPTION_LINES]),
        schema=tuple(schema[:SCHEMA_CHANGES]),
        hints=tuple(hints[:HINT_CHANGES]),
        left_out=left_out,
    )


def _description_lines(before: str | None, after: str | None) -> list[str]:
    old, new = (before or "").splitlines(), (after or "").splitlines()
    if old == new:
        return []
    # The first two lines are the `---`/`+++` headers; `@@` lines start hunks.
    body = list(difflib.unified_diff(old, new, lineterm="", n=1))[2:]
    lines = ["…" if line.startswith("@@") else _cut(line, LINE_CHARS) for line in body]
    return lines[1:]  # the first hunk needs no separator


def _schema_changes(before: Any, after: Any, path: str) -> Iterator[ValueChange]:
    """The values that differ, depth first in key order (`_ABSENT`: no such key).

    An object added or removed is walked into, so that a new tool's schema reads as its paths
    (`$.properties.repo.type: "string"`); a list is compared item by item when its length is
    unchanged, else as one value.
    """
    old_is_object = isinstance(before, Mapping) or (before is _ABSENT and isinstance(after, Mapping) and bool(after))
    new_is_object = isinstance(after, Mapping) or (after is _ABSENT and isinstance(before, Mapping) and bool(before))
    if old_is_object and new_is_object:
        old = before if isinstance(before, Mapping) else {}
        new = after if isinstance(after, Mapping) else {}
        for key in sorted(set(old) | set(new)):
            yield from _schema_changes(old.get(key, _ABSENT), new.get(key, _ABSENT), _child(path, key))
        return
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        for index, (old_item, new_item) in enumerate(zip(before, after, strict=True)):
            yield from _schema_changes(old_item, new_item, f"{path}[{index}]")
        return
    old_text = None if before is _ABSENT else _value(before)
    new_text = None if after is _ABSENT else _value(after)
    if before is _ABSENT or after is _ABSENT or canonical_json(before) != canonical_json(after):
        yield ValueChange(path, old_text, new_text)


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if _IDENTIFIER.fullmatch(key) else f"{path}[{canonical_json(key)}]"


def _shown(values: Mapping[str, Any], key: str) -> str | None:
    return _value(values[key]) if key in values else None


def _value(value: Any) -> str:
    return _cut(canonical_json(value), VALUE_CHARS)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
