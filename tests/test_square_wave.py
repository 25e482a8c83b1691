"""The square wave and its study: the signal's returns, and the whole study on a tiny budget."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gamma_net_core.cli import main
from gamma_net_core.returns import discounted_returns
from gamma_net_core.signals.square_wave import SquareWave
from gamma_net_core.timescales import gamma_from_tau
from gamma_net_studies import square_wave as study

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_square_wave_signal_and_its_exact_returns():
    wave = SquareWave()
    values = wave.values()
    assert values.shape == (100,) and np.all(values[:50] == 1.0) and np.all(values[50:] == -1.0)
    phases_t, cumulants, phases_tp1 = wave.transitions(250)
    np.testing.assert_array_equal(phases_tp1, (phases_t + 1) % 100)
    np.testing.assert_array_equal(cumulants, values[phases_tp1])  # C_{t+1} is the wave at t + 1
    gammas = np.array([0.0, 0.5, 0.9, 0.99])
    returns = wave.returns(gammas)
    np.testing.assert_array_equal(returns[:, 0], wave.cumulants_by_phase())  # gamma = 0: the next value
    # The closed form equals a long unrolled recording's backward recursion (gamma^5000 is negligible).
    _, long_cumulants, _ = wave.transitions(5000)
    np.testing.assert_allclose(discounted_returns(long_cumulants, gammas)[:100], returns, atol=1e-9)
    with pytest.raises(ValueError, match="even number"):
        SquareWave(period=7)


def test_runs_are_seeded_by_seed_series_and_run():
    budget = study.Budget(runs=2, steps=600, last=200)
    a = study.run_one((0, 0, budget, True))
    assert a[3].shape == (study.FIGURE_STEPS, len(study.PROBE_TAUS))
    np.testing.assert_array_equal(a[2], study.run_one((0, 0, budget, False))[2])
    assert not np.array_equal(a[2], study.run_one((0, 1, budget, False))[2])
    assert not np.array_equal(a[2], study.run_one((5, 0, budget, False))[2])


@pytest.mark.slow
def test_tiny_study_writes_figures_json_and_table(tmp_path, capsys):
    out = tmp_path / "sw"
    argv = ["square-wave", "--runs", "2", "--steps", "1000", "--last", "400", "--out", str(out), "--no-progress"]
    assert main([*argv, "--workers", "1", "--json", str(tmp_path / "report.json")]) == 0
    printed = capsys.readouterr().out
    for name in ("inputs", "distribution", "scaling"):
        for suffix in ("", "_predictions"):
            assert (out / f"{name}{suffix}.png").read_bytes()[:8] == PNG_MAGIC
    data = json.loads((out / "square_wave.json").read_text())
    assert set(data["mse_by_run"]) == {s.key for s in study.SERIES}
    assert np.array(data["mse_by_run"]["reference"]).shape == (2, 9)
    comparisons = data["comparisons"]
    assert comparisons["inputs"]["names"] == ["gamma", "tau", "both"]
    # The reference configuration is run once and shared by the three comparisons.
    shared = [
        comparisons["inputs"]["mean"][2],
        comparisons["distribution"]["mean"][2],
        comparisons["scaling"]["mean"][0],
    ]
    assert shared[0] == shared[1] == shared[2]
    reference_runs = np.array(data["mse_by_run"]["reference"])
    np.testing.assert_allclose(comparisons["inputs"]["mean"][2], reference_runs.mean(0), rtol=1e-3)
    for c in comparisons.values():
        assert max(max(row) for row in c["norm_mean"]) == pytest.approx(1.0)  # worst series is 1 at each tau
    assert "tau=100" in printed and "square-wave study" in printed
    assert json.loads((tmp_path / "report.json").read_text())["command"] == "square-wave"


def test_the_default_step_size_learns_in_the_cumulants_units_with_and_without_scaling():
    """20k steps of run 0 at the study's alpha (0.5 / 70): MSE under 10% of the return's mean square at every tau.

    With loss scaling the weights learn f = (1 - gamma) V and the study records V = f / (1 - gamma):
    were f recorded instead, the error at tau = 100 would be about 98% of the mean square. The worst
    seen over 3 runs of each series was 5.2% (scaled) and 1.3% (unscaled).
    """
    budget = study.Budget(runs=1, steps=20_000, last=5_000)
    assert budget.step_size == 0.5
    mean_square = np.mean(SquareWave().returns(gamma_from_tau(np.array(study.PROBE_TAUS))) ** 2, axis=0)
    for key in ("reference", "unscaled"):
        index = next(i for i, s in enumerate(study.SERIES) if s.key == key)
        _, _, mse, _ = study.run_one((index, 0, budget, False))
        np.testing.assert_array_less(mse / mean_square, 0.10)


@pytest.mark.slow
def test_two_worker_processes_give_the_numbers_of_one():
    budget = study.Budget(runs=2, steps=600, last=200)
    one = study.run_study(budget, workers=1, progress=False)
    two = study.run_study(budget, workers=2, progress=False)
    for key, errors in one["mse"].items():
        assert np.all(np.isfinite(errors))
        np.testing.assert_array_equal(two["mse"][key], errors)
        np.testing.assert_array_equal(two["predictions"][key], one["predictions"][key])


@pytest.mark.parametrize(
    "extra, message", [(["--last", "0"], "--last"), (["--runs", "0"], "--runs"), (["--steps", "10"], "--steps")]
)
def test_bad_study_arguments(extra, message, tmp_path, capsys):
    assert main(["square-wave", "--out", str(tmp_path), *extra]) == 2
    assert message in capsys.readouterr().err
