"""`bench.mcp_turns`' report: the target line for a model that answers at once, what a person feels for a slow one."""

from __future__ import annotations

from bench.common.harness import Series
from bench.mcp_turns import KINDS, McpResults, mcp_lines, parse_args


def results(bare_ms: float, whole_ms: float) -> McpResults:
    """Every series of a side at one latency, one server start per side."""
    return McpResults(
        bare=[Series(f"bare stack, {row}", [bare_ms] * 3) for _, row, *_ in KINDS],
        whole=[Series(f"whole Slack path, {row}", [whole_ms] * 3) for _, row, *_ in KINDS],
        bare_starts=1,
        bot_starts=1,
    )


def test_with_a_model_that_answers_at_once_the_report_judges_the_target():
    """At the default `--model-ms 0` the report says the stand-in answers at once and whether 1.3x is met."""
    assert parse_args([]).model_ms == 0
    lines = mcp_lines(results(20.0, 30.0), turns=3, warmup=1)
    assert "(the Gemini stand-in answers each model call at once)" in lines
    assert "  p50 target: within 1.3x of the bare stack: NOT met (1.50x)" in lines
    assert "  p50 target: within 1.3x of the bare stack: met (1.25x)" in mcp_lines(results(20.0, 25.0), 3, 1)


def test_with_a_slow_model_the_report_says_what_a_person_feels_instead_of_the_target():
    """With `--model-ms 500` the report names the model's delay and gives the ratio without judging the target."""
    assert parse_args(["--model-ms", "500"]).model_ms == 500
    lines = mcp_lines(results(1000.0, 1010.0), turns=3, warmup=1, model_ms=500)
    assert "(the Gemini stand-in answers each model call after 500 ms)" in lines
    assert "  with a model this slow, the MCP call's whole Slack path takes 1.01x the bare stack's" in lines
    assert not any("p50 target" in line for line in lines)
