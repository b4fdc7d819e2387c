"""A gate a stand-in's request can be held at: a moment to crash a replica at."""

from __future__ import annotations

import asyncio


class Gate:
    """Holds the next request that passes it (once armed) until `release`.

    A test arms the gate, waits until a request `arrived`, kills the process that sent it, and
    checks what the next process makes of it. A released or disarmed gate lets everything by.
    """

    def __init__(self) -> None:
        self._armed = False
        self.arrived = asyncio.Event()
        self._released = asyncio.Event()

    def arm(self) -> None:
        """Hold the next request."""
        self._armed = True
        self.arrived.clear()
        self._released.clear()

    def release(self) -> None:
        """Let the held request (and every later one) go on."""
        self._armed = False
        self._released.set()

    async def wait_arrived(self, timeout: float = 60.0) -> None:
        """Wait until a request is held here."""
        await asyncio.wait_for(self.arrived.wait(), timeout)

    async def passing(self) -> None:
        """Called by the stand-in for each request: holds it when the gate is armed."""
        if not self._armed:
            return
        self._armed = False
        self.arrived.set()
        await self._released.wait()
