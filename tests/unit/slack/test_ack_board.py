"""`AckBoard` and `AfterAck` across workers: work waits until no worker of the machine owes an ack (decision 0032)."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.slack.ack_board import MAGIC, SLOT, STALE_S, AckBoard
from adapters.slack.after_ack import AfterAck
from bot.settings import Settings
from bot.tasks import TaskTracker
from tests.unit.slack.test_after_ack import one_requests_work_runs

WAIT_S = 30.0


@pytest.fixture
def board_fd() -> Iterator[int]:
    fd = AckBoard.create(2)
    yield fd
    os.close(fd)


def write_slot(fd: int, index: int, in_hand: int, changed: float) -> None:
    os.pwrite(fd, SLOT.pack(in_hand, changed), len(MAGIC) + index * SLOT.size)


async def test_work_waits_while_another_worker_has_a_request_in_hand(board_fd: int) -> None:
    mine, sibling = AckBoard.open(board_fd, 0), AckBoard.open(board_fd, 1)
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
    after_ack.close()
    mine.close()
    sibling.close()


async def test_work_waits_a_quiet_period_after_another_workers_last_ack(board_fd: int) -> None:
    mine, sibling = AckBoard.open(board_fd, 0), AckBoard.open(board_fd, 1)
    quiet_s = 0.3
    after_ack = AfterAck(TaskTracker(), quiet_s=quiet_s, max_defer_s=60, board=mine)
    started: list[float] = []
    ran = asyncio.Event()

    async def work() -> None:
        started.append(time.monotonic())
        ran.set()

    with after_ack.acking():
        after_ack.run(work(), "Approve")
    await asyncio.sleep(quiet_s / 2)  # part of this worker's own quiet period has passed
    sibling.publish(1)
    sibling.publish(0)  # ...when the sibling acks a request of its own
    _, sibling_acked = mine.others()
    await asyncio.wait_for(ran.wait(), WAIT_S)
    assert started[0] >= sibling_acked + quiet_s
    after_ack.close()
    mine.close()
    sibling.close()


async def test_each_worker_says_what_it_has_in_hand(board_fd: int) -> None:
    mine, sibling = AckBoard.open(board_fd, 0), AckBoard.open(board_fd, 1)
    after_ack = AfterAck(TaskTracker(), quiet_s=0.01, max_defer_s=60, board=mine)

    before = time.monotonic()
    with after_ack.acking():
        with after_ack.acking():
            assert sibling.others()[0]
        assert sibling.others()[0]
    busy, changed = sibling.others()
    assert not busy
    assert changed >= before
    after_ack.close()
    mine.close()
    sibling.close()


async def test_a_slot_unchanged_for_long_does_not_hold_the_work(board_fd: int) -> None:
    # A worker killed with requests in hand leaves its count behind.
    write_slot(board_fd, 1, 3, time.monotonic() - STALE_S - 1)
    mine = AckBoard.open(board_fd, 0)
    after_ack = AfterAck(TaskTracker(), quiet_s=0.01, max_defer_s=60, board=mine)
    await one_requests_work_runs(after_ack)
    after_ack.close()
    mine.close()


def test_a_restarted_worker_clears_the_count_it_left(board_fd: int) -> None:
    write_slot(board_fd, 0, 3, time.monotonic())
    sibling = AckBoard.open(board_fd, 1)
    assert sibling.others()[0]

    restarted = AckBoard.open(board_fd, 0)

    assert not sibling.others()[0]
    restarted.close()
    sibling.close()


async def test_closing_lets_waiting_work_go_and_a_closed_board_reads_as_quiet(board_fd: int) -> None:
    mine, sibling = AckBoard.open(board_fd, 0), AckBoard.open(board_fd, 1)
    failures: list[dict[str, object]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, context: failures.append(context))
    after_ack = AfterAck(TaskTracker(), quiet_s=0.01, max_defer_s=60, board=mine)
    ran = asyncio.Event()

    async def work() -> None:
        ran.set()

    sibling.publish(1)  # busy for good: only the close lets the work go
    with after_ack.acking():
        after_ack.run(work(), "Approve")
    await asyncio.sleep(0.05)  # the timer is looking at the board meanwhile
    after_ack.close()
    mine.close()
    await asyncio.wait_for(ran.wait(), WAIT_S)
    await asyncio.sleep(0.05)  # a timer left behind would now read the unmapped board
    assert failures == []
    assert mine.others() == (False, 0.0)
    mine.publish(1)  # ignored once closed
    sibling.close()


def test_a_worker_without_a_slot_is_refused(board_fd: int) -> None:
    with pytest.raises(ValueError, match="no slot 2"):
        AckBoard.open(board_fd, 2)


def test_a_worker_that_cannot_map_the_board_goes_on_without_it(
    board_fd: int, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from countersign.server import BotServer

    monkeypatch.setenv("COUNTERSIGN_WORKER_INDEX", "5")  # the board has two slots
    monkeypatch.setenv("COUNTERSIGN_ACK_BOARD_FD", str(board_fd))
    with caplog.at_level("WARNING"):
        board = BotServer(Settings())._ack_board()

    assert board is None
    assert "cannot use the workers' ack board" in caplog.text
    assert "wait only for its own acks" in caplog.text
    os.fstat(board_fd)  # left open: it may be something else of the process's


def test_a_worker_maps_the_board_at_each_start_attempt_and_keeps_its_descriptor_from_children(
    board_fd: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each start attempt of a worker (one retried after an outage too) maps the board; no child inherits it."""
    from countersign.server import BotServer

    handed = os.dup(board_fd)
    os.set_inheritable(handed, True)  # as the supervisor's pass_fds hands it over
    monkeypatch.setenv("COUNTERSIGN_WORKER_INDEX", "1")
    monkeypatch.setenv("COUNTERSIGN_ACK_BOARD_FD", str(handed))
    first = BotServer(Settings())._ack_board()
    assert first is not None
    first.close()  # the first attempt failed and unwound its stack
    board = BotServer(Settings())._ack_board()

    assert board is not None
    assert not os.get_inheritable(handed)
    sibling = AckBoard.open(board_fd, 0)
    board.publish(2)
    assert sibling.others()[0]
    board.close()
    sibling.close()
    os.close(handed)


def test_a_file_that_is_not_a_board_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    # A hand-set COUNTERSIGN_ACK_BOARD_FD naming another open file of the process.
    other = tmp_path / "gauge_livesum.db"
    other.write_bytes(b"\x88\x00" + bytes(1 << 20))
    fd = os.open(other, os.O_RDWR)
    try:
        with pytest.raises(ValueError, match="not a Countersign ack board"):
            AckBoard.open(fd, 0)
    finally:
        os.close(fd)
    assert other.read_bytes() == b"\x88\x00" + bytes(1 << 20)


def test_a_time_from_the_future_counts_as_now(board_fd: int) -> None:
    # A slot read half written: its time must not hold the work back past a quiet period.
    write_slot(board_fd, 1, 0, time.monotonic() + 1e9)
    mine = AckBoard.open(board_fd, 0)

    busy, latest = mine.others()

    assert not busy
    assert latest <= time.monotonic()
    mine.close()
