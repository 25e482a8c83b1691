"""`gamma-net atari train` and `atari evaluate`: the paper's comparisons, by hand and end to end on real ALE data."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

from gamma_net_core.atari.evaluation_points import EvaluationPoints
from gamma_net_core.atari.rollouts import MonteCarloReturns
from gamma_net_core.cli import main
from gamma_net_core.neural.learner import NeuralConfig, NeuralLearner
from gamma_net_core.timescales import gamma_from_tau
from gamma_net_studies import atari_evaluate as ev
from gamma_net_studies import atari_series as study
from gamma_net_studies import atari_train as train

pytestmark = pytest.mark.usefixtures("one_torch_thread")

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
ALL_TAUS = [f"{t:g}" for t in study.study_taus(NeuralConfig().probe_taus)]
# Tiny learners: the paper's settings but for the budget (the settings a user changes with --set).
TINY = ["--set", "hidden_sizes=[16, 8]", "--set", "min_replay_history=60", "--set", "target_sync_period=5"]


# ----------------------------------------------------------------------------- by hand


def test_steady_state_is_the_evaluations_after_three_quarters_of_training():
    assert ev.steady_state_count([0, 10, 20, 30, 40, 50, 60, 70, 80]) == 2  # 70 and 80 (> 60)
    paper = np.arange(0, 20_000_001, 500_000)  # every 500k frames of 20M
    assert ev.steady_state_count(paper) == 10  # the last 5M: 15.5M ... 20M
    assert ev.steady_state_count([0, 5]) == 1
    with pytest.raises(ValueError, match="non-empty"):
        ev.steady_state_count([])


RETURNS = np.array([[1.0, 10.0], [2.0, 20.0], [3.0, 30.0], [4.0, 40.0]])  # 4 points, τ = 1 and 10
TAUS = np.array([1.0, 10.0])


def history(*evaluations) -> np.ndarray:
    """[1 run, evaluations, points, τ]."""
    return np.stack(evaluations)[None]


def test_normalization_bars_filter_and_window_by_hand():
    anti = RETURNS[::-1]
    predictions = {
        # Anti-correlated early, then off by 1 at every point: MSE 1 at both τ in the steady state.
        "good": np.concatenate([history(anti, RETURNS + 1.0), history(anti, RETURNS - 1.0)]),  # 2 runs
        # Half the return: MSE (1 + 4 + 9 + 16) / 4 / 4 = 1.875 at τ = 1 and 187.5 at τ = 10.
        "half": np.concatenate([history(anti, 0.5 * RETURNS), history(anti, 0.5 * RETURNS)]),
        # Perfect early, anti-correlated at the end: only the steady state counts, so it is dropped.
        "late_anti": np.concatenate([history(RETURNS, anti), history(RETURNS, anti)]),
    }
    result, informative, steady, failing = ev.filtered_comparison(predictions, RETURNS, TAUS, last=1)
    assert informative.all()
    assert result.excluded == ("late_anti",)
    c = result.comparison
    assert c.names == ("good", "half")
    np.testing.assert_allclose(c.mean, [[1.0, 1.0], [1.875, 187.5]])
    np.testing.assert_allclose(c.norm_mean, [[1 / 1.875, 1 / 187.5], [1.0, 1.0]])  # the worst is 1 at each τ
    np.testing.assert_allclose(c.bar_mean, [(1 / 1.875 + 1 / 187.5) / 2, 1.0])  # averaged over τ
    np.testing.assert_allclose(c.var, [[0.0, 0.0], [0.0, 0.0]])
    np.testing.assert_allclose(steady["late_anti"], [[5.0, 500.0], [5.0, 500.0]])
    np.testing.assert_allclose(result.correlations["late_anti"], -1.0)
    assert c.best() == "good"
    # Over both evaluations every series averages a correlation of 0 (-1 then +1): all are dropped.
    both, _, _, _ = ev.filtered_comparison(predictions, RETURNS, TAUS, last=2)
    assert both.excluded == ("good", "half", "late_anti") and both.comparison is None
    # Without the filter every series is compared; the ones failing it are still named.
    unfiltered, _, _, failing = ev.filtered_comparison(predictions, RETURNS, TAUS, last=1, apply_filter=False)
    assert unfiltered.excluded == () and failing == ("late_anti",)
    assert unfiltered.comparison.names == ("good", "half", "late_anti")
    np.testing.assert_allclose(unfiltered.comparison.norm_mean[:, 0], [1 / 5.0, 1.875 / 5.0, 1.0])


def test_filter_ignores_a_tau_whose_returns_are_equal_at_every_point():
    returns = RETURNS.copy()
    returns[:, 0] = 0.0  # no reward one step after any point: correlation undefined for every series
    predictions = {"a": history(returns + 1.0), "b": history(returns * 2.0 + 0.5)}
    result, informative, _, _ = ev.filtered_comparison(predictions, returns, TAUS, last=1)
    assert informative.tolist() == [False, True]
    assert result.excluded == () and result.comparison.names == ("a", "b")
    assert np.isnan(result.correlations["a"][0, 0])
    np.testing.assert_allclose(result.comparison.mean[:, 0], [1.0, 0.25])  # MSE still compared there


def test_the_per_tau_filter_keeps_a_series_where_it_is_predictive():
    """All-τ reading: one τ with a negative correlation drops a series from the whole comparison. Per-τ
    reading: it is compared at the τ where it passes, and its bar averages those τ only."""
    flipped = RETURNS.copy()
    flipped[:, 1] = RETURNS[::-1, 1]  # right at τ = 1, anti-correlated at τ = 10
    predictions = {
        "reference": history(flipped + 1.0),  # MSE 1 at τ = 1
        "half": history(0.5 * RETURNS),  # MSE 1.875 and 187.5, positive at both
        "flat": history(np.full_like(RETURNS, 2.5)),  # constant: NaN correlation, fails everywhere
    }
    result, informative, steady, failing = ev.filtered_comparison(predictions, RETURNS, TAUS, last=1)
    assert failing == ("reference", "flat") and result.comparison.names == ("half",)
    reading = ev.per_tau_reading(steady, result.correlations, informative, TAUS)
    assert reading.passes.tolist() == [[True, False], [True, True], [False, False]]
    np.testing.assert_allclose(reading.norm_mean[0], [1 / 1.875, np.nan])
    np.testing.assert_allclose(reading.norm_mean[1], [1.0, 1.0])
    np.testing.assert_allclose(reading.bar_mean[:2], [1 / 1.875, 1.0])
    assert np.isnan(reading.bar_mean[2]) and reading.passed.tolist() == [1, 2, 0]
    assert reading.best() == "half"  # passes at more τ; with equal coverage the lower bar wins
    # Where the returns are flat the correlation says nothing: every series passes there.
    returns = RETURNS.copy()
    returns[:, 1] = 5.0
    result, informative, steady, _ = ev.filtered_comparison(predictions, returns, TAUS, last=1)
    reading = ev.per_tau_reading(steady, result.correlations, informative, TAUS)
    assert reading.passes[:, 1].all() and reading.passed.tolist() == [2, 2, 1]
    np.testing.assert_allclose(reading.norm_mean[:, 1], np.array([566.0, 87.5, 6.25]) / 566.0)  # MSE vs 5
    assert reading.best() == "half"  # (1 + 87.5 / 566) / 2 beats the reference's (1 / 1.875 + 1) / 2


def test_a_comparison_the_filter_empties_gets_a_figure_naming_who_failed(tmp_path):
    stale = tmp_path / "inputs.png"
    stale.write_bytes(b"an earlier evaluation's figure")
    path = ev.plot_nothing_kept("Timescale inputs", ("gamma", "tau", "both"), stale)
    assert path == stale and stale.read_bytes()[:8] == PNG_MAGIC


def test_learning_curves_normalize_each_tau_by_the_worst_mean_at_any_evaluation():
    curves = ev.learning_curves(
        {"a": history(RETURNS + 2.0, RETURNS + 1.0), "b": history(RETURNS, RETURNS + 1.0)}, RETURNS
    )
    # MSE: a = 4 then 1, b = 0 then 1, at both τ; the worst mean is 4.
    np.testing.assert_allclose(curves["a"], [[1.0, 0.25]])
    np.testing.assert_allclose(curves["b"], [[0.0, 0.25]])


def runs_of(name: str, taus, predictions) -> ev.SeriesRuns:
    predictions = np.asarray(predictions, dtype=np.float64)
    return ev.SeriesRuns(name, [0], np.array([0, 10]), np.asarray(taus, float), predictions, [0.0], [None])


def test_against_the_mean_is_the_mse_over_the_variance_of_the_returns_and_the_fall_of_its_curve(tmp_path):
    returns = np.array([[0.0, 1.0], [2.0, 3.0], [4.0, 5.0], [6.0, 9.0]])  # variances 5 and 8.75
    mean = returns.mean(axis=0)
    evaluations = 4
    constant = np.broadcast_to(mean, (1, evaluations, 4, 2))  # predicts the mean: ratio 1 throughout
    # Exact at the end; off by 2, then 1, then 0.5, then 0 earlier: its curve falls through the steady state.
    learning = np.stack([returns + off for off in (2.0, 1.0, 0.5, 0.0)])[None]
    transitions = np.array([0, 10, 20, 30])
    runs = {
        name: ev.SeriesRuns(name, [0], transitions, np.array([1.0, 10.0]), p, [0.0], [None])
        for name, p in (("constant", constant), ("learning", learning))
    }
    check = ev.against_the_mean(runs, returns, [1.0, 10.0], last=2)
    np.testing.assert_allclose(check.steady[0], [1.0, 1.0])
    np.testing.assert_allclose(check.steady[1], [0.125 / 5, 0.125 / 8.75])  # MSE 0.25 then 0: mean 0.125
    assert check.change[0] == 0.0 and check.change[1] == 1.0  # from 0.25 / var to 0: all of it
    assert check.names == ("constant", "learning") and check.curves["learning"].shape == (1, 4)
    path = ev.plot_against_the_mean(check, tmp_path / "against.png", last=2)
    assert path.read_bytes()[:8] == PNG_MAGIC
    flat = {"flat": ev.SeriesRuns("flat", [0], transitions, np.array([1.0]), np.zeros((1, 4, 3, 1)), [0.0], [None])}
    assert ev.against_the_mean(flat, np.ones((3, 1)), [1.0], last=2) is None  # equal returns: nothing to beat


def test_interpolated_probes_on_the_tau_and_gamma_scales():
    probe_taus = np.array([1.0, 2.0, 5.0, 10.0])
    values = np.broadcast_to(3.0 * probe_taus, (1, 2, 1, 4))  # V = 3 τ at every point: linear in τ
    runs = {"probes": runs_of("probes", probe_taus, values)}
    between = np.array([1.5, 3.5, 7.5])
    on_tau = ev.member_predictions(study.Member("tau", "probes", "tau"), runs, between)
    np.testing.assert_allclose(on_tau[0, 0, 0], 3.0 * between)  # exact on the scale it is linear in
    on_gamma = ev.member_predictions(study.Member("gamma", "probes", "gamma"), runs, between)
    g, lo, hi = gamma_from_tau(3.5), gamma_from_tau(2.0), gamma_from_tau(5.0)
    w = (g - lo) / (hi - lo)  # the weight on the γ scale: 0.6 here, 0.5 on the τ scale
    np.testing.assert_allclose(on_gamma[0, 0, 0, 1], 3.0 * ((1 - w) * 2.0 + w * 5.0))
    assert on_gamma[0, 0, 0, 1] > on_tau[0, 0, 0, 1]
    own = ev.member_predictions(study.Member("fixed", "probes"), runs, [2.0, 10.0])
    np.testing.assert_allclose(own[0, 0, 0], [6.0, 30.0])
    with pytest.raises(ValueError, match=r"has no τ \[3.5\]"):
        ev.member_predictions(study.Member("fixed", "probes"), runs, [3.5])


def test_a_diverged_or_missing_series_is_named_and_left_out():
    members = (
        study.Member("gamma", "input_gamma"),
        study.Member("tau", "input_tau"),
        study.Member("both", "reference"),
    )
    spec = study.ComparisonSpec("inputs", "Inputs", members)
    good = np.stack([RETURNS + 1.0, RETURNS + 0.5])[None]  # [1 run, 2 evaluations, P, τ]
    diverged = good.copy()
    diverged[0, 1] = np.nan  # NaN after the divergence, as train_run saves it
    runs = {"reference": runs_of("reference", TAUS, good), "input_gamma": runs_of("input_gamma", TAUS, diverged)}
    runs["input_gamma"].stopped = ["the loss became nan at update 3"]
    result = ev.evaluate_comparison(spec, runs, RETURNS, TAUS, last=1)
    assert result.missing == ("tau",) and result.points.excluded == ("gamma",)
    assert result.points.comparison.names == ("both",)
    assert "not trained: tau" in result.note and "training diverged (NaN after it): gamma (1 of 1 seeds)" in result.note
    np.testing.assert_allclose(result.curves["both"], [[1.0, 0.25]])  # MSE 1 then 0.25; the worst mean is 1
    alone = ev.evaluate_comparison(spec, {"reference": runs["reference"]}, RETURNS, TAUS, last=1)
    assert alone.points is None and alone.note.startswith("not run: needs at least two")


def test_the_interpolation_comparison_is_scored_between_the_probes():
    spec = next(c for c in study.COMPARISONS if c.name == "interpolation")
    assert spec.at == "between" and study.INTERPOLATION_TAUS == (1.5, 3.5, 7.5, 15.0, 30.0, 50.0, 70.0, 90.0)
    assert {m.interpolation for m in spec.members} == {None, "gamma", "tau"}
    others = [c for c in study.COMPARISONS if c.name != "interpolation"]
    assert all(c.at == "probe" for c in others)


def test_each_series_changes_one_setting_of_the_reference():
    reference = NeuralConfig.paper(seed=7)
    study.check_reference(reference)
    for name in study.SERIES:
        config = study.series_config(reference, name, 2)
        assert config.seed == 9  # the reference's seed + the seed index
        changed = {
            f.name for f in dataclasses.fields(NeuralConfig) if getattr(config, f.name) != getattr(reference, f.name)
        }
        expected = {"seed"} | set(study.SERIES[name].changes) - {"draws"}
        if name.startswith("draws"):
            expected |= {"n_gamma", "n_tau"}
            assert config.n_gamma + config.n_tau == reference.n_gamma + reference.n_tau
        assert changed == expected, name
    assert study.series_config(reference, "draws_gamma", 0).n_tau == 0
    assert study.parse_series("all") == list(study.SERIES)
    assert study.parse_series("probes,reference") == ["reference", "probes"]
    with pytest.raises(ValueError, match="unknown series \\['direkt'\\]; known: reference"):
        study.parse_series("reference,direkt")
    with pytest.raises(ValueError, match="the study's reference must be the paper's"):
        study.check_reference(NeuralConfig.paper(embedding="l_embed"))


def test_evaluation_schedule():
    assert train.evaluation_schedule(100, 30).tolist() == [0, 30, 60, 90, 100]
    assert train.evaluation_schedule(90, 30).tolist() == [0, 30, 60, 90]


# ----------------------------------------------------------------------------- end to end on real ALE data


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A real Centipede recording (random policy) and evaluation points with returns at every study τ."""
    root = tmp_path_factory.mktemp("atari_study")
    env = ["--max-episode-steps", "80", "--no-progress"]
    assert main(["atari", "record", "--steps", "240", "--out", str(root / "rec"), *env]) == 0
    points = ["atari", "points", "--episodes", "1", "--rollouts", "2", "--horizon", "40", "--workers", "0"]
    assert main([*points, "--out", str(root / "pts"), "--taus", *ALL_TAUS, *env]) == 0
    return root


