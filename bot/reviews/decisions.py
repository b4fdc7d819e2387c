"""Review decisions in the LangChain HITL shape, and their validation.

Shapes (DESIGN.md "Approvals"): `{"type": "approve"}`, `{"type": "edit", "edited_action":
{"name", "args"}}`, `{"type": "reject", "message": "optional reason"}`; resumed as
`Command(resume={"decisions": [...]})`, one per action request, in order.

docs/DESIGN.md (Approvals) explains why validation happens before the graph is touched: the resume value is
stored in the checkpoint, so a decision that fails after `interrupt()` fails again on every
retry and the thread is stuck. Beyond the template, edited arguments are checked against the
tool's own schema here, and a change of tool name is refused.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

from jsonschema import Draft202012Validator
from langchain_core.tools import BaseTool
from langchain_core.utils.json_schema import dereference_refs
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from bot.base.errors import InvalidArgumentsError, InvalidDecisionError
from bot.tools.canonical import MAX_ARGS_DEPTH, canonical_args
from bot.tools.refusals import input_json_schema, json_schema_error
from bot.tools.registry import ARGS_CHECK

MAX_REASON_CHARS = 2000
"""A reject reason longer than this is refused (it goes to the model and into the audit log)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EditedAction(_Strict):
    """The replacement call of an `edit` decision."""

    name: str
    args: dict[str, Any]


class Approve(_Strict):
    """Run the call as proposed."""

    type: Literal["approve"] = "approve"


class Edit(_Strict):
    """Run the call with `edited_action.args` (same tool, same call id)."""

    type: Literal["edit"] = "edit"
    edited_action: EditedAction


class Reject(_Strict):
    """Do not run the call; `message` reaches the model as the reason.

    Its length is checked by `check_decision` (at most `MAX_REASON_CHARS`), so an adapter can
    build one from any text and the person who typed it gets the refusal in words.
    """

    type: Literal["reject"] = "reject"
    message: str | None = None


Decision = Annotated[Approve | Edit | Reject, Field(discriminator="type")]
_DECISION = TypeAdapter(Decision)


def parse_decision(raw: object) -> Approve | Edit | Reject:
    """Validate one decision's shape.

    Args:
        raw: a decision dict as in the module docstring.

    Raises:
        InvalidDecisionError: naming the first problem.
    """
    try:
        return _DECISION.validate_python(raw)
    except ValidationError as exc:
        raise InvalidDecisionError(f"malformed decision: {_first_error(exc)}") from None


def check_decision(
    decision: Approve | Edit | Reject,
    action: Mapping[str, Any],
    tool: BaseTool | None,
) -> Approve | Edit | Reject:
    """Check a decision against the action request it answers.

    Args:
        decision: a parsed decision.
        action: the action request (`{"name", "args", "description"}`).
        tool: the tool named by the action, or None if it is not registered any more.

    Returns:
        The decision; an edit's arguments in the tool's canonical form, once they passed the
        schema (see `validate_tool_args`).

    Raises:
        InvalidDecisionError: for a reject reason over `MAX_REASON_CHARS`, or an edit that
            renames the tool, has arguments the tool's schema or canonical form refuses, or
            targets a tool that no longer exists.
    """
    if isinstance(decision, Reject):
        if decision.message is not None and len(decision.message) > MAX_REASON_CHARS:
            raise InvalidDecisionError(
                f"the reason is too long ({len(decision.message)} characters; at most {MAX_REASON_CHARS})",
                field="message",
            )
        return decision
    if not isinstance(decision, Edit):
        return decision
    expected = action.get("name")
    if decision.edited_action.name != expected:
        raise InvalidDecisionError(
            f"an edit cannot change the tool: expected {expected!r}, got {decision.edited_action.name!r}",
            field="name",
        )
    if tool is None:
        raise InvalidDecisionError(f"tool {expected!r} is not available any more", field="name")
    args = validate_tool_args(tool, decision.edited_action.args)
    return Edit(edited_action=EditedAction(name=decision.edited_action.name, args=args))


