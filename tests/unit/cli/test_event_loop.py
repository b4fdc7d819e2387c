"""The event loop a `countersign` command runs on, and the heap tuning after start-up."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest
import uvloop

from bot.base.errors import ConfigurationError
from bot.settings import ServerSettings
from countersign import event_loop


async def _loop_name() -> str:
    return event_loop.running_loop_name()


def test_auto_runs_on_uvloop_where_it_is_installed():
    """`auto` (the default) picks uvloop when it can be imported, and the command runs on it."""
    assert ServerSettings().event_loop == "auto"
    assert event_loop.loop_factory("auto") is uvloop.new_event_loop
    assert event_loop.run(_loop_name(), "auto") == "uvloop"


def test_asyncio_runs_on_the_standard_loop():
    """`asyncio` keeps asyncio's own loop."""
    assert event_loop.loop_factory("asyncio") is None
    assert event_loop.run(_loop_name(), "asyncio") == "asyncio"


def test_without_uvloop_auto_falls_back_and_uvloop_is_refused(monkeypatch):
    """Where uvloop is not installed (Windows), `auto` is asyncio's loop and `uvloop` a configuration error."""
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "uvloop" else real(name, *a))
    assert event_loop.loop_factory("auto") is None
    with pytest.raises(ConfigurationError, match="uvloop is not installed"):
        event_loop.loop_factory("uvloop")
    never_run = _loop_name()
    with pytest.raises(ConfigurationError):
        event_loop.run(never_run, "uvloop")
    assert never_run.cr_frame is None  # closed, not left to warn "never awaited"


def test_settle_heap_freezes_start_up_objects_and_raises_the_thresholds():
    """After `settle_heap` the start-up objects are frozen and young collections are rarer (in a fresh process)."""
    code = (
        "import gc; from countersign.event_loop import settle_heap, GC_THRESHOLDS; "
        "before = gc.get_freeze_count(); settle_heap(); "
        "print(before, gc.get_freeze_count() > 10_000, gc.get_threshold() == GC_THRESHOLDS)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()  # noqa: S603 - our own code
    assert out == ["0", "True", "True"]
