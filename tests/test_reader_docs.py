"""The reader docs stay readers' docs, and the project's own files are there.

results.md, benchmarks.md and robustness.md hold what a reader needs, each about a screenful of
screens (dated reruns and history live in docs/lab-notes/); no reader page names the project's
internal issue numbers (the lab notes may); results.md opens with its results at a glance; and
LICENSE, CONTRIBUTING.md and CHANGELOG.md exist and agree with package.xml.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest
from guides import ROOT, all_guides, guide_text

#: The most lines a results, benchmarks or robustness page may have: about 300, with a margin.
READER_PAGE_LINES = 320

#: An internal issue number: "issue 17", "issues 18 and 24", "#27" (not a heading's "# ", not a hex colour).
ISSUE_NUMBER = re.compile(r"\bissues?\s+#?\d+|(?<![\w/&#])#\d+\b(?![0-9a-fA-F])", re.IGNORECASE)

#: The columns the results page's first table must have, in this order.
GLANCE_COLUMNS = ["claim", "whose", "here", "held?", "figure", "reproduce"]


def reader_text(text: str) -> str:
    """TEXT as a reader sees it: without code, link targets and kept `<a id>` anchors (names, not prose)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    text = re.sub(r"`[^`\n]*`", "", text)
    text = re.sub(r"\]\([^)\s]*\)", "]", text)
    return re.sub(r'<a (?:id|name)="[^"]*"></a>', "", text)


def issue_numbers(text: str) -> list[str]:
    """Every internal issue number a reader of TEXT would see."""
    return [m.group(0) for m in ISSUE_NUMBER.finditer(reader_text(text))]


@pytest.mark.parametrize("name", ["results", "benchmarks", "robustness"])
def test_each_reader_page_is_about_300_lines(name):
    lines = guide_text(name).count("\n")
    assert lines <= READER_PAGE_LINES, (
        f"docs/{name}.md has {lines} lines (at most {READER_PAGE_LINES}): move history to docs/lab-notes/"
    )


@pytest.mark.parametrize("page", all_guides(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_reader_page_names_an_internal_issue_number(page):
    found = issue_numbers(page.read_text(encoding="utf-8"))
    assert not found, f"{page.relative_to(ROOT)} names internal issues {found}: say what they mean, or use lab notes"


def test_the_issue_check_finds_numbers_and_spares_code_links_and_anchors():
    text = (
        "As issue 17 found; issues 18 and 24; see #27.\n"
        '# A heading\n<a id="reflex-study-issue-23"></a>\n[notes](lab-notes/x.md#minatar-issue-19) `issue 5`\n'
        "```bash\necho '#12' # issue 9\n```\ncolour #1f77b4, the issue's checks, Fast-DDS#1144\n"
    )
    assert issue_numbers(text) == ["issue 17", "issues 18", "#27"]


def glance_table() -> list[list[str]]:
    """The rows of the table under results.md's first section, header first, cells stripped."""
    text = guide_text("results")
    first = re.search(r"^## (.*)$", text, flags=re.M)
    assert first and first.group(1) == "Results at a glance", (
        f"docs/results.md's first section is {first and first.group(1)!r}, not 'Results at a glance'"
    )
    section = text[first.end() :].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows if not set(row) <= set("|-: ")]


def test_results_open_with_the_results_at_a_glance():
    header, *rows = glance_table()
    assert header == GLANCE_COLUMNS
    assert len(rows) >= 10, f"only {len(rows)} claims at a glance"
    for row in rows:
        cells = dict(zip(header, row))
        assert len(row) == len(header), f"row {row[0]!r} has {len(row)} cells"
        assert cells["whose"] in {"paper", "ours"}, f"claim {row[0]!r}: whose is {cells['whose']!r}"
        assert cells["held?"], f"claim {row[0]!r} does not say whether it held"
        assert cells["figure"] == "—" or re.match(r"\[[^\]]+\]\(figures/", cells["figure"]), (
            f"claim {row[0]!r}: figure {cells['figure']!r} is not a link into figures/"
        )
        assert re.search(r"`[^`]+`|\]\(|^as above$", cells["reproduce"]), (
            f"claim {row[0]!r}: no command in {cells['reproduce']!r}"
        )


def positional_arguments(command: str) -> list[str]:
    """COMMAND's arguments given by position: after `gamma-net` and its (one or two) subcommand words, or after
    `python -m MODULE` / `python SCRIPT`, every word until the first option."""
    words = command.split()
    if words[0] == "gamma-net":
        start = 1
        while start < 3 and start < len(words) and re.fullmatch(r"[a-z][a-z-]*", words[start]):
            start += 1
    elif words[0] == "python":
        start = 3 if words[1] == "-m" else 2
    else:
        return []
    rest = words[start:]
    first_option = next((i for i, w in enumerate(rest) if w.startswith("--")), len(rest))
    return rest[:first_option]


def test_every_glance_command_names_its_options():
    """A command at a glance passes its values through named options, never by position."""
    _, *rows = glance_table()
    for row in rows:
        for command in re.findall(r"`((?:gamma-net|python) [^`]+)`", row[-1]):
            assert not positional_arguments(command), f"positional arguments in {command!r}"


def test_the_positional_check_finds_them():
    assert positional_arguments("gamma-net arm train --out runs/arm") == []
    assert positional_arguments("gamma-net square-wave --runs 100") == []
    assert positional_arguments("python -m gamma_net_studies.forecasts") == []
    assert positional_arguments("python tools/reflex_scratch_sweep.py 8 180 paper --x 1") == ["8", "180", "paper"]
    assert positional_arguments("gamma-net atari import-dopamine ckpt/path --out p") == ["ckpt/path"]


def test_license_contributing_and_changelog_are_there():
    license_text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    declared = ET.parse(ROOT / "package.xml").getroot().findtext("license")
    assert declared == "Apache-2.0"
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
    assert "END OF TERMS AND CONDITIONS" in license_text, "LICENSE is not the license's full text"
    contributing = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    for needed in ("make setup", "make test", "gamma-net bench", "72"):
        assert needed in contributing, f"CONTRIBUTING.md does not say {needed!r}"
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert re.search(r"^## Unreleased$", changelog, flags=re.M), "CHANGELOG.md has no Unreleased section"
    version = ET.parse(ROOT / "package.xml").getroot().findtext("version")
    assert re.search(rf"^## {re.escape(version)}\b", changelog, flags=re.M), f"CHANGELOG.md has no {version} section"
