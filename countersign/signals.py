"""Turning SIGTERM and Ctrl-C into a cancellation the process can clean up after.

Python's default action for SIGTERM ends the process on the spot: no `finally`, no exit
handlers. A process that started the embedded PostgreSQL (a daemon outside its process group)
must never die like that, or the server outlives it; so every command that may start one
handles the signals for as long as its event loop runs (DESIGN.md "Lifecycle").
"""

from __future__ import annotations

import asyncio
import signal


def cancel_on_signals(*signals: signal.Signals) -> asyncio.Event:
    """Cancel the current task on any of `signals`; the returned event says one arrived.

    The handlers stay until the command's event loop closes (`countersign.event_loop.run`), so a
    signal during clean-up cancels nothing twice: the task is cancelled once, and the
    clean-up it runs (closing pools, stopping the embedded server) goes on.
    """
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    arrived = asyncio.Event()

    def cancel() -> None:
        if arrived.is_set():
            return
        arrived.set()
        if task is not None:
            task.cancel()

    for sig in signals:
        loop.add_signal_handler(sig, cancel)
    return arrived
