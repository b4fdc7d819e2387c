"""The command line: a subcommand's unknown option is refused with its usage; closed standard streams are reopened."""

from __future__ import annotations

import subprocess
import sys

import pytest

from countersign.cli import main


@pytest.mark.parametrize(
    ("argv", "usage"),
    [
        (["run", "--bogus"], "usage: countersign run [-h] [--workers N]"),
        (["chat", "extra"], "usage: countersign chat [-h]"),
        (["migrate", "--workers", "2"], "usage: countersign migrate [-h]"),
    ],
)
def test_an_unknown_argument_is_refused_with_the_subcommands_usage(
    argv: list[str], usage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)

    assert exited.value.code == 2
    error = capsys.readouterr().err.splitlines()
    assert error[0] == usage
    assert error[-1] == f"countersign {argv[0]}: error: unrecognized arguments: {' '.join(argv[1:])}"


@pytest.mark.parametrize("closed", [0, 1])
def test_a_closed_standard_stream_is_reopened_on_dev_null(closed: int) -> None:
    script = (
        f"import os; os.close({closed}); "
        "from countersign.cli import open_standard_streams; open_standard_streams(); "
        f"os.write(2, os.readlink('/proc/self/fd/{closed}').encode())"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60, check=False)  # noqa: S603 - our own code

    assert done.returncode == 0, done.stderr
    assert done.stderr == b"/dev/null"
