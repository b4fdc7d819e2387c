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


@pytest.mark.parametrize(
    ("argv", "env", "line"),
    [
        (["run", "--workers", "0"], {}, "countersign: invalid setting --workers: must be at least 1, not 0"),
        (["run", "--workers", "65"], {}, "countersign: invalid setting --workers: must be at most 64, not 65"),
        (
            ["run"],
            {"COUNTERSIGN_WORKERS": "two"},
            "countersign: invalid setting COUNTERSIGN_WORKERS: must be a whole number, not two",
        ),
        (
            ["run"],
            {"COUNTERSIGN_WORKERS": "9\n" * 30},
            "countersign: invalid setting COUNTERSIGN_WORKERS: must be a whole number, not '9\\n9\\n9\\n9\\n9\\n9\\n"
            "9\\n9\\n9\\n9\\n9\\n9\\n9\\n9\\n9\\n9\\n9\\n9\\n9\\n9\\n'",
        ),
    ],
)
def test_a_number_out_of_range_is_refused_in_plain_words(
    argv: list[str], env: dict[str, str], line: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker count out of range or not a number: one line saying what it must be and what was given."""
    monkeypatch.setenv("COUNTERSIGN_WORKERS", "1")  # `--workers` writes it; this restores it afterwards
    for name, value in env.items():
        monkeypatch.setenv(name, value)

    assert main(argv) == 2
    assert capsys.readouterr().err.splitlines() == [line]


@pytest.mark.parametrize(
    ("name", "value", "line"),
    [
        (
            "COUNTERSIGN_ENCRYPTION_KEY",
            "not-a-fernet-key-but-secret",
            "countersign: invalid setting COUNTERSIGN_ENCRYPTION_KEY: must be Fernet keys (32 url-safe "
            "base64-encoded bytes each, comma-separated); make one with: uv run --frozen python -c "
            '"from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"',
        ),
        (
            "METRICS_PORT",
            "3000",
            "countersign: invalid setting METRICS_PORT: must differ from PORT (unset it to serve the probes on PORT)",
        ),
    ],
)
def test_a_refused_setting_is_named_once(
    name: str, value: str, line: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A setting our validators refuse: the line names it once, then says what it must be (never what it was)."""
    monkeypatch.setenv("PORT", "3000")
    monkeypatch.setenv(name, value)

    assert main(["run"]) == 2
    assert capsys.readouterr().err.splitlines() == [line]
