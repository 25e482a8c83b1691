"""`gamma-net bench linear` runs end to end on a tiny budget (timings are never asserted)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

from waiting import bound

REPO = pathlib.Path(__file__).resolve().parent.parent


def test_bench_script_reports_both_settings(tmp_path):
    out = tmp_path / "bench.json"
    args = ["--reference-steps", "5", "--fast-steps", "300", "--repeats", "1", "--json", str(out)]
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    result = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_linear.py"), *args],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=bound(300),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "square wave" in result.stdout and "robot arm" in result.stdout and "goals" in result.stdout
    rows = json.loads(out.read_text())["data"]["rows"]
    assert [r["setting"] for r in rows] == ["square wave", "robot arm"]
    assert [(r["tilings"], r["features"], r["gamma_t"]) for r in rows] == [(70, 40630, 6), (100, 2049, 32)]
    for r in rows:
        assert r["ratio"] == r["recording_steps_per_s"] / r["reference_steps_per_s"] > 0
        # TD(lambda) timed beside TD(0) in the same run: the cost of a step is their ratio.
        assert r["lam"] == 0.9 and r["lambda_cost"] == r["recording_steps_per_s"] / r["recording_lambda_steps_per_s"]
        assert r["learn_lambda_cost"] == r["learn_steps_per_s"] / r["learn_lambda_steps_per_s"] > 0
        assert r["backward_cost"] == r["recording_steps_per_s"] / r["recording_backward_steps_per_s"] > 0
        assert r["learn_backward_cost"] == r["learn_steps_per_s"] / r["learn_backward_steps_per_s"] > 0
    assert "TD(lambda) step, backward view, <= 3x a TD(0) step (robot arm, recording)" in result.stdout
