"""Subagent definitions: the shipped default set, or a TOML file (`COUNTERSIGN_SUBAGENTS_FILE`).

A file holds one `[[subagents]]` table per subagent::

    [[subagents]]
    name = "researcher"                       # the supervisor's tool name for it
    description = "Looks things up ..."       # what the supervisor reads to choose it
    prompt = "You research ..."               # its system prompt
    tools = ["current_time", "calculator", "http_request"]   # MCP: "github__create_issue", "notes__*"
    model = "gemini-3.8-pro"                  # optional: else the supervisor's model
    step_limit = 15                           # optional LangGraph steps per delegation

Everything is checked when the bot starts, so a mistake stops the start with one line instead
of failing in a conversation (docs/decisions/0008).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from bot.base.errors import ConfigurationError
from bot.tools.registry import ToolRegistry
from bot.tools.server_wide import pattern_server, server_patterns

DEFAULT_STEP_LIMIT = 15
"""LangGraph steps per delegation unless a subagent sets its own (docs/decisions/0008)."""
MIN_STEP_LIMIT, MAX_STEP_LIMIT = 5, 200
"""5 steps allow one tool round (review, tools, model) after the first model call."""

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
"""A name Gemini accepts for a function: a letter or `_` first, then letters, digits, `_`, `-`,
at most 64 characters (its function-declaration rules; dots are allowed there too, but they
would read as paths in cards and logs)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SubagentSpec:
    """One subagent as configured.

    Attributes:
        name: the tool name the supervisor calls it by; cards say "<name> wants to call ...".
        description: the tool description the supervisor's model reads.
        prompt: its own system prompt (Countersign appends the report rules).
        tools: names of registered tools it may call; the policy applies to them as anywhere.
            A tool of a configured MCP server (`<server>__<tool>`), or every tool of one
            (`<server>__*`), is offered to it while its server is connected.
        model: a Gemini model name, or None for the supervisor's model.
        step_limit: LangGraph steps per delegation (its `recursion_limit`).
    """

    name: str
    description: str
    prompt: str
    tools: tuple[str, ...]
    model: str | None = None
    step_limit: int = DEFAULT_STEP_LIMIT


