"""The tool registry: every tool the agent may call, with its default review mode."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from langchain_core.tools import BaseTool

from bot.approvals.mode import Mode
from bot.tools.canonical import CANONICAL_ARGS, CanonicalForm, CaseRule, canonical_case

ARGS_CHECK = "countersign_args_check"
"""Key in a tool's `metadata` of an `args -> problem or None` check for what its schema cannot say.

The check must say only what the tool itself refuses before doing anything. A model's call with
such arguments is answered at once with that problem, with no card, whatever its mode but
`deny` (`bot.tools.refusals`), and an edit is refused with it before it is recorded (e.g.
`http_request` to a host that is not allowed): nobody is asked to approve what cannot run.
"""

CANCELLABLE = "countersign_cancellable"
"""Key in a tool's `metadata`: True when a Stop may cancel the tool while it runs.

Declare it (with `ToolSpec(cancellable=True)`) for tools whose work may be cut off at any
moment without leaving something worse than a failed call: an HTTP request (the server sees a
closed connection). A tool without it is let finish when its turn is stopped, and its result
is kept (`bot.agents.stop_signal`). A cancelled call's result tells the model that it may or
may not have taken effect.
"""

ReviewCondition = Callable[[Mapping[str, Any]], bool]
"""`args -> needs review?`; an exception counts as True (fail closed)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpec:
    """A tool and its built-in policy.

    Attributes:
        tool: the LangChain tool; its name is the name the model sees.
        default_mode: what happens to a call when no admin rule says otherwise.
        review_when: with `default_mode=REVIEW`, review only when this returns True for the
            call's arguments (e.g. `http_request` only for methods other than GET and HEAD).
            It receives the canonical arguments when they have one, else the arguments as sent.
        canonical: the tool's canonical form of its arguments (see `bot.tools.canonical`):
            `args -> args` in the spelling the tool itself uses, raising
            `bot.errors.InvalidArgumentsError` for arguments it would refuse (such a call is
            answered at once with that error, with no card, `bot.tools.refusals`). It is stored in
            the tool's `metadata` under `CANONICAL_ARGS`, where every part of the bot that
            holds only the tool (the graph's nodes, subagents, edits) finds it; a tool that
            already carries one there (the built-in `http_request`) needs none here.
        cancellable: a Stop may cancel the tool while it runs (see `CANCELLABLE`); stored in
            the tool's `metadata`. Default False: a running call finishes.

    Raises:
        ValueError: when `canonical` is given for a tool that already carries another one.
    """

    tool: BaseTool
    default_mode: Mode = Mode.REVIEW
    review_when: ReviewCondition | None = None
    review_when_text: str | None = None
    """`review_when` in words, for `/countersign show` (e.g. "the method is not GET or HEAD")."""
    canonical: CanonicalForm | None = None
    cancellable: bool = False

    def __post_init__(self) -> None:
        if self.cancellable:
            self.tool.metadata = {**(self.tool.metadata or {}), CANCELLABLE: True}
        if self.canonical is None:
            return
        metadata = dict(self.tool.metadata or {})
        if metadata.get(CANONICAL_ARGS, self.canonical) is not self.canonical:
            raise ValueError(f"tool {self.tool.name!r} already carries another canonical form")
        metadata[CANONICAL_ARGS] = self.canonical
        self.tool.metadata = metadata

    @property
    def name(self) -> str:
        """The tool's name."""
        return self.tool.name

    @property
    def canonical_case(self) -> tuple[CaseRule, ...]:
        """What the tool's canonical form writes in one case (its `metadata`'s `CANONICAL_CASE`).

        A condition comparing such text in the other case is refused when saved
        (`bot.approvals.conditions.compile_condition`).
        """
        return canonical_case(self.tool)

    @property
    def argument_names(self) -> tuple[str, ...]:
        """The tool's argument names in its own order: the properties of the schema the model sees.

        Cards list a call's arguments in this order (`bot.approvals.shown.arrange`); `trust ...
        matching` names are checked against it. Empty when the tool has no readable schema.
        """
        schema = self.tool.tool_call_schema
        fields = getattr(schema, "model_fields", None)
        if isinstance(fields, dict):
            return tuple(fields)
        return tuple((schema.get("properties") or {}) if isinstance(schema, dict) else ())


class ToolRegistry:
    """An ordered set of `ToolSpec`s keyed by tool name.

    Raises:
        ValueError: from `register` when a name is taken twice, so that an operator tool can
            never silently replace a built-in one (and its review default).
    """

    def __init__(self, specs: Iterable[ToolSpec] = ()) -> None:
        self._specs: dict[str, ToolSpec] = {}
        for spec in specs:
            self.register(spec)

    def register(self, spec: ToolSpec) -> None:
        """Add a tool; see the class docstring for the duplicate-name rule."""
        if spec.name in self._specs:
            raise ValueError(f"a tool named {spec.name!r} is already registered")
        self._specs[spec.name] = spec

    def get(self, name: str) -> ToolSpec | None:
        """The spec for `name`, or None."""
        return self._specs.get(name)

    def argument_order(self, name: str) -> tuple[str, ...]:
        """The argument names of the tool `name` in its own order (`ToolSpec.argument_names`); empty if unknown."""
        spec = self._specs.get(name)
        return spec.argument_names if spec is not None else ()

    def names(self) -> list[str]:
        """Tool names in registration order."""
        return list(self._specs)

    def tools(self) -> list[BaseTool]:
        """The LangChain tools in registration order (what the model is bound to)."""
        return [spec.tool for spec in self._specs.values()]

    def __iter__(self) -> Iterator[ToolSpec]:
        return iter(self._specs.values())

    def __len__(self) -> int:
        return len(self._specs)
