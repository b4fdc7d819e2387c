"""`load_subagents`: the shipped default set, a TOML file, and one readable line per mistake (docs/decisions/0008)."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.tools import tool

from bot.agents.subagent_specs import (
    DEFAULT_STEP_LIMIT,
    OPERATOR_PROMPT,
    RESEARCHER_PROMPT,
    SubagentSpec,
    load_subagents,
)
from bot.base.errors import ConfigurationError
from bot.settings import ToolSettings
from bot.tools.builtin import builtin_tools
from bot.tools.operator import build_registry
from bot.tools.registry import ToolRegistry, ToolSpec

SMTP = ToolSettings(smtp_url="smtp://mailer:secret@127.0.0.1:2525")


def builtins(settings: ToolSettings | None = None) -> ToolRegistry:
    """The registry `countersign run` builds, without an operator tools module."""
    return build_registry(settings or ToolSettings(), None)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "subagents.toml"
    path.write_text(text, encoding="utf-8")
    return path


ONE = """
[[subagents]]
name = "helper"
description = "Helps."
prompt = "You help."
tools = ["calculator"]
"""


# --- the default set ---------------------------------------------------------------------------


def test_the_default_set_is_researcher_and_operator_without_send_email():
    """Unset file: `researcher` (time, calculator, HTTP) and `operator` (HTTP only, as SMTP_URL is unset)."""
    researcher, operator = load_subagents(None, builtins())
    assert (researcher.name, researcher.tools) == ("researcher", ("current_time", "calculator", "http_request"))
    assert (operator.name, operator.tools) == ("operator", ("http_request",))
    assert researcher.prompt == RESEARCHER_PROMPT and operator.prompt == OPERATOR_PROMPT
    assert "email" not in operator.description
    assert all(s.model is None and s.step_limit == DEFAULT_STEP_LIMIT for s in (researcher, operator))


def test_the_default_operator_gets_send_email_when_it_is_registered():
    """With SMTP_URL set, `send_email` is registered and the default `operator` may call it (and says so)."""
    researcher, operator = load_subagents(None, builtins(SMTP))
    assert operator.tools == ("http_request", "send_email")
    assert "sending email" in operator.description
    assert "send_email" not in researcher.tools


def test_a_tool_named_like_a_default_subagent_is_one_line_with_the_remedy():
    """An operator tool called `researcher` clashes with the default set: one line saying what to do."""

    @tool
    async def researcher(query: str) -> str:
        """Not a subagent."""
        return query

    registry = ToolRegistry([*builtin_tools(ToolSettings()), ToolSpec(tool=researcher)])
    with pytest.raises(ConfigurationError) as info:
        load_subagents(None, registry)
    assert str(info.value) == (
        "the default subagents do not fit the tools: subagent 'researcher' has the same name as a tool "
        "(cards and audit rows could not tell them apart); rename that tool or set COUNTERSIGN_SUBAGENTS_FILE"
    )


# --- a valid file ------------------------------------------------------------------------------


def test_a_file_with_every_field_is_read_in_order(tmp_path):
    """Every key is read; text is trimmed; model and step_limit are optional with their defaults."""
    path = write(
        tmp_path,
        '''
[[subagents]]
name = "ops_runner-2"
description = """
  Runs things.
