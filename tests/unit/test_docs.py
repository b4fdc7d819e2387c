"""The documentation stays true: the configuration reference matches the settings model, links resolve."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic_settings import BaseSettings

from bot.settings import Settings
from scripts import config_reference

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def _prose(path: Path) -> str:
    """The page without its fenced code blocks (a `[x](y)` in code is not a link)."""
    return _FENCE.sub("", path.read_text(encoding="utf-8"))


def _anchors(path: Path) -> set[str]:
    """The heading anchors GitHub makes for a markdown page (lower case, punctuation dropped, `-n` for repeats)."""
    seen: dict[str, int] = {}
    anchors = set()
    for line in _prose(path).splitlines():
        match = re.match(r"^#{1,6}\s+(.*?)\s*$", line)
        if not match:
            continue
        slug = re.sub(r"[^\w\- ]", "", match.group(1).lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def test_configuration_reference_is_current():
    """docs/configuration.md is exactly what `python -m scripts.config_reference` renders from bot/settings.py."""
    written = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert written == config_reference.render(), (
        "docs/configuration.md is stale: run python -m scripts.config_reference"
    )
    assert config_reference.main(["--check"]) == 0


def test_every_setting_is_described_and_listed():
    """Every settings field has a description, and every environment variable of the model is in the reference."""
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    for section_field in Settings.model_fields.values():
        section = section_field.annotation
        assert isinstance(section, type) and issubclass(section, BaseSettings)
        for name, field in section.model_fields.items():
            assert field.description, f"{section.__name__}.{name} has no description="
            if isinstance(field.validation_alias, str):
                assert f"| `{field.validation_alias}` |" in text


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path):
    """Every relative link of README.md and docs/*.md names a file that exists, and a heading there when it has an anchor."""
    broken = []
    for target in _LINK.findall(_prose(page)):
        if re.match(r"^[a-z]+:", target):
            continue  # https:, mailto: ...: not checked here
        path_part, _, anchor = target.partition("#")
        file = (page.parent / path_part).resolve() if path_part else page
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
            broken.append(f"{target}: no heading #{anchor}")
    assert not broken, broken