def train_argv(data, out, *extra):
    return ["atari", "train", "--shards", str(data / "rec"), "--points", str(data / "pts"), "--out", str(out),
            "--seeds", "2", "--eval-every", "40", "--workers", "0", "--no-progress", *TINY, *extra]  # fmt: skip


@pytest.mark.slow
def test_train_and_evaluate_end_to_end(data, tmp_path, capsys):
    run = tmp_path / "run"
    series = "reference,probes,l_embed,input_gamma"
    assert main([*train_argv(data, run, "--series", series), "--json", str(tmp_path / "train.json")]) == 0
    report = json.loads((tmp_path / "train.json").read_text())
    assert sorted((r["series"], r["seed"]) for r in report["data"]["runs"]) == sorted(
        (s, k) for s in series.split(",") for k in (0, 1)
    )
    points = EvaluationPoints.load(data / "pts" / "points.npz")
    saved = study.RunPredictions.load(run / "reference" / "seed-1" / study.PREDICTIONS)
    assert saved.transitions.tolist() == [0, 40, 80, 120, 160, 200, 240]
    assert saved.predictions.shape == (7, len(points), len(ALL_TAUS)) and np.isfinite(saved.predictions).all()
    assert saved.updates[-1] == (240 - 60) // 4 + 1 and saved.losses.size == saved.updates[-1]
    probes = study.RunPredictions.load(run / "probes" / "seed-0" / study.PREDICTIONS)
    np.testing.assert_allclose(probes.taus, [1, 2, 5, 10, 20, 40, 60, 80, 100])  # their own τ only
    # The final learner is a checkpoint the neural_predictor node resumes from; it predicts what was recorded.
    learner = NeuralLearner.load(run / "reference" / "seed-1" / study.CHECKPOINT)
    assert learner.config.seed == 1 and learner.transitions == 240
    np.testing.assert_allclose(learner.predict(points.features, saved.gammas), saved.predictions[-1], rtol=1e-6)

    # A run saved before a setting existed (here average_decay, which the study sets to the paper's 0) is kept too.
    older = study.RunPredictions.load(run / "reference" / "seed-0" / study.PREDICTIONS)
    assert older.config["learner"].pop("average_decay") == 0.0
    older.save(run / "reference" / "seed-0" / study.PREDICTIONS)
    # Running it again trains nothing (finished runs are kept; the device is not part of a study) and adds a series.
    again = [*train_argv(data, run, "--series", "reference,unscaled"), "--set", "device=cpu:0"]
    assert main([*again, "--json", str(tmp_path / "again.json")]) == 0
    again = json.loads((tmp_path / "again.json").read_text())["data"]
    assert again["skipped"] == [["reference", 0], ["reference", 1]]
    assert sorted((r["series"], r["seed"]) for r in again["runs"]) == [("unscaled", 0), ("unscaled", 1)]
    capsys.readouterr()

    evaluation = tmp_path / "evaluation"
    assert main(["atari", "evaluate", "--run", str(run), "--points", str(data / "pts"), "--out", str(evaluation)]) == 0
    out = capsys.readouterr().out
    assert "Timescale inputs: steady-state MSE by τ" in out and "the paper: γ alone worst" in out
    result = json.loads((evaluation / "atari_evaluate.json").read_text())
    assert result["steady_state"]["evaluations"] == 2  # 200 and 240 of 240 transitions
    comparisons = result["comparisons"]
    assert comparisons["interpolation"]["taus"] == list(study.INTERPOLATION_TAUS)
    assert comparisons["inputs"]["taus"] == [1, 2, 5, 10, 20, 40, 60, 80, 100]
    assert comparisons["inputs"]["missing"] == ["tau"] and comparisons["matrix"]["result"] is None
    for name in ("embedding", "inputs", "scaling", "fixed_vs_gamma_net", "interpolation"):
        outcome = comparisons[name]["result"]
        kept = outcome["comparison"]["names"] if outcome["comparison"] else []
        assert sorted(kept + outcome["excluded"]) == sorted(outcome["correlations"])  # every series kept or dropped
        assert (evaluation / f"{name}_learning.png").read_bytes()[:8] == PNG_MAGIC
        assert (evaluation / f"{name}.png").read_bytes()[:8] == PNG_MAGIC  # or the names of those that failed
        if kept:
            assert max(np.max(v) for v in outcome["comparison"]["norm_mean"]) == 1.0
    assert (evaluation / "predictions_in_time.png").read_bytes()[:8] == PNG_MAGIC
    assert (evaluation / "against_the_mean.png").read_bytes()[:8] == PNG_MAGIC
    assert "Against a constant" in out
    assert sorted(result["against_the_mean"]["names"]) == sorted(result["series"])
    assert result["series"]["reference"]["seeds"] == [0, 1] and result["filter_applied"]
    # --no-filter: every series in the MSE panels; the filter's verdict is the same, and still reported.
    argv = ["atari", "evaluate", "--run", str(run), "--points", str(data / "pts"), "--out", str(tmp_path / "all")]
    assert main([*argv, "--no-filter"]) == 0
    unfiltered = json.loads((tmp_path / "all" / "atari_evaluate.json").read_text())
    assert not unfiltered["filter_applied"]
    for name in ("embedding", "scaling", "interpolation"):
        before, after = comparisons[name], unfiltered["comparisons"][name]
        assert after["fails_filter"] == before["fails_filter"] == before["result"]["excluded"]
        assert after["result"]["excluded"] == []
        assert sorted(after["result"]["comparison"]["names"]) == sorted(after["result"]["correlations"])
    _, one_seed = ev.load_study(run, seeds=1)  # --seeds 1: the same first seed of every series
    assert {name: s.seeds for name, s in one_seed.items()} == {name: [0] for name in result["series"]}
    # The steady-state MSE in the JSON is the run files' own numbers: the last 2 evaluations, the points' returns.
    returns = MonteCarloReturns.load(data / "pts" / "returns.npz")
    targets = returns.returns[:, study.columns(returns.taus, saved.taus, what="the returns")]
    mse = ((saved.predictions[-2:] - targets) ** 2).mean(axis=1).mean(axis=0)
    probe_columns = study.columns(saved.taus, [1, 2, 5, 10, 20, 40, 60, 80, 100], what="reference")
    np.testing.assert_allclose(
        comparisons["inputs"]["steady_state_mse_by_run"]["both"][1], mse[probe_columns], rtol=1e-3
    )


