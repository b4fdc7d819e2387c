"""The MCP servers file: its shape, `${NAME}`, tool names, and every refusal that stops the start."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langchain_core.tools import tool

from bot.base.errors import ConfigurationError
from bot.settings import ToolSettings
from bot.tools.builtin import builtin_tools
from bot.tools.mcp.config import HttpServer, StdioServer, load_mcp_config, mcp_environment, registry_name
from bot.tools.mcp.servers import McpServers
from bot.tools.mcp.tools import name_problem
from bot.tools.registry import ToolRegistry, ToolSpec
from countersign.cli import main
from countersign.runtime import mcp_servers


@tool
def calc__add(a: int) -> int:
    """An operator tool whose name an MCP server `calc` would make."""
    return a


def write(tmp_path: Path, content: object) -> Path:
    path = tmp_path / "mcp.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


def test_stdio_and_http_entries_are_read_with_env_references(tmp_path: Path) -> None:
    """`command` makes a stdio server, `url` an HTTP one; `${NAME}` is replaced from the environment."""
    path = write(
        tmp_path,
        {
            "mcpServers": {
                "notes": {
                    "command": "python",
                    "args": ["-m", "srv", "${MODE}"],
                    "env": {"T": "${TOKEN}"},
                    "cwd": "sub",
                },
                "git.hub": {
                    "url": "https://example.com/mcp",
                    "headers": {"Authorization": "Bearer ${TOKEN}"},
                    "timeout": 5,
                },
            }
        },
    )
    config = load_mcp_config(path, {"TOKEN": "s3cret", "MODE": "fast"})
    notes, github = config.servers["notes"], config.servers["git.hub"]
    assert isinstance(notes, StdioServer) and isinstance(github, HttpServer)
    assert notes.args == ("-m", "srv", "fast") and notes.env == {"T": "s3cret"} and notes.cwd == tmp_path / "sub"
    assert github.headers == {"Authorization": "Bearer s3cret"} and github.timeout == 5
    assert list(config.servers) == ["notes", "git.hub"]


@pytest.mark.parametrize(
    ("content", "env", "expected"),
    [
        ("{not json", {}, "is not valid JSON"),
        ({"mcp": {}}, {}, 'one key, "mcpServers"'),
        ({"mcpServers": {"a": {"command": "x", "tools": ["y"]}}}, {}, "server 'a': tools: unknown key"),
        ({"mcpServers": {"a": {"url": "https://h/mcp", "env": {}}}}, {}, "server 'a': env: unknown key"),
        ({"mcpServers": {"a": {"args": ["x"]}}}, {}, "server 'a' needs either `command`"),
        (
            {"mcpServers": {"a": {"command": "x", "url": "https://h"}}},
            {},
            "server 'a' has both `command` and `url`: use one",
        ),
        (
            {"mcpServers": {"a": {"command": "x", "timeout": "10"}}},
            {},
            "server 'a': timeout: Input should be a valid number",
        ),
        (
            {"mcpServers": {"a": {"command": "x", "autoApprove": ["y"]}}},
            {},
            "server 'a': autoApprove: unknown key; a stdio server's entry may have: type, command, args, env, cwd, "
            "includeTools, excludeTools, timeout, maxAnswerMB",
        ),
        (
            {"mcpServers": {"a": {"url": "https://h/mcp", "env": {}}}},
            {},
            "a Streamable HTTP server's entry may have: type, url, headers, includeTools, excludeTools, timeout, maxAnswerMB",
        ),
        (
            {"mcpServers": {"a": {"type": "sse", "url": "https://h/sse"}}},
            {},
            "server 'a': type `sse`: SSE servers are not supported (Streamable HTTP only",
        ),
        (
            {"mcpServers": {"a": {"type": "http", "command": "x"}}},
            {},
            "server 'a': type 'http' does not match its `command`",
        ),
        (
            {"mcpServers": {"a": {"type": "stdio", "url": "https://h"}}},
            {},
            "server 'a': type 'stdio' does not match its `url`",
        ),
        (
            {"mcpServers": {"a": {"type": "ws", "url": "https://h"}}},
            {},
            "server 'a': type 'ws' is not one of stdio, http",
        ),
        (
            {"servers": {"a": {"command": "x"}}, "inputs": []},
            {},
            'has "servers" (VS Code\'s shape): name that object "mcpServers"',
        ),
        ({"mcpServers": {"a": {"url": "ftp://h"}}}, {}, "server 'a': url: must be an http:// or https:// URL"),
        ({"mcpServers": {"a": {"command": "x", "timeout": 0}}}, {}, "server 'a': timeout:"),
        (
            {"mcpServers": {"a": {"command": "x", "env": {"K": "${MISSING_TOKEN}"}}}},
            {},
            "${MISSING_TOKEN}, which is not set (set it in the environment or .env)",
        ),
        ({"mcpServers": {"a.b": {"command": "x"}, "a_b": {"command": "y"}}}, {}, "servers 'a.b' and 'a_b' both make"),
        ({"mcpServers": {"a": "python"}}, {}, "server 'a' must be an object"),
        ({"mcpServers": {"gh": {"command": "x"}, "gh__admin": {"command": "y"}}}, {}, "may not contain '__'"),
        ({"mcpServers": {"gh.": {"command": "x"}}}, {}, "server 'gh.' makes tool names gh___…"),
    ],
)
def test_a_bad_file_is_refused_in_one_line(tmp_path: Path, content: object, env: dict[str, str], expected: str) -> None:
    """Each problem of the file is one line naming the file and what is wrong."""
    with pytest.raises(ConfigurationError) as refused:
        load_mcp_config(write(tmp_path, content), env)
    message = str(refused.value)
    assert expected in message and message.startswith("COUNTERSIGN_MCP_CONFIG (") and "\n" not in message


@pytest.mark.parametrize("kind", ["stdio", "http", "streamable-http", "streamableHttp"])
def test_the_type_key_other_clients_write_is_accepted(tmp_path: Path, kind: str) -> None:
    """`type` as Claude Code, Cursor and VS Code write it is read when it matches `command` or `url`."""
    entry = {"type": kind, "command": "python"} if kind == "stdio" else {"type": kind, "url": "https://h/mcp"}
    server = load_mcp_config(write(tmp_path, {"mcpServers": {"a": entry}}), {}).servers["a"]
    assert isinstance(server, StdioServer if kind == "stdio" else HttpServer)


def test_references_are_read_from_dotenv_and_the_environment_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`${NAME}` takes `.env`'s value in the working directory, as the settings do; the real environment wins."""
    (tmp_path / ".env").write_text("GH_A=from-dotenv\nGH_B=from-dotenv\n")
    monkeypatch.chdir(tmp_path)
    path = write(
        tmp_path, {"mcpServers": {"gh": {"url": "https://h/mcp", "headers": {"A": "${GH_A}", "B": "${GH_B}"}}}}
    )
    entry = load_mcp_config(path, mcp_environment({"GH_B": "from-environment"})).servers["gh"]
    assert isinstance(entry, HttpServer) and entry.headers == {"A": "from-dotenv", "B": "from-environment"}
    # The start reads it so too: a variable only `.env` sets is no reason to stop.
    monkeypatch.delenv("GH_A", raising=False)
    monkeypatch.delenv("GH_B", raising=False)
    monkeypatch.setenv("COUNTERSIGN_MCP_CONFIG", str(path))
    assert mcp_servers(ToolSettings(), ToolRegistry(builtin_tools(ToolSettings()))) is not None


