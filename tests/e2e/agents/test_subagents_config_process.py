"""`countersign run` with a broken subagents configuration: one line, exit code 2, no PostgreSQL (docs/decisions/0008).

Each case is a separate process, as an operator runs it. A process spends seconds importing the
libraries before it can fail, so the module starts every case at once and each test reads its
own outcome: the cases stay separate tests without costing their sum in wall time.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.bot_process import BotProcess, base_env, free_port

pytestmark = pytest.mark.e2e

ENTRY = 'description = "Helps."\nprompt = "You help."\ntools = ["calculator"]\n'

CASES: dict[str, tuple[str | None, dict[str, str], str]] = {
    # id: (file text or None for no file, extra environment, the one line; {file} is the path)
    "duplicate-name": (
        f'[[subagents]]\nname = "helper"\n{ENTRY}\n[[subagents]]\nname = "helper"\n{ENTRY}',
        {},
        "COUNTERSIGN_SUBAGENTS_FILE {file}: two subagents are named 'helper'",
    ),
    "unknown-tool": (
        '[[subagents]]\nname = "helper"\ndescription = "Helps."\nprompt = "You help."\ntools = ["teleport"]\n',
        {},
        "COUNTERSIGN_SUBAGENTS_FILE {file}: subagent 'helper' names unknown tool 'teleport'; "
        "the tools are: calculator, current_time, http_request",
    ),
    "empty-prompt": (
        '[[subagents]]\nname = "helper"\ndescription = "Helps."\nprompt = ""\n',
        {},
        "COUNTERSIGN_SUBAGENTS_FILE {file}: subagent 'helper': prompt is empty",
    ),
    "invalid-name": (
        f'[[subagents]]\nname = "help desk"\n{ENTRY}',
        {},
        "COUNTERSIGN_SUBAGENTS_FILE {file}: subagent 'help desk': name is not a valid tool name "
        "(a letter or _ first, then letters, digits, _ or -, at most 64 characters)",
    ),
    "missing-file": (
        None,
        {},
        "COUNTERSIGN_SUBAGENTS_FILE {file}: cannot read it: No such file or directory",
    ),
    "bogus-agent": (
        f'[[subagents]]\nname = "helper"\n{ENTRY}',
        {"COUNTERSIGN_AGENT": "bogus"},
        "invalid setting COUNTERSIGN_AGENT: Input should be 'react' or 'subagents'",
    ),
}

_LOG_LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO) ")
"""A log record below WARNING (e.g. "send_email is off"): allowed beside the one error line."""


@dataclass(frozen=True)
class Outcome:
    code: int
    stderr: str
    file: Path
    data_dir: Path


async def _run(case: str, root: Path) -> Outcome:
    text, extra, _ = CASES[case]
    cwd = root / case
    cwd.mkdir()
    file = cwd / "subagents.toml"
    if text is not None:
        file.write_text(text, encoding="utf-8")
    data_dir = cwd / "data"
    settings = {
        "GOOGLE_API_KEY": "k",
        # Slack configured (so `run` gets as far as the core), but pointing nowhere: nothing
        # outside this machine is ever tried, and only a start that got past the file would notice.
        "SLACK_BOT_TOKEN": "xoxb-x",
        "SLACK_SIGNING_SECRET": "s",
        "SLACK_API_URL": "http://127.0.0.1:9/api/",
        "COUNTERSIGN_DATA_DIR": str(data_dir),
        "COUNTERSIGN_AGENT": "subagents",
        "COUNTERSIGN_SUBAGENTS_FILE": str(file),
        "PORT": str(free_port()),
        "HOST": "127.0.0.1",
    }
    bot = await BotProcess(base_env(**(settings | extra)), cwd).start()
    code = await bot.wait(timeout=90)
    return Outcome(code=code, stderr=bot.stderr.decode(), file=file, data_dir=data_dir)


@pytest.fixture(scope="module")
async def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    root = tmp_path_factory.mktemp("subagents-config")
    results = await asyncio.gather(*(_run(case, root) for case in CASES))
    return dict(zip(CASES, results, strict=True))


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_subagents_configuration_stops_the_start_in_one_line(outcomes, case):
    """Exit code 2 and exactly one line naming the problem (beside INFO logs), no traceback, PostgreSQL never started."""
    outcome = outcomes[case]
    expected = "countersign: " + CASES[case][2].format(file=outcome.file)
    lines = outcome.stderr.strip().splitlines()
    assert outcome.code == 2, outcome.stderr
    assert "Traceback" not in outcome.stderr
    assert [line for line in lines if not _LOG_LINE.match(line)] == [expected], outcome.stderr
    assert lines[-1] == expected
    # The file is checked before the database opens: the embedded server's data dir never appears.
    assert not outcome.data_dir.exists(), outcome.stderr