def validate_tool_args(tool: BaseTool, args: Mapping[str, Any], *, tool_checks: bool = True) -> dict[str, Any]:
    """Validate `args` against the tool's call schema (what the model sees), in canonical form.

    The arguments are first put in the tool's canonical form (`bot.tools.canonical`), so an
    edit is judged, stored, shown and run in the same spelling as a call from the model
    (docs/decisions/0010). With `tool_checks`, the tool's own check of what its schema
    cannot express (the `ARGS_CHECK` in its metadata, e.g. `http_request`'s allowed hosts)
    runs too. A tool described by a JSON Schema instead of a pydantic model (an MCP tool's
    `inputSchema`, `bot.tools.registry.INPUT_SCHEMA`) is checked against that schema with
    `jsonschema`, so an approver cannot send what the tool would refuse.

    Returns:
        The canonical arguments (only keys the caller sent), after validation succeeded.

    Raises:
        InvalidDecisionError: with the failing argument path in `field`; an argument name the
            tool does not have is refused too (a typo must not be dropped silently), and so
            are arguments the tool's canonical form refuses (a URL with a user name, say).
    """
    problem = storable_problem(args)
    if problem is not None:
        raise InvalidDecisionError(f"invalid arguments for {tool.name}: {problem}", field="args")
    schema = tool.tool_call_schema
    model = schema if isinstance(schema, type) and issubclass(schema, BaseModel) else None
    unknown = sorted(set(args) - set(model.model_fields)) if model is not None else []
    if model is not None and unknown:
        raise InvalidDecisionError(
            f"{tool.name} has no argument {unknown[0]!r} (its arguments: {', '.join(model.model_fields) or 'none'})",
            field=f"args.{unknown[0]}",
        )
    try:
        args = canonical_args(tool, args)
    except InvalidArgumentsError as exc:
        raise InvalidDecisionError(
            f"{tool.name} would refuse these arguments: {_clip(exc.message)}", field=exc.field or "args"
        ) from None
    if model is None:
        return _fit_json_schema(tool, dict(args), tool_checks=tool_checks)
    schema = model
    try:
        schema.model_validate(dict(args))
    except ValidationError as exc:
        error = exc.errors()[0]
        path = ".".join(str(p) for p in error.get("loc", ()))
        raise InvalidDecisionError(
            f"invalid arguments for {tool.name}: {_clip(_first_error(exc))}",
            field=f"args.{path}" if path else "args",
        ) from None
    json_schema = dereference_refs(schema.model_json_schema())
    # The JSON Schema the model sees can say more than the pydantic types (an `enum` of HTTP
    # methods, say); an edit must fit it too.
    for error in Draft202012Validator(json_schema).iter_errors(dict(args)):
        path = ".".join(str(p) for p in error.absolute_path)
        raise InvalidDecisionError(
            f"invalid arguments for {tool.name}: {path + ': ' if path else ''}{_clip(error.message)}",
            field=f"args.{path}" if path else "args",
        )
    nested = _unknown_key(dict(args), json_schema, "args")
    if nested is not None:
        where, key, known = nested
        raise InvalidDecisionError(
            f"{where} has no field {key!r} (its fields: {', '.join(known) or 'none'})",
            field=f"{where}.{key}",
        )
    check = (tool.metadata or {}).get(ARGS_CHECK) if tool_checks else None
    problem = check(dict(args)) if callable(check) else None
    if problem:
        raise InvalidDecisionError(f"{tool.name} would refuse these arguments: {_clip(str(problem))}", field="args")
    return dict(args)


def _fit_json_schema(tool: BaseTool, args: dict[str, Any], *, tool_checks: bool) -> dict[str, Any]:
    """`validate_tool_args` for a tool described by a JSON Schema (an MCP tool's `inputSchema`).

    The arguments must fit the tool's own schema (`bot.tools.refusals.input_json_schema`), and
    a key it does not declare is refused where the schema lists properties and says nothing of
    others (a typo would otherwise reach the tool, or be dropped by it, silently).
    """
    json_schema = input_json_schema(tool)
    if json_schema is not None:
        found = json_schema_error(json_schema, args)
        if found is not None:
            path, message = found
            raise InvalidDecisionError(
                f"invalid arguments for {tool.name}: {path + ': ' if path else ''}{_clip(message)}",
                field=f"args.{path}" if path else "args",
            )
        nested = _unknown_key(args, json_schema, "args")
        if nested is not None:
            where, key, known = nested
            owner = f"{tool.name}" if where == "args" else where
            raise InvalidDecisionError(
                f"{owner} has no {'argument' if where == 'args' else 'field'} {key!r} "
                f"(its {'arguments' if where == 'args' else 'fields'}: {', '.join(known) or 'none'})",
                field=f"{where}.{key}",
            )
    check = (tool.metadata or {}).get(ARGS_CHECK) if tool_checks else None
    problem = check(dict(args)) if callable(check) else None
    if problem:
        raise InvalidDecisionError(f"{tool.name} would refuse these arguments: {_clip(str(problem))}", field="args")
    return args


_MESSAGE_CHARS = 300
"""Validation messages quote the offending value; past this they are cut (a card's error must fit)."""

_SURROGATE = re.compile("[\ud800-\udfff]")


def _clip(text: str) -> str:
    return text if len(text) <= _MESSAGE_CHARS else text[: _MESSAGE_CHARS - 1] + "…"


