"""Arguments a tool refuses before doing anything: such a call is answered at once, with no card.

A card asks a person to approve a call; asking about one the tool will refuse anyway (a POST to
a host that is not allowed, an address with a display name) only wastes the approver's time,
and the model learns what is wrong only after someone clicked. `refusal` says, from the tool's
own checks, whether the tool would refuse the arguments as written; `llm_call` then plans the
call as refused and `human_review` answers it with that error, whatever its mode, except that a
denied tool stays denied (docs/decisions/0010-canonical-arguments.md).

Only the tool's own refusals count, each one a check the tool applies before it does anything:

1. its canonical form (`bot.tools.canonical`) raises `InvalidArgumentsError`;
2. its call schema refuses them (the tool node's own check, `schema_problem`; a JSON Schema,
   such as an MCP tool's, is checked with `jsonschema`);
3. its `ARGS_CHECK` (`bot.tools.registry`) names a problem.

A check that fails any other way (a form or check that raises something else) refuses nothing:
the call then goes to its mode as before, since only a refusal may spare the review. Nothing
that is refused here runs, so this can never let a call run without review.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match
from jsonschema.validators import validator_for
from langchain_core.tools import BaseTool
from pydantic import BaseModel, ValidationError

from bot.base.errors import InvalidArgumentsError
from bot.tools.canonical import canonical_form, canonical_values
from bot.tools.registry import ARGS_CHECK, INPUT_SCHEMA

log = logging.getLogger(__name__)

_PROBLEM_CHARS = 500
"""A refusal quotes the offending value; past this it is cut (the model reads it, and so may a log)."""


def input_json_schema(tool: BaseTool) -> dict[str, Any] | None:
    """The JSON Schema `tool`'s arguments are checked against, when it has one instead of a pydantic model.

    Its own (`bot.tools.registry.INPUT_SCHEMA`), else its `args_schema` when that is a dict
    (without the description LangChain adds); None for a tool with a pydantic model.
    """
    own = (tool.metadata or {}).get(INPUT_SCHEMA)
    if isinstance(own, dict):
        return own
    if isinstance(tool.args_schema, dict):
        return tool.args_schema
    return None


def json_schema_error(schema: Mapping[str, Any], args: Mapping[str, Any]) -> tuple[str, str] | None:
    """The first error of `args` against a JSON Schema, as `(path, message)`; None when they fit.

    `path` is dotted from the arguments' root ("" for the root itself). The draft is the one the
    schema names in `$schema`, else 2020-12 (MCP's). A schema that cannot be used (invalid, or
    with a reference that cannot be resolved here) finds nothing: the tool is then the judge.
    """
    try:
        validator = validator_for(schema, default=Draft202012Validator)(schema)
        error = best_match(validator.iter_errors(dict(args)))
    except Exception:
        log.warning("a tool's JSON Schema cannot be used to check arguments", exc_info=True)
        return None
    if error is None:
        return None
    return ".".join(str(p) for p in error.absolute_path), error.message


def schema_problem(tool: BaseTool, args: Mapping[str, Any]) -> str | None:
    """What the tool's call schema finds wrong with `args`, or None when they fit.

    The tool node runs no call with such arguments (`bot.agents.tool_node.run_tool`). A tool
    with a JSON Schema instead of a pydantic model (`input_json_schema`, an MCP tool's) is
    checked against it with `jsonschema`.
    """
    json_schema = input_json_schema(tool)
    if json_schema is not None:
        found = json_schema_error(json_schema, args)
        if found is None:
            return None
        path, message = found
        return f"{path or 'args'}: {message}"
    schema = tool.tool_call_schema
    if not isinstance(schema, type) or not issubclass(schema, BaseModel):
        return None
    try:
        schema.model_validate(dict(args))
    except ValidationError as exc:
        return "; ".join(
            f"{'.'.join(str(p) for p in error['loc']) or 'args'}: {error['msg']}" for error in exc.errors()
        )
    return None


def refusal(tool: BaseTool, args: Mapping[str, Any]) -> str | None:
    """Why `tool` would refuse `args` before doing anything, as one sentence; None when it would try them.

    Args:
        tool: the tool the call names.
        args: the call's arguments, as the model sent them or in their canonical form (the
            form is idempotent, so either gives the same answer).

    Returns:
        The tool's reason (its canonical form's, its schema's, or its `ARGS_CHECK`'s, in that
        order), ending with a full stop; None when none of them refuses.
    """
    values: dict[str, Any] = canonical_values(dict(args))
    form = canonical_form(tool)
    if form is not None:
        try:
            values = dict(canonical_values(form(values)))
        except InvalidArgumentsError as exc:
            return _sentence(exc.message)
        except Exception:
            # A form that breaks is no refusal by the tool: the call goes to its mode (the
            # policy then fails closed on it, `bot.policy.review.effective_mode`).
            log.warning("the canonical form of %s failed; the call goes to its mode", tool.name, exc_info=True)
            return None
    problem = schema_problem(tool, values)
    if problem is not None:
        return _sentence(f"invalid arguments for {tool.name}: {problem}")
    check = (tool.metadata or {}).get(ARGS_CHECK)
    if not callable(check):
        return None
    try:
        found = check(values)
    except Exception:
        log.warning("the argument check of %s failed; the call goes to its mode", tool.name, exc_info=True)
        return None
    return _sentence(str(found)) if found else None


def _sentence(text: str) -> str:
    """`text` trimmed, cut to `_PROBLEM_CHARS`, ending once as a sentence (`.`, `!`, `?` or `…`).

    The same rule as `adapters.words.decisions.as_sentence`: refusals are clauses, and some end
    in a period of their own.
    """
    text = text.strip()
    if len(text) > _PROBLEM_CHARS:
        text = text[: _PROBLEM_CHARS - 1] + "…"
    return text if text.endswith((".", "!", "?", "…")) else text + "."
