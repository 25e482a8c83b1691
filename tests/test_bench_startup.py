"""`gamma-net bench startup` runs end to end: a cold and a warm start of the predictor, each to a prediction."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from waiting import bound

#: A cold start (the predictor's kernels compiled) then a warm one: 11 s on the loaded 2-core machine, far more
#: beside builds (a cold predictor once compiled for 170 s beside six).
BENCH_S = 450.0
pytestmark = [pytest.mark.ros, pytest.mark.slow]


@pytest.mark.timeout(bound(BENCH_S + 60))
def test_bench_startup_times_a_cold_and_a_warm_start_to_the_first_prediction(tmp_path):
    out = tmp_path / "bench.json"
    result = subprocess.run(
        [sys.executable, "-m", "gamma_net_core.cli", "bench", "startup", "--nodes", "predictor", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=bound(BENCH_S),
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    (run,) = json.loads(out.read_text())["data"]["runs"]
    assert run["node"] == "predictor"
    assert run["cold_s"] > 0 and run["warm_s"] > 0
    assert run["cold_over_warm"] == pytest.approx(run["cold_s"] / run["warm_s"])


def test_bench_startup_refuses_a_bad_timeout_in_one_line():
    result = subprocess.run(
        [sys.executable, "-m", "gamma_net_core.cli", "bench", "startup", "--timeout", "0"],
        capture_output=True,
        text=True,
        timeout=bound(60),
    )
    assert result.returncode != 0 and "--timeout must be positive; got 0.0" in result.stderr
    assert "Traceback" not in result.stderr
