"""Typed in-process events: how an object tells one the composition root builds after it.

Used only where construction has a cycle (docs/decisions/0062-one-composition-root.md): the
publisher is given the `Subscribers` of its event type as a constructor argument; the
composition root (`countersign.wiring`) subscribes the handlers once their objects exist,
before traffic starts. Everything else is handed over as a constructor argument.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

E = TypeVar("E")


class Subscribers(Generic[E]):
    """The handlers of one event type, called in order of subscription, synchronously.

    A handler must return at once (wake a sweeper, spawn a task): it runs inside the
    publisher's call. A handler's exception propagates to the publisher.
    """

    def __init__(self) -> None:
        self._handlers: list[Callable[[E], None]] = []

    def subscribe(self, handler: Callable[[E], None]) -> None:
        """Call `handler` with every event published from now on."""
        self._handlers.append(handler)

    def publish(self, event: E) -> None:
        """Hand `event` to every handler."""
        for handler in self._handlers:
            handler(event)


@dataclass(frozen=True, slots=True)
class ApprovalsExpiring:
    """Pending approvals with an expiry time were stored: the expiry sweep should look again now."""


@dataclass(frozen=True, slots=True)
class QuestionsExpiring:
    """MCP questions with an expiry time were stored (or one is past it): the question expiry should look now."""
