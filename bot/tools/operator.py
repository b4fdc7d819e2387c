"""Operator tools: a Python module named by `COUNTERSIGN_TOOLS_MODULE` that lists extra tools.

The module defines `TOOLS`, an iterable whose items are `ToolSpec`s (used as they are) or
LangChain `BaseTool`s. A bare tool gets `Mode.REVIEW`: the bot knows nothing about what it does,
so a human looks at every call until an admin says otherwise (fail safe)::

    # my_tools.py, run with COUNTERSIGN_TOOLS_MODULE=my_tools
    from langchain_core.tools import tool
    from bot.base.mode import Mode
    from bot.tools.registry import ToolSpec

    @tool
    async def lookup_order(order_id: str) -> str:
        \"\"\"Look up an order by id.\"\"\"
        ...

    TOOLS = [ToolSpec(tool=lookup_order, default_mode=Mode.AUTO)]

Every problem is a `ConfigurationError` with a one-line message, raised at start-up.
"""

from __future__ import annotations

import importlib
import logging
import re
from collections.abc import Iterable, Mapping
from types import ModuleType
from typing import Final

from langchain_core.tools import BaseTool

from bot.base.errors import ConfigurationError
from bot.base.mode import Mode
from bot.settings import ToolSettings
from bot.tools.builtin import builtin_tools
from bot.tools.registry import ToolRegistry, ToolSpec

log = logging.getLogger(__name__)

# Gemini's rule for function names; a name it rejects would fail every model call.
_TOOL_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_.:-]{0,63}")


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _import(module_name: str) -> ModuleType:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):
            raise ConfigurationError(
                f"tools module {module_name!r} (COUNTERSIGN_TOOLS_MODULE) was not found; check "
                "the name and that its directory is on PYTHONPATH"
            ) from exc
        raise ConfigurationError(
            f"tools module {module_name!r} cannot be imported: it needs {exc.name!r}, which is not installed"
        ) from exc
    except Exception as exc:
        # Anything the module raises at import time (syntax errors, failing top-level code).
        raise ConfigurationError(f"tools module {module_name!r} failed to import: {_one_line(exc)}") from exc


def _as_spec(item: object, index: int, module_name: str) -> ToolSpec:
    where = f"TOOLS[{index}] in tools module {module_name!r}"
    if isinstance(item, ToolSpec):
        if not isinstance(item.tool, BaseTool):
            raise ConfigurationError(
                f"{where} is a ToolSpec whose tool is a {type(item.tool).__name__}, not a LangChain tool"
            )
        spec = item
    elif isinstance(item, BaseTool):
        spec = ToolSpec(tool=item, default_mode=Mode.REVIEW)
    else:
        hint = "; decorate functions with langchain_core.tools.tool" if callable(item) else ""
        raise ConfigurationError(f"{where} is a {type(item).__name__}; expected a ToolSpec or a LangChain tool{hint}")
    if not _TOOL_NAME.fullmatch(spec.name):
        raise ConfigurationError(
            f"{where} has the name {spec.name!r}; tool names must start with a letter or _ and "
            "use only letters, digits, _ . : - (at most 64 characters)"
        )
    return spec


def load_operator_tools(module_name: str) -> list[ToolSpec]:
    """Import `module_name` and return its `TOOLS` as specs.

    Args:
        module_name: dotted module name, e.g. `acme.countersign_tools`.

    Returns:
        One spec per item of `TOOLS`, in order; bare LangChain tools get `Mode.REVIEW`.

    Raises:
        ConfigurationError: the module cannot be imported, has no `TOOLS`, `TOOLS` is not an
            iterable of tools, or an item is neither a `ToolSpec` nor a LangChain tool.
    """
    module = _import(module_name)
    try:
        tools = module.TOOLS
    except AttributeError:
        raise ConfigurationError(
            f"tools module {module_name!r} has no TOOLS; define TOOLS = [...] with ToolSpec items or LangChain tools"
        ) from None
    if isinstance(tools, str | bytes | Mapping | BaseTool | ToolSpec) or not isinstance(tools, Iterable):
        raise ConfigurationError(
            f"TOOLS in tools module {module_name!r} is a {type(tools).__name__}; it must be a "
            "list (or other iterable) of ToolSpec items or LangChain tools"
        )
    specs = [_as_spec(item, index, module_name) for index, item in enumerate(tools)]
    log.info(
        "loaded %d operator tool(s) from %s: %s",
        len(specs),
        module_name,
        ", ".join(f"{spec.name} ({spec.default_mode})" for spec in specs),
    )
    return specs


def build_registry(settings: ToolSettings, tools_module: str | None) -> ToolRegistry:
    """The registry of every tool the agent may call: built-in ones, then the operator's.

    Args:
        settings: the tool section of the settings.
        tools_module: `COUNTERSIGN_TOOLS_MODULE`, or None for built-in tools only.

    Raises:
        ConfigurationError: a built-in tool is misconfigured, the operator module cannot be
            loaded, two tools share a name (an operator tool may not replace a built-in
            one, which would silently drop that tool's review default), or the built-in and
            operator tools alone are more than `COUNTERSIGN_MAX_TOOLS`.
    """
    builtins = builtin_tools(settings)
    registry = ToolRegistry(builtins, max_tools=settings.max_tools)
    if tools_module:
        _register_operator_tools(registry, tools_module, {spec.name for spec in builtins})
    if len(registry) > settings.max_tools:
        raise ConfigurationError(
            f"COUNTERSIGN_MAX_TOOLS is {settings.max_tools}, but the built-in and operator tools alone are "
            f"{len(registry)}; raise it (Gemini takes at most 512) or offer fewer operator tools"
        )
    return registry


def _register_operator_tools(registry: ToolRegistry, tools_module: str, builtin_names: set[str]) -> None:
    """Register the tools of `tools_module` after the built-in ones (see `build_registry` for the refusals)."""
    for spec in load_operator_tools(tools_module):
        if spec.name in builtin_names:
            raise ConfigurationError(
                f"tools module {tools_module!r} defines a tool named {spec.name!r}, which is the "
                "name of a built-in tool; rename it"
            )
        if registry.get(spec.name) is not None:
            raise ConfigurationError(f"tools module {tools_module!r} defines more than one tool named {spec.name!r}")
        registry.register(spec)
