"""The canonical form of a tool call's arguments: the one form that is judged, shown, approved and run.

A call's arguments reach many readers: the review policy (CEL conditions compare strings), the
card, the approval digest, PostgreSQL (jsonb), the checkpoint (msgpack) and the tool. When two
of them read two spellings of the same call, they can disagree: a condition
`args.url.startsWith('https://internal.example/')` misses `HTTPS://Internal.Example:443/`, which
the tool sends to the same place (docs/decisions/0010), and an integer beyond 64 bits comes back
from jsonb as another number than the checkpoint holds (finding 7). So each call is put in its
canonical form once, where it enters the system (the model's answer, an approver's edit), and
every reader after that sees the same arguments (docs/decisions/0010-canonical-arguments.md).

Two layers:

- `canonical_values`, for every tool: JSON values as both stores keep them (an integer beyond
  64 bits becomes the float the checkpoint can hold; tuples become lists). Also applied to
  arguments read back from the database (rows stored as jsonb before migration 0016).
- a tool's own form, declared by the tool in its `metadata` under `CANONICAL_ARGS` (or through
  `ToolSpec(canonical=...)`), e.g. `bot.tools.http_url.canonical_http_request_args`. It
  rewrites its arguments into the spelling the tool itself will use, and raises
  `InvalidArgumentsError` for arguments the tool would refuse anyway. It must be idempotent
  (`form(form(a)) == form(a)`) and must not change what the call does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from langchain_core.tools import BaseTool

from bot.base.errors import InvalidArgumentsError

CANONICAL_ARGS: Final = "countersign_canonical_args"
"""Key in a tool's `metadata` of its `CanonicalForm` (read by `canonical_args`)."""

CanonicalForm = Callable[[Mapping[str, Any]], dict[str, Any]]
"""`args -> canonical args`; raises `InvalidArgumentsError` for arguments the tool would refuse."""

CANONICAL_CASE: Final = "countersign_canonical_case"
"""Key in a tool's `metadata` of the `CaseRule`s its canonical form keeps (read by `canonical_case`)."""


class Case(StrEnum):
    """The one case a canonical form writes some text in."""

    LOWER = "lower"
    UPPER = "upper"


class Part(StrEnum):
    """Which text of an argument a `CaseRule` is about."""

    VALUE = "value"
    """The argument itself, a string (`http_request`'s `method`)."""
    ITEMS = "items"
    """Each string of a list (`send_email`'s `to`)."""
    KEYS = "keys"
    """Each key of an object (`http_request`'s `headers`)."""
    HOST = "host"
    """The scheme and host of a URL, as `url(...).getScheme()`, `getHost()` and `getHostname()` give them."""


@dataclass(frozen=True, slots=True)
class CaseRule:
    """Text that a tool's canonical form always writes in one case.

    A condition comparing such text with a string literal in the other case can never match
    (`'X-Sudo' in args.headers` when header names are lower case): as a deny-list it lets every
    call through. `bot.policy.conditions.compile_condition` refuses one when it is saved.

    Attributes:
        argument: the argument's name.
        part: which of its text.
        case: the case the canonical form writes it in.
        words: what that text is, in the plural, for the refusal ("header names").
    """

    argument: str
    part: Part
    case: Case
    words: str

    def spelled(self, literal: str) -> str:
        """`literal` in this rule's case: what a condition must write to match."""
        return literal.lower() if self.case is Case.LOWER else literal.upper()


_INT64: Final = (-(2**63), 2**63 - 1)

MAX_ARGS_DEPTH: Final = 32
"""Arguments nested deeper are refused, the model's as an approver's edit: nobody writes arguments
like that, and the checkpoint serializer (msgpack) refuses nesting not much deeper (about 250
levels), which would leave the thread unable to save its turn."""

CUT_MARK: Final = "…"
"""What stands in for each value nested deeper than `MAX_ARGS_DEPTH` in a call `cut_deeper_than` kept."""


