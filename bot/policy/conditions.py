"""Argument conditions: CEL expressions over `args`, through cel-python.

`policy http_request review when args.method != 'GET'` stores the expression text; it is
compiled and checked when saved (syntax, and every `args.<name>` must be an argument of the
tool) and evaluated for each call. An evaluation error counts as "the condition holds": the
call needs review (docs/decisions/0006: fail closed).

Beyond CEL's standard library, `lowerAscii()` and `upperAscii()` are available (from cel-go's
strings extension), so `args.method.upperAscii() in ['GET', 'HEAD']` works for any casing, and
Kubernetes' URL helpers (`url(args.url).getHostname()`, ...: `bot.policy.cel_url`).

A condition reads the call's canonical arguments (`bot.tools.canonical`): the spelling the tool
itself uses, so `args.url` is already lower-case in scheme and host, without a default port.
Where that form writes text in one case (header names, addresses, methods: the tool's
`CaseRule`s), a string literal in the other case compared with that text could never match, so
the condition is refused when saved ("header names are compared in lower case: write 'x-sudo'").
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
from celpy.evaluation import celstr
from lark import Token, Tree

from bot.base.errors import CountersignError
from bot.policy.cel_url import URL_FUNCTIONS
from bot.tools.canonical import CaseRule, Part

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
    text: str,
    tool_arguments: Collection[str] | None = None,
    sample_args: Mapping[str, Any] | None = None,
    *,
    case_rules: Collection[CaseRule] = (),
) -> Condition:
    """Compile and check a condition.

    Args:
        text: the CEL expression (wrapping double quotes are removed).
        tool_arguments: the tool's argument names; every `args.<name>` must be one of them.
        sample_args: arguments of the right types (see `sample_arguments`); when the condition
            evaluates on them to something other than true or false (`args.url`, `1 + 1`),
            it is refused, since at run time it could only ever fail closed. An evaluation
            error on the sample proves nothing and is accepted.
        case_rules: what the tool's canonical form writes in one case (`ToolSpec.canonical_case`);
            a string literal in the other case compared with such text is refused (see
            `_case_problem` for the comparisons found). Empty: nothing is checked (conditions
            stored before are compiled so at run time).

    Raises:
        InvalidConditionError: naming the problem (syntax position, unknown argument, a literal
            in the wrong case, ...).
    """
    text = strip_quotes(text)
    if not text:
        raise InvalidConditionError("the condition is empty")
    if len(text) > MAX_CONDITION_CHARS:
        raise InvalidConditionError(f"the condition is longer than {MAX_CONDITION_CHARS} characters")
    condition = _compile(text, frozenset(tool_arguments) if tool_arguments is not None else None)
    if case_rules:
        problem = _case_problem(_parse(text), case_rules)
        if problem is not None:
            raise InvalidConditionError(problem)
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


def _parse(text: str) -> Tree[Token]:
    try:
        return celpy.Environment().compile(text)
    except CELParseError as exc:
        raise InvalidConditionError(f"not a valid CEL expression: {_first_line(exc)}") from None


@lru_cache(maxsize=512)
def _compile(text: str, tool_arguments: frozenset[str] | None) -> Condition:
    environment = celpy.Environment()
    tree = _parse(text)
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


_WRAPPERS = frozenset(
    {"expr", "conditionalor", "conditionaland", "relation", "addition", "multiplication", "unary", "member"}
    | {"primary", "paren_expr"}
)
"""Parse-tree nodes that, with one child, are that child (`(args.method)` is `args.method`)."""
_SUBSTRING_METHODS = frozenset({"startsWith", "endsWith", "contains"})
_MACROS = frozenset({"exists", "all", "exists_one", "filter", "map"})
_HOST_METHODS = frozenset({"getScheme", "getHost", "getHostname"})


def _case_problem(tree: Tree[Token], rules: Collection[CaseRule]) -> str | None:
    """Why the condition cannot match what `rules` say is written in one case; None when it can.

    Finds a string literal in the other case compared with such text: `args.method == 'post'`
    (or `!=`, `in [...]`, `startsWith`, `endsWith`, `contains`); `'X-Sudo' in args.headers`,
    `args.headers['X-Sudo']`, `has(args.headers.Authorization)`; `'Bob@X.example' in args.to`,
    `args.to[0] == ...`; a loop variable of `exists`, `all`, `exists_one`, `filter` or `map` over
    such keys or items (`args.to.exists(a, a.endsWith('@X.example'))`); and
    `url(args.url).getHostname()`, `getHost()` or `getScheme()`. Text passed through a function
    first (`args.method.lowerAscii() == 'post'`) is not such text and is not checked.
    """
    by_argument = {rule.argument: rule for rule in rules}

    def argument(node: Any) -> str | None:
        node = _unwrapped(node)
        if isinstance(node, Tree) and node.data in {"member_dot", "member_index"} and _is_args(node.children[0]):
            return str(node.children[1]) if node.data == "member_dot" else _string_value(node.children[1])
        return None

    def rule_of(node: Any, *parts: Part) -> CaseRule | None:
        rule = by_argument.get(argument(node) or "")
        return rule if rule is not None and rule.part in parts else None

    def text_rule(node: Any, bound: Mapping[str, CaseRule | None]) -> CaseRule | None:
        """The rule of the text `node` reads, when it reads text written in one case."""
        node = _unwrapped(node)
        if not isinstance(node, Tree):
            return None
        if node.data == "ident":
            return bound.get(str(node.children[0]))
        if node.data == "member_index":
            return rule_of(node.children[0], Part.ITEMS)
        if node.data == "member_dot_arg" and str(node.children[1]) in _HOST_METHODS:
            target = _unwrapped(node.children[0])
            if isinstance(target, Tree) and target.data == "ident_arg" and str(target.children[0]) == "url":
                inner = _expressions(target.children[1] if len(target.children) > 1 else None)
                return rule_of(inner[0], Part.HOST) if len(inner) == 1 else None
            return None
        return rule_of(node, Part.VALUE)

    def check(rule: CaseRule | None, literal: Any) -> None:
        value = _string_value(literal)
        if rule is not None and value is not None and rule.spelled(value) != value:
            raise _WrongCaseError(f"{rule.words} are compared in {rule.case.value} case: write {rule.spelled(value)!r}")

    def walk(node: Any, bound: Mapping[str, CaseRule | None]) -> None:
        if not isinstance(node, Tree):
            return
        children = node.children
        if node.data == "relation" and len(children) == 2 and isinstance(children[0], Tree):
            operator, right = children[0].data, children[1]
            left = children[0].children[0] if children[0].children else None
            if operator in {"relation_eq", "relation_ne"}:
                check(text_rule(left, bound), right)
                check(text_rule(right, bound), left)
            elif operator == "relation_in":
                check(rule_of(right, Part.ITEMS, Part.KEYS), left)
                listed = _unwrapped(right)
                if isinstance(listed, Tree) and listed.data == "list_lit":
                    for item in _expressions(listed.children[0] if listed.children else None):
                        check(text_rule(left, bound), item)
        elif node.data == "member_dot":
            check(rule_of(children[0], Part.KEYS), Token("STRING_LIT", repr(str(children[1]))))
        elif node.data == "member_index":
            check(rule_of(children[0], Part.KEYS), children[1])
        elif node.data == "member_dot_arg":
            method = str(children[1])
            given = _expressions(children[2] if len(children) > 2 else None)
            if method in _SUBSTRING_METHODS and len(given) == 1:
                check(text_rule(children[0], bound), given[0])
            variable = _unwrapped(given[0]) if method in _MACROS and len(given) >= 2 else None
            if isinstance(variable, Tree) and variable.data == "ident":
                # The loop variable reads the keys or items of the collection, not outer text.
                walk(children[0], bound)
                inner = {**bound, str(variable.children[0]): rule_of(children[0], Part.ITEMS, Part.KEYS)}
                for expression in given[1:]:
                    walk(expression, inner)
                return
        for child in children:
            walk(child, bound)

    try:
        walk(tree, {})
    except _WrongCaseError as wrong:
        return str(wrong)
    except RecursionError:
        # Hundreds of nested parentheses: cel-python parses them, but no one writes them.
        return "the condition is nested too deeply to check; write it with fewer parentheses"
    return None


class _WrongCaseError(Exception):
    """A literal in the wrong case was found (`_case_problem`); its message is the refusal."""


def _unwrapped(node: Any) -> Any:
    """`node` without the one-child wrappers around it (`_WRAPPERS`)."""
    while isinstance(node, Tree) and node.data in _WRAPPERS and len(node.children) == 1:
        node = node.children[0]
    return node


def _expressions(exprlist: Any) -> list[Any]:
    """The expressions of an `exprlist` node (a call's arguments, a list's items); empty for none."""
    return list(exprlist.children) if isinstance(exprlist, Tree) and exprlist.data == "exprlist" else []


def _string_value(node: Any) -> str | None:
    """The value of a string literal (`'X'`, `"X"`, `r'X'`, `'''X'''`, escapes decoded), else None."""
    node = _unwrapped(node)
    if isinstance(node, Tree) and node.data == "literal" and node.children:
        node = node.children[0]
    if isinstance(node, Token) and node.type in {"STRING_LIT", "MLSTRING_LIT"}:
        try:
            return str(celstr(node))
        except Exception:  # cel-python raises several types for a bad escape; not a literal we can read
            return None
    return None


def _first_line(exc: Exception) -> str:
    return " ".join(str(exc).split())[:300]
