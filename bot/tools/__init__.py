"""Built-in tools and the tool registry."""

from bot.tools.builtin import builtin_tools
from bot.tools.operator import build_registry, load_operator_tools
from bot.tools.registry import ToolRegistry, ToolSpec

__all__ = ["ToolRegistry", "ToolSpec", "build_registry", "builtin_tools", "load_operator_tools"]
