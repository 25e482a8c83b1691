"""The real-time reflex study's statistics (no ROS): rule on time, the bootstrap ratio, the tables."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gamma_net_studies.reflex_realtime_stats import (
    SHARED,
    SIMULATED_CONTACT_PER_HIT,
    any_on,
    bootstrap_ratio,
    contact_per_hit,
    counted_contact_rate,
    cumulative_at,
    describe_time_to_beat,
    done_when,
    markdown,
    plot_summary,
    plot_time_to_beat,
    summarize,
    time_on,
    time_to_beat,
)


def test_time_on_counts_only_the_window_from_the_switches():
    assert time_on([], 0.0, 10.0) == 0.0
    assert time_on([], 0.0, 10.0, on_at_start=True) == 1.0
    assert time_on([(2.0, True), (4.0, False)], 0.0, 10.0) == pytest.approx(0.2)
    assert time_on([(-5.0, True), (1.0, False), (9.0, True), (20.0, False)], 0.0, 10.0) == pytest.approx(0.2)
    with pytest.raises(ValueError, match=r"out of time order: 1\.0 after 2\.0"):
        time_on([(2.0, True), (1.0, False)], 0.0, 10.0)
    with pytest.raises(ValueError, match="must end after it starts"):
        time_on([], 3.0, 3.0)


def test_any_on_is_on_while_either_rule_is():
    # The predictive rule 1-3 s, the reactive floor 2-5 s: the command was limited 1-5 s.
    switches = [("ahead", 1.0, True), ("floor", 2.0, True), ("ahead", 3.0, False), ("floor", 5.0, False)]
    assert any_on(switches) == [(1.0, True), (5.0, False)]
    assert time_on(any_on(switches), 0.0, 10.0) == pytest.approx(0.4)
    # On before the window: off only when the last rule on lets go; a repeated switch changes nothing.
    assert any_on([("floor", 2.0, True), ("ahead", 4.0, False), ("ahead", 6.0, False)], on_at_start={"ahead"}) == []
    assert any_on([("ahead", 4.0, False), ("floor", 6.0, True)], on_at_start={"ahead"}) == [(4.0, False), (6.0, True)]


@given(
    st.lists(st.tuples(st.sampled_from(["ahead", "floor"]), st.floats(0.0, 10.0), st.booleans()), max_size=20).map(
        lambda s: sorted(s, key=lambda x: x[1])
    ),
    st.sets(st.sampled_from(["ahead", "floor"])),
)
def test_the_time_any_rule_is_on_is_at_least_each_rules_and_at_most_their_sum(switches, on_at_start):
    each = [
        time_on([(t, on) for r, t, on in switches if r == rule], 0.0, 10.0, on_at_start=rule in on_at_start)
        for rule in ("ahead", "floor")
    ]
    either = time_on(any_on(switches, on_at_start=on_at_start), 0.0, 10.0, on_at_start=bool(on_at_start))
    assert max(each) - 1e-9 <= either <= min(1.0, sum(each)) + 1e-9


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
    shoulder, elbow, ratios, checks = report.tables
    assert [row[0] for row in elbow.rows] == ["reactive", "predictive"]
    assert [row[0] for row in shoulder.rows] == ["none", "reactive", "predictive"]
    assert shoulder.rows[0][1:3] == [2, "0.6 ± 0.141"]
    assert ratios.rows[0][:3] == ["shoulder", "2, 2", "0.50"] and ratios.rows[0][4] == "-10.0 %"
    assert ratios.rows[1][2:4] == ["undefined", "the denominator's runs have no contact"]
    json.dumps(report.data)  # plain data
    assert plot_summary(tmp_path / "f.png", runs).stat().st_size > 0
    # The checks: shoulder ratio 0.5 (its resamples 0.25 .. 0.75): PASS; progress 0.9 against none's 1.1
    # circuits: FAIL; its reactive contact per hit 0.1 s against the simulated 0.021 s: FAIL.
    assert [row[:2] for row in checks.rows] == [["scratch", "shoulder"], ["scratch", "elbow"]]
    assert checks.rows[0][2:6] == ["0.50 (0.25 .. 0.75)", "PASS", "-18.2 %", "FAIL"]
    assert checks.rows[0][6].startswith("0.100 (simulated 0.021)") and checks.rows[0][7] == "FAIL"
    assert checks.rows[1][3] == checks.rows[1][5] == checks.rows[1][7] == "n/a"  # no contact, no none runs
    assert checks.rows[0][8] == "undefined: no contact series"  # these runs have none
    assert report.data["scratch"]["shoulder"]["checks"] == {"ratio": "PASS", "progress": "FAIL", "per_hit": "FAIL"}
    text = markdown(report.tables)
    assert text.count("| condition | runs |") == 2 and "| scratch | shoulder | 0.50 (" in text
    assert all(line.count("|") == 10 for line in text.splitlines() if line.startswith("| scratch"))


# -- the time until the predictive rule is ahead ------------------------------------------------


def series(rate_before, rate_after=None, switch_at=None, end=90.0, step=1.0):
    """A run's cumulative contact series: ``rate_before`` s of contact a s until ``switch_at``, then ``rate_after``."""
    out = []
    for t in np.arange(0.0, end + 1e-9, step):
        if switch_at is None or t <= switch_at:
            c = rate_before * t
        else:
            c = rate_before * switch_at + rate_after * (t - switch_at)
        out.append([float(t), float(c), 0])
    return out


