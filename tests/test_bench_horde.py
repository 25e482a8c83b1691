"""`gamma-net bench horde` runs as a user runs it, on a tiny budget (numbers are reported, never asserted)."""

from __future__ import annotations

import json
import subprocess

import pytest
from waiting import bound


@pytest.mark.slow
def test_bench_horde_reports_both_learners_and_the_goals(tmp_path):
    out = tmp_path / "bench.json"
    result = subprocess.run(
        ["gamma-net", "bench", "horde", "--questions", "3", "--horde-steps", "5", "--loop-steps", "2",
         "--repeats", "1", "--json", str(out)],
        capture_output=True, text=True, timeout=bound(300),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "HordeLearner.learn (constant alpha)" in result.stdout and "Horde >= 10x the loop" in result.stdout
    assert "HordeLearner.learn (constant alpha, plain kernels)" in result.stdout
    data = json.loads(out.read_text())["data"]
    assert data["questions"] == 3 and data["gamma_t"] == 32 and data["features"] == 2049
    assert data["horde_steps_per_s"] > 0 and data["loop_steps_per_s"] > 0 and data["horde_plain_steps_per_s"] > 0


@pytest.mark.slow
def test_bench_horde_times_td_lambda_beside_td0(tmp_path):
    out = tmp_path / "bench.json"
    result = subprocess.run(
        ["gamma-net", "bench", "horde", "--questions", "3", "--horde-steps", "5", "--loop-steps", "2",
         "--repeats", "1", "--lam", "0.9", "--json", str(out)],
        capture_output=True, text=True, timeout=bound(300),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "HordeLearner.learn (TD(lambda), lam 0.9)" in result.stdout
    assert "TD(lambda) Horde >= 100 steps/s" in result.stdout
    data = json.loads(out.read_text())["data"]
    assert data["lam"] == 0.9 and data["horde_lambda_steps_per_s"] > 0 and data["horde_steps_per_s"] > 0


def test_bench_horde_refuses_a_bad_lambda_in_one_line():
    result = subprocess.run(["gamma-net", "bench", "horde", "--lam", "1.5"], capture_output=True, text=True,
                            timeout=bound(120))  # fmt: skip
    assert result.returncode == 1
    assert result.stderr.strip() == "gamma-net bench horde: error: --lam must be in [0, 0.999]; got 1.5"


def test_bench_horde_refuses_a_bad_budget_in_one_line():
    result = subprocess.run(["gamma-net", "bench", "horde", "--questions", "0"], capture_output=True, text=True,
                            timeout=bound(120))  # fmt: skip
    assert result.returncode == 1
    assert result.stderr.strip() == "gamma-net bench horde: error: --questions must be >= 1; got 0"


def test_bench_all_runs_every_bench_command_but_itself():
    from gamma_net_core.cli import COMMANDS
    from gamma_net_studies.ros.bench.all import BENCHMARKS

    benches = {words[1]: module for words, module, _ in COMMANDS if words[0] == "bench" and words[1] != "all"}
    assert BENCHMARKS == benches


def test_the_cost_model_counts_each_distinct_row_once_and_every_access_apart():
    from gamma_net_studies.bench.horde import tick_cost

    cost = tick_cost(questions=10, gammas=2, published=3, n_active=4, rows_learn=12, rows_publish=9)
    assert cost["bytes"] == 80 * (12 + 6 + 9)  # read each row once, write S_t's (about half), read the published
    assert cost["accesses_bytes"] == 80 * (16 + 16 + 12)
    assert cost["flops"] == 10 * (3 * 2 * 4 + 3 * 4 + 8 * 2)


@pytest.mark.slow
def test_bench_horde_cost_model_reports_the_limit_and_the_measured_fraction(tmp_path):
    out = tmp_path / "bench.json"
    result = subprocess.run(
        ["gamma-net", "bench", "horde", "--questions", "3", "--horde-steps", "5", "--loop-steps", "2",
         "--repeats", "1", "--cost-model", "--cost-questions", "4,8", "--json", str(out)],
        capture_output=True, text=True, timeout=bound(300),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "cost model of a node tick" in result.stdout
    data = json.loads(out.read_text())["data"]
    assert [r["questions"] for r in data["cost_model"]] == [4, 8]
    assert data["memory_bandwidth_bytes_per_s"] > 0
    for r in data["cost_model"]:
        assert 0 < r["rows_learn"] <= 2049 and r["tick_s"] > 0 and r["fraction_of_limit"] > 0
        assert r["plain_tick_s"] > 0 and r["speedup"] == r["plain_tick_s"] / r["tick_s"]
        assert r["tick_bytes"] <= r["tick_access_bytes"]
