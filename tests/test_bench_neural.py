"""`gamma-net bench neural` runs end to end on a tiny budget (timings are never asserted)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest
from waiting import bound

REPO = pathlib.Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_bench_script_reports_learner_and_replay(tmp_path):
    out = tmp_path / "bench.json"
    args = ["--tiny", "--updates", "2", "--repeats", "1", "--replay-batches", "5", "--threads", "1", "--json", str(out),
            "--ensemble", "3", "--ensemble-mix"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    result = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_neural.py"), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=bound(300),
    )
    assert result.returncode == 0, result.stderr
    assert "per-gamma loop (reference)" in result.stdout and "goals" in result.stdout
    data = json.loads(out.read_text())["data"]
    learner, replay = data["learner"], data["replay"]
    assert (learner["batch"], learner["gamma_t"]) == (32, 8)
    assert learner["ratio"] == learner["loop_ms"] / learner["tiled_ms"] > 0
    assert replay["replay_us"] > 0 and replay["plain_tree_us"] > 0 and replay["device_tree_us"] > 0
    assert "torch sum tree on cpu (DeviceSumTree)" in result.stdout
    assert data["machine"]["torch_threads"] == 1 and data["machine"]["device"] == "cpu"
    ensemble = data["ensemble"]
    assert ensemble["K"] == 3 and "ensemble of K = 3 learners (3 network shape(s))" in result.stdout
    assert ensemble["mixed"] == ["reference", "l_embed", "h_l_embed"] and ensemble["groups"] == 3
    assert ensemble["ratio"] == ensemble["separate_ms"] / ensemble["ensemble_ms"] > 0
    assert ensemble["single_ms"] == ensemble["separate_ms"] / 3
    assert ensemble["batched"] is False and ensemble["other_ratio"] == ensemble["separate_ms"] / ensemble["other_ms"]
    assert "ensemble (each member's module; this device's way)" in result.stdout
    assert "ensemble (one vmap-ed pass)" in result.stdout


def test_bench_refuses_a_device_it_does_not_have(tmp_path):
    from gamma_net_core.cli import main

    assert main(["bench", "neural", "--tiny", "--device", "toaster"]) == 2
