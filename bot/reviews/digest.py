"""A stable digest of tool-call arguments: what an approval is bound to."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

_NUMBER = "\x00n"
"""The key numbers are wrapped under before hashing; no argument can have it (NUL is replaced in
what the model sends and refused in edits, see `bot.agents.history.without_nul`)."""


def args_digest(args: Mapping[str, Any]) -> str:
    """SHA-256 of the arguments as canonical JSON (sorted keys, no spaces, numbers by value), hex.

    Two argument sets with the same digest are the same call for approval purposes; the tool
    runs only when the digest of what it is about to run equals the approved one (docs/decisions/0006).
    Numbers count by their value, whatever their spelling: an integer beyond 64 bits lives in
    the checkpoint as a float (`1.1805916207174113e+21`) but comes back from jsonb as the
    integer `1180591620717411300000`, and `1.0` is `1`; the same call must not look changed
    between the card and the tool.
    """
    canonical = json.dumps(
        _canonical(dict(args)), sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def bound_to_definition(digest: str, definition: str | None) -> str:
    """`digest` bound to an MCP tool's pinned definition digest; `digest` itself for the bot's own tools.

    What a trust grant stores (`bot.reviews.trust.grants.key_digest`): a grant made under one
    definition of a tool then covers no call under another (docs/decisions/0046-mcp-pins-wiring.md).

    Args:
        digest: a hex SHA-256 (`args_digest`).
        definition: `McpToolInfo.digest` of the tool, or None for a tool that is not an MCP tool.
    """
    if definition is None:
        return digest
    return hashlib.sha256(f"{digest}:{definition}".encode()).hexdigest()


def _canonical(value: Any) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            return {_NUMBER: repr(value)}
        number = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
        return {_NUMBER: format(number.normalize(), "f") if abs(number) < 10**30 else str(number.normalize())}
    if isinstance(value, Mapping):
        return {str(key): _canonical(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(item) for item in value]
    return value
