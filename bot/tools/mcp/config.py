"""The MCP servers file (`COUNTERSIGN_MCP_CONFIG`): the `mcpServers` shape every MCP client reads.

```json
{"mcpServers": {
    "github": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer ${GITHUB_TOKEN}"}},
    "notes": {"command": "python", "args": ["notes_server.py"], "env": {"NOTES_DIR": "/srv/notes"}, "timeout": 20}
}}
```

An entry with `command` (and optional `args`, `env`, `cwd`) is a stdio server, one with `url`
(and optional `headers`) a Streamable HTTP server; either may set `timeout`, the seconds one
call of its tools may take (a number), `maxAnswerMB`, the megabytes one answer may have (a
number), and `type`, as other clients write it (`stdio`, or
`http`, `streamable-http`, `streamableHttp`; it must match `command` or `url`), and the tool
filters Gemini CLI's entries use: `includeTools` (only these of the server's tools are offered)
and `excludeTools` (these never are; it wins over `includeTools`), lists of the server's own
tool names (docs/decisions/0051-offering-only-some-mcp-tools.md). `${NAME}` in any
string value is replaced by the variable `NAME` of the bot's environment, else of its `.env`
file (`mcp_environment`), so tokens stay out of the file. Anything else stops the start with one
line (`bot.base.errors.ConfigurationError`) saying every problem of the file at once: a file that
cannot be read or is not JSON, an unknown key (the line lists the keys an entry may have), an
entry with both or neither of `command` and `url`, a `type` that does not match them or is `sse`
(SSE servers are not supported), a `${NAME}` that is not set or is empty, two server keys that
make the same tool-name prefix (`safe_server_name`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Final

from dotenv import dotenv_values
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator

from bot.base.errors import ConfigurationError
from bot.tools.server_wide import SEPARATOR

_REFERENCE = re.compile(r"\$\{([^}]*)\}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")

STDIO_TYPES: Final = frozenset({"stdio"})
"""The `type` values other MCP clients write for a stdio server."""
HTTP_TYPES: Final = frozenset({"http", "streamable-http", "streamableHttp"})
"""The `type` values other MCP clients write for a Streamable HTTP server."""


def mcp_environment(environ: Mapping[str, str], env_file: Path = Path(".env")) -> dict[str, str]:
    """The variables `${NAME}` may name: `env_file`'s, overridden by `environ`'s.

    Read as the bot's settings read theirs (`bot.settings`: pydantic-settings' `.env` handling,
    python-dotenv's parser, the file in the working directory): the real environment wins over
    the file, and a missing file is no error.

    Args:
        environ: the process's environment (`os.environ`).
        env_file: the dotenv file; `.env` in the working directory by default.
    """
    from_file = {name: value for name, value in dotenv_values(env_file).items() if value is not None}
    return {**from_file, **environ}


def safe_server_name(key: str) -> str:
    """The server part of its tools' names: `key` with each character other than a letter, digit, `_` or `-` as `_`.

    The tool the model calls, cards show and `/countersign` commands take is
    `<safe_server_name(key)>__<tool>`.
    """
    return _UNSAFE.sub("_", key)


def registry_name(server_key: str, upstream: str) -> str:
    """The name the model calls, cards show, commands and audit rows take: `<server>__<tool>`.

    The one place MCP tools are named (a fixed interface): the server's key made safe
    (`safe_server_name`), two underscores, then the tool's name as the server lists it.

    Args:
        server_key: the server's key in the file, as written.
        upstream: the tool's name on the server, as it is.
    """
    return f"{safe_server_name(server_key)}{SEPARATOR}{upstream}"


def _tool_names(value: object) -> object:
    """`includeTools` / `excludeTools` as written: a list of non-empty strings, else why not in words."""
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        raise ValueError('must be a list of the server\'s tool names as it lists them, e.g. ["create_issue"]')
    blank = next((place for place, name in enumerate(value, 1) if not name.strip()), None)
    if blank is not None:
        raise ValueError(f"its name #{blank} is empty; write the server's tool names as it lists them")
    return value


ToolNames = Annotated[list[str] | None, BeforeValidator(_tool_names)]
"""A server entry's `includeTools` or `excludeTools`: the server's own tool names (not `<server>__<tool>`)."""


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    timeout: float | None = Field(default=None, gt=0, le=3600, strict=True)
    """Seconds one call of this server's tools may take, a JSON number (`"10"` is refused); None:
    `COUNTERSIGN_MCP_TIMEOUT`."""
    maxAnswerMB: float | None = Field(default=None, gt=0, le=1024, strict=True)  # noqa: N815 (the file's key)
    """Megabytes (10^6 bytes) one answer of this server may have, a JSON number; None:
    `COUNTERSIGN_MCP_MAX_ANSWER_MB`. A larger answer is refused as it arrives, and the call's
    outcome is unknown (docs/decisions/0053-bounded-mcp-answers.md)."""


class StdioServer(_Entry):
    """A server the bot starts as a subprocess and talks to over its stdin and stdout.

    Attributes:
        command: the program (looked up on `PATH`).
        args: its arguments.
        env: its environment variables: the only ones it gets besides what any process needs
            (`HOME`, `LOGNAME`, `PATH`, `SHELL`, `TERM`, `USER`: the MCP SDK's default), so
            the bot's own secrets never reach it.
        cwd: its working directory; a relative one is read from the file's directory. None:
            the bot's working directory.
        includeTools: only these of its tools (its own names) are offered; None: all of them.
        excludeTools: these of its tools are never offered (wins over `includeTools`).
    """

    command: str = Field(min_length=1)
    args: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=dict)
    cwd: Path | None = None
    # Named as the file writes them (Gemini CLI's keys), so the refusal of an unknown key lists them so.
    includeTools: ToolNames = None  # noqa: N815 (the file's key)
    excludeTools: ToolNames = None  # noqa: N815 (the file's key)


class HttpServer(_Entry):
    """A server reached over Streamable HTTP.

    Attributes:
        url: its endpoint (`http://` or `https://`), e.g. `https://example.com/mcp`.
        headers: sent with every request (e.g. `Authorization`).
        includeTools: only these of its tools (its own names) are offered; None: all of them.
        excludeTools: these of its tools are never offered (wins over `includeTools`).
    """

    url: str
    headers: dict[str, str] = Field(default_factory=dict)
    includeTools: ToolNames = None  # noqa: N815 (the file's key)
    excludeTools: ToolNames = None  # noqa: N815 (the file's key)

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not re.match(r"https?://[^/\s]+", value):
            raise ValueError("must be an http:// or https:// URL")
        return value


ServerEntry = StdioServer | HttpServer


def offered_by_file(entry: ServerEntry, tool: str) -> bool:
    """Whether the file lets the server's tool `tool` (its own name) be offered: not excluded, and included if listed.

    Gemini CLI's rule: `excludeTools` wins; without `includeTools` every tool not excluded is
    offered (an empty `includeTools` offers none).
    """
    if entry.excludeTools is not None and tool in entry.excludeTools:
        return False
    return entry.includeTools is None or tool in entry.includeTools


class McpConfig(BaseModel):
    """The servers of the file, by their key, in the file's order.

    Attributes:
        servers: key → entry.
        source: the file it was read from (for messages).
    """

    model_config = ConfigDict(frozen=True)

    servers: dict[str, ServerEntry]
    source: Path


def load_mcp_config(path: Path, environ: Mapping[str, str]) -> McpConfig:
    """Read and check the MCP servers file.

    Args:
        path: the file (`COUNTERSIGN_MCP_CONFIG`).
        environ: the variables `${NAME}` may name (`mcp_environment`: the bot's environment over
            its `.env` file).

    Raises:
        ConfigurationError: one line naming the file and what is wrong with it (see the module
            docstring): every problem of its servers at once, numbered when there are several.
    """
    where = f"COUNTERSIGN_MCP_CONFIG ({path})"
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigurationError(f"{where} cannot be read: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigurationError(f"{where} is not valid JSON: {exc}") from None
    if isinstance(raw, dict) and "servers" in raw and "mcpServers" not in raw:
        # VS Code's `mcp.json` names them `servers` (beside `inputs`, prompts the bot cannot ask).
        raise ConfigurationError(
            f'{where} has "servers" (VS Code\'s shape): name that object "mcpServers", without "inputs"'
        )
    if not isinstance(raw, dict) or set(raw) != {"mcpServers"} or not isinstance(raw["mcpServers"], dict):
        raise ConfigurationError(f'{where} must be a JSON object with one key, "mcpServers", an object of servers')
    servers: dict[str, ServerEntry] = {}
    prefixes: dict[str, str] = {}
    problems: list[str] = []
    for key, entry in raw["mcpServers"].items():
        safe = safe_server_name(key)
        if not key:
            problems.append("a server's key must not be empty")
            continue
        if safe in prefixes:
            problems.append(f"servers {prefixes[safe]!r} and {key!r} both make tool names {safe}__…; rename one")
            continue
        if SEPARATOR in safe or safe.endswith("_"):
            # The first "__" of a tool's name must be where its server's name ends: with "gh"
            # and "gh__admin" (or "gh_"), one server's tool could take another's name, and a
            # rule for `gh__*` would reach the other server's tools.
            problems.append(
                f"server {key!r} makes tool names {safe}__…: a server's name may not contain '__' or end with '_'; "
                "rename it"
            )
            continue
        prefixes[safe] = key
        unset: dict[str, str] = {}
        substituted = _substituted(key, entry, environ, unset)
        if unset:
            # Checked no further: a value still holding `${NAME}` would only add confusing problems.
            problems.extend(unset.values())
            continue
        try:
            servers[key] = _entry(key, substituted, path.parent)
        except _EntryError as exc:
            problems.extend(exc.problems)
    if problems:
        raise ConfigurationError(said_at_once(where, problems))
    return McpConfig(servers=servers, source=path)


def said_at_once(where: str, problems: Sequence[str]) -> str:
    """Every problem of a file in one line: `<where>: <problem>`, or `<where> has 3 problems: (1) ...; (2) ...`.

    One line, as every start failure is said (docs/decisions/0040-start-failures-said-once.md),
    so that a user fixes the file once, not once per restart.

    Args:
        where: the file, e.g. "COUNTERSIGN_MCP_CONFIG (/etc/mcp.json)".
        problems: at least one, each a clause without a final period.
    """
    if len(problems) == 1:
        return f"{where}: {problems[0]}"
    listed = "; ".join(f"({number}) {problem}" for number, problem in enumerate(problems, start=1))
    return f"{where} has {len(problems)} problems: {listed}"


class _EntryError(Exception):
    """One server's entry cannot be used: every problem found, each a clause naming the server."""

    def __init__(self, *problems: str) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def _entry(key: str, entry: Any, base: Path) -> ServerEntry:
    """One server's entry, checked; raises `_EntryError` naming the server and its problems."""
    if not isinstance(entry, dict):
        raise _EntryError(f"server {key!r} must be an object")
    if "command" in entry and "url" in entry:
        raise _EntryError(f"server {key!r} has both `command` and `url`: use one")
    kind = entry.get("type")
    if kind == "sse":
        raise _EntryError(
            f"server {key!r}: type `sse`: SSE servers are not supported (Streamable HTTP only, with `url`)"
        )
    if kind is not None and kind not in STDIO_TYPES | HTTP_TYPES:
        raise _EntryError(f"server {key!r}: type {kind!r} is not one of stdio, http, streamable-http, streamableHttp")
    if "command" not in entry and "url" not in entry:
        raise _EntryError(f"server {key!r} needs either `command` (a stdio server) or `url` (a Streamable HTTP server)")
    model: type[StdioServer] | type[HttpServer] = StdioServer if "command" in entry else HttpServer
    if kind is not None and (kind in STDIO_TYPES) != (model is StdioServer):
        has = "`command`" if model is StdioServer else "`url`"
        raise _EntryError(
            f"server {key!r}: type {kind!r} does not match its {has}"
            f" (`stdio` goes with `command`; `http`, `streamable-http`, `streamableHttp` with `url`)"
        )
    fields = {name: value for name, value in entry.items() if name != "type"}
    try:
        checked = model.model_validate(fields)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            field = ".".join(str(p) for p in error.get("loc", ())) or "entry"
            if error["type"] == "extra_forbidden":
                shared = list(_Entry.model_fields)  # said last: they are the same for every entry
                allowed = ", ".join(["type", *(name for name in model.model_fields if name not in shared), *shared])
                what = "a stdio server's" if model is StdioServer else "a Streamable HTTP server's"
                problems.append(f"server {key!r}: {field}: unknown key; {what} entry may have: {allowed}")
            else:
                problems.append(f"server {key!r}: {field}: {error['msg'].removeprefix('Value error, ')}")
        raise _EntryError(*problems) from None
    if isinstance(checked, StdioServer) and checked.cwd is not None and not checked.cwd.is_absolute():
        checked = checked.model_copy(update={"cwd": base / checked.cwd})
    return checked


def _substituted(key: str, value: Any, environ: Mapping[str, str], unset: dict[str, str]) -> Any:
    """`value` with every `${NAME}` in its strings replaced from `environ` (keys are left as written).

    A `${NAME}` that is not a name, or whose variable is not set or is empty (a token left blank
    is no token), is left as written and its problem added to `unset` (by name, once each).
    """
    if isinstance(value, str):

        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if not _ENV_NAME.fullmatch(name):
                unset.setdefault(name, f"server {key!r}: ${{{name}}} is not a variable name")
            elif name not in environ:
                unset.setdefault(
                    name, f"server {key!r} uses ${{{name}}}, which is not set (set it in the environment or .env)"
                )
            elif not environ[name].strip():
                unset.setdefault(
                    name, f"server {key!r} uses ${{{name}}}, which is empty (set it in the environment or .env)"
                )
            else:
                return environ[name]
            return match.group(0)

        return _REFERENCE.sub(replace, value)
    if isinstance(value, list):
        return [_substituted(key, item, environ, unset) for item in value]
    if isinstance(value, dict):
        return {name: _substituted(key, item, environ, unset) for name, item in value.items()}
    return value
