"""The tool registry: every tool the agent may call, with its default review mode.

The registry offers at most `max_tools` tools (`COUNTERSIGN_MAX_TOOLS`, Gemini's limit of 512 by
default): Gemini refuses a whole request declaring more, so over the limit the tools of its
sources (MCP servers) are left out, the fixed tools first, then each source's in its own order
(docs/decisions/0051-offering-only-some-mcp-tools.md). Every graph's tools are a view of this
registry, so the limit holds for every model call, a subagent's included.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from langchain_core.tools import BaseTool

from bot.base.mode import Mode
from bot.ports import ToolOrigin
from bot.tools.canonical import CANONICAL_ARGS, CanonicalForm, CaseRule, canonical_case
from bot.tools.server_wide import covers, pattern_server

if TYPE_CHECKING:
    from bot.tools.mcp.info import McpToolInfo

log = logging.getLogger(__name__)

MAX_TOOLS = 512
"""Function declarations Gemini accepts in one request; more and it refuses the whole request."""

OVER_LIMIT = (
    "it is left out: the bot offers the model at most {limit} tools (COUNTERSIGN_MAX_TOOLS), and the tools "
    "before it in order fill that"
)
"""Why a tool left out over the limit is not offered, for the model (after "<tool> is not available now: ")."""

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
is kept (`bot.turns.stop.signal`). A cancelled call's result tells the model that it may or
may not have taken effect.
"""

INPUT_SCHEMA = "countersign_input_schema"
"""Key in a tool's `metadata`: the JSON Schema (a dict) its arguments are checked against.

For a tool whose arguments are described by a JSON Schema rather than a pydantic model (an MCP
tool's `inputSchema`): the model's arguments are checked against it before a card or a claim
(`bot.tools.refusals.schema_problem`), and so are an approver's edits
(`bot.reviews.decisions.validate_tool_args`), so nobody approves what the tool would refuse.
Without it, a tool whose `args_schema` is a dict is checked against that dict. The schema the
model is shown may be a simplified copy (see `bot.tools.mcp.tools.model_schema`); this one is
the tool's own.
"""

DEFINITION = "countersign_definition"
"""Key in a tool's `metadata`: the pinned digest of an MCP tool's definition (`McpToolInfo.digest`).

Set by `ToolSpec` for a tool of an MCP server. A card records the digest of the tool it was
made for (`bot.reviews.requests.build_review_request`), and an approved call runs only while
the tool about to run has that same digest (`bot.tools.ledger.store`,
docs/decisions/0046-mcp-pins-wiring.md): what the approver saw is what runs.
"""


