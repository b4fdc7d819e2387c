"""How long Slack waited for each acknowledgement: `countersign_platform_ack_seconds{platform="slack"}`.

Slack shows the clicker an error when an interaction is not acknowledged within three seconds, and
delivers an unacknowledged event again ("Acknowledge the event", Slack's Events API and
interactivity docs). The time is taken from the moment our handler has the request (HTTP: the
aiohttp handler starts, before the body is read; Socket Mode: the envelope is handed to Bolt) to
the moment the ack is sent; time in the kernel's accept queue is not in it. The kind is one of a
fixed few, never anything the request says in words.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot import metrics

_INTERACTIONS = frozenset(
    {"block_actions", "view_submission", "view_closed", "shortcut", "message_action", "block_suggestion"}
)
_ENVELOPE_KINDS = {"events_api": "event", "interactive": "interaction", "slash_commands": "command"}
"""Socket Mode envelope types (slack_sdk's `SocketModeRequest.type`) by kind."""


def kind_of_payload(payload: Mapping[str, Any]) -> str:
    """`event`, `interaction`, `command` or `other` for a request body as Bolt parsed it."""
    kind = payload.get("type")
    if kind == "event_callback":
        return "event"
    if kind in _INTERACTIONS:
        return "interaction"
    if "command" in payload and "type" not in payload:
        return "command"
    return "other"


def kind_of_envelope(envelope_type: str) -> str:
    """`event`, `interaction`, `command` or `other` for a Socket Mode envelope's type."""
    return _ENVELOPE_KINDS.get(envelope_type, "other")


def record(kind: str, seconds: float) -> None:
    """Count one acknowledgement of `kind` that took `seconds`."""
    metrics.PLATFORM_ACKS.labels(platform="slack", kind=kind).observe(seconds)