def test_a_missing_file_is_refused(tmp_path: Path) -> None:
    """A path that names no file is said so."""
    with pytest.raises(ConfigurationError, match="cannot be read"):
        load_mcp_config(tmp_path / "nope.json", {})


def test_a_server_making_a_builtin_tool_name_stops_the_start(tmp_path: Path) -> None:
    """A server key whose prefix is a built-in or operator tool's name is refused, naming both."""
    registry = ToolRegistry(builtin_tools(ToolSettings()))
    registry.register(ToolSpec(tool=calc__add))
    config = load_mcp_config(write(tmp_path, {"mcpServers": {"calc": {"command": "x"}}}), {})
    with pytest.raises(ConfigurationError, match=r"server 'calc' makes tool names calc__…, like the tool 'calc__add'"):
        McpServers(config, fixed_names=registry.names(), default_timeout_s=10)


def test_names_are_server_then_tool_and_bad_ones_are_named() -> None:
    """`<server>__<tool>` with the key made safe; over 64 characters or a character Gemini refuses is a problem."""
    assert registry_name("my server.v2", "create_issue") == "my_server_v2__create_issue"
    assert name_problem("srv__" + "x" * 59) is None
    assert "over Gemini's 64" in (name_problem("srv__" + "x" * 60) or "")
    assert "characters Gemini refuses" in (name_problem("srv__do it") or "")


