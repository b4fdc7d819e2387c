"""`includeTools` / `excludeTools` in the MCP servers file, and the limit on the tools the model is offered."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path

import mcp_types
import pytest
from langchain_core.tools import StructuredTool

from bot.base.errors import ConfigurationError
from bot.settings import ToolSettings
from bot.tools.mcp.config import HttpServer, StdioServer, load_mcp_config, offered_by_file
from bot.tools.mcp.info import tool_info
from bot.tools.operator import build_registry
from bot.tools.registry import AbsentTool, ToolRegistry, ToolSpec
from tests.support.tools import ToolLog, make_test_registry


def write(tmp_path: Path, content: object) -> Path:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(content))
    return path


def entry_of(tmp_path: Path, entry: dict[str, object]) -> StdioServer | HttpServer:
    return load_mcp_config(write(tmp_path, {"mcpServers": {"gh": entry}}), {"ONE": "issues"}).servers["gh"]


def test_both_keys_are_read_as_gemini_cli_writes_them(tmp_path: Path) -> None:
    """`includeTools` and `excludeTools` are lists of the server's own tool names, `${NAME}` replaced."""
    stdio = entry_of(tmp_path, {"command": "x", "includeTools": ["a", "${ONE}"], "excludeTools": ["b"]})
    http = entry_of(tmp_path, {"url": "https://h/mcp", "excludeTools": []})
    assert stdio.includeTools == ["a", "issues"] and stdio.excludeTools == ["b"]
    assert http.includeTools is None and http.excludeTools == []


@pytest.mark.parametrize(
    ("entry", "offered"),
    [
        ({}, {"a", "b", "c"}),
        ({"includeTools": ["a", "b"]}, {"a", "b"}),
        ({"excludeTools": ["a"]}, {"b", "c"}),
        ({"includeTools": ["a", "b"], "excludeTools": ["b"]}, {"a"}),
        ({"includeTools": []}, set()),
    ],
    ids=["neither", "include", "exclude", "exclude-wins", "empty-include"],
)
def test_exclude_wins_and_include_keeps_only_its_names(tmp_path: Path, entry: dict[str, object], offered: set[str]):
    """Gemini CLI's rule: excluded never, included only (when given), else every tool."""
    server = entry_of(tmp_path, {"command": "x", **entry})
    assert {name for name in ("a", "b", "c") if offered_by_file(server, name)} == offered


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        (
            {"includeTools": "create_issue"},
            "server 'gh': includeTools: must be a list of the server's tool names as it lists them, "
            'e.g. ["create_issue"]',
        ),
        ({"excludeTools": ["a", 7]}, "server 'gh': excludeTools: must be a list of the server's tool names"),
        ({"includeTools": None}, "server 'gh': includeTools: must be a list of the server's tool names"),
        ({"excludeTools": {"a": True}}, "server 'gh': excludeTools: must be a list of the server's tool names"),
        (
            {"includeTools": ["a", " "]},
            "server 'gh': includeTools: its name #2 is empty; write the server's tool names as it lists them",
        ),
        ({"include_tools": ["a"]}, "server 'gh': include_tools: unknown key; a stdio server's entry may have: "),
        ({"includetools": ["a"]}, "cwd, includeTools, excludeTools, timeout"),
    ],
    ids=["string", "number-in-list", "null", "object", "blank-name", "snake-case", "wrong-case"],
)
def test_a_bad_filter_is_refused_in_words(tmp_path: Path, entry: dict[str, object], expected: str) -> None:
    """A filter that is not a list of non-empty names, or a misspelt key, stops the start with one line."""
    with pytest.raises(ConfigurationError) as refused:
        entry_of(tmp_path, {"command": "x", **entry})
    message = str(refused.value)
    assert expected in message and "\n" not in message and "Input should" not in message


# The limit --------------------------------------------------------------------------------------


async def _never(**_: object) -> str:
    raise AssertionError("only offered")


def mcp_spec(server: str, tool: str) -> ToolSpec:
    """A tool of MCP server `server` as `McpServers` offers it."""
    schema = {"type": "object", "properties": {}}
    info = tool_info(server, mcp_types.Tool(name=tool, inputSchema=schema))
    tool_ = StructuredTool(name=f"{server}__{tool}", description="t", args_schema=schema, coroutine=_never)
    return ToolSpec(tool=tool_, mcp=info)


class Source:
    """A `ToolSource` whose tools the test sets."""

    def __init__(self, specs: Sequence[ToolSpec]) -> None:
        self._specs = list(specs)
        self.version = 0

    def set(self, specs: Sequence[ToolSpec]) -> None:
        self._specs = list(specs)
        self.version += 1

    def specs(self) -> Sequence[ToolSpec]:
        return self._specs

    def absent(self, name: str) -> AbsentTool | None:
        return None

    def servers(self) -> dict[str, bool]:
        return {}


def test_over_the_limit_mcp_tools_are_left_out_in_order_with_one_warning_per_change(caplog) -> None:
    """Fixed tools first, then servers in order, each in its order; the rest left out, absent with why, warned once."""
    registry = make_test_registry(ToolLog())  # 4 fixed tools
    registry.max_tools = 7
    source = Source([mcp_spec("a", "one"), mcp_spec("a", "two"), mcp_spec("b", "one"), mcp_spec("b", "two")])
    registry.add_source(source)
    with caplog.at_level(logging.WARNING):
        assert registry.names()[4:] == ["a__one", "a__two", "b__one"]
        assert registry.names()[4:] == ["a__one", "a__two", "b__one"]
    assert registry.over_limit() == {"b": ("b__two",)}
    absent = registry.absent("b__two")
    assert absent is not None and "at most 7 tools (COUNTERSIGN_MAX_TOOLS)" in absent.reason
    assert registry.known("b__two") is not None and registry.get("b__two") is None
    assert [record.getMessage() for record in caplog.records] == [
        "MCP server b: 1 of its tools are left out, over the model's limit of 7 tools (COUNTERSIGN_MAX_TOOLS); "
        "offer fewer with includeTools/excludeTools in its entry"
    ]
    caplog.clear()
    source.set([mcp_spec("a", "one"), mcp_spec("a", "two"), mcp_spec("a", "three"), mcp_spec("b", "one")])
    with caplog.at_level(logging.WARNING):
        assert registry.names()[4:] == ["a__one", "a__two", "a__three"]
    assert registry.over_limit() == {"b": ("b__one",)}
    assert caplog.records == []  # still one of b's: no change to say
    view = registry.view(["b__one", "a__*"])
    assert list(view) == ["a__one", "a__two", "a__three"]
    assert view.absent("b__one") is not None


def test_the_start_refuses_a_limit_the_fixed_tools_alone_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """`COUNTERSIGN_MAX_TOOLS` below the built-in tools' number stops the start in one line; the default is 512."""
    assert ToolSettings().max_tools == 512 and build_registry(ToolSettings(), None).max_tools == 512
    monkeypatch.setenv("COUNTERSIGN_MAX_TOOLS", "1")
    with pytest.raises(ConfigurationError, match=r"COUNTERSIGN_MAX_TOOLS is 1, but the built-in and operator tools"):
        build_registry(ToolSettings(), None)


def test_a_registry_is_bounded_by_default() -> None:
    """A registry built without a limit still offers at most Gemini's 512 tools."""
    registry = ToolRegistry()
    registry.add_source(Source([mcp_spec("big", f"t{index}") for index in range(600)]))
    assert len(registry.tools()) == 512 and len(registry.over_limit()["big"]) == 88