def nested_deeper_than(value: Any, limit: int = MAX_ARGS_DEPTH) -> bool:
    """Whether `value` holds a value more than `limit` levels below it (keys count as values).

    The top value is at level 0, its items and keys at level 1, and so on: the level
    `bot.reviews.decisions.storable_problem` counts. Walked without recursion, so any nesting
    can be asked about.
    """
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        children: list[Any] = []
        if isinstance(item, Mapping):
            children = list(item.values())
        elif isinstance(item, list | tuple):
            children = list(item)
        if not children:
            continue
        if depth + 1 > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def cut_deeper_than(value: Any, limit: int = MAX_ARGS_DEPTH) -> Any:
    """`value` with each non-empty object or list at level `limit` replaced by `CUT_MARK`.

    What stays of arguments `nested_deeper_than` the limit: a copy every store can hold (it
    recurses at most `limit` levels), which still shows the model what it sent.
    """
    return _cut(value, limit)


def _cut(value: Any, room: int) -> Any:
    if isinstance(value, Mapping):
        if room <= 0 and value:
            return CUT_MARK
        return {key: _cut(item, room - 1) for key, item in value.items()}
    if isinstance(value, list | tuple):
        if room <= 0 and value:
            return CUT_MARK
        return [_cut(item, room - 1) for item in value]
    return value


def canonical_number(value: int | float) -> int | float:
    """`value` as the checkpoint and jsonb both keep it: an integer beyond 64 bits becomes a float.

    The checkpoint serializer (msgpack) holds 64-bit integers only; jsonb gives such a float
    back as the integer of its decimal expansion (`1.1805916207174113e+21` returns as
    `1180591620717411300000`), which this turns into the same float again. Booleans and other
    numbers are returned unchanged.
    """
    if isinstance(value, bool) or not isinstance(value, int) or _INT64[0] <= value <= _INT64[1]:
        return value
    return float(value)


def canonical_values(value: Any) -> Any:
    """A JSON value in canonical form: numbers per `canonical_number`, tuples as lists, keys as text.

    Strings are left alone (a NUL in what the model sends is replaced by
    `bot.agents.history.without_nul`; in an edit it is refused by
    `bot.reviews.decisions.storable_problem`).
    """
    if isinstance(value, int | float):
        return canonical_number(value)
    if isinstance(value, Mapping):
        return {str(key): canonical_values(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [canonical_values(item) for item in value]
    return value


def canonical_form(tool: BaseTool | None) -> CanonicalForm | None:
    """The tool's own canonical form (its `metadata[CANONICAL_ARGS]`), or None."""
    form = (tool.metadata or {}).get(CANONICAL_ARGS) if tool is not None else None
    return form if callable(form) else None


def canonical_case(tool: BaseTool | None) -> tuple[CaseRule, ...]:
    """The `CaseRule`s the tool's canonical form keeps (its `metadata[CANONICAL_CASE]`); empty for none."""
    rules = (tool.metadata or {}).get(CANONICAL_CASE) if tool is not None else None
    return tuple(rule for rule in rules or () if isinstance(rule, CaseRule))


def canonical_args(tool: BaseTool | None, args: Mapping[str, Any]) -> dict[str, Any]:
    """The canonical form of `args` for `tool`: `canonical_values`, then the tool's own form.

    Args:
        tool: the tool the call names; None (an unknown tool) applies `canonical_values` only.
        args: the call's arguments as sent (by the model or an editor).

    Returns:
        A new dict; calling this again on it returns an equal dict.

    Raises:
        InvalidArgumentsError: the tool's form refuses the arguments (the tool would not run
            them); any other exception from a form is reported the same way, naming the tool.
    """
    values: dict[str, Any] = canonical_values(dict(args))
    form = canonical_form(tool)
    if form is None or tool is None:
        return values
    try:
        return dict(canonical_values(form(values)))
    except InvalidArgumentsError:
        raise
    except Exception as exc:  # a custom tool's form that fails is a refusal, never a pass
        raise InvalidArgumentsError(f"{tool.name} cannot read these arguments: {type(exc).__name__}: {exc}") from exc
