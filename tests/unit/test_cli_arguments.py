"""The command line: an option a subcommand does not take is refused with that subcommand's usage."""

from __future__ import annotations

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
