"""`gamma-net bench ros` runs end to end on a tiny budget (its numbers go to docs, not asserts).

Not `serial`: it asserts no timing, only that every reading of the latency run was answered (the
bench waits 2 s past the last one) and that the ramp starts at its first rate; it held at a load
of 8-17 from other work (2026-11-29). A worker waiting on a serial test is idle.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from waiting import bound

pytestmark = [pytest.mark.ros, pytest.mark.slow]


def test_bench_ros_reports_latency_and_rates(tmp_path):
    out = tmp_path / "bench.json"
    result = subprocess.run(
        [sys.executable, "-m", "gamma_net_core.cli", "bench", "ros", "--seconds", "1", "--burst", "0.5"]
        + ["--rates", "30", "100", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=bound(180),
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    report = json.loads(out.read_text())
    latency = {row[0]: row for row in report["tables"][0]["rows"]}
    assert set(latency) == {
        "predictor node",
        "echo node (transport reference)",
        "observe + predict, no ROS (compute reference)",
    }
    assert latency["predictor node"][3] == "30/30"  # every reading of the latency run was answered
    ramp = report["tables"][2]["rows"]
    assert [row[1] for row in ramp if row[0] == "predictor node"][:1] == [30.0]
