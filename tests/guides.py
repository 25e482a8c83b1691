"""The user guides, README.md and docs/*.md, as the tests that run what they show read them.

A test that runs a guide's commands or compares its tables reads the guide itself, so a change
in the guide is tested.
"""

from __future__ import annotations

import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent


def guide_path(name: str) -> pathlib.Path:
    """README.md for "README", else docs/NAME.md (e.g. "horde": docs/horde.md)."""
    return ROOT / "README.md" if name == "README" else ROOT / "docs" / f"{name}.md"


def guide_text(*names: str) -> str:
    """The named guides' text, in the order named, one after another."""
    return "\n".join(guide_path(name).read_text(encoding="utf-8") for name in names)


def all_guides() -> list[pathlib.Path]:
    """README.md and every docs/*.md."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
