"""Formatting the benchmarks' reports: tables, ratios, milestones, profile, machine.

What only one benchmark prints stays in its own module (`bench.turns.header_lines`,
`bench.common.clicks.click_lines`, `bench.common.throughput_report`).
"""

from __future__ import annotations

import contextlib
import cProfile
import io
import os
import platform
import pstats
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from bench.common.harness import (
    REPO_ROOT,
    Milestones,
    Series,
    percentile,
)


def machine_lines(pg_version: str) -> list[str]:
    """Python, CPUs, load and the library versions that matter for these figures."""
    cpu_model = "unknown CPU"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    versions = []
    for dist in (
        "langgraph",
        "langgraph-checkpoint-postgres",
        "psycopg",
        "google-genai",
        "langchain-google-genai",
        "slack-bolt",
        "slack-sdk",
    ):
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions.append(f"{dist} {metadata.version(dist)}")
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return [
        f"python {platform.python_version()} ({platform.python_implementation()}), "
        f"{platform.system()} {platform.machine()}",
        f"CPUs: {os.cpu_count()} ({usable} usable), {cpu_model}; load average {load}",
        f"PostgreSQL: {pg_version}",
        "; ".join(versions),
    ]


def format_row(series: Series, qs: Sequence[float]) -> str:
    """One table row: name, n, then the percentiles."""
    figures = "".join(f"{series.p(q):>9.1f}" for q in qs)
    return f"  {series.name:<46}{series.count:>5}{figures}"


def table(title: str, rows: Sequence[Series], qs: Sequence[float]) -> list[str]:
    """A titled table of series with the given percentiles."""
    head = "".join(f"{'p' + format(q, 'g'):>9}" for q in qs)
    lines = [title, f"  {'series':<46}{'n':>5}{head}"]
    lines += [format_row(series, qs) for series in rows]
    return lines


def ratio_lines(pairs: Sequence[tuple[str, Series, Series]]) -> list[str]:
    """whole / bare at p50 and p95 for each pair."""
    lines = ["Ratio whole Slack path / bare graph (same model: the Gemini stand-in)"]
    for label, whole, bare in pairs:
        lines.append(
            f"  {label:<46}p50 {whole.p(50) / bare.p(50):>5.2f}x   "
            f"p95 {whole.p(95) / bare.p(95):>5.2f}x   "
            f"(extra at p50: {whole.p(50) - bare.p(50):.1f} ms)"
        )
    return lines


def milestone_lines(groups: Sequence[Milestones]) -> list[str]:
    """Median time since the turn started at which each milestone happened."""
    lines = ["Where the time goes: median ms since the turn started (signed event sent / ainvoke)"]
    for group in groups:
        lines.append(f"  {group.name}")
        ordered = sorted(group.by_label.items(), key=lambda item: percentile(item[1], 50))
        for label, values in ordered:
            lines.append(f"    {label:<44}{percentile(values, 50):>8.1f}")
    return lines


def profile_lines(profiler: cProfile.Profile, top: int = 20) -> list[str]:
    """Own CPU time by package, then the top functions, of an extra profiled Slack series."""
    by_package = own_time_by_package(profiler)
    total = sum(by_package.values())
    lines = [
        "cProfile (CPU time) of an extra, unreported Slack text series: own time by package",
        f"(everything in this process: bot, stand-ins, mention sender; total {total:.2f} s)",
    ]
    for name, own in sorted(by_package.items(), key=lambda item: -item[1])[:16]:
        lines.append(f"  {name:<40}{own:>8.3f} s {100 * own / total:>5.1f} %")
    lines += ["", *top_function_lines(profiler, top)]
    return lines


Profile = cProfile.Profile | pstats.Stats
"""A finished profile: a profiler of this process, or stats loaded from a file (`pstats.Stats(path)`)."""


def own_time_by_package(profile: Profile) -> dict[str, float]:
    """Seconds of own time (`tottime`) per package (`package_of`) in a finished profile."""
    raw: dict[Any, Any] = pstats.Stats().add(profile).stats  # type: ignore[attr-defined]
    by_package: dict[str, float] = {}
    for (filename, _, _), (_, _, own, _, _) in raw.items():
        name = package_of(filename)
        by_package[name] = by_package.get(name, 0.0) + own
    return by_package


def top_function_lines(profile: Profile, top: int) -> list[str]:
    """pstats' table of the `top` functions by own time, paths shortened."""
    buffer = io.StringIO()
    pstats.Stats(stream=buffer).add(profile).sort_stats("tottime").print_stats(top)
    text = buffer.getvalue()
    for prefix in (sys.prefix, sys.base_prefix):
        # site-packages first, then the rest of the prefix (the venv may sit in the repo).
        for lib in Path(prefix).glob("lib/python3*"):
            text = text.replace(f"{lib}/site-packages/", "").replace(f"{lib}/", "")
        text = text.replace(str(Path(prefix)) + "/", "")
    text = text.replace(str(REPO_ROOT) + "/", "")
    kept = [line for line in text.splitlines() if line.strip()]
    start = next((i for i, line in enumerate(kept) if line.lstrip().startswith("ncalls")), 0)
    return [f"Top {top} functions by own CPU time:", *kept[start:]]


def package_of(filename: str) -> str:
    """A readable owner for a profiled file: site-packages distribution, repo dir, or stdlib."""
    path = filename.replace("\\", "/")
    if "site-packages/" in path:
        parts = path.split("site-packages/", 1)[1].split("/")
        if parts[0] in ("google", "langchain_google_genai") and len(parts) > 1:
            return f"{parts[0]}.{parts[1]}" if parts[0] == "google" else parts[0]
        return parts[0].removesuffix(".py")
    root = str(REPO_ROOT) + "/"
    if path.startswith(root):
        return "repo:" + path[len(root) :].split("/")[0]
    if path == "~":
        return "C functions (builtins)"
    if path.startswith("<"):
        return "frozen/generated"
    stdlib = path.split("/lib/python3", 1)
    if len(stdlib) == 2:
        rest = stdlib[1].split("/", 2)
        return "stdlib:" + (rest[1].removesuffix(".py") if len(rest) > 1 else "?")
    return path
