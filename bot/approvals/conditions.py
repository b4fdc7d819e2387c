"""Argument conditions: CEL expressions over `args`, through cel-python.

`policy http_request review when args.method != 'GET'` stores the expression text; it is
compiled and checked when saved (syntax, and every `args.<name>` must be an argument of the
tool) and evaluated for each call. An evaluation error counts as "the condition holds": the
call needs review (issue 4: fail closed).

Beyond CEL's standard library, `lowerAscii()` and `upperAscii()` are available (from cel-go's
strings extension), so `args.method.upperAscii() in ['GET', 'HEAD']` works for any casing, and
Kubernetes' URL helpers (`url(args.url).getHostname()`, ...: `bot.approvals.cel_url`).

A condition reads the call's canonical arguments (`bot.tools.canonical`): the spelling the tool
itself uses, so `args.url` is already lower-case in scheme and host, without a default port.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import celpy
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.celparser import CELParseError
from lark import Token, Tree

from bot.approvals.cel_url import URL_FUNCTIONS
from bot.errors import CountersignError

log = logging.getLogger(__name__)

MAX_CONDITION_CHARS = 1000


class InvalidConditionError(CountersignError):
    """A condition cannot be saved: bad syntax or an argument the tool does not have.

    Args:
        message: what is wrong, for the admin who typed it.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _lower(value: celtypes.StringType) -> celtypes.StringType:
    return celtypes.StringType(str(value).lower())


def _upper(value: celtypes.StringType) -> celtypes.StringType:
    return celtypes.StringType(str(value).upper())


_FUNCTIONS: dict[str, Callable[..., Any]] = {"lowerAscii": _lower, "upperAscii": _upper, **URL_FUNCTIONS}


@dataclass(frozen=True, slots=True)
class Condition:
    """A compiled condition.

    Attributes:
        text: the CEL expression as the admin wrote it.
        arguments: the `args.<name>` names it reads.
    """

    text: str
    arguments: frozenset[str]
    _program: Any = field(repr=False, compare=False)

    def holds(self, args: Mapping[str, Any]) -> bool:
        """Evaluate the condition for `args`.

        Raises:
            ConditionEvaluationError: the expression failed (a missing argument, a wrong
                type) or did not produce a boolean. Callers treat this as "holds".
        """
        try:
            result = self._program.evaluate({"args": json_to_cel(dict(args))})
        except Exception as exc:  # cel-python raises several types
            raise ConditionEvaluationError(self.text, str(exc)) from exc
        if isinstance(result, Exception):
            raise ConditionEvaluationError(self.text, str(result))
        if not isinstance(result, celtypes.BoolType | bool):
            raise ConditionEvaluationError(self.text, f"result is {type(result).__name__}, not a boolean")
        return bool(result)


class ConditionEvaluationError(CountersignError):
    """A condition failed at run time (the call then needs review)."""

    def __init__(self, text: str, detail: str) -> None:
        super().__init__(f"condition {text!r} failed: {' '.join(detail.split())[:300]}")


def strip_quotes(text: str) -> str:
    """The condition without surrounding whitespace and one pair of wrapping double quotes."""
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        text = text[1:-1].strip()
    return text


def compile_condition(
    text: str, tool_arguments: Collection[str] | None = None, sample_args: Mapping[str, Any] | None = None
) -> Condition:
    """Compile and check a condition.

    Args:
        text: the CEL expression (wrapping double quotes are removed).
        tool_arguments: the tool's argument names; every `args.<name>` must be one of them.
        sample_args: arguments of the right types (see `sample_arguments`); when the condition
            evaluates on them to something other than true or false (`args.url`, `1 + 1`),
            it is refused, since at run time it could only ever fail closed. An evaluation
            error on the sample proves nothing and is accepted.

    Raises:
        InvalidConditionError: naming the problem (syntax position, unknown argument, ...).
    """
    text = strip_quotes(text)
    if not text:
        raise InvalidConditionError("the condition is empty")
    if len(text) > MAX_CONDITION_CHARS:
        raise InvalidConditionError(f"the condition is longer than {MAX_CONDITION_CHARS} characters")
    condition = _compile(text, frozenset(tool_arguments) if tool_arguments is not None else None)
    if sample_args is not None:
        try:
            result = condition._program.evaluate({"args": json_to_cel(dict(sample_args))})
        except Exception:  # cel-python raises several types; the sample proves nothing
            result = None
        if result is not None and not isinstance(result, Exception | celtypes.BoolType | bool):
            raise InvalidConditionError(
                f"the condition must be true or false, but it gives {_kind(result)} (compare it, e.g. args.x == 'y')"
            )
    return condition