@pytest.mark.slow
def test_runs_give_the_same_predictions_in_worker_processes(data, tmp_path):
    argv = [*train_argv(data, tmp_path / "here", "--series", "reference"), "--seeds", "1"]
    assert main(argv) == 0
    argv = [*train_argv(data, tmp_path / "there", "--series", "reference"), "--seeds", "1", "--workers", "1"]
    assert main(argv) == 0
    here = study.RunPredictions.load(tmp_path / "here" / "reference" / "seed-0" / study.PREDICTIONS)
    there = study.RunPredictions.load(tmp_path / "there" / "reference" / "seed-0" / study.PREDICTIONS)
    np.testing.assert_array_equal(here.predictions, there.predictions)
    np.testing.assert_array_equal(here.losses, there.losses)


@pytest.mark.slow
def test_runs_give_the_same_predictions_on_ray(data, tmp_path):
    ray = pytest.importorskip("ray")
    argv = [*train_argv(data, tmp_path / "here", "--series", "reference"), "--seeds", "1"]
    assert main(argv) == 0
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:  # the initialised instance is the cluster --ray-address names
        argv = [*train_argv(data, tmp_path / "there", "--series", "reference"), "--seeds", "1", "--ray-address", "auto"]
        assert main(argv) == 0
    finally:
        ray.shutdown()
    here = study.RunPredictions.load(tmp_path / "here" / "reference" / "seed-0" / study.PREDICTIONS)
    there = study.RunPredictions.load(tmp_path / "there" / "reference" / "seed-0" / study.PREDICTIONS)
    np.testing.assert_array_equal(here.predictions, there.predictions)
    np.testing.assert_array_equal(here.losses, there.losses)