def test_the_predictive_rule_is_ahead_from_the_first_window_of_at_most_half_the_reactive_rate():
    # Reactive: 0.01 s of contact a second throughout. Predictive: the same until 40 s, then none.
    # A 20 s window [s, s + 20] holds 0.01 * (40 - s) s of predictive contact against 0.2 s reactive:
    # at most half from s = 30 on, and every later window too.
    beat = time_to_beat([series(0.01, 0.0, 40)], [series(0.01)], window_s=20, resamples=200)
    assert beat["T"] == 30.0 and beat["low"] == beat["high"] == 30.0 and beat["found"] == 1.0
    assert beat["end_s"] == 90.0 and beat["rates"]["start"][0] == 0.0 and beat["rates"]["start"][-1] == 70.0
    assert beat["rates"]["reactive"][0] == pytest.approx(0.6)  # contact seconds per minute
    assert describe_time_to_beat(beat) == "30 s (30 s .. 30 s)"
    # Ahead from the start: a predictive rule that never touches.
    assert time_to_beat([series(0.0)], [series(0.01)], window_s=20, resamples=200)["T"] == 0.0
    # Windows where neither touches count as ahead: a reactive rule touching only in the first 10 s.
    assert time_to_beat([series(0.0)], [series(0.01, 0.0, 10)], window_s=20, resamples=200)["T"] == 0.0
    # A reactive rule that never touches leaves nothing to beat.
    never = time_to_beat([series(0.01, 0.0, 5)], [series(0.0)], window_s=20, resamples=200)
    assert never["undefined"] == "the reactive runs have no contact" and never["T"] is None


def test_a_later_window_where_it_falls_behind_moves_the_time_past_it():
    # Predictive: no contact except 0.5 s in [60, 61]; every window holding it is worse than half
    # the reactive 0.2 s, so it is ahead only from the first window after it, s = 61.
    burst = series(0.0, 0.5, 60, end=61.0) + [[float(t), 0.5, 1] for t in range(62, 91)]
    beat = time_to_beat([burst], [series(0.01)], window_s=20, resamples=200)
    assert beat["T"] == 61.0


def test_never_ahead_within_the_run_is_said_so():
    same = time_to_beat([series(0.01)] * 3, [series(0.01)] * 3, window_s=20, resamples=500)
    assert same["T"] is None and same["low"] is None and same["high"] is None and same["found"] == 0.0
    assert describe_time_to_beat(same) == "not within the run"
    # Ahead until the last window: behind at the end is not ahead.
    late = time_to_beat([series(0.0, 0.05, 80)], [series(0.01)], window_s=20, resamples=200)
    assert late["T"] is None


def test_the_interval_spans_the_runs_that_learn_early_and_late():
    react = [series(0.01) for _ in range(6)]
    # Half the predictive runs stop touching at 20 s, half at 50 s: pooled, half the reactive rate
    # (0.005 s/s) from s = 50 on with 20 s windows at the latest, earlier with luck in a resample.
    pred = [series(0.01, 0.0, 20)] * 3 + [series(0.01, 0.0, 50)] * 3
    beat = time_to_beat(pred, react, window_s=20, resamples=2000)
    assert beat["T"] is not None and beat["low"] <= beat["T"] <= beat["high"] <= 50.0
    assert beat["low"] < beat["high"]  # resamples with more early learners get ahead earlier
    # A resample of only late learners is still ahead by 50 s: found in every resample.
    assert beat["found"] == 1.0
    # Some runs never learn: the upper end is "not within the run" when enough resamples never get ahead.
    never = time_to_beat([series(0.01, 0.0, 20)] + [series(0.01)] * 3, react[:4], window_s=20, resamples=2000)
    assert never["high"] is None and 0.0 < never["found"] < 1.0
    assert describe_time_to_beat(never).endswith(".. not within the run)")


