"""The README's test tiers as written: each row's `make test PYTEST_ARGS=...` selects what the table says.

Each tier's arguments are taken from README.md, split as make's shell splits them, and given to
pytest's own collection, so a mistyped marker or a tier that leaves tests out fails here. The
suite is collected once: a tier that passes only ``-m EXPRESSION`` is selected from that
collection by pytest's own ``-m`` code (tests/tier_selection.py); any other tier is collected anew.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys

import pytest
from guides import ROOT, guide_text
from waiting import bound

pytestmark = pytest.mark.slow  # a collection of the whole suite

TIER_ROW = re.compile(r"^\| (\w+) \| `(make test[^`]*)` \|")


def readme_tiers() -> dict[str, list[str]]:
    """Each tier of the README's table: its name and the pytest arguments its command passes."""
    tiers = {}
    for line in guide_text("README").splitlines():
        row = TIER_ROW.match(line)
        if row:
            words = shlex.split(row.group(2))  # what the shell hands make
            assert words[:2] == ["make", "test"], words
            args = [w.split("=", 1)[1] for w in words[2:] if w.startswith("PYTEST_ARGS=")]
            tiers[row.group(1)] = shlex.split(args[0]) if args else []  # what make's recipe hands pytest
    return tiers


def collected(args: list[str], env: dict[str, str] | None = None) -> set[str]:
    """The test ids pytest collects from the repository with ARGS."""
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=bound(120),
        env=env,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return {line for line in result.stdout.splitlines() if "::" in line}


def selected(tiers: dict[str, list[str]], tmp_path) -> dict[str, set[str]]:
    """The test ids each tier's arguments select: one collection of the whole suite for every ``-m`` tier."""
    marked = {name: args[1] for name, args in tiers.items() if len(args) == 2 and args[0] == "-m"}
    out = tmp_path / "selected.json"
    env = dict(os.environ, GAMMA_NET_TIER_EXPRESSIONS=json.dumps(marked), GAMMA_NET_TIER_SELECTED=str(out))
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])
    everything = collected(["-p", "tier_selection"], env)
    ids = {name: set(nodeids) for name, nodeids in json.loads(out.read_text()).items()}
    for name, args in tiers.items():
        if name not in ids:
            ids[name] = everything if not args else collected(args)
    return ids


def files(ids: set[str]) -> set[str]:
    return {i.split("::")[0] for i in ids}


def test_the_readme_tiers_select_what_their_rows_say(tmp_path):
    tiers = readme_tiers()
    assert set(tiers) == {"fast", "ROS", "pipelines", "all"}, tiers
    assert tiers["fast"] == ["-m", "not ros and not slow"] and tiers["all"] == []
    ids = selected(tiers, tmp_path)
    fast, ros, pipelines, everything = ids["fast"], ids["ROS"], ids["pipelines"], ids["all"]
    assert fast and ros and pipelines
    assert fast | ros | pipelines == everything  # no test falls between the tiers
    assert fast.isdisjoint(ros | pipelines)
    assert "tests/test_docs_links.py" in files(fast) and "tests/test_readme_ros2.py" in files(ros)