def sample_arguments(json_schema: Mapping[str, Any]) -> dict[str, Any]:
    """One value of the declared type per argument of a tool's JSON Schema (text, 0, false, [], {}).

    The text sample is a URL, so that a condition over the URL helpers (`url(args.url)...`)
    evaluates on it too and a result that is not a boolean is caught when it is saved.
    """
    samples: dict[str, Any] = {
        "string": "https://example.com/",
        "integer": 0,
        "number": 0.0,
        "boolean": False,
        "array": [],
        "object": {},
    }
    out: dict[str, Any] = {}
    for name, prop in (json_schema.get("properties") or {}).items():
        branches = [prop, *(prop.get("anyOf") or ())] if isinstance(prop, Mapping) else []
        kinds = [b.get("type") for b in branches if isinstance(b, Mapping) and b.get("type") not in (None, "null")]
        kind = kinds[0] if kinds else "string"
        out[str(name)] = samples.get(kind if isinstance(kind, str) else "string", "")
    return out


def _kind(value: Any) -> str:
    names = {
        celtypes.StringType: "text",
        celtypes.IntType: "a number",
        celtypes.UintType: "a number",
        celtypes.DoubleType: "a number",
        celtypes.ListType: "a list",
        celtypes.MapType: "a map",
        celtypes.BytesType: "bytes",
    }
    return next((name for kind, name in names.items() if isinstance(value, kind)), "a value that is not a boolean")


@lru_cache(maxsize=512)
def _compile(text: str, tool_arguments: frozenset[str] | None) -> Condition:
    environment = celpy.Environment()
    try:
        tree = environment.compile(text)
    except CELParseError as exc:
        raise InvalidConditionError(f"not a valid CEL expression: {_first_line(exc)}") from None
    names = _argument_names(tree)
    roots = _root_identifiers(tree) - {"args"} - _bound_variables(tree)
    if roots:
        raise InvalidConditionError(
            f"unknown name {sorted(roots)[0]!r}: a condition reads only `args` (e.g. args.method)"
        )
    if tool_arguments is not None:
        unknown = sorted(names - tool_arguments)
        if unknown:
            known = ", ".join(sorted(tool_arguments)) or "none"
            raise InvalidConditionError(f"the tool has no argument {unknown[0]!r} (its arguments: {known})")
    program = environment.program(tree, functions=_FUNCTIONS)
    return Condition(text=text, arguments=frozenset(names), _program=program)


def _argument_names(tree: Tree[Token]) -> set[str]:
    """Names read as `args.<name>` or `args['<name>']`."""
    names: set[str] = set()
    for node in tree.iter_subtrees():
        if node.data == "member_dot" and len(node.children) == 2 and _is_args(node.children[0]):
            names.add(str(node.children[1]))
        if node.data == "member_index" and len(node.children) == 2 and _is_args(node.children[0]):
            literal = _string_literal(node.children[1])
            if literal is not None:
                names.add(literal)
    return names


def _is_args(node: Any) -> bool:
    """True when `node` is exactly the identifier `args` (a `member -> primary -> ident` chain)."""
    while isinstance(node, Tree) and node.data in {"member", "primary"} and len(node.children) == 1:
        node = node.children[0]
    return isinstance(node, Tree) and node.data == "ident" and str(node.children[0]) == "args"


def _string_literal(node: Any) -> str | None:
    for child in node.iter_subtrees() if isinstance(node, Tree) else ():
        if child.data == "literal":
            token = str(child.children[0])
            if len(token) >= 2 and token[0] == token[-1] and token[0] in "'\"":
                return token[1:-1]
    return None


def _root_identifiers(tree: Tree[Token]) -> set[str]:
    """Identifiers used as values (not as function or method names)."""
    return {str(node.children[0]) for node in tree.iter_subtrees() if node.data == "ident"}


def _bound_variables(tree: Tree[Token]) -> set[str]:
    """Loop variables of comprehension macros (`args.to.exists(t, ...)` binds `t`)."""
    bound: set[str] = set()
    for node in tree.iter_subtrees():
        if node.data == "member_dot_arg" and len(node.children) == 3:
            exprlist = node.children[2]
            if isinstance(exprlist, Tree) and exprlist.children:
                first = exprlist.children[0]
                if isinstance(first, Tree):
                    idents = [c for c in first.iter_subtrees() if c.data == "ident"]
                    if len(idents) == 1:
                        bound.add(str(idents[0].children[0]))
    return bound


def _first_line(exc: Exception) -> str:
    return " ".join(str(exc).split())[:300]
