"""Turning SIGTERM and Ctrl-C into a cancellation the process can clean up after.

Python's default action for SIGTERM ends the process on the spot: no `finally`, no exit
handlers. A process that started the embedded PostgreSQL (a daemon outside its process group)
must never die like that, or the server outlives it; so every command that may start one
handles the signals for as long as its event loop runs (DESIGN.md "Lifecycle").
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable


def cancel_on_signals(*signals: signal.Signals, first: Callable[[signal.Signals], bool] | None = None) -> asyncio.Event:
    """Cancel the current task on any of `signals`; the returned event says one arrived.

    The handlers stay until the command's event loop closes (`countersign.event_loop.run`), so a
    signal during clean-up cancels nothing twice: the task is cancelled once, and the
    clean-up it runs (closing pools, stopping the embedded server) goes on.

    Args:
        signals: the signals that cancel.
        first: asked first about each signal, also after one cancelled; when it answers True,
            the signal was taken for something else and cancels nothing (`countersign chat`:
            Ctrl-C while the bot works stops its turn instead, and a signal while it waits for
            the turn in progress at shutdown ends that wait).
    """
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    arrived = asyncio.Event()

    def cancel(sig: signal.Signals) -> None:
        if first is not None and first(sig):
            return
        if arrived.is_set():
            return
        arrived.set()
        if task is not None:
            task.cancel()

    for sig in signals:
        loop.add_signal_handler(sig, cancel, sig)
    return arrived
