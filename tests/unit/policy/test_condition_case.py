"""Conditions that name in the other case what a tool's canonical form writes in one case are refused when saved."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from bot.policy.conditions import InvalidConditionError, compile_condition
from bot.settings import ToolSettings
from bot.tools.builtin import builtin_tools

SPECS = {spec.name: spec for spec in builtin_tools(ToolSettings(smtp_url=SecretStr("smtp://mail.example:25")))}


def saved(tool: str, condition: str) -> str:
    """Compile `condition` as `/countersign policy` does for the built-in `tool`; return its text."""
    spec = SPECS[tool]
    return compile_condition(condition, spec.argument_names, case_rules=spec.canonical_case).text


@pytest.mark.parametrize(
    ("tool", "condition", "problem"),
    [
        (
            "http_request",
            "has(args.headers) && 'X-Sudo' in args.headers",
            "header names are compared in lower case: write 'x-sudo'",
        ),
        ("http_request", "args.headers['X-Sudo'] == '1'", "write 'x-sudo'"),
        ("http_request", "has(args.headers) && has(args.headers.Authorization)", "write 'authorization'"),
        ("http_request", "args.headers.exists(k, k == 'X-Sudo')", "write 'x-sudo'"),
        ("http_request", "args.headers.exists(k, k.startsWith('X-'))", "write 'x-'"),
        ("http_request", "args.method == 'post'", "methods are compared in upper case: write 'POST'"),
        ("http_request", "args.method in ['GET', 'head']", "write 'HEAD'"),
        ("http_request", '(args.method) != "get"', "write 'GET'"),
        ("http_request", "url(args.url).getHostname() == 'Internal.example'", "host names are compared in lower case"),
        ("http_request", "url(args.url).getHostname().endsWith('.Corp.example')", "write '.corp.example'"),
        (
            "send_email",
            "args.to.exists(a, a == 'Bob@X.example')",
            "addresses are compared in lower case: write 'bob@x.example'",
        ),
        ("send_email", "args.to.exists(a, a.endsWith('@Corp.example'))", "write '@corp.example'"),
        ("send_email", "'CEO@corp.example' in args.cc", "write 'ceo@corp.example'"),
        ("send_email", "size(args.cc) > 0 && args.cc[0] == r'Ann@corp.example'", "write 'ann@corp.example'"),
    ],
)
def test_a_literal_in_the_other_case_is_refused(tool, condition, problem):
    """The refusal says how the text is compared and what to write instead."""
    with pytest.raises(InvalidConditionError, match=problem.replace("(", r"\(").replace("[", r"\[")):
        saved(tool, condition)


@pytest.mark.parametrize(
    ("tool", "condition"),
    [
        ("http_request", "has(args.headers) && 'x-sudo' in args.headers"),
        ("http_request", "args.headers['x-env'] == 'Prod'"),  # values keep their case
        ("http_request", "args.method != 'GET' && args.method.lowerAscii() == 'post'"),
        ("http_request", "url(args.url).getEscapedPath().startsWith('/Admin/')"),  # paths keep their case
        ("http_request", "args.headers.exists(k, args.method == 'POST')"),
        ("send_email", "args.to.exists(a, a.endsWith('@corp.example')) && args.subject == 'Q3 Report'"),
        ("send_email", "args.to.exists(a, [1].exists(a, a == 'X'))"),  # the inner `a` is not an address
    ],
)
def test_literals_in_the_canonical_case_and_other_text_are_accepted(tool, condition):
    """Lower-case names and addresses, upper-case methods, header values, paths and subjects are saved as written."""
    assert saved(tool, condition) == condition


def test_conditions_stored_before_still_compile_at_run_time():
    """Without the tool's rules (how stored conditions are compiled for each call) nothing is refused."""
    assert compile_condition("'X-Sudo' in args.headers").text == "'X-Sudo' in args.headers"


def test_a_condition_nested_too_deeply_to_check_is_refused_in_words():
    """Hundreds of nested parentheses are refused with a sentence, never a RecursionError (a failed command)."""
    condition = "(" * 400 + "true" + ")" * 400
    with pytest.raises(InvalidConditionError, match="nested too deeply"):
        saved("http_request", condition)
