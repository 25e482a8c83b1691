"""The real-time reflex study's statistics (no ROS): rule on time, the bootstrap ratio, the tables."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gamma_net_core.experiments.reflex_realtime_stats import bootstrap_ratio, plot_summary, summarize, time_on


def test_time_on_counts_only_the_window_from_the_switches():
    assert time_on([], 0.0, 10.0) == 0.0
    assert time_on([], 0.0, 10.0, on_at_start=True) == 1.0
    assert time_on([(2.0, True), (4.0, False)], 0.0, 10.0) == pytest.approx(0.2)
    assert time_on([(-5.0, True), (1.0, False), (9.0, True), (20.0, False)], 0.0, 10.0) == pytest.approx(0.2)
    with pytest.raises(ValueError, match=r"out of time order: 1\.0 after 2\.0"):
        time_on([(2.0, True), (1.0, False)], 0.0, 10.0)
    with pytest.raises(ValueError, match="must end after it starts"):
        time_on([], 3.0, 3.0)


def test_the_ratio_is_of_the_means_with_an_interval_that_holds_it_and_narrows_with_runs():
    rng = np.random.default_rng(1)
    few = bootstrap_ratio(rng.gamma(2.0, 0.025, 5), rng.gamma(2.0, 0.075, 5), resamples=4000)
    assert few["low"] <= few["ratio"] <= few["high"] and few["runs"] == [5, 5]
    pred, react = rng.gamma(2.0, 0.025, 200), rng.gamma(2.0, 0.075, 200)
    many = bootstrap_ratio(pred, react, resamples=4000)
    assert many["ratio"] == pytest.approx(pred.mean() / react.mean())
    assert many["low"] < 1 / 3 < many["high"] and many["high"] - many["low"] < few["high"] - few["low"]
    # Reproducible: the same runs and seed give the same interval.
    assert bootstrap_ratio(pred, react, resamples=4000) == many


def test_the_ratio_is_undefined_when_the_reactive_rule_never_met_the_obstacle():
    out = bootstrap_ratio([0.1, 0.0], [0.0, 0.0])
    assert out["ratio"] is None and out["undefined"] == "the denominator's runs have no contact"
    some = bootstrap_ratio([0.1, 0.0], [0.0, 0.2], resamples=2000)
    assert some["ratio"] == pytest.approx(0.5) and some["high"] == np.inf  # resamples of only the 0 run


def run(obstacle, condition, contact, progress, on=0.1):
    return {
        "obstacle": obstacle,
        "condition": condition,
        "contact_s": contact,
        "contacts": 2 if contact else 0,
        "peak_current_a": 0.5,
        "progress_circuits": progress,
        "rule_on_fraction": {"stall": on},
    }


def test_summarize_gives_a_row_per_condition_and_the_ratio_per_obstacle(tmp_path):
    runs = [
        run("shoulder", "none", 0.5, 1.0),
        run("shoulder", "none", 0.7, 1.2),
        run("shoulder", "reactive", 0.2, 1.0),
        run("shoulder", "reactive", 0.2, 1.0),
        run("shoulder", "predictive", 0.05, 0.9),
        run("shoulder", "predictive", 0.15, 0.9),
        run("elbow", "reactive", 0.0, 1.0),
        run("elbow", "predictive", 0.0, 1.0),
    ]
    report = summarize(runs, seconds=90, pretrained=False, resamples=1000)
    shoulder, elbow, ratios = report.tables
    assert [row[0] for row in elbow.rows] == ["reactive", "predictive"]
    assert [row[0] for row in shoulder.rows] == ["none", "reactive", "predictive"]
    assert shoulder.rows[0][1:3] == [2, "0.6 ± 0.141"]
    assert ratios.rows[0][:3] == ["shoulder", "2, 2", "0.50"] and ratios.rows[0][4] == "-10.0 %"
    assert ratios.rows[1][2:4] == ["undefined", "the denominator's runs have no contact"]
    json.dumps(report.data)  # plain data
    assert plot_summary(tmp_path / "f.png", runs).stat().st_size > 0