def test_countersign_run_stops_with_one_line_for_a_bad_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`countersign run` with a file naming an unset variable exits 2 with one line, before anything starts."""
    path = write(tmp_path, {"mcpServers": {"gh": {"url": "https://h/mcp", "headers": {"A": "${GH_TOKEN_UNSET}"}}}})
    monkeypatch.delenv("GH_TOKEN_UNSET", raising=False)
    monkeypatch.setenv("GOOGLE_API_KEY", "k")
    monkeypatch.setenv("COUNTERSIGN_MCP_CONFIG", str(path))
    monkeypatch.setenv("COUNTERSIGN_WORKERS", "1")
    assert main(["run"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"countersign: COUNTERSIGN_MCP_CONFIG ({path}): server 'gh' uses ${{GH_TOKEN_UNSET}}, which is not set "
        "(set it in the environment or .env)"
    ]


def test_every_problem_of_the_file_is_said_at_once_in_one_line(tmp_path: Path) -> None:
    """Problems in several servers (and several in one) are all said, numbered, in one line: one fix, one restart."""
    path = write(
        tmp_path,
        {
            "mcpServers": {
                "a": {"command": "x", "tools": ["y"], "timeout": "10"},
                "b": {"args": ["x"]},
                "c": {"url": "https://h/mcp", "headers": {"A": "${C_TOKEN_UNSET}", "B": "${C_OTHER_UNSET}"}},
                "fine": {"command": "python"},
                "c.": {"command": "y"},
            }
        },
    )
    with pytest.raises(ConfigurationError) as refused:
        load_mcp_config(path, {})
    message = str(refused.value)
    assert "\n" not in message
    assert message == (
        f"COUNTERSIGN_MCP_CONFIG ({path}) has 6 problems: "
        "(1) server 'a': timeout: Input should be a valid number; "
        "(2) server 'a': tools: unknown key; a stdio server's entry may have: type, command, args, env, cwd, "
        "includeTools, excludeTools, timeout, maxAnswerMB; "
        "(3) server 'b' needs either `command` (a stdio server) or `url` (a Streamable HTTP server); "
        "(4) server 'c' uses ${C_TOKEN_UNSET}, which is not set (set it in the environment or .env); "
        "(5) server 'c' uses ${C_OTHER_UNSET}, which is not set (set it in the environment or .env); "
        "(6) server 'c.' makes tool names c___…: a server's name may not contain '__' or end with '_'; rename it"
    )


@pytest.mark.parametrize("value", ["", "   "])
def test_an_empty_variable_is_refused_like_an_unset_one(tmp_path: Path, value: str) -> None:
    """`${NAME}` whose variable is set but empty (or blank) stops the start, naming it; it is never sent as ""."""
    path = write(tmp_path, {"mcpServers": {"gh": {"url": "https://h/mcp", "headers": {"A": "Bearer ${GH_TOKEN}"}}}})
    with pytest.raises(ConfigurationError) as refused:
        load_mcp_config(path, {"GH_TOKEN": value})
    assert str(refused.value) == (
        f"COUNTERSIGN_MCP_CONFIG ({path}): server 'gh' uses ${{GH_TOKEN}}, which is empty "
        "(set it in the environment or .env)"
    )


def test_every_server_making_a_builtin_tool_name_is_named_at_once(tmp_path: Path) -> None:
    """Two servers whose prefixes are tools' names already: one line naming both."""
    registry = ToolRegistry(builtin_tools(ToolSettings()))
    registry.register(ToolSpec(tool=calc__add))
    config = load_mcp_config(write(tmp_path, {"mcpServers": {"calc": {"command": "x"}, "http": {"command": "y"}}}), {})
    with pytest.raises(ConfigurationError) as refused:
        McpServers(config, fixed_names=[*registry.names(), "http__get"], default_timeout_s=10)
    message = str(refused.value)
    assert message.startswith(f"COUNTERSIGN_MCP_CONFIG ({config.source}) has 2 problems: (1) server 'calc' makes")
    assert "(2) server 'http' makes tool names http__…, like the tool 'http__get'" in message
