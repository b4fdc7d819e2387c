"""The `calculator` tool: arithmetic the model should not do in its head.

Evaluation goes through `simpleeval`, never `eval`, and only after the parsed expression has
passed a whitelist of node types (numbers, the arithmetic operators, calls of a few named math
functions, the constants `pi` and `e`). simpleeval's own guards stay on as a second line; the
whitelist exists because simpleeval by default also allows strings, comparisons, attributes and
`int()`/`str()` calls, none of which a calculator needs.

Cost is bounded up front: the expression length is capped, exponents are capped both by
simpleeval's `MAX_POWER` and by an estimate of the result's size, and big integer products are
capped the same way, so no input can keep the event loop busy for long. Error messages never
print the operands: converting a huge integer to text is itself slow (and capped by Python).
"""

from __future__ import annotations

import ast
import inspect
import logging
import math
import operator
from collections.abc import Callable, Mapping
from typing import Any, Final

import simpleeval
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

from bot.tools.canonical import CANONICAL_ARGS

log = logging.getLogger(__name__)

MAX_EXPRESSION_CHARS: Final = 500
"""Longer input is refused before it is parsed."""
MAX_INT_BITS: Final = 100_000
"""Largest integer (in bits, about 30,000 digits) an intermediate result may reach."""
MAX_RESULT_DIGITS: Final = 1000
"""Integers with more digits are shown in scientific notation."""
_MAX_ROUND_DIGITS: Final = 100
_MAX_EXACT_BITS: Final = int(MAX_RESULT_DIGITS * math.log2(10))

Number = int | float


def _check_int_size(value: int) -> int:
    if value.bit_length() > MAX_INT_BITS:
        raise simpleeval.NumberTooHigh("the result would be too large")
    return value


def _power(base: Number, exponent: Number) -> Number:
    """`base ** exponent` with the result size estimated before any work is done."""
    if abs(exponent) > simpleeval.MAX_POWER:
        raise simpleeval.NumberTooHigh(f"exponents above {simpleeval.MAX_POWER} are refused")
    # b ** n has about n * log2(|b|) bits; 0, 1 and -1 stay small whatever n is.
    if (
        isinstance(base, int)
        and isinstance(exponent, int)
        and exponent > 0
        and abs(base) > 1
        and exponent * math.log2(abs(base)) > MAX_INT_BITS
    ):
        raise simpleeval.NumberTooHigh("the power would be too large")
    result: Number = base**exponent
    if isinstance(result, complex):
        # A negative number to a fractional power: Python answers with a complex number.
        raise ValueError("the result is a complex number")
    return result


def _multiply(left: Number, right: Number) -> Number:
    """`left * right`, refusing integer products beyond `MAX_INT_BITS`."""
    if isinstance(left, int) and isinstance(right, int) and left.bit_length() + right.bit_length() > MAX_INT_BITS + 1:
        raise simpleeval.NumberTooHigh("the product would be too large")
    return left * right


def _round(value: Number, ndigits: int | None = None) -> Number:
    """`round()` with `ndigits` bounded (a huge negative `ndigits` computes a huge power)."""
    if ndigits is None:
        return round(value)
    if not isinstance(ndigits, int) or abs(ndigits) > _MAX_ROUND_DIGITS:
        raise ValueError(f"round() digits must be an integer between {-_MAX_ROUND_DIGITS} and {_MAX_ROUND_DIGITS}")
    return round(value, ndigits)


_OPERATORS: Final[dict[type[ast.AST], Callable[..., Any]]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: _multiply,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: _power,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}

_FUNCTIONS: Final[dict[str, Callable[..., Any]]] = {
    "sqrt": math.sqrt,
    "log": math.log,
    "exp": math.exp,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "abs": abs,
    "round": _round,
    "min": min,
    "max": max,
    "floor": math.floor,
    "ceil": math.ceil,
}

_NAMES: Final[dict[str, float]] = {"pi": math.pi, "e": math.e}

# Node types that may appear anywhere; calls and names get their own checks in `_check`.
_ALLOWED_NODES: Final = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Load)


def _describe(node: ast.AST) -> str:
    """A short human name for a refused syntax element."""
    names = {
        ast.Attribute: "attribute access",
        ast.Subscript: "indexing",
        ast.Compare: "comparisons",
        ast.BoolOp: "and/or",
        ast.IfExp: "if/else",
        ast.Lambda: "lambda",
        ast.JoinedStr: "f-strings",
        ast.List: "lists",
        ast.Tuple: "tuples",
        ast.Dict: "dicts",
        ast.Set: "sets",
        ast.ListComp: "comprehensions",
        ast.SetComp: "comprehensions",
        ast.DictComp: "comprehensions",
        ast.GeneratorExp: "comprehensions",
        ast.NamedExpr: "assignment",
        ast.Starred: "unpacking",
    }
    return names.get(type(node), type(node).__name__)