@pytest.mark.slow
def test_ensembles_train_the_runs_a_one_by_one_study_trains(data, tmp_path, capsys):
    """--ensemble 3: any series mix in an ensemble, runs of one shape packed together: reference 0, 1 and
    unscaled 0 (one stacked group); unscaled 1 with the probes' two seeds (two groups); input_gamma's two seeds.
    Every run's files match a one-by-one study's to float tolerance, and the ensemble's checkpoints load as
    single learners."""
    series = ["--series", "reference,unscaled,probes,input_gamma"]
    assert main([*train_argv(data, tmp_path / "alone", *series)]) == 0
    together_json = tmp_path / "together.json"
    assert (
        main([*train_argv(data, tmp_path / "together", *series, "--ensemble", "3"), "--json", str(together_json)]) == 0
    )
    assert "ensembles of up to 3" in capsys.readouterr().out
    runs = json.loads(together_json.read_text())["data"]["runs"]
    assert sorted(r.get("ensemble", 1) for r in runs) == [2, 2, 3, 3, 3, 3, 3, 3]
    assert not list((tmp_path / "together").rglob(train.ENSEMBLE_CHECKPOINT))  # removed once the runs are written
    for name in ("reference", "unscaled", "probes", "input_gamma"):
        for seed in (0, 1):
            alone = study.RunPredictions.load(study.run_path(tmp_path / "alone", name, seed) / study.PREDICTIONS)
            together = study.RunPredictions.load(study.run_path(tmp_path / "together", name, seed) / study.PREDICTIONS)
            assert together.config == alone.config and np.isfinite(together.predictions).all()
            np.testing.assert_array_equal(together.updates, alone.updates)
            np.testing.assert_allclose(together.predictions, alone.predictions, rtol=1e-3, atol=1e-4)
            np.testing.assert_allclose(together.losses, alone.losses, rtol=1e-3, atol=1e-6)
    learner = NeuralLearner.load(study.run_path(tmp_path / "together", "unscaled", 1) / study.CHECKPOINT)
    assert learner.config.scaling == "none" and learner.transitions == 240
    # Continuing: the same command finds every run done and trains nothing.
    assert main([*train_argv(data, tmp_path / "together", *series, "--ensemble", "3")]) == 0
    assert capsys.readouterr().out.count("already trained") == 8


