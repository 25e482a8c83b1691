"""`gamma-net bench horde-node` runs end to end on a tiny budget (its numbers go to docs, not asserts)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from waiting import bound

from gamma_net_core.horde.questions import load_questions
from gamma_net_studies.ros.bench.horde import _latencies, questions_doc, waited_for_a_cpu, waited_on_collection

pytestmark = pytest.mark.ros


def test_the_benchmark_questions_are_a_valid_horde_of_the_asked_size():
    spec = load_questions(questions_doc(100, 100.0))
    assert len(spec.questions) == len(set(spec.names)) == 100
    assert sum(q.termination is not None for q in spec.questions) == 20
    assert spec.rate_hz == 100.0 and spec.timescales.size == 32


def test_latencies_pair_each_tick_with_the_newest_message_before_it():
    sent = np.array([10.00, 10.01, 10.02])
    arrays = [(9.995, 9.999), (10.005, 10.008), (10.015, 10.019), (10.025, 10.027), (10.5, 10.501)]
    tick, message = _latencies(sent, arrays, 0.01)
    # 9.995: before any message; 10.5: the node still sampling the last one, long after: both left out.
    np.testing.assert_allclose(tick, [0.003, 0.004, 0.002], atol=1e-9)
    np.testing.assert_allclose(message, [0.008, 0.009, 0.007], atol=1e-9)


def test_slow_samples_are_matched_to_the_collections_they_waited_on():
    sent_at = np.array([1.000, 1.010, 1.020, 1.030])
    latency = np.array([0.002, 0.009, 0.008, 0.006])  # the last three are slow (over 5 ms)
    pauses = [(1.012, 1.018, 2), (1.0305, 1.0306, 0), (2.0, 2.1, 2)]
    # In flight: sample 2 from 1.010 to 1.019 (the first collection), sample 3 from 1.020 to 1.028
    # (none: the first ended at 1.018), sample 4 from 1.030 to 1.036 (the second).
    assert waited_on_collection(sent_at, latency, pauses, slow_s=0.005) == (3, 2)
    assert waited_on_collection(sent_at, latency, [], slow_s=0.005) == (3, 0)


def test_slow_samples_are_matched_to_the_nodes_waits_for_a_cpu():
    sent_at = np.array([1.00, 1.01, 1.02, 1.03, 1.04])
    latency = np.array([0.002, 0.025, 0.016, 0.006, 0.007])  # arrivals 1.002, 1.035, 1.036, 1.036, 1.047
    cpu_wait = np.array([0.0, 0.030, 0.0, 0.0, 0.001])  # 30 ms off the cores between 1.002 and 1.035
    # The burst (samples 2 to 4) was in flight during that wait; sample 5 (1.040..1.047) waited 1 ms only.
    assert waited_for_a_cpu(sent_at, latency, cpu_wait, slow_s=0.005) == 3


@pytest.mark.slow  # not `serial`: its latencies are reported, not asserted; its counts' bounds are loose
def test_bench_horde_node_reports_latency(tmp_path):
    out = tmp_path / "bench.json"
    result = subprocess.run(
        [sys.executable, "-m", "gamma_net_core.cli", "bench", "horde-node", "--questions", "3", "--rate", "20"]
        + ["--seconds", "1", "--runs", "2", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=bound(180),
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    report = json.loads(out.read_text())
    rows = {row[0]: row for row in report["tables"][0]["rows"]}
    assert set(rows) == {
        "tick_topic: JointState published -> PredictionArray received",
        "clock: tick -> PredictionArray received",
        "clock: JointState published -> PredictionArray received (+ wait for the tick)",
        "node's work per tick, no ROS (compute reference)",
        "OnlineError.observe (part of the work)",
        "PlainOnlineError.observe (its plain reference)",
    }
    assert all(0 < row[1] <= row[2] for row in rows.values())  # p50 <= p99, both measured
    throughput = dict(report["tables"][1]["rows"])
    assert throughput["clock: JointState sent"] == throughput["tick_topic: JointState sent"] == 20
    assert 10 <= throughput["clock: PredictionArrays received"] <= 21
    # One array per message, each paired with its message by the stamp it carries.
    assert 10 <= throughput["tick_topic: PredictionArrays received"] <= 20
    assert (
        rows["tick_topic: JointState published -> PredictionArray received"][4]
        == throughput["tick_topic: PredictionArrays received"]
    )
    assert throughput["PlainOnlineError / OnlineError, p50"] > 0
    # --runs 2: each run's p99, with the node's garbage collections traced beside it.
    runs = report["tables"][2]["rows"]
    assert [row[:2] for row in runs] == [[1, "on"], [2, "on"]]
    assert all(0 < row[2] <= row[3] <= row[4] and 10 <= row[5] <= 20 and row[7] <= row[6] for row in runs)
    assert all(row[10] <= row[6] and 0 <= row[11] for row in runs)  # read from /proc/PID/schedstat
    assert len(report["data"]["runs_p99_ms"]) == 2


def test_a_split_nodes_message_counts_when_all_its_workers_arrays_have_arrived():
    from gamma_net_studies.ros.bench.horde import _complete

    arrays = [(1.0, 1.002), (1.0, 1.004), (2.0, 2.003), (3.0, 3.001), (3.0, 3.009)]  # stamp 2.0: one array of two
    assert _complete(arrays, 2) == [(1.0, 1.004), (3.0, 3.009)]
    assert _complete(arrays, 1) == [(1.0, 1.004), (2.0, 2.003), (3.0, 3.009)]
