"""The rules of pinned definitions: which listed tools are offered, which are held, what to record.

Pure functions over values (no I/O); `bot.tools.mcp.pins.pinning` runs them against a
`PinStore` (docs/decisions/0043-pinned-mcp-definitions.md).

Per tool a server lists, given what the store holds for that server:

- first sight (the server was never seen): every listed tool is pinned now and offered (trust
  on first use, audited);
- pinned, and listed with the pinned digest: offered (and a stored hold on it is released: the
  server lists what an admin accepted again);
- pinned with another digest (changed, or reappeared changed), or never pinned on a server
  that was seen (a new tool): held. Its calls are refused before anything reaches the server
  (`call_refusal`), and the admins get one message per held definition (`HoldNotice`);
- pinned and not listed: gone, and remembered: a tool that reappears unchanged is offered
  again.

An admin's accept (`plan_accept`) pins the held definitions the admins were shown, and only
those: when the server lists something else by then, the accept is refused.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Final

from bot.agents.prompts import MCP_HELD_CALL, MCP_HELD_TOOL
from bot.tools.mcp.config import safe_server_name
from bot.tools.mcp.pins.definitions import ToolDefinition
from bot.tools.mcp.pins.diff import ChangeKind, DefinitionChange, describe_change

ACCEPT_COMMAND: Final = "/countersign mcp accept {server}"
"""The command that accepts a server's held definitions (fixed interface)."""


class DuplicateToolError(ValueError):
    """A listing names one tool twice: the server's tools cannot be judged (offer none of them).

    Args:
        server: the server's key.
        names: the names listed more than once, sorted.
    """

    def __init__(self, server: str, names: Sequence[str]) -> None:
        super().__init__(f"MCP server {server!r} lists these tools more than once: {', '.join(names)}")
        self.server = server
        self.names = tuple(names)


@dataclass(frozen=True, slots=True, kw_only=True)
class Hold:
    """A held definition as the store keeps it.

    Attributes:
        definition: the definition the server listed that differs from the pin (or has none).
        held_at: when it was first held with this digest.
        noticed: whether the admins' message about this digest was claimed (`PinStore.claim_notice`).
    """

    definition: ToolDefinition
    held_at: datetime
    noticed: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerPins:
    """What the store holds for one server (`PinStore.load`).

    Attributes:
        server: the server's key.
        seen: whether the server's first sight was recorded (even with no tools).
        pins: the pinned definition of each tool, by the tool's listed name.
        holds: the held definition of each held tool, by name (a held tool may be gone).
    """

    server: str
    seen: bool = False
    pins: Mapping[str, ToolDefinition] = field(default_factory=dict)
    holds: Mapping[str, Hold] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class HeldTool:
    """A listed tool whose calls are refused until an admin accepts it.

    Attributes:
        definition: the definition listed now.
        pinned: its pinned definition; None for a new tool.
    """

    definition: ToolDefinition
    pinned: ToolDefinition | None

    @property
    def kind(self) -> ChangeKind:
        """New (never pinned) or changed."""
        return ChangeKind.NEW if self.pinned is None else ChangeKind.CHANGED

    @property
    def change(self) -> DefinitionChange:
        """What differs from the pin, bounded (`describe_change`)."""
        return describe_change(self.pinned, self.definition)


@dataclass(frozen=True, slots=True, kw_only=True)
class HoldNotice:
    """The admins' message about newly held tools of one server: send it once (it was claimed).

    The wording is each adapter's; this carries the facts.

    Attributes:
        server: the server's key.
        changes: each newly held tool and what changed in it (new tools included).
        definitions: each newly held tool's definition as listed now, in the order of `changes`
            (for how its calls will be decided once accepted, `bot.admin.outlook`).
    """

    server: str
    changes: tuple[DefinitionChange, ...]
    definitions: tuple[ToolDefinition, ...] = ()

    @property
    def accept_command(self) -> str:
        """How an admin accepts: `/countersign mcp accept <server>`, the server named as in its tools' names."""
        return accept_command(self.server)


