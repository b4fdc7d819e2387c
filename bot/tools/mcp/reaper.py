"""Runs a stdio MCP server's command, and ends every process it started once it ends.

The MCP SDK starts a stdio server in a session of its own, and ends that process group only
when the server does not exit within 2 s of its stdin closing. A server that does exit (as it
should) leaves behind whatever it started itself: `sh -c "python server.py"`'s python, npx's
node, a server's own helper. So the bot does not start the configured command directly but
`python reaper.py GRACE_S COMMAND [ARG...]` (`wrapped`), which starts the command in a process
group of its own and, once it exits, or once the SDK stops the reaper, ends that whole group:
SIGTERM, then SIGKILL to whatever is left after `GRACE_S` seconds
(docs/decisions/XXXX-stdio-server-process-trees.md).

The command inherits the reaper's standard input, output and error, environment and working
directory: the server sees exactly what it would see when started directly. The reaper then
lets go of its own copies of standard input and output, so that the server's end of the
connection is the server's alone. On Linux the reaper is its descendants' subreaper: an
orphaned descendant becomes its child, and it reaps it, so none is left a zombie (e.g. under a
bot that runs as PID 1 in a container).

This file is run with `python -I -S` and imports only the standard library: it starts with
every stdio server, and must never import the bot.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from types import FrameType

_STOPS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_POLL_S = 0.01
_PR_SET_CHILD_SUBREAPER = 36
"""Linux `prctl` option (include/uapi/linux/prctl.h)."""


class _StoppedError(Exception):
    """The reaper was asked to stop before its command ended."""


def wrapped(command: str, args: list[str], grace_s: float) -> tuple[str, list[str]]:
    """The command and arguments that start `command` under the reaper (POSIX), or unchanged (Windows).

    Args:
        command: the configured command.
        args: its arguments.
        grace_s: seconds the command's process group has, after SIGTERM, before SIGKILL; keep
            it below the SDK's own wait before it kills the reaper (`FORCE_KILL_TIMEOUT`).

    On Windows the SDK puts the server in a Job Object, which ends its whole tree already.
    """
    if sys.platform == "win32":  # pragma: no cover - the SDK's Job Object ends the tree
        return command, args
    return sys.executable, ["-I", "-S", os.path.abspath(__file__), f"{grace_s:g}", command, *args]


def main(argv: list[str]) -> int:
    """Run `argv[1:]` and end its process group once it ends; returns its exit status.

    Args:
        argv: `[GRACE_S, COMMAND, ARG...]`.

    Returns:
        The command's exit status (128 + the signal's number when a signal ended it); 127 when
        it cannot be started (the reason is written to standard error, the server's log); 2 for
        a malformed `argv`.
    """
    if len(argv) < 2:
        sys.stderr.write("usage: reaper.py GRACE_S COMMAND [ARG...]\n")
        return 2
    grace_s = float(argv[0])
    _become_subreaper()
    for stop in _STOPS:
        signal.signal(stop, _raise_stopped)
    try:
        child = subprocess.Popen(argv[1:], process_group=0)  # noqa: S603 - the operator's configured command
    except OSError as exc:
        sys.stderr.write(f"cannot start {argv[1]!r}: {exc}\n")
        return 127
    _let_go_of_stdio()
    status: int | None = None
    with contextlib.suppress(_StoppedError):
        status = child.wait()
    for stop in _STOPS:  # a second signal must not cut the ending short
        signal.signal(stop, signal.SIG_IGN)
    end_group(child.pid, grace_s, child)
    if status is None:
        status = child.returncode if child.returncode is not None else -signal.SIGTERM
    return status if status >= 0 else 128 - status


def end_group(pgid: int, grace_s: float, leader: subprocess.Popen[bytes] | None = None) -> None:
    """SIGTERM the process group `pgid`, and SIGKILL what is left of it after `grace_s` seconds.

    Args:
        pgid: the group (its leader's pid).
        grace_s: seconds the group has to end after SIGTERM.
        leader: the group's leader when it is this process's child: reaped as it ends, so that
            it does not keep the group alive as a zombie.

    Children this process inherited as subreaper are reaped as they end, for the same reason.
    """
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    except PermissionError:
        pass  # EPERM never proves the group is gone: wait, then escalate
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        _reap(leader)
        if not _group_alive(pgid):
            return
        time.sleep(_POLL_S)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and _group_alive(pgid):  # reap what SIGKILL ended
        _reap(leader)
        time.sleep(_POLL_S)


def _reap(leader: subprocess.Popen[bytes] | None) -> None:
    """Reap the leader and any inherited orphan that has ended; never blocks."""
    if leader is not None:
        leader.poll()
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _group_alive(pgid: int) -> bool:
    """Whether the group has a member (signal 0; only ESRCH proves it gone)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _raise_stopped(signum: int, frame: FrameType | None) -> None:
    raise _StoppedError


def _let_go_of_stdio() -> None:
    """Point this process's standard input and output at /dev/null (the server has its own copies).

    Standard error stays: it is where a failure of the reaper itself is said.
    """
    null = os.open(os.devnull, os.O_RDWR)
    try:
        os.dup2(null, 0)
        os.dup2(null, 1)
    finally:
        os.close(null)


def _become_subreaper() -> None:
    """On Linux, become the subreaper of this process's descendants; elsewhere, nothing."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # orphans then go to init, which reaps them


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
