"""The calculator tool: arithmetic works, abuse is refused with an error string."""

from __future__ import annotations

import time

import pytest

from bot.tools.calculator import MAX_EXPRESSION_CHARS, make_calculator_tool


@pytest.fixture(scope="module")
def calculator():
    """The calculator tool, shared by the module's tests (it is stateless)."""
    return make_calculator_tool()


async def calc(tool, expression: str) -> str:
    """Invoke the tool as the agent does and return its text."""
    result = await tool.ainvoke({"expression": expression})
    assert isinstance(result, str)
    return result


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("1 + 2 * 3", "7"),
        ("(1 + 2) * 3", "9"),
        ("10 / 4", "2.5"),
        ("7 // 2", "3"),
        ("7 % 3", "1"),
        ("2 ** 10", "1024"),
        ("-(3 + 4) * 2", "-14"),
        ("--5", "5"),
        ("0.1 + 0.2", "0.30000000000000004"),
        ("sqrt(16)", "4"),
        ("log(100, 10)", "2"),
        ("log(e)", "1"),
        ("exp(0)", "1"),
        ("sin(pi / 2)", "1"),
        ("cos(0)", "1"),
        ("tan(0)", "0"),
        ("abs(-3.5)", "3.5"),
        ("round(2.567, 2)", "2.57"),
        ("min(3, 1, 2)", "1"),
        ("max(3, 1, 2)", "3"),
        ("floor(2.7)", "2"),
        ("ceil(2.1)", "3"),
        ("pi", "3.141592653589793"),
        ("2 ** 0.5", "1.4142135623730951"),
        ("1e20", "1e+20"),
        ("   1200 * 1.08 / 12  ", "108"),
    ],
)
async def test_arithmetic(calculator, expression, expected):
    """Each supported operator, function and constant gives Python's exact result."""
    assert await calc(calculator, expression) == expected


async def test_big_integer_shown_exactly_then_scientific(calculator):
    """Integers up to 1000 digits are exact; larger ones come back in scientific notation."""
    assert await calc(calculator, "10 ** 999") == "1" + "0" * 999
    assert await calc(calculator, "-(10 ** 1500)") == "-1e+1500 (about 1501 digits)"


@pytest.mark.parametrize(
    ("expression", "fragment"),
    [
        ("1 / 0", "division by zero"),
        ("5 % 0", "division by zero"),
        ("sqrt(-1)", "math domain error"),
        ("(-8) ** (1 / 3)", "complex"),
        ("1e308 * 10", "not a finite number"),
        ("exp(1000)", "too large"),
        ("1 +", "invalid syntax"),
        ("", "empty"),
        ("sqrt(1, 2)", "Error:"),
    ],
)
async def test_mistakes_are_error_strings(calculator, expression, fragment):
    """Division by zero, domain and syntax errors come back as `Error: ...`, never raised."""
    result = await calc(calculator, expression)
    assert result.startswith("Error:")
    assert fragment in result


@pytest.mark.parametrize(
    "expression",
    [
        "9 ** 9 ** 9",
        "2 ** 4000001",
        "10 ** 100000",
        "(2 ** 99999) * (2 ** 99999)",
        "2 ** -5000000",
        "round(5, -10 ** 9)",
    ],
)
async def test_huge_numbers_are_refused_quickly(calculator, expression):
    """Powers and products that would take long to compute are refused before any work."""
    started = time.perf_counter()
    result = await calc(calculator, expression)
    assert result.startswith("Error:")
    assert time.perf_counter() - started < 0.5


async def test_long_input_is_refused(calculator):
    """An expression over the length cap is refused without being parsed."""
    result = await calc(calculator, "1+" * MAX_EXPRESSION_CHARS + "1")
    assert result == f"Error: the expression is longer than {MAX_EXPRESSION_CHARS} characters."


async def test_deep_nesting_is_an_error(calculator):
    """Parentheses nested past the parser's limit give an error string, not a crash."""
    result = await calc(calculator, "(" * 240 + "1" + ")" * 240)
    assert result.startswith("Error:")


@pytest.mark.parametrize(
    ("expression", "fragment"),
    [
        ("__import__('os').system('true')", "only these functions"),
        ("x + 1", "unknown name 'x'"),
        ("pi.real", "attribute access"),
        ("(1).__class__", "attribute access"),
        ("'a' * 3", "only numbers"),
        ("b'a'", "only numbers"),
        ("True + 1", "only numbers"),
        ("1j", "only numbers"),
        ("[x for x in range(10)]", "not supported"),
        ("[1, 2][0]", "not supported"),
        ("{1: 2}", "not supported"),
        ("1 < 2", "comparisons"),
        ("1 if 1 else 2", "if/else"),
        ("(lambda: 1)()", "only these functions"),
        ("int('3')", "only these functions"),
        ("max(1, key=abs)", "by position"),
        ("sqrt(*[4])", "not supported"),
        ("f'{1}'", "f-strings"),
        ("1 << 2", "LShift"),
        ("1 & 3", "BitAnd"),
        ("sqrt", "does not evaluate to a number"),
        ("a = 1", "invalid syntax"),
        ("1; 2", "invalid syntax"),
        ("import os", "invalid syntax"),
    ],
)
async def test_abuse_is_refused(calculator, expression, fragment):
    """Names, attributes, strings, containers, comprehensions and statements are refused."""
    result = await calc(calculator, expression)
    assert result.startswith("Error:")
    assert fragment in result


def test_schema_is_one_string():
    """The model sees a single required `expression` string with a description."""
    schema = make_calculator_tool().tool_call_schema.model_json_schema()
    assert schema["required"] == ["expression"]
    assert schema["properties"]["expression"]["type"] == "string"
    assert schema["properties"]["expression"]["description"]


def test_the_canonical_expression_is_the_one_the_tool_reads():
    """Surrounding whitespace, which the calculator ignores, is not part of the canonical expression."""
    from bot.tools.canonical import canonical_args

    assert canonical_args(make_calculator_tool(), {"expression": "\t 1 + 2 \n"}) == {"expression": "1 + 2"}
