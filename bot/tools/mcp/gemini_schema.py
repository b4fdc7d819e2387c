"""The model-facing JSON Schema of an MCP tool (a PLACEHOLDER: a pass-through copy).

This module stands in for the real conversion of real servers' schemas into what Gemini's
function declarations accept, which is written separately; the signature and the exception
are the interface `bot.tools.mcp.tools` relies on.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any


class UnusableSchemaError(Exception):
    """A tool's input schema cannot be offered to the model; the tool is left out.

    Args:
        reason: why, in one clause (it is logged with the tool's name).
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def gemini_parameters(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters schema the model is shown for a tool whose input schema is `schema`.

    Args:
        schema: the tool's `inputSchema` as its server listed it (not modified).

    Returns:
        A new dict (here, a deep copy of `schema`).

    Raises:
        UnusableSchemaError: when no usable schema can be made (never, in this placeholder).
    """
    return copy.deepcopy(dict(schema))