def test_an_interrupted_ensemble_continues_from_its_last_save(data, tmp_path, monkeypatch, capsys):
    """Ctrl-C after evaluation 3 of 6 (saves every 2): the same command continues from evaluation 2 and ends with
    the files an uninterrupted ensemble writes."""
    from gamma_net_core.neural.ensemble import LearnerEnsemble

    series = ["--series", "reference,probes,l_embed", "--seeds", "1", "--ensemble", "3", "--resume-every", "2"]
    assert main([*train_argv(data, tmp_path / "whole", *series)]) == 0
    observe = LearnerEnsemble.observe_many

    def interrupted(self, *args, **kwargs):
        if self.transitions >= 120:  # in evaluation 4
            raise KeyboardInterrupt
        return observe(self, *args, **kwargs)

    monkeypatch.setattr(LearnerEnsemble, "observe_many", interrupted)
    capsys.readouterr()
    assert main([*train_argv(data, tmp_path / "cut", *series)]) == 130
    assert "interrupted" in capsys.readouterr().err
    saved = study.run_path(tmp_path / "cut", "reference", 0) / train.ENSEMBLE_CHECKPOINT
    assert saved.is_file() and not list((tmp_path / "cut").rglob(study.PREDICTIONS))
    monkeypatch.setattr(LearnerEnsemble, "observe_many", observe)
    assert main([*train_argv(data, tmp_path / "cut", *series)]) == 0
    err = capsys.readouterr().err
    assert "resuming the ensemble of reference seed 0, l_embed seed 0, probes seed 0 at evaluation 2 of 6" in err
    assert not saved.exists()
    for name in ("reference", "probes", "l_embed"):
        whole = study.RunPredictions.load(study.run_path(tmp_path / "whole", name, 0) / study.PREDICTIONS)
        cut = study.RunPredictions.load(study.run_path(tmp_path / "cut", name, 0) / study.PREDICTIONS)
        np.testing.assert_array_equal(cut.predictions, whole.predictions)
        np.testing.assert_array_equal(cut.losses, whole.losses)
        np.testing.assert_array_equal(cut.updates, whole.updates)
        a = NeuralLearner.load(study.run_path(tmp_path / "whole", name, 0) / study.CHECKPOINT)
        b = NeuralLearner.load(study.run_path(tmp_path / "cut", name, 0) / study.CHECKPOINT)
        for key, value in a.online.state_dict().items():
            assert torch.equal(b.online.state_dict()[key], value), key
    assert main([*train_argv(data, tmp_path / "usage", *series[:-2], "--resume-every", "-1")]) == 2
    assert "--resume-every" in capsys.readouterr().err


