"""`AckBoard` and `AfterAck` across workers: work waits until no worker of the machine owes an ack (decision 0032)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from adapters.slack.ack_board import SLOT, STALE_S, AckBoard
from adapters.slack.after_ack import AfterAck
from bot.tasks import TaskTracker

WAIT_S = 30.0


@pytest.fixture
def board_file(tmp_path: Path) -> Path:
    path = tmp_path / "ack-board"
    AckBoard.create(path, 2)
    return path


def write_slot(path: Path, index: int, in_hand: int, changed: float) -> None:
    data = bytearray(path.read_bytes())
    SLOT.pack_into(data, index * SLOT.size, in_hand, changed)
    path.write_bytes(bytes(data))


async def test_work_waits_while_another_worker_has_a_request_in_hand(board_file: Path) -> None:
    mine, sibling = AckBoard.open(board_file, 0), AckBoard.open(board_file, 1)
    tasks = TaskTracker()
    after_ack = AfterAck(tasks, quiet_s=0.01, max_defer_s=60, board=mine)
    order: list[str] = []
    ran = asyncio.Event()

    async def work() -> None:
        order.append("work")
        ran.set()

    sibling.publish(1)  # the other worker is handling a click
    with after_ack.acking():
        after_ack.run(work(), "Approve")
    for _ in range(10):  # ten quiet periods: time enough for the work to start if it would
        await asyncio.sleep(0.01)
    order.append("sibling acked")
    sibling.publish(0)
    await asyncio.wait_for(ran.wait(), WAIT_S)
    assert order == ["sibling acked", "work"]
    mine.close()
    sibling.close()


async def test_each_worker_says_what_it_has_in_hand(board_file: Path) -> None:
    mine, sibling = AckBoard.open(board_file, 0), AckBoard.open(board_file, 1)
    after_ack = AfterAck(TaskTracker(), quiet_s=0.01, max_defer_s=60, board=mine)

    with after_ack.acking():
        with after_ack.acking():
            busy, _ = sibling.others()
            assert busy
        assert sibling.others()[0]
    busy, changed = sibling.others()
    assert not busy
    assert changed <= time.monotonic()
    mine.close()
    sibling.close()


async def test_a_slot_unchanged_for_long_does_not_hold_the_work(board_file: Path) -> None:
    # A worker killed with requests in hand leaves its count behind.
    write_slot(board_file, 1, 3, time.monotonic() - STALE_S - 1)
    mine = AckBoard.open(board_file, 0)
    tasks = TaskTracker()
    after_ack = AfterAck(tasks, quiet_s=0.01, max_defer_s=60, board=mine)
    ran = asyncio.Event()

    async def work() -> None:
        ran.set()

    with after_ack.acking():
        after_ack.run(work(), "Approve")
    await asyncio.wait_for(ran.wait(), WAIT_S)
    mine.close()


def test_a_restarted_worker_clears_the_count_it_left(board_file: Path) -> None:
    write_slot(board_file, 0, 3, time.monotonic())
    sibling = AckBoard.open(board_file, 1)
    assert sibling.others()[0]

    restarted = AckBoard.open(board_file, 0)

    assert not sibling.others()[0]
    restarted.close()
    sibling.close()


def test_a_worker_without_a_slot_is_refused(board_file: Path) -> None:
    with pytest.raises(ValueError, match="no slot 2"):
        AckBoard.open(board_file, 2)
