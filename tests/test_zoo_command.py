"""`gamma-net zoo` end to end on its small tier; refusals in one line; the guide's worked example runs."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from guides import guide_text
from waiting import bound

#: The small tier on the busy 2-core machine, with the numba kernels' cache cold (scaled by `bound`).
TIMEOUT = 200.0


@pytest.mark.slow
@pytest.mark.timeout(bound(TIMEOUT + 30))
def test_the_small_tier_prints_the_tables_and_writes_json_and_the_figure(tmp_path):
    out = tmp_path / "zoo"
    result = subprocess.run(
        ["gamma-net", "zoo", "--tier", "small", "--out", str(out), "--no-progress", "--json", str(tmp_path / "t.json")],
        capture_output=True, text=True, timeout=bound(TIMEOUT),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "relative RMSE, mean over seeds" in result.stdout and "td0_fixed" in result.stdout
    assert (out / "zoo.png").stat().st_size > 10_000
    data = json.loads((out / "zoo.json").read_text())
    problems = {"random_walk_5", "rare_ring_10", "ar1_x", "cartpole"}
    assert {r["problem"] for r in data["results"]} == problems
    learners = {(r["learner"], r["mode"]) for r in data["results"]}
    assert learners == {
        ("linear", "recording"), ("linear", "online"), ("linear_lam0.5", "recording"), ("linear_lam0.5", "online"),
        ("td0_fixed", "recording"), ("horde", "online"), ("neural", "recording"), ("neural", "online"),
    }  # fmt: skip
    for r in data["results"]:
        assert r["note"] == "" and len(r["error"]) == len(data["taus"]), r
        assert all(e >= 0.0 for e in r["error"]), r
    by = {(r["problem"], r["learner"], r["mode"]): r["error"] for r in data["results"]}
    for p in problems:
        # the two doors are the same updates (a Horde of one question at the linear Γ-net's settings is too:
        # tests/test_zoo.py; at their defaults the two differ in the bias unit)
        assert by[(p, "linear", "recording")] == pytest.approx(by[(p, "linear", "online")], rel=1e-9)
        # a tile-coded learner of the one fixed timescale does better than predicting 0 there
        assert by[(p, "td0_fixed", "recording")][0] < 1.0
    assert set(data["online_minus_recording"]) == {"linear", "linear_lam0.5", "neural"}
    assert all(v < 1e-9 for v in data["online_minus_recording"].values())
    assert "online vs recording, largest error difference" in result.stdout
    assert data["truth_error"]["cartpole"][0] == 0.0 and 0.0 < data["truth_error"]["cartpole"][-1] < 0.1
    table = json.loads((tmp_path / "t.json").read_text())["tables"]
    assert [t["title"][:13] for t in table] == ["relative RMSE", "over problems", "checks, worst"]
    # the small tier has no lambda 0.9: the checks are the default Γ-net's bars, and the baseline's own error
    assert set(data["checks"]["passed"]) == {"td0_fixed error", "linear / td0_fixed", "linear error"}
    assert "checks passed: td0_fixed error " in result.stdout
    curves = {r["learner"]: r["extra"].get("curve") for r in data["results"] if r["problem"] == "random_walk_5"}
    assert curves["linear"]["steps"] == [150, 500, 1000, 1500] and curves["td0_fixed"] is None


@pytest.mark.parametrize(
    "flag, name, message",
    [
        ("--problems", "no_such", "--problems: unknown zoo problem 'no_such'; known: "),
        ("--learners", "no_such", "--learners: unknown zoo learner 'no_such'; known: "),
    ],
)
def test_an_unknown_problem_or_learner_is_refused_in_one_line(tmp_path, flag, name, message):
    result = subprocess.run(
        ["gamma-net", "zoo", "--out", str(tmp_path / "z"), flag, name], capture_output=True, text=True,
        timeout=bound(120),
    )  # fmt: skip
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"gamma-net zoo: {message}"), result.stderr
    assert not (tmp_path / "z").exists()


@pytest.mark.timeout(bound(150))
def test_the_guides_example_adds_a_problem_the_zoo_runs():
    blocks = re.findall(r"```python\n(.*?)```", guide_text("zoo"), flags=re.S)
    example = next(b for b in blocks if "register(" in b)
    code = example + "\nassert errors[('loop', 'td0_fixed', 'recording')].shape == (2,)\n"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=bound(120))
    assert result.returncode == 0, result.stderr
    numbers = [float(x) for x in re.findall(r"\d+\.\d+", result.stdout)]
    assert len(numbers) == 4 and all(0.0 <= x < 1.0 for x in numbers), result.stdout