def test_an_ensemble_save_of_other_runs_is_not_resumed(data, tmp_path, monkeypatch, capsys):
    """Interrupted as an ensemble of 3, continued with --ensemble 2: the save holds other members, so the new
    ensemble says so and trains from the start; the stale save is replaced and then removed."""
    from gamma_net_core.neural.ensemble import LearnerEnsemble

    series = ["--series", "reference,probes,l_embed", "--seeds", "1", "--resume-every", "1"]
    observe = LearnerEnsemble.observe_many

    def interrupted(self, *args, **kwargs):
        if self.transitions >= 80:
            raise KeyboardInterrupt
        return observe(self, *args, **kwargs)

    monkeypatch.setattr(LearnerEnsemble, "observe_many", interrupted)
    assert main([*train_argv(data, tmp_path / "run", *series, "--ensemble", "3")]) == 130
    saved = study.run_path(tmp_path / "run", "reference", 0) / train.ENSEMBLE_CHECKPOINT
    assert saved.is_file()
    monkeypatch.setattr(LearnerEnsemble, "observe_many", observe)
    capsys.readouterr()
    assert main([*train_argv(data, tmp_path / "run", *series, "--ensemble", "2")]) == 0
    err = capsys.readouterr().err
    assert "not resuming: " in err and "holds 3 members; this ensemble has 2" in err and "resuming the" not in err
    assert not saved.exists() and len(list((tmp_path / "run").rglob(study.PREDICTIONS))) == 3


