"""The generic canonical form of arguments, and how a tool declares its own."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import pytest
from langchain_core.tools import tool

from bot.base.errors import InvalidArgumentsError
from bot.base.mode import Mode
from bot.reviews.decisions import storable_problem
from bot.tools.canonical import (
    CANONICAL_ARGS,
    MAX_ARGS_DEPTH,
    canonical_args,
    canonical_values,
    cut_deeper_than,
    nested_deeper_than,
)
from bot.tools.registry import ToolRegistry, ToolSpec


def test_numbers_take_the_form_both_stores_keep():
    """An integer beyond 64 bits becomes its float, also when jsonb gives the float back as an integer."""
    huge = float(2**70)
    from_jsonb = int(Decimal(repr(huge)))  # what jsonb returns for the float
    assert from_jsonb != 2**70
    assert canonical_values({"n": 2**70}) == {"n": huge}
    assert canonical_values({"n": from_jsonb}) == {"n": huge}
    assert canonical_values({"n": [2**63 - 1, -(2**63), True, 1.5, (2**64,)]}) == {
        "n": [2**63 - 1, -(2**63), True, 1.5, [float(2**64)]]
    }
    assert type(canonical_values({"n": 2**63 - 1})["n"]) is int


def _deploy_tool():
    @tool
    async def deploy(service: str, replicas: int = 1) -> str:
        """Deploy a service."""
        return "ok"

    return deploy


def _lower_service(args: Mapping[str, Any]) -> dict[str, Any]:
    service = args.get("service")
    if isinstance(service, str) and not service.strip():
        raise InvalidArgumentsError("the service name is empty", field="args.service")
    return {**args, "service": service.strip().lower()} if isinstance(service, str) else dict(args)


def test_a_tool_spec_declares_the_canonical_form_on_its_tool():
    """`ToolSpec(canonical=...)` puts the form in the tool's metadata, where every node finds it."""
    spec = ToolSpec(tool=_deploy_tool(), default_mode=Mode.REVIEW, canonical=_lower_service)
    registry = ToolRegistry([spec])
    [deploy] = registry.tools()
    assert (deploy.metadata or {})[CANONICAL_ARGS] is _lower_service
    assert canonical_args(deploy, {"service": " Web ", "replicas": 2**70}) == {
        "service": "web",
        "replicas": float(2**70),
    }
    with pytest.raises(InvalidArgumentsError, match="empty"):
        canonical_args(deploy, {"service": "  "})


def test_a_failing_form_is_a_refusal_naming_the_tool():
    """A custom form that raises anything is reported as arguments the tool refuses, never passed through."""

    def broken(args: Mapping[str, Any]) -> dict[str, Any]:
        raise KeyError("service")

    spec = ToolSpec(tool=_deploy_tool(), canonical=broken)
    with pytest.raises(InvalidArgumentsError, match="deploy cannot read these arguments: KeyError"):
        canonical_args(spec.tool, {})


def test_a_tool_cannot_get_two_canonical_forms():
    """Declaring another form for a tool that already carries one is a start-up error."""
    deploy = _deploy_tool()
    ToolSpec(tool=deploy, canonical=_lower_service)
    ToolSpec(tool=deploy, canonical=_lower_service)  # the same form again is fine
    with pytest.raises(ValueError, match="another canonical form"):
        ToolSpec(tool=deploy, canonical=lambda args: dict(args))


def test_a_tool_without_a_form_gets_the_generic_one_only():
    """No declared form: values only (an unknown tool too)."""
    assert canonical_args(_deploy_tool(), {"service": " Web "}) == {"service": " Web "}
    assert canonical_args(None, {"n": 2**64}) == {"n": float(2**64)}


def _dicts(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return value


def _lists(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("nest", [_dicts, _lists], ids=["dicts", "lists"])
@pytest.mark.parametrize("depth", [0, 1, MAX_ARGS_DEPTH - 1, MAX_ARGS_DEPTH, MAX_ARGS_DEPTH + 1, 250, 5000])
def test_the_depth_cap_agrees_with_the_edit_check_and_cutting_fits_under_it(nest, depth):
    """`nested_deeper_than` says what `storable_problem` says of an edit; the cut value is under the cap, even from 5000 levels."""
    value = {"x": nest(depth)}
    deep = nested_deeper_than(value)
    assert deep == (depth + 1 > MAX_ARGS_DEPTH)
    assert deep == (storable_problem(value) is not None)
    cut = cut_deeper_than(value)
    assert not nested_deeper_than(cut)
    assert (cut == value) is not deep
    assert storable_problem(cut) is None