"""
prompt = "  You run things carefully.  "
tools = ["http_request", "send_email"]
model = "gemini-3.8-pro"
step_limit = 40

[[subagents]]
name = "thinker"
description = "Thinks."
prompt = "You think."
model = "  "
''',
    )
    assert load_subagents(path, builtins(SMTP)) == (
        SubagentSpec(
            name="ops_runner-2",
            description="Runs things.",
            prompt="You run things carefully.",
            tools=("http_request", "send_email"),
            model="gemini-3.8-pro",
            step_limit=40,
        ),
        SubagentSpec(name="thinker", description="Thinks.", prompt="You think.", tools=(), model=None, step_limit=15),
    )


@pytest.mark.parametrize("limit", [5, 200])
def test_step_limits_at_the_bounds_are_accepted(tmp_path, limit):
    """5 and 200 are the inclusive bounds of step_limit."""
    [spec] = load_subagents(write(tmp_path, ONE + f"step_limit = {limit}\n"), builtins())
    assert spec.step_limit == limit


# --- mistakes: one line naming the file, the subagent and the field ----------------------------

ENTRY = 'description = "d"\nprompt = "p"\ntools = ["calculator"]\n'

MISTAKES = [
    pytest.param(
        '[[subagents]]\nname = "a"\ndescription = "d"\npromt = "p"\n',
        "subagent 'a': unknown key 'promt' (the keys are: name, description, prompt, tools, model, step_limit)",
        id="typo-of-a-required-key",
    ),
    pytest.param(
        '[[subagent]]\nname = "a"\ndescription = "d"\nprompt = "p"\n',
        "unknown key 'subagent'; the tables are written [[subagents]] (plural)",
        id="singular-table",
    ),
    pytest.param(
        f'[[subagents]]\nname = "a"\n{ENTRY}step_limit = "20"\n',
        "subagent 'a': step_limit must be a whole number",
        id="step-limit-as-text",
    ),
    pytest.param(
        f'[[subagents]]\nname = "twin"\n{ENTRY}\n[[subagents]]\nname = "twin"\n{ENTRY}',
        "two subagents are named 'twin'",
        id="duplicate-name",
    ),
    pytest.param(
        '[[subagents]]\nname = "a"\ndescription = "d"\nprompt = "p"\ntools = ["calculator", "teleport"]\n',
        "subagent 'a' names unknown tool 'teleport'; the tools are: calculator, current_time, http_request",
        id="unknown-tool",
    ),
    pytest.param(
        '[[subagents]]\nname = "a"\ndescription = "d"\nprompt = "p"\ntools = ["send_email"]\n',
        "subagent 'a' names unknown tool 'send_email' (it exists only when SMTP_URL is set); "
        "the tools are: calculator, current_time, http_request",
        id="send-email-without-smtp",
    ),
    pytest.param(
        '[[subagents]]\nname = "a"\ndescription = "d"\nprompt = "  \\n "\n',
        "subagent 'a': prompt is empty",
        id="empty-prompt",
    ),
    pytest.param(
        '[[subagents]]\nname = "a"\ndescription = " "\nprompt = "p"\n',
        "subagent 'a': description is empty",
        id="empty-description",
    ),
    pytest.param(
        f'[[subagents]]\nname = "my helper"\n{ENTRY}',
        "subagent 'my helper': name is not a valid tool name "
        "(a letter or _ first, then letters, digits, _ or -, at most 64 characters)",
        id="invalid-name",
    ),
    pytest.param(
        f'[[subagents]]\nname = "helper\\n"\n{ENTRY}',
        "subagent 'helper\\n': name is not a valid tool name "
        "(a letter or _ first, then letters, digits, _ or -, at most 64 characters)",
        id="name-with-trailing-newline",
    ),
    pytest.param(
        f'[[subagents]]\nname = "{"a" * 65}"\n{ENTRY}',
        f"subagent '{'a' * 65}': name is not a valid tool name "
        "(a letter or _ first, then letters, digits, _ or -, at most 64 characters)",
        id="name-too-long",
    ),
    pytest.param(
        f'[[subagents]]\nname = "calculator"\n{ENTRY}',
        "subagent 'calculator' has the same name as a tool (cards and audit rows could not tell them apart)",
        id="name-of-a-tool",
    ),
    pytest.param(
        f'[[subagents]]\nname = "a"\n{ENTRY}step_limit = 4\n',
        "subagent 'a': step_limit must be from 5 to 200, not 4",
        id="step-limit-too-low",
    ),
    pytest.param(
        f'[[subagents]]\nname = "a"\n{ENTRY}step_limit = 201\n',
        "subagent 'a': step_limit must be from 5 to 200, not 201",
        id="step-limit-too-high",
    ),
    pytest.param(
        f'[[subagents]]\nname = "a"\n{ENTRY}step_limit = "many"\n',
        "subagent 'a': step_limit must be a whole number",
        id="step-limit-not-a-number",
    ),
    pytest.param(
        '[[subagents]]\nname = "a"\ndescription = "d"\nprompt = "p"\ntools = ["calculator", "calculator"]\n',
        "subagent 'a' lists tool 'calculator' twice",
        id="tool-twice",
    ),
    pytest.param(
        f'[[subagents]]\nname = "a"\n{ENTRY}temperature = 0.2\n',
        "subagent 'a': unknown key 'temperature' (the keys are: name, description, prompt, tools, model, step_limit)",
        id="unknown-key",
    ),
    pytest.param(
        f'version = 2\n[[subagents]]\nname = "a"\n{ENTRY}',
        "unknown key 'version'; the file holds only [[subagents]] tables",
        id="unknown-top-level-key",
    ),
    pytest.param(
        '[[subagents]]\nname = "a"\nprompt = "p"\n',
        "subagent 'a': description is missing",
        id="missing-description",
    ),
    pytest.param(
        '[[subagents]]\ndescription = "d"\nprompt = "p"\n\n[[subagents]]\nname = "b"\n',
        "subagent #1: name is missing",
        id="missing-name-numbers-the-entry",
    ),
    pytest.param(
        '[[subagents]]\nname = "a"\ndescription = "d"\nprompt = "p"\ntools = "calculator"\n',
        "subagent 'a': tools must be a list",
        id="tools-not-a-list",
    ),
    pytest.param(
        '[[subagents]]\nname = "a"\ndescription = "d"\nprompt = "p"\ntools = ["calculator", 7]\n',
        "subagent 'a': tools item 2 must be a string",
        id="tool-not-a-string",
    ),
    pytest.param("", "no subagents defined; add at least one [[subagents]] table", id="empty-file"),
    pytest.param("subagents = []\n", "no subagents defined; add at least one [[subagents]] table", id="empty-list"),
    pytest.param(
        f'[subagents]\nname = "a"\n{ENTRY}',
        "subagents must be written as [[subagents]] tables (double brackets), one per subagent",
        id="single-brackets",
    ),
    pytest.param("subagents = [1]\n", "subagent #1 is not a table of name, description, prompt, ...", id="not-a-table"),
]


@pytest.mark.parametrize(("text", "problem"), MISTAKES)
def test_each_mistake_is_one_line_naming_the_file_and_the_problem(tmp_path, text, problem):
    """A bad file raises ConfigurationError: one line, the variable and path first, then the problem, no chained cause."""
    path = write(tmp_path, text)
    with pytest.raises(ConfigurationError) as info:
        load_subagents(path, builtins())
    assert str(info.value) == f"COUNTERSIGN_SUBAGENTS_FILE {path}: {problem}"
    assert "\n" not in str(info.value)
    assert info.value.__cause__ is None and (info.value.__context__ is None or info.value.__suppress_context__)


def test_a_file_that_is_not_toml_is_one_line_with_the_position(tmp_path):
    """A TOML syntax error is named as such, with the parser's line and column."""
    path = write(tmp_path, "[[subagents]\nname = 1\n")
    with pytest.raises(ConfigurationError) as info:
        load_subagents(path, builtins())
    message = str(info.value)
    assert message.startswith(f"COUNTERSIGN_SUBAGENTS_FILE {path}: not valid TOML: ")
    assert "(at line 1, column " in message and "\n" not in message
    assert info.value.__suppress_context__


def test_a_missing_file_is_one_line(tmp_path):
    """A path that does not exist says it cannot be read, and why."""
    path = tmp_path / "nowhere.toml"
    with pytest.raises(ConfigurationError) as info:
        load_subagents(path, builtins())
    assert str(info.value) == f"COUNTERSIGN_SUBAGENTS_FILE {path}: cannot read it: No such file or directory"


def test_a_directory_is_one_line(tmp_path):
    """A directory given as the file cannot be read either."""
    with pytest.raises(ConfigurationError) as info:
        load_subagents(tmp_path, builtins())
    assert str(info.value) == f"COUNTERSIGN_SUBAGENTS_FILE {tmp_path}: cannot read it: Is a directory"


def test_a_file_that_is_not_utf8_is_one_line(tmp_path):
    """Bytes that are not UTF-8 are named as such (TOML files are UTF-8), with the offending position."""
    path = tmp_path / "latin1.toml"
    path.write_bytes('[[subagents]]\nname = "caf\xe9"\n'.encode("latin-1"))
    with pytest.raises(ConfigurationError) as info:
        load_subagents(path, builtins())
    assert str(info.value) == f"COUNTERSIGN_SUBAGENTS_FILE {path}: not UTF-8 text (byte 25: invalid continuation byte)"
