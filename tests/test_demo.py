"""`make demo`'s main job end to end, shortened: emulator, driver, operator, teleop, predictor."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from waiting import bound

pytestmark = [pytest.mark.ros, pytest.mark.slow]


def test_demo_runs_the_whole_arm_pipeline(tmp_path):
    out = tmp_path / "demo"
    result = subprocess.run(
        [sys.executable, "-m", "gamma_net_core.cli", "demo", "--seconds", "25", "--pretrain-circuits", "3"]
        + ["--out", str(out), "--json", str(out / "demo.json")],
        capture_output=True,
        text=True,
        timeout=bound(300),
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    live = [line for line in result.stdout.splitlines() if "(1-γ)·prediction" in line]
    assert len(live) >= 5  # a live line per two-second tick once predictions flow
    report = json.loads((out / "demo.json").read_text())
    run = dict(report["tables"][0]["rows"])
    assert run["joint readings recorded"] > 500  # 25 s at 30 Hz through the real driver
    assert run["gaps in the readings (> 1.5 periods)"] <= 5
    assert run["updates at the end"] > run["offline updates before the live run"] > 0  # resumed, kept learning
    errors = report["tables"][1]["rows"]
    assert [round(r[0]) for r in errors] == [1, 10, 30, 60, 100]
    assert all(0 < r[5] < 1.0 for r in errors)  # relative error: better than predicting zero
    assert (out / "demo_predictions.png").stat().st_size > 10_000
    assert "resumed from" in (out / "logs" / "predictor.log").read_text()
    # The Horde beside it: the arm's questions learned live, each scored online against its realized return.
    horde = [r for r in report["tables"][2]["rows"] if r[1] in ("tau 1", "tau 2", "tau 5", "tau 10")]
    assert "left out" not in result.stdout  # the driver publishes every field the questions read
    assert {r[0] for r in horde} >= {"shoulder_speed", "elbow_speed", "shoulder_effort", "elbow_speed_until_past_2rad"}
    assert all(r[2] > 100 and r[5] < 1.0 for r in horde)  # scored, and better than the running mean