def _unknown_key(value: Any, schema: Mapping[str, Any], where: str) -> tuple[str, str, list[str]] | None:
    """The first key in `value` that its JSON schema does not declare, as (path, key, known).

    Pydantic ignores unknown keys in nested models by default; an approver's typo there would
    be dropped silently, so it is refused like a top-level one. Keys under a free-form object
    (`additionalProperties` given) are allowed.
    """
    branches = schema.get("anyOf") or schema.get("oneOf")
    if branches:
        found = [_unknown_key(value, branch, where) for branch in branches if _fits(value, branch)]
        return None if not found or any(f is None for f in found) else found[0]
    if isinstance(value, dict):
        properties: Mapping[str, Any] = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            if key in properties:
                deeper = _unknown_key(item, properties[key], f"{where}.{key}")
            elif isinstance(extra, Mapping):
                deeper = _unknown_key(item, extra, f"{where}.{key}")
            elif properties and extra is None:
                return where, str(key), list(properties)
            else:
                deeper = None
            if deeper is not None:
                return deeper
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for index, item in enumerate(value):
            deeper = _unknown_key(item, schema["items"], f"{where}.{index}")
            if deeper is not None:
                return deeper
    return None


def _fits(value: Any, schema: Mapping[str, Any]) -> bool:
    """Whether `value` has the JSON type a schema branch describes (untyped fits anything)."""
    kind = schema.get("type")
    if kind is None:
        return True
    kinds = kind if isinstance(kind, list) else [kind]
    python = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}
    return any(
        isinstance(value, python[k]) if k in python else isinstance(value, (int, float)) and not isinstance(value, bool)
        for k in kinds
    )


_INT_RANGE = (-(2**63), 2**63 - 1)


def storable_problem(value: Any, depth: int = 0) -> str | None:
    """Why `value` cannot be stored and run safely, or None.

    The checkpoint serializer refuses integers beyond 64 bits and very deep nesting, and
    PostgreSQL's jsonb refuses U+0000, NaN and Infinity, and UTF-8 cannot hold a lone surrogate
    (U+D800 alone, say); an edit with any of them would be recorded and then fail after the tool
    ran. They are refused before anything is recorded.
    """
    if depth > MAX_ARGS_DEPTH:
        return f"nested more than {MAX_ARGS_DEPTH} levels deep"
    if isinstance(value, float):
        return None if math.isfinite(value) else "a number is not finite (NaN and Infinity are not JSON)"
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return None if _INT_RANGE[0] <= value <= _INT_RANGE[1] else "a number is too large (64-bit integers only)"
    if isinstance(value, str):
        if "\x00" in value:
            return "text contains a NUL character (U+0000)"
        return "text contains a lone surrogate (not valid Unicode)" if _SURROGATE.search(value) else None
    if isinstance(value, Mapping):
        for key, item in value.items():
            problem = storable_problem(str(key), depth + 1) or storable_problem(item, depth + 1)
            if problem:
                return problem
        return None
    if isinstance(value, list | tuple):
        for item in value:
            problem = storable_problem(item, depth + 1)
            if problem:
                return problem
    return None


def validate_decisions(
    decisions: Sequence[object],
    review_request: Mapping[str, Any],
    tools: Mapping[str, BaseTool],
) -> list[Approve | Edit | Reject]:
    """Validate a whole resume value against the pending review request (docs/DESIGN.md, Agents).

    Args:
        decisions: one raw decision per action request, in order.
        review_request: the interrupt payload (`{"action_requests", "review_configs"}`).
        tools: tools by name.

    Raises:
        InvalidDecisionError: on a count mismatch, a malformed decision, a decision type the
            review config does not allow, or an invalid edit.
    """
    actions = list(review_request.get("action_requests", []))
    configs = list(review_request.get("review_configs", []))
    if len(decisions) != len(actions):
        raise InvalidDecisionError(f"expected {len(actions)} decision(s), one per pending action, got {len(decisions)}")
    checked: list[Approve | Edit | Reject] = []
    for index, (raw, action) in enumerate(zip(decisions, actions, strict=True)):
        decision = parse_decision(raw)
        allowed = _allowed_for(configs, index, action)
        if decision.type not in allowed:
            raise InvalidDecisionError(
                f"decision {index + 1}: {decision.type!r} is not allowed for "
                f"{action.get('name')!r} (allowed: {', '.join(allowed)})"
            )
        checked.append(check_decision(decision, action, tools.get(str(action.get("name")))))
    return checked


def _allowed_for(configs: Sequence[Mapping[str, Any]], index: int, action: Mapping[str, Any]) -> list[str]:
    """The allowed decision types for the action at `index` (by position, then by name)."""
    if index < len(configs) and configs[index].get("action_name") == action.get("name"):
        return list(configs[index].get("allowed_decisions", []))
    for config in configs:
        if config.get("action_name") == action.get("name"):
            return list(config.get("allowed_decisions", []))
    return ["approve", "edit", "reject"]


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(p) for p in error.get("loc", ()))
    return f"{where}: {error['msg']}" if where else str(error["msg"])
