"""Slack requests in hand across the workers of one machine: a small shared memory, a slot each.

`countersign run --workers N` runs N processes on the same cores. Each one's `AfterAck` holds
the work that follows its acks while requests wait for theirs (docs/decisions/0029), but a
worker that has acked its share of a burst of clicks would otherwise start its decisions and
resumed turns while a sibling still acks its own share, and take the cores from it: the burst's
last acks came back tens of ms later (docs/decisions/0032). So each worker publishes, in its
slot of a small shared memory the supervisor makes, how many requests it has in hand and when
that last changed; each worker's `AfterAck` waits for the whole machine to be quiet.

The board has no name in the file system: the supervisor makes it with `memfd_create` (Linux;
an unlinked temporary file elsewhere) and hands the open file descriptor to each worker it
starts (`COUNTERSIGN_ACK_BOARD_FD`, `pass_fds`), so no temporary-file cleaner can delete or
truncate it under the workers, and it is gone with the last process that holds it.

The board starts with `MAGIC`, so that a worker handed some other file (a hand-set
`COUNTERSIGN_ACK_BOARD_FD`) refuses it instead of writing into it. Then comes one slot per
worker: two 8-byte fields (`SLOT`), written only by its own worker and read by the others
without a lock. A reader may see a slot a moment late, or half written: it then waits one more
quiet period or starts one early, and a time it reads from the future counts as now, so no
misread holds work back for longer than a quiet period. A worker killed while it had requests
in hand leaves its count behind; a slot not changed for `STALE_S` counts as quiet, and a
restarted worker clears its own slot at start.
"""

from __future__ import annotations

import mmap
import os
import struct
import tempfile
import time

MAGIC = b"countersign-acks1"
"""The first bytes of every board (the format's name and version)."""

SLOT = struct.Struct("=qd")
"""One worker's slot: requests in hand (int64), then when that last changed (float64 seconds,
`time.monotonic()`, which is CLOCK_MONOTONIC and so the same clock in every process)."""

STALE_S = 3.0
"""A slot unchanged this long, in seconds, counts as quiet whatever it says: Slack gives up on
an ack after three seconds, so no request is still worth waiting for by then."""


class AckBoard:
    """This worker's view of the machine's board: its own slot to write, the others to read.

    Open it with `AckBoard.open`; the supervisor makes the board with `AckBoard.create`. Once
    closed, it says nothing is in hand elsewhere and ignores what this worker publishes.

    Args:
        board: the mapped board.
        index: this worker's slot (`COUNTERSIGN_WORKER_INDEX`).
        slots: how many slots the board holds (the supervisor's worker count).
    """

    def __init__(self, board: mmap.mmap, index: int, slots: int) -> None:
        self._board = board
        self._index = index
        self._slots = slots

    @staticmethod
    def create(workers: int) -> int:
        """A new board for `workers` workers, every slot quiet: an open file descriptor (the caller closes it).

        Raises:
            OSError: the memory cannot be had (no file descriptor left, no space).
        """
        if hasattr(os, "memfd_create"):
            fd = os.memfd_create("countersign-ack-board")
        else:  # pragma: no cover - macOS and BSD
            fd, path = tempfile.mkstemp(prefix="countersign-ack-board-")
            os.unlink(path)
        try:
            os.ftruncate(fd, len(MAGIC) + SLOT.size * workers)
            os.pwrite(fd, MAGIC, 0)
        except OSError:
            os.close(fd)
            raise
        return fd

    @classmethod
    def open(cls, fd: int, index: int) -> AckBoard:
        """Map the board behind `fd` and clear this worker's slot (a restarted worker's old count).

        The file descriptor stays open (the mapping does not need it; the caller may close it).

        Raises:
            OSError: `fd` is not an open file that can be read and mapped.
            ValueError: `fd` is not a board (no `MAGIC`, or a size no board has), or `index` has
                no slot in it.
        """
        size = os.fstat(fd).st_size - len(MAGIC)
        if size <= 0 or size % SLOT.size or os.pread(fd, len(MAGIC), 0) != MAGIC:
            raise ValueError("it is not a Countersign ack board")
        slots = size // SLOT.size
        if not 0 <= index < slots:
            raise ValueError(f"the board has no slot {index} ({slots} slots)")
        ack_board = cls(mmap.mmap(fd, len(MAGIC) + size), index, slots)
        ack_board.publish(0)
        return ack_board

    def _offset(self, slot: int) -> int:
        return len(MAGIC) + slot * SLOT.size

    def publish(self, in_hand: int) -> None:
        """Write this worker's count of requests in hand, stamped now (nothing once closed)."""
        if not self._board.closed:
            SLOT.pack_into(self._board, self._offset(self._index), in_hand, time.monotonic())

    def others(self) -> tuple[bool, float]:
        """(whether another worker has a request in hand, the latest time another worker's count changed).

        The time is `time.monotonic()` seconds, never later than now (0.0 when no other slot was
        ever written, and once this board is closed); a slot unchanged for `STALE_S` is never
        in hand.
        """
        if self._board.closed:
            return False, 0.0
        now = time.monotonic()
        busy, latest = False, 0.0
        for slot in range(self._slots):
            if slot == self._index:
                continue
            in_hand, changed = SLOT.unpack_from(self._board, self._offset(slot))
            busy = busy or (in_hand > 0 and now - changed < STALE_S)
            latest = max(latest, changed)
        return busy, min(latest, now)

    def close(self) -> None:
        """Unmap the board (this worker's slot is left as it is; the next `open` clears it)."""
        self._board.close()
