"""The fault matrix runs (a short version) and prints zero for the five counts that must be zero."""

from __future__ import annotations

import asyncio
import sys

import pytest

from bench.faults import MUST_BE_ZERO

pytestmark = pytest.mark.e2e


@pytest.mark.timeout(480)
async def test_a_short_fault_matrix_prints_zeros():
    """Six conversations, every kind of fault once (kill -9, PostgreSQL restart, model and Slack errors)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.faults",
        "--conversations",
        "6",
        "--concurrency",
        "3",
        "--faults-every",
        "2.5",
        "--seed",
        "9",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await asyncio.wait_for(process.communicate(), timeout=420)
    text = output.decode()
    assert process.returncode == 0, text[-4000:]
    for name in MUST_BE_ZERO:
        [line] = [line for line in text.splitlines() if line.strip().startswith(name)]
        assert line.split()[len(name.split())] == "0", line
    for fault in ("kill", "postgres"):
        assert f"{fault} " in text.split("Faults injected:")[1].splitlines()[0], text[-2000:]