class _SubagentEntry(BaseModel):
    # strict: TOML has real integers and strings, so `step_limit = "20"` is a mistake to report.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    name: str
    description: str
    prompt: str
    tools: list[str] = Field(default_factory=list)
    model: str | None = None
    step_limit: Annotated[int, Field(ge=MIN_STEP_LIMIT, le=MAX_STEP_LIMIT)] = DEFAULT_STEP_LIMIT

    @field_validator("name")
    @classmethod
    def _tool_name(cls, value: str) -> str:
        # fullmatch: `$` alone would let a trailing newline through into the function name.
        if not _NAME.fullmatch(value):
            raise ValueError(
                "is not a valid tool name (a letter or _ first, then letters, digits, _ or -, at most 64 characters)"
            )
        return value

    @field_validator("description", "prompt")
    @classmethod
    def _has_text(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("is empty")
        return value

    @field_validator("model")
    @classmethod
    def _blank_model_is_default(cls, value: str | None) -> str | None:
        return value.strip() or None if value is not None else None


class _SubagentsFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    subagents: Annotated[list[_SubagentEntry], Field(min_length=1)]


RESEARCHER_PROMPT = """\
You are the researcher. You find facts: the current time, calculations, and what HTTP services \
answer to GET requests. Work only on the task you are given; you cannot ask the user anything."""

OPERATOR_PROMPT = """\
You are the operator. You carry out actions on HTTP services (and send email when that tool is \
available). Some of your calls wait for a person's approval; a rejected call is not done, and \
you must not try it again. Work only on the task you are given; you cannot ask the user anything."""


def default_subagents(registry: ToolRegistry) -> tuple[SubagentSpec, ...]:
    """The shipped set (DESIGN.md "Subagents"): `researcher` and `operator`.

    `operator` gets `send_email` only when that tool is registered (`SMTP_URL` is set).
    """
    available = set(registry.names())
    operator_tools = tuple(name for name in ("http_request", "send_email") if name in available)
    return (
        SubagentSpec(
            name="researcher",
            description=(
                "Finds facts and figures: the current time anywhere, arithmetic, and reading HTTP "
                "services with GET requests. Give it one self-contained research question."
            ),
            prompt=RESEARCHER_PROMPT,
            tools=tuple(name for name in ("current_time", "calculator", "http_request") if name in available),
        ),
        SubagentSpec(
            name="operator",
            description=(
                "Carries out actions: HTTP requests that change things (POST, PUT, DELETE, ...)"
                + (" and sending email" if "send_email" in available else "")
                + ". Give it one self-contained instruction with every detail it needs."
            ),
            prompt=OPERATOR_PROMPT,
            tools=operator_tools,
        ),
    )


def load_subagents(path: Path | None, registry: ToolRegistry) -> tuple[SubagentSpec, ...]:
    """The subagents for this process: from `path`, or the default set when it is None.

    Raises:
        ConfigurationError: one line naming the file, the subagent and the field of the first
            problem: unreadable, not UTF-8 or not TOML, no `[[subagents]]` table, an unknown
            key, a missing field or one of the wrong type, an empty prompt or description, an
            invalid or duplicate name, a name that is also a tool's, a step limit out of range,
            a tool that is not registered (nor of a configured MCP server: `<server>__<tool>`,
            `<server>__*`) or is listed twice.
    """
    if path is None:
        defaults = default_subagents(registry)
        problem = _cross_check(defaults, registry)
        if problem is not None:
            raise ConfigurationError(
                f"the default subagents do not fit the tools: {problem}; rename that tool or set "
                "COUNTERSIGN_SUBAGENTS_FILE"
            )
        return defaults
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigurationError(f"COUNTERSIGN_SUBAGENTS_FILE {path}: cannot read it: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigurationError(
            f"COUNTERSIGN_SUBAGENTS_FILE {path}: not UTF-8 text (byte {exc.start}: {exc.reason})"
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(f"COUNTERSIGN_SUBAGENTS_FILE {path}: not valid TOML: {exc}") from None
    try:
        parsed = _SubagentsFile.model_validate(raw)
    except ValidationError as exc:
        raise ConfigurationError(f"COUNTERSIGN_SUBAGENTS_FILE {path}: {_first_problem(exc, raw)}") from None
    specs = tuple(
        SubagentSpec(
            name=entry.name,
            description=entry.description.strip(),
            prompt=entry.prompt.strip(),
            tools=tuple(entry.tools),
            model=entry.model,
            step_limit=entry.step_limit,
        )
        for entry in parsed.subagents
    )
    problem = _cross_check(specs, registry)
    if problem is not None:
        raise ConfigurationError(f"COUNTERSIGN_SUBAGENTS_FILE {path}: {problem}")
    return specs


def _cross_check(specs: Sequence[SubagentSpec], registry: ToolRegistry) -> str | None:
    """The first problem that needs more than one entry or the registry to see, or None.

    A tool of a configured MCP server (`<server>__<tool>`), or all of them (`<server>__*`), is
    accepted before the server connects: the servers are checked, not their tools, which
    appear in the subagent while their server is connected (`bot.tools.registry.ToolView`).
    """
    seen: set[str] = set()
    tools = set(registry.names())
    servers = registry.servers()
    for spec in specs:
        if spec.name in seen:
            return f"two subagents are named {spec.name!r}"
        seen.add(spec.name)
        if spec.name in tools:
            return (
                f"subagent {spec.name!r} has the same name as a tool (cards and audit rows could not tell them apart)"
            )
        for tool in spec.tools:
            if tool not in tools and not _of_a_server(tool, servers):
                hint = " (it exists only when SMTP_URL is set)" if tool == "send_email" else ""
                mcp = f"; the MCP servers are: {', '.join(servers)}" if servers else ""
                return (
                    f"subagent {spec.name!r} names unknown tool {tool!r}{hint}; "
                    f"the tools are: {', '.join(registry.names())}{mcp}"
                )
        twice = next((tool for index, tool in enumerate(spec.tools) if tool in spec.tools[:index]), None)
        if twice is not None:
            return f"subagent {spec.name!r} lists tool {twice!r} twice"
    return None


def _of_a_server(tool: str, servers: Collection[str]) -> bool:
    """Whether `tool` is `<server>__<tool>` or `<server>__*` of one of the configured MCP `servers`."""
    server = pattern_server(tool)
    if server is not None:
        return server in servers
    return any(pattern_server(pattern) in servers for pattern in server_patterns(tool))


_KEYS = ", ".join(_SubagentEntry.model_fields)
_TYPES = {
    "string_type": "must be a string",
    "list_type": "must be a list",
    "int_type": "must be a whole number",
    "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number",
}
"""Pydantic error types in words an operator reads (its own messages name Python types)."""


def _first_problem(exc: ValidationError, raw: object) -> str:
    """The first validation error in words, placed by subagent name where one can be read."""
    errors = exc.errors()
    # An unknown key first: `promt = "..."` is a typo of `prompt`, and "prompt is missing"
    # alone would not say which line to fix.
    error = next((e for e in errors if e.get("type") == "extra_forbidden"), errors[0])
    loc = list(error.get("loc", ()))
    kind = str(error.get("type", ""))
    message = str(error["msg"]).removeprefix("Value error, ")
    if loc == ["subagents"]:
        if kind in {"missing", "too_short"}:
            return "no subagents defined; add at least one [[subagents]] table"
        if kind == "list_type":
            return "subagents must be written as [[subagents]] tables (double brackets), one per subagent"
        return f"subagents: {message}"
    if len(loc) < 2 or loc[0] != "subagents" or not isinstance(loc[1], int):
        where = ".".join(str(p) for p in loc)
        if kind == "extra_forbidden" and where == "subagent":
            return "unknown key 'subagent'; the tables are written [[subagents]] (plural)"
        if kind == "extra_forbidden":
            return f"unknown key {where!r}; the file holds only [[subagents]] tables"
        return f"{where}: {message}"
    entries = raw.get("subagents") if isinstance(raw, dict) else None
    entry = entries[loc[1]] if isinstance(entries, list) and loc[1] < len(entries) else None
    name = entry.get("name") if isinstance(entry, dict) else None
    label = f"subagent {name!r}" if isinstance(name, str) and name else f"subagent #{loc[1] + 1}"
    field = " ".join(f"item {p + 1}" if isinstance(p, int) else str(p) for p in loc[2:])
    if not field:
        return f"{label} is not a table of name, description, prompt, ..."
    if kind == "extra_forbidden":
        return f"{label}: unknown key {field!r} (the keys are: {_KEYS})"
    if kind == "missing":
        return f"{label}: {field} is missing"
    if kind == "value_error":
        return f"{label}: {field} {message}"
    if field == "step_limit" and kind in {"greater_than_equal", "less_than_equal"}:
        return f"{label}: step_limit must be from {MIN_STEP_LIMIT} to {MAX_STEP_LIMIT}, not {error.get('input')!r}"
    if kind in _TYPES:
        return f"{label}: {field} {_TYPES[kind]}"
    return f"{label}: {field}: {message}"