def test_the_series_are_checked_and_a_short_run_leaves_it_undefined():
    assert cumulative_at([[1.0, 0.1, 1], [2.0, 0.3, 2]], np.array([0.0, 0.5, 1.5, 5.0])).tolist() == pytest.approx(
        [0.0, 0.05, 0.2, 0.3]
    )
    with pytest.raises(ValueError, match="never decreasing"):
        cumulative_at([[0.0, 0.2], [1.0, 0.1]], np.array([0.5]))
    with pytest.raises(ValueError, match="at least one sample"):
        cumulative_at([], np.array([0.5]))
    short = time_to_beat([series(0.0, end=10.0)], [series(0.01)], window_s=20)
    assert short["undefined"] == "the shortest run (10 s) is shorter than a window (20 s)" and short["T"] is None
    assert time_to_beat([], [series(0.01)])["undefined"] == "no contact series"


def test_summarize_reports_the_time_per_start_from_each_runs_series(tmp_path):
    runs = []
    for _ in range(3):
        for condition, contact in (
            ("none", series(0.02)),
            ("reactive", series(0.01)),
            ("predictive", series(0.01, 0.0, 30)),
        ):
            # As the study makes them: the shared conditions once (the Horde from scratch), predictive per start.
            for checkpoint in (None,) if condition in SHARED else (None, "/x/shoulder.npz"):
                r = run("shoulder", condition, contact[-1][1], 1.0)
                r.update(contact_series=contact, pretrained=checkpoint, contacts=10 if contact[-1][1] else 0)
                runs.append(r)
    report = summarize(runs, seconds=90, resamples=500)
    # Per start its obstacle's table and its ratios, then the checks of both.
    assert len(report.tables) == 5
    assert "learning from scratch" in report.tables[0].title and "learning from scratch" in report.tables[1].title
    assert "pretrained" in report.tables[2].title and "pretrained" in report.tables[3].title
    assert set(report.data) == {"scratch", "pretrained"}
    beat = report.data["scratch"]["shoulder"]["time_to_beat"]
    assert beat["T"] == 15.0  # 30 s windows: [15, 45] holds 0.15 s of predictive contact against 0.3 s
    checks = report.tables[-1]
    assert [row[:2] for row in checks.rows] == [["scratch", "shoulder"], ["pretrained", "shoulder"]]
    assert checks.rows[0][8] == "15 s (15 s .. 15 s)"
    assert plot_time_to_beat(tmp_path / "t.png", {("scratch", "shoulder"): beat}).stat().st_size > 0
    assert plot_time_to_beat(tmp_path / "u.png", {}) is None


def test_both_starts_use_the_same_reactive_and_none_runs_beside_their_own_predictive_runs():
    shared = [run("shoulder", "reactive", c, 1.0, on=0.2) for c in (0.2, 0.4)]
    shared += [run("shoulder", "none", 0.5, 1.0, on=0.3), run("shoulder", "none", 0.7, 1.0, on=0.5)]
    for r in shared:
        r["pretrained"] = None  # the shared runs' Horde learned from scratch
    scratch = [dict(run("shoulder", "predictive", 0.15, 1.0), pretrained=None)]
    pretrained = [dict(run("shoulder", "predictive", 0.03, 1.0), pretrained="/x/shoulder.npz")]
    report = summarize(shared + scratch + pretrained, seconds=90, resamples=500)
    data = report.data
    assert data["scratch"]["shoulder"]["reactive"] == data["pretrained"]["shoulder"]["reactive"]
    assert data["scratch"]["shoulder"]["reactive"]["contact_s"] == [0.2, 0.4]  # each shared run once
    # Each start's ratio: its own predictive runs over the same reactive runs (mean 0.3 s).
    assert data["scratch"]["shoulder"]["ratio"]["ratio"] == pytest.approx(0.5)
    assert data["pretrained"]["shoulder"]["ratio"]["ratio"] == pytest.approx(0.1)
    assert data["scratch"]["shoulder"]["ratio"]["runs"] == data["pretrained"]["shoulder"]["ratio"]["runs"] == [1, 2]
    # Progress against none: the same none runs for both.
    assert data["scratch"]["shoulder"]["none"]["contact_s"] == data["pretrained"]["shoulder"]["none"]["contact_s"]
    # None's rule on is its Horde's (from scratch): given in the scratch table, left out of the pretrained one.
    scratch_table, _, pretrained_table, _, _ = report.tables
    assert "shared by every start" in scratch_table.title and "shared by every start" in pretrained_table.title
    on = list(scratch_table.columns).index("rule on (fraction)")
    assert scratch_table.rows[0][0] == pretrained_table.rows[0][0] == "none"
    assert scratch_table.rows[0][on] == "0.4 ± 0.141" and pretrained_table.rows[0][on] == "-"
    assert scratch_table.rows[1] == pretrained_table.rows[1]  # the reactive row, whole
    # A none run the pretrained start once made (its Horde pretrained) gives that table its rule on.
    shared[3]["pretrained"] = "/x/shoulder.npz"
    again = summarize(shared + scratch + pretrained, seconds=90, resamples=500)
    assert again.data["pretrained"]["shoulder"]["none"]["rule_on_fraction"] == [0.5]
    assert again.data["scratch"]["shoulder"]["none"]["rule_on_fraction"] == [0.3]
    assert again.data["scratch"]["shoulder"]["none"]["contact_s"] == [0.5, 0.7]
    # Only shared runs: the starts are the ones asked for.
    assert set(summarize(shared, seconds=90, starts=["pretrained"], resamples=500).data) == {"pretrained"}