def _check(tree: ast.Expression) -> None:
    """Raise `ValueError` naming the first syntax element a calculator does not allow."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS:
                raise ValueError("only these functions may be called: " + ", ".join(sorted(_FUNCTIONS)))
            if node.keywords:
                raise ValueError("pass function arguments by position, e.g. round(x, 2)")
        elif isinstance(node, ast.Name):
            if node.id not in _NAMES and node.id not in _FUNCTIONS:
                raise ValueError(f"unknown name {node.id!r}; the only constants are pi and e")
        elif isinstance(node, ast.operator | ast.unaryop):
            if type(node) not in _OPERATORS:
                raise ValueError(f"operator {type(node).__name__} is not supported")
        elif isinstance(node, ast.Constant):
            value = node.value
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"only numbers are allowed, not {value!r}")
        elif not isinstance(node, _ALLOWED_NODES):
            raise ValueError(f"not supported in a calculator: {_describe(node)}")
        # A bare function name used as a value is caught by the result type check.


def _format(result: object) -> str:
    """The result as text; raises `ValueError` for anything that is not a finite number."""
    if isinstance(result, bool) or not isinstance(result, int | float):
        raise ValueError("the expression does not evaluate to a number")
    if isinstance(result, float):
        if not math.isfinite(result):
            raise ValueError("the result is not a finite number (overflow?)")
        # repr gives the shortest text that round-trips; integral floats read better as ints.
        if result.is_integer() and abs(result) < 1e16:
            return str(int(result))
        return repr(result)
    if result.bit_length() > _MAX_EXACT_BITS:
        return _scientific(result)
    return str(result)


def _scientific(value: int) -> str:
    """A huge integer as `d.ddd...e+N` (str() of it would be slow, and is capped by Python)."""
    exponent = math.floor(math.log10(abs(value)))
    mantissa = abs(value) / 10**exponent  # int / int is a correctly rounded float
    if mantissa >= 10:  # log10 rounded up across a power of ten
        mantissa, exponent = mantissa / 10, exponent + 1
    sign = "-" if value < 0 else ""
    return f"{sign}{mantissa:.15g}e+{exponent} (about {exponent + 1} digits)"


def evaluate(expression: str) -> str:
    """Evaluate `expression` and return the result or an `Error: ...` line.

    Args:
        expression: arithmetic such as `2 * (3 + 4) ** 2 / sqrt(2)`.

    Returns:
        The result as text, or `Error: <what is wrong>` for input the calculator refuses or
        cannot compute (syntax errors, division by zero, results too large, ...).
    """
    text = expression.strip()
    if not text:
        return "Error: the expression is empty."
    if len(text) > MAX_EXPRESSION_CHARS:
        return f"Error: the expression is longer than {MAX_EXPRESSION_CHARS} characters."
    try:
        tree = ast.parse(text, mode="eval")
        _check(tree)
        evaluator = simpleeval.SimpleEval(operators=dict(_OPERATORS), functions=dict(_FUNCTIONS), names=dict(_NAMES))
        result = evaluator.eval(text, previously_parsed=tree.body)
        if isinstance(result, int):
            _check_int_size(result)
        return _format(result)
    except SyntaxError as exc:
        return f"Error: invalid syntax ({exc.msg})."
    except ZeroDivisionError:
        return "Error: division by zero."
    except OverflowError:
        return "Error: the result is too large."
    except RecursionError:
        return "Error: the expression is nested too deeply."
    except simpleeval.NumberTooHigh as exc:
        return f"Error: number too large ({exc})."
    except simpleeval.InvalidExpression as exc:
        return f"Error: {exc}."
    except (ValueError, TypeError) as exc:
        # math domain errors, wrong argument counts and our own refusals.
        return f"Error: {exc}."


class _CalculatorArgs(BaseModel):
    """Arguments of the calculator tool."""

    expression: str = Field(description="The arithmetic expression, e.g. `(1200 * 1.08) / 12` or `sqrt(2) * pi`.")


async def _calculator(expression: str) -> str:
    """Evaluate an arithmetic expression exactly and return the result.

    Supports numbers, + - * / // % ** (power), parentheses, unary minus, the functions
    sqrt, log (natural, or log(x, base)), exp, sin, cos, tan (radians), abs, round, min,
    max, floor, ceil and the constants pi and e. Use it instead of doing arithmetic in your
    head. Returns the result, or a line starting with "Error:" saying what to fix.
    """
    result = evaluate(expression)
    if result.startswith("Error:"):
        log.debug("calculator refused %r: %s", expression[:100], result)
    return result


def canonical_calculator_args(args: Mapping[str, Any]) -> dict[str, Any]:
    """The calculator's arguments in canonical form: the expression without surrounding whitespace.

    That is how `evaluate` reads it.

    Args:
        args: `{"expression"}` as sent; a value that is not text is left for the schema.
    """
    out = dict(args)
    if isinstance(out.get("expression"), str):
        out["expression"] = out["expression"].strip()
    return out


def make_calculator_tool() -> BaseTool:
    """Build the `calculator` tool (stateless; a factory for symmetry with the other tools)."""
    return StructuredTool.from_function(
        coroutine=_calculator,
        name="calculator",
        description=inspect.cleandoc(_calculator.__doc__ or ""),
        args_schema=_CalculatorArgs,
        metadata={CANONICAL_ARGS: canonical_calculator_args},
    )
