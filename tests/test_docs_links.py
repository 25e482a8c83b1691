"""Every relative link in README.md, docs/ and docs/lab-notes/ leads to a file that exists, and to a heading there."""

from __future__ import annotations

import pathlib
import re

import pytest
from guides import ROOT, all_guides

#: [text](target) and ![alt](target); a target ends at whitespace or the closing parenthesis.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def prose(text: str) -> str:
    """TEXT without its fenced code blocks and inline code, where brackets are code, not links."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


#: An anchor kept by hand where a heading changed and pages or code still link its old name.
HTML_ANCHOR = re.compile(r'<a (?:id|name)="([^"]+)"></a>')


def anchors(path: pathlib.Path) -> set[str]:
    """The anchors GitHub gives PATH's headings (lowercase, punctuation dropped, spaces to hyphens) and `<a id>`s."""
    seen: dict[str, int] = {}
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.S | re.M)
    result = set(HTML_ANCHOR.findall(text))
    for line in text.splitlines():
        heading = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not heading:
            continue
        slug = re.sub(r"[^\w\- ]", "", heading.group(1).lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        result.add(slug if count == 0 else f"{slug}-{count}")
    return result


def relative_links(path: pathlib.Path) -> list[str]:
    return [t for t in LINK.findall(prose(path.read_text(encoding="utf-8"))) if not re.match(r"[a-z]+:", t)]


def broken_links(page: pathlib.Path) -> list[str]:
    """PAGE's relative links whose file is missing, or whose anchor names no heading of a linked page."""
    broken = []
    for target in relative_links(page):
        file, _, anchor = target.partition("#")
        linked = (page.parent / file).resolve() if file else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target}: no heading #{anchor} in {linked.name}")
    return broken


def linked_pages() -> list[pathlib.Path]:
    """The guides, the lab notes and the project's own pages at the root: every page whose links are checked."""
    notes = sorted((ROOT / "docs" / "lab-notes").glob("*.md"))
    return [*all_guides(), *notes, ROOT / "CONTRIBUTING.md", ROOT / "CHANGELOG.md"]


@pytest.mark.parametrize("page", linked_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_points_to_an_existing_file_and_heading(page):
    assert not broken_links(page)


def test_the_readme_links_every_guide_in_docs():
    linked = {(ROOT / t.partition("#")[0]).resolve() for t in relative_links(ROOT / "README.md")}
    unlinked = [p.name for p in all_guides()[1:] if p.resolve() not in linked]
    assert not unlinked, f"docs/ guides the README does not link: {unlinked}"


def test_the_link_check_finds_a_missing_file_and_a_missing_heading(tmp_path):
    (tmp_path / "a.md").write_text(
        "# Title: `here`\n\n```bash\n# not a heading\n```\n"
        "[ok](a.md#title-here) [self](#title-here) [gone](b.md) [astray](a.md#elsewhere) `[code](c.md)`\n"
        "![figure](a.md) [web](https://example.org/x.md)\n"
        '<a id="old-name"></a>\n\n## Kept\n[ok](a.md#old-name)\n'
    )
    assert anchors(tmp_path / "a.md") == {"title-here", "old-name", "kept"}
    assert broken_links(tmp_path / "a.md") == ["b.md: no such file", "a.md#elsewhere: no heading #elsewhere in a.md"]