def test_the_checks_pass_and_fail_at_their_bounds():
    ratio = {"ratio": 0.5, "low": 0.2, "high": 0.99}
    assert done_when(ratio, -0.05, 0.03, 0.02) == {"ratio": "PASS", "progress": "PASS", "per_hit": "PASS"}
    assert done_when({**ratio, "high": 1.0}, -0.051, 0.031, 0.02) == {
        "ratio": "FAIL",
        "progress": "FAIL",
        "per_hit": "FAIL",
    }
    assert done_when({**ratio, "ratio": 0.51}, None, 0.013, 0.02)["ratio"] == "FAIL"
    assert done_when({"ratio": None}, None, 0.012, 0.02) == {"ratio": "n/a", "progress": "n/a", "per_hit": "FAIL"}
    assert done_when(ratio, 0.1, 0.02, None)["per_hit"] == "n/a"
    assert contact_per_hit([{"contact_s": 0.3, "contacts": 4}, {"contact_s": 0.1, "contacts": 4}]) == 0.05
    assert contact_per_hit([{"contact_s": 0.0, "contacts": 0}]) is None


def test_the_simulated_reference_is_the_simulated_studys_reactive_contact_per_hit():
    folder = pathlib.Path(__file__).parents[1] / "docs" / "figures" / "reflex"
    runs = []
    for name in ("reflex_study.json", "reflex_study_seeds_5_9.json"):
        reactive = json.loads((folder / name).read_text())["data"]["reactive"]
        runs += [{"contact_s": c, "contacts": n} for c, n in zip(reactive["contact_s"], reactive["contacts"])]
    assert SIMULATED_CONTACT_PER_HIT["shoulder"] == pytest.approx(contact_per_hit(runs), rel=1e-9)


def test_from_scratch_contact_counts_after_the_learning_time_and_runs_of_other_lengths_compare_as_rates():
    series = [[0.0, 0.0, 0], [30.0, 0.3, 3], [60.0, 0.4, 4], [150.0, 0.5, 5]]
    learner = {**run("shoulder", "predictive", 0.5, 15.0), "seconds": 150.0, "contact_series": series}
    assert counted_contact_rate(learner) == pytest.approx(60 * 0.5 / 150)
    assert counted_contact_rate(learner, 60.0) == pytest.approx(60 * 0.1 / 90)  # the 0.4 s before 60 s left out
    with pytest.raises(ValueError, match="nothing after its first 150 s"):
        counted_contact_rate(learner, 150.0)
    with pytest.raises(ValueError, match="needs the run's contact_series"):
        counted_contact_rate({**learner, "contact_series": None}, 60.0)
    reactive = [{**run("shoulder", "reactive", c, 9.0), "seconds": 90.0} for c in (0.1, 0.3)]
    none = [{**run("shoulder", "none", 1.0, 9.0), "seconds": 90.0}]
    report = summarize([learner, *reactive, *none], seconds=90, learn_s=60.0, resamples=500)
    here = report.data["scratch"]["shoulder"]
    assert here["ratio"]["ratio"] == pytest.approx((0.1 / 90) / (0.2 / 90))  # rates: 90 s of each counted
    # 15 circuits in 150 s and 9 in 90 s: 6 a minute each, no loss (the totals would say +67 %)
    assert here["progress_vs_none"] == pytest.approx(0.0)
    assert "a run none 90 s, reactive 90 s, predictive 150 s" in report.tables[0].title
    assert "counted from 60 s on" in report.tables[1].title
    # a pretrained start counts its runs whole: the learning time is a from-scratch Horde's
    trained = {**learner, "pretrained": "warm.npz"}
    again = summarize([trained, *reactive, *none], seconds=90, learn_s=60.0, resamples=500)
    assert again.data["pretrained"]["shoulder"]["ratio"]["ratio"] == pytest.approx((0.5 / 150) / (0.2 / 90))