def test_a_study_of_the_clipped_reward_learns_it_and_wants_its_returns(data, tmp_path, capsys):
    from gamma_net_core.data.shards import read_transitions

    run = tmp_path / "clipped"
    argv = [*train_argv(data, run, "--series", "reference"), "--seeds", "1", "--cumulant", "clipped"]
    assert main(argv) == 0
    saved = study.RunPredictions.load(study.run_path(run, "reference", 0) / study.PREDICTIONS)
    # By hand: the same learner on the recording's clipped column.
    reference, _ = train.reference_config(None, TINY[1::2])
    learner = NeuralLearner(study.series_config(reference, "reference", 0))
    rows = read_transitions(data / "rec", feature_size=512)
    assert rows.cumulants.max() > 1 and rows.clipped_cumulants.max() == 1  # the clipping matters here
    learner.observe_many(rows.features, rows.clipped_cumulants, rows.terminals, rows.truncated)
    points = EvaluationPoints.load(data / "pts" / "points.npz")
    np.testing.assert_allclose(
        saved.predictions[-1], learner.predict(points.features, saved.gammas), rtol=1e-4, atol=1e-5
    )
    # The points' returns are of the raw reward: evaluating against them is refused.
    capsys.readouterr()
    assert (
        main(["atari", "evaluate", "--run", str(run), "--points", str(data / "pts"), "--out", str(tmp_path / "f")]) == 1
    )
    err = capsys.readouterr().err
    assert "the study learned the clipped reward" in err and "--cumulant clipped" in err