@dataclass(frozen=True, slots=True, kw_only=True)
class Review:
    """The judgement of one listing of one server (`review_listing`).

    Attributes:
        server: the server's key.
        first_sight: the server was never seen: `pin` is to be recorded (`PinStore.record_first_sight`).
        offered: the listed tools the model may call, in listing order.
        held: the listed tools whose calls are refused, in listing order.
        gone: names of pinned tools not listed now (remembered), sorted.
        pin: on first sight, every listed definition; else empty.
        hold: held definitions the store does not hold yet with this digest (to record).
        release: listed definitions equal to their pin whose tool the store still holds (to lift).
        notify: held tools whose admins' message was not claimed yet for this digest.
    """

    server: str
    first_sight: bool
    offered: tuple[ToolDefinition, ...] = ()
    held: tuple[HeldTool, ...] = ()
    gone: tuple[str, ...] = ()
    pin: tuple[ToolDefinition, ...] = ()
    hold: tuple[ToolDefinition, ...] = ()
    release: tuple[ToolDefinition, ...] = ()
    notify: tuple[HeldTool, ...] = ()


def review_listing(state: ServerPins, listed: Sequence[ToolDefinition]) -> Review:
    """Judge what a server lists now against what is pinned (see the module docstring).

    Args:
        state: the server's pins and holds, as loaded now.
        listed: every definition the server lists now (`ToolDefinition.from_listing`).

    Raises:
        DuplicateToolError: the listing names a tool twice.
        ValueError: a definition of another server.
    """
    _check_listing(state.server, listed)
    if not state.seen:
        return Review(server=state.server, first_sight=True, offered=tuple(listed), pin=tuple(listed))
    offered: list[ToolDefinition] = []
    held: list[HeldTool] = []
    hold: list[ToolDefinition] = []
    release: list[ToolDefinition] = []
    notify: list[HeldTool] = []
    for definition in listed:
        pinned = state.pins.get(definition.name)
        stored = state.holds.get(definition.name)
        if pinned is not None and pinned.digest == definition.digest:
            offered.append(definition)
            if stored is not None:
                release.append(definition)
            continue
        tool = HeldTool(definition, pinned)
        held.append(tool)
        if stored is None or stored.definition.digest != definition.digest:
            hold.append(definition)
            notify.append(tool)
        elif not stored.noticed:
            notify.append(tool)  # held before, but its message was never claimed
    names = {definition.name for definition in listed}
    return Review(
        server=state.server,
        first_sight=False,
        offered=tuple(offered),
        held=tuple(held),
        gone=tuple(sorted(set(state.pins) - names)),
        hold=tuple(hold),
        release=tuple(release),
        notify=tuple(notify),
    )


def call_refusal(state: ServerPins, definition: ToolDefinition) -> str | None:
    """Why a call of a tool must not reach its server, for the model; None when it may.

    A call may go only when the tool is pinned with exactly the definition the server lists now
    and no worker or replica holds the tool (the store is the truth: a hold recorded by another
    process refuses here too, before this process lists the change itself).

    Args:
        state: the server's pins and holds, loaded for this call.
        definition: the tool's definition as this process last listed it.
    """
    pinned = state.pins.get(definition.name)
    if pinned is not None and pinned.digest == definition.digest and definition.name not in state.holds:
        return None
    return MCP_HELD_CALL.format(tool=definition.registry_name, accept=accept_command(definition.server))


def accept_command(server: str) -> str:
    """The exact command accepting the held tools of the server `server` (its key): `/countersign mcp accept <name>`.

    The server is named as in its tools' names (`safe_server_name`), as `/countersign mcp` shows it.
    """
    return ACCEPT_COMMAND.format(server=safe_server_name(server))


