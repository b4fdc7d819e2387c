"""The terminal adapter: the same core in a terminal, approvals as prompts."""

from adapters.console.chat import ConsoleChat
from adapters.console.platform import ConsolePlatform

__all__ = ["ConsoleChat", "ConsolePlatform"]