def test_bad_inputs_are_refused_with_a_clear_message(data, tmp_path, capsys):
    def error(argv, code=1) -> str:  # 2: refused before reading any data
        assert main(argv) == code
        return capsys.readouterr().err

    def replaced(argv, flag, value):
        i = argv.index(flag) + 1
        return [*argv[:i], str(value), *argv[i + 1 :]]

    assert "no transition recording at" in error(replaced(train_argv(data, tmp_path / "a"), "--shards", tmp_path))
    assert "points.npz is missing" in error(replaced(train_argv(data, tmp_path / "a"), "--points", tmp_path))
    assert "unknown series ['direkt']" in error(train_argv(data, tmp_path / "a", "--series", "reference,direkt"), 2)
    assert "features have size 512, the network expects 256" in error(
        train_argv(data, tmp_path / "a", "--set", "feature_size=256")
    )
    assert "unknown NeuralConfig settings ['hiden_sizes']" in error(
        train_argv(data, tmp_path / "a", "--set", "hiden_sizes=[4]")
    )
    assert "no network would ever train" in error(train_argv(data, tmp_path / "a", "--set", "min_replay_history=240"))
    assert "--steps must be in [1, 240]" in error(train_argv(data, tmp_path / "a", "--steps", "241"))
    elsewhere = tmp_path / "elsewhere"  # points whose φ come from another feature network than the recording's
    points = EvaluationPoints.load(data / "pts" / "points.npz")
    points.config["policy"] = {**points.config["policy"], "feature_seed": 1}
    points.save(elsewhere / "points.npz")
    assert "come from different policy settings" in error(
        replaced(train_argv(data, tmp_path / "a"), "--points", elsewhere)
    )
    assert not (tmp_path / "a").exists()  # nothing was written

    run = tmp_path / "b"
    assert main(train_argv(data, run, "--series", "reference", "--seeds", "1")) == 0
    assert "holds a study made with other ['reference']" in error(
        train_argv(data, run, "--series", "reference", "--set", "target_sync_period=6")
    )
    evaluate = ["atari", "evaluate", "--run", str(run), "--points"]
    assert "points.npz is missing" in error([*evaluate, str(tmp_path)])
    assert "no Atari study at" in error(["atari", "evaluate", "--run", str(tmp_path), "--points", str(data / "pts")])
    other = tmp_path / "other_points"
    other.mkdir()
    (other / "points.npz").write_bytes((data / "pts" / "points.npz").read_bytes())
    assert "returns.npz is missing" in error([*evaluate, str(other)])
    points = EvaluationPoints.load(data / "pts" / "points.npz")
    points.features = points.features * 2.0
    points.save(other / "points.npz")
    (other / "returns.npz").write_bytes((data / "pts" / "returns.npz").read_bytes())
    assert "not the set of points the study was trained against" in error([*evaluate, str(other)])


def test_a_corrupt_shard_is_refused_before_the_study_folder_is_made(data, tmp_path, capsys):
    import shutil

    recording = tmp_path / "rec"
    shutil.copytree(data / "rec", recording)
    shard = sorted(recording.glob("*.npz"))[-1]  # the last: read only after the study file was written
    blob = bytearray(shard.read_bytes())
    blob[len(blob) // 2] ^= 0x01
    shard.write_bytes(bytes(blob))
    out = tmp_path / "new-study"
    argv = train_argv(data, out)
    argv[argv.index("--shards") + 1] = str(recording)
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert f"transition shard {shard} is corrupt" in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()


@pytest.mark.slow
def test_ensembles_on_ray_give_what_local_processes_give(data, tmp_path):
    ray = pytest.importorskip("ray")
    cli = main

    series = ["--series", "reference,unscaled", "--seeds", "1", "--ensemble", "2"]
    assert cli([*train_argv(data, tmp_path / "here", *series)]) == 0
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:  # the command joins the running cluster, as on a real one
        assert cli([*train_argv(data, tmp_path / "ray", *series), "--ray-address", "auto"]) == 0
    finally:
        ray.shutdown()
    for name in ("reference", "unscaled"):
        here = study.RunPredictions.load(study.run_path(tmp_path / "here", name, 0) / study.PREDICTIONS)
        there = study.RunPredictions.load(study.run_path(tmp_path / "ray", name, 0) / study.PREDICTIONS)
        np.testing.assert_array_equal(here.predictions, there.predictions)
        np.testing.assert_array_equal(here.losses, there.losses)