def definition_of(tool: BaseTool | None) -> str | None:
    """The pinned digest of `tool`'s MCP definition (its `DEFINITION` metadata); None for any other tool."""
    found = (tool.metadata or {}).get(DEFINITION) if tool is not None else None
    return found if isinstance(found, str) else None


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
            `bot.base.errors.InvalidArgumentsError` for arguments it would refuse (such a call is
            answered at once with that error, with no card, `bot.tools.refusals`). It is stored in
            the tool's `metadata` under `CANONICAL_ARGS`, where every part of the bot that
            holds only the tool (the graph's nodes, subagents, edits) finds it; a tool that
            already carries one there (the built-in `http_request`) needs none here.
        cancellable: a Stop may cancel the tool while it runs (see `CANCELLABLE`); stored in
            the tool's `metadata`. Default False: a running call finishes.
        mcp: for a tool of an MCP server, where it comes from and its definition as the server
            listed it (annotations included); None for every other tool. Its digest is stored
            in the tool's `metadata` (`DEFINITION`).

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
    mcp: McpToolInfo | None = None

    def __post_init__(self) -> None:
        if self.cancellable:
            self.tool.metadata = {**(self.tool.metadata or {}), CANCELLABLE: True}
        if self.mcp is not None:
            self.tool.metadata = {**(self.tool.metadata or {}), DEFINITION: self.mcp.digest}
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
        (`bot.policy.conditions.compile_condition`).
        """
        return canonical_case(self.tool)

    @property
    def argument_names(self) -> tuple[str, ...]:
        """The tool's argument names in its own order: the properties of the schema the model sees.

        Cards list a call's arguments in this order (`bot.reviews.shown.arrange`); `trust ...
        matching` names are checked against it. A tool with its own `INPUT_SCHEMA` is read
        there. Empty when the tool has no readable schema.
        """
        own = (self.tool.metadata or {}).get(INPUT_SCHEMA)
        schema = own if isinstance(own, dict) else self.tool.tool_call_schema
        fields = getattr(schema, "model_fields", None)
        if isinstance(fields, dict):
            return tuple(fields)
        return tuple((schema.get("properties") or {}) if isinstance(schema, dict) else ())


@dataclass(frozen=True, slots=True, kw_only=True)
class AbsentTool:
    """Why a tool a source would offer is not offered now (e.g. its MCP server is not connected).

    Attributes:
        reason: one clause for the model and for logs, e.g. "MCP server 'github' is not
            connected"; the model reads it followed by "; nothing ran".
        last_spec: the tool as its source last offered it in this process, if it ever did
            (admin commands and cards still know its arguments); None otherwise.
    """

    reason: str
    last_spec: ToolSpec | None = None


class ToolSource(Protocol):
    """A set of tools that changes while the bot runs (the tools of MCP servers).

    A registry asks `version` on every look-up and reads `specs()` again only when it changed,
    so `version` must be cheap and must change whenever `specs()` would answer differently.
    """

    @property
    def version(self) -> int:
        """A number that changes whenever `specs()` changes."""
        ...

    def specs(self) -> Sequence[ToolSpec]:
        """The tools offered now, in the order the model sees them."""
        ...

    def absent(self, name: str) -> AbsentTool | None:
        """Why `name`, a tool this source would offer, is not offered now; None for any other name."""
        ...

    def servers(self) -> Mapping[str, bool]:
        """The servers whose tools this source offers, by their name in tool names, and whether each is connected.

        Every configured server, connected or not, so that admins may set `<server>__*` rules
        and subagents may list its tools before it connects.
        """
        ...


class ToolRegistry:
    """An ordered set of `ToolSpec`s keyed by tool name: fixed ones, then those of live sources.

    The fixed tools are registered at start (`register`); a source (`add_source`) adds tools
    that come and go while the bot runs. Every look-up sees the tools offered at that moment.

    Args:
        specs: the fixed tools.
        max_tools: tools offered at most (`COUNTERSIGN_MAX_TOOLS`); a source's tools past it are
            left out (`over_limit`), in order, with one warning per server each time their
            number changes. The fixed tools are never left out (the start checks that they fit).

    Raises:
        ValueError: from `register` when a name is taken twice, so that an operator tool can
            never silently replace a built-in one (and its review default).
    """

    def __init__(self, specs: Iterable[ToolSpec] = (), *, max_tools: int = MAX_TOOLS) -> None:
        self._specs: dict[str, ToolSpec] = {}
        self._sources: list[ToolSource] = []
        self._changes = 0
        self._merged: dict[str, ToolSpec] = {}
        self._merged_version: tuple[int, ...] | None = None
        self._max_tools = max_tools
        self._over: dict[str, ToolSpec] = {}
        self._over_counts: dict[str, int] = {}
        for spec in specs:
            self.register(spec)

    @property
    def max_tools(self) -> int:
        """Tools offered at most (`COUNTERSIGN_MAX_TOOLS`)."""
        return self._max_tools

    @max_tools.setter
    def max_tools(self, value: int) -> None:
        self._max_tools = value
        self._changes += 1  # what is offered may change

    def register(self, spec: ToolSpec) -> None:
        """Add a fixed tool; see the class docstring for the duplicate-name rule."""
        if spec.name in self._specs:
            raise ValueError(f"a tool named {spec.name!r} is already registered")
        self._specs[spec.name] = spec
        self._changes += 1

    def add_source(self, source: ToolSource) -> None:
        """Offer the tools of `source` after the fixed ones, for as long as it offers them.

        A source's tool named like a fixed tool, or like an earlier source's, is not offered
        (the source is expected to leave such tools out and say why, as `bot.tools.mcp` does).
        """
        self._sources.append(source)
        self._changes += 1

    @property
    def version(self) -> tuple[int, ...]:
        """Changes whenever the tools offered change (a registration, a source's own version)."""
        return (self._changes, *(source.version for source in self._sources))

    def _current(self) -> dict[str, ToolSpec]:
        version = self.version
        if version != self._merged_version:
            merged = dict(self._specs)
            over: dict[str, ToolSpec] = {}
            for source in self._sources:
                for spec in source.specs():
                    if spec.name in merged:
                        log.warning("tool %s is offered twice; the first one is kept", spec.name)
                        continue
                    if len(merged) >= self.max_tools:
                        over[spec.name] = spec
                        continue
                    merged[spec.name] = spec
            self._merged, self._merged_version = merged, version
            self._left_out_over_limit(over)
        return self._merged

    def _left_out_over_limit(self, over: dict[str, ToolSpec]) -> None:
        """Record the tools left out over `max_tools`; one warning per server whose number of them changed."""
        self._over = over
        counts = Counter(_server_of(spec) for spec in over.values())
        for server in dict.fromkeys([*self._over_counts, *counts]):
            count, before = counts.get(server, 0), self._over_counts.get(server, 0)
            if count == before:
                continue
            if count:
                log.warning(
                    "MCP server %s: %d of its tools are left out, over the model's limit of %d tools "
                    "(COUNTERSIGN_MAX_TOOLS); offer fewer with includeTools/excludeTools in its entry",
                    server,
                    count,
                    self.max_tools,
                )
            else:
                log.info("MCP server %s: none of its tools is left out over the model's limit any more", server)
        self._over_counts = dict(counts)

    def over_limit(self) -> dict[str, tuple[str, ...]]:
        """The tools left out now because `max_tools` is reached, by their MCP server's key, each in order."""
        self._current()
        found: dict[str, list[str]] = {}
        for name, spec in self._over.items():
            found.setdefault(_server_of(spec), []).append(name)
        return {server: tuple(names) for server, names in found.items()}

    def get(self, name: str) -> ToolSpec | None:
        """The spec for `name` when it is offered now, or None."""
        return self._current().get(name)

    def absent(self, name: str) -> AbsentTool | None:
        """Why `name` is not offered now when a source would offer it; None when it is offered or unknown."""
        if name in self._current():
            return None
        if name in self._over:
            return AbsentTool(reason=OVER_LIMIT.format(limit=self.max_tools), last_spec=self._over[name])
        for source in self._sources:
            found = source.absent(name)
            if found is not None:
                return found
        return None

    def servers(self) -> dict[str, bool]:
        """Every source's servers, by their name in their tools' names, and whether each is connected now."""
        found: dict[str, bool] = {}
        for source in self._sources:
            for server, up in source.servers().items():
                found.setdefault(server, up)
        return found

    def known(self, name: str) -> ToolSpec | None:
        """The spec for `name` when offered now, else as its source last offered it (`AbsentTool.last_spec`).

        Admin settings and cards may name a tool whose MCP server is down for a while; what
        can run is asked with `get`.
        """
        spec = self.get(name)
        if spec is not None:
            return spec
        absent = self.absent(name)
        return absent.last_spec if absent is not None else None

    def origin(self, name: str) -> ToolOrigin | None:
        """The MCP server and tool behind `name`, with the server's hints, for its cards; None for the bot's own."""
        spec = self.known(name)
        info = spec.mcp if spec is not None else None
        if info is None:
            return None
        return ToolOrigin(server=info.server, tool=info.upstream, hints=info.hints.words())

    def argument_order(self, name: str) -> tuple[str, ...]:
        """The argument names of the tool `name` in its own order (`ToolSpec.argument_names`); empty if unknown."""
        spec = self.known(name)
        return spec.argument_names if spec is not None else ()

    def names(self) -> list[str]:
        """Tool names offered now, fixed ones first, in registration order."""
        return list(self._current())

    def tools(self) -> list[BaseTool]:
        """The LangChain tools offered now, in registration order (what the model is bound to)."""
        return [spec.tool for spec in self._current().values()]

    def view(self, names: Sequence[str] | None = None) -> ToolView:
        """A live view of the tools offered now: all of them, or those of `names` (a subagent's)."""
        return ToolView(self, names)

    def __iter__(self) -> Iterator[ToolSpec]:
        return iter(list(self._current().values()))

    def __len__(self) -> int:
        return len(self._current())


def _server_of(spec: ToolSpec) -> str:
    """The key of the MCP server behind `spec` (a source's tool), else its own name."""
    return spec.mcp.server if spec.mcp is not None else spec.name


class ToolView(Mapping[str, BaseTool]):
    """The tools one graph offers, by name, as they are at each look-up.

    A graph's nodes read their tools through a view, so that a tool offered after the graph
    was compiled (an MCP server that connected) is bound to the model, reviewed and run, and a
    tool that went away is answered as unavailable (`absent`) instead of being called.

    Args:
        registry: the tools.
        names: the names this graph may call, in its order (a subagent's `tools`); None for
            every tool of the registry. A `<server>__*` stands for every tool its MCP server
            offers at the time (`bot.tools.server_wide`), in the server's order.
    """

    def __init__(self, registry: ToolRegistry, names: Sequence[str] | None = None) -> None:
        self._registry = registry
        self._names = tuple(names) if names is not None else None
        self._tools: dict[str, BaseTool] = {}
        self._version: tuple[int, ...] | None = None

    @classmethod
    def of(cls, tools: Iterable[BaseTool]) -> ToolView:
        """A view of a fixed list of tools (the supervisor's delegations, tests).

        Raises:
            ValueError: when two tools share a name.
        """
        return cls(ToolRegistry(ToolSpec(tool=tool) for tool in tools))

    @property
    def version(self) -> tuple[int, ...]:
        """Changes whenever the tools of the view may have changed (cache what you derive from them by it)."""
        return self._registry.version

    def _current(self) -> dict[str, BaseTool]:
        version = self._registry.version
        if version != self._version:
            if self._names is None:
                self._tools = {spec.name: spec.tool for spec in self._registry}
            else:
                offered = self._registry.names()
                tools: dict[str, BaseTool] = {}
                for listed in self._names:
                    prefix = listed[:-1] if pattern_server(listed) is not None else None
                    for name in [n for n in offered if n.startswith(prefix)] if prefix else [listed]:
                        spec = self._registry.get(name)
                        if spec is not None:
                            tools.setdefault(name, spec.tool)
                self._tools = tools
            self._version = version
        return self._tools

    def absent(self, name: str) -> str | None:
        """Why `name`, one of this view's tools, is not offered now; None when it is, or is not the view's."""
        if self._names is not None and not covers(self._names, name):
            return None
        absent = self._registry.absent(name)
        return absent.reason if absent is not None else None

    def tools(self) -> list[BaseTool]:
        """The tools offered now, in order (what the model is bound to)."""
        return list(self._current().values())

    def __getitem__(self, name: str) -> BaseTool:
        return self._current()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._current()))

    def __len__(self) -> int:
        return len(self._current())

    def __contains__(self, name: object) -> bool:
        return name in self._current()