def held_reason(server: str, name: str) -> str:
    """Why the held tool `name` (`<server>__<tool>`) of the server `server` (its key) is not offered, in words.

    Names the tool as users see it and the exact accept command (`MCP_HELD_TOOL`).
    """
    return MCP_HELD_TOOL.format(tool=name, accept=accept_command(server))


@dataclass(frozen=True, slots=True, kw_only=True)
class AcceptPlan:
    """What an accept pins: the held definitions the admins were shown (`PinStore.accept`).

    Attributes:
        server: the server's key.
        definitions: the held definitions, by tool name order.
        changes: what each changes against its pin, in the same order.
    """

    server: str
    definitions: tuple[ToolDefinition, ...]
    changes: tuple[DefinitionChange, ...]

    @property
    def shown(self) -> dict[str, str]:
        """The digest of each tool's definition the admins were shown, by tool name."""
        return {definition.name: definition.digest for definition in self.definitions}


class AcceptRefusal(StrEnum):
    """Why an accept pins nothing."""

    NOTHING_HELD = "nothing_held"
    """The server has no held tool (or was never seen)."""
    CHANGED_AGAIN = "changed_again"
    """The server lists a definition the admins were not shown (changed again since, or not
    recorded yet); it is held and the admins told (`pinning.accept_server`)."""
    STALE = "stale"
    """The holds changed between reading them and accepting (another worker recorded a change)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AcceptRefused:
    """An accept that pinned nothing, and the tools it is about.

    Attributes:
        server: the server's key.
        reason: why.
        tools: the tools concerned (for CHANGED_AGAIN, those listed unlike what was shown; for
            STALE, those the admin was shown), sorted.
        notice: for CHANGED_AGAIN, the admins' message about the definitions now held, when
            `pinning.accept_server` claimed it: send it like any other.
    """

    server: str
    reason: AcceptRefusal
    tools: tuple[str, ...] = ()
    notice: HoldNotice | None = None


def plan_accept(state: ServerPins, listed: Sequence[ToolDefinition]) -> AcceptPlan | AcceptRefused:
    """What `/countersign mcp accept <server>` pins, given the stored state and the listing now.

    The admins were shown the held definitions (in their message, and by `/countersign mcp`),
    so the accept pins those, a held tool that is gone now included. It is refused when the
    server lists a definition that differs from its pin and is not the held one: the admins
    never saw it.

    Args:
        state: the server's pins and holds, as stored before the command.
        listed: every definition the server lists now.

    Raises:
        DuplicateToolError, ValueError: as `review_listing`.
    """
    _check_listing(state.server, listed)
    if not state.seen:
        return AcceptRefused(server=state.server, reason=AcceptRefusal.NOTHING_HELD)
    unshown = []
    for definition in listed:
        pinned, stored = state.pins.get(definition.name), state.holds.get(definition.name)
        if stored is not None:
            # Held: the server must list the held definition (one it changed again, or back to
            # its pin before a poll released the hold, is not what the admins were shown).
            if stored.definition.digest != definition.digest:
                unshown.append(definition.name)
        elif pinned is None or pinned.digest != definition.digest:
            unshown.append(definition.name)  # differs from its pin, and no poll has held it yet
    if unshown:
        return AcceptRefused(server=state.server, reason=AcceptRefusal.CHANGED_AGAIN, tools=tuple(sorted(unshown)))
    if not state.holds:
        return AcceptRefused(server=state.server, reason=AcceptRefusal.NOTHING_HELD)
    definitions = tuple(state.holds[name].definition for name in sorted(state.holds))
    changes = tuple(describe_change(state.pins.get(d.name), d) for d in definitions)
    return AcceptPlan(server=state.server, definitions=definitions, changes=changes)


def _check_listing(server: str, listed: Sequence[ToolDefinition]) -> None:
    others = sorted({d.server for d in listed if d.server != server})
    if others:
        raise ValueError(f"definitions of {', '.join(others)} in a listing of {server}")
    twice = sorted(name for name, count in Counter(d.name for d in listed).items() if count > 1)
    if twice:
        raise DuplicateToolError(server, twice)
