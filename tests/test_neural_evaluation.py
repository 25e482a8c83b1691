"""Scores at evaluation points: MSE by τ, correlation along the points, the paper's filter, by hand."""

from __future__ import annotations

import numpy as np
import pytest

from gamma_net_core.evaluation import compare_at_points, is_predictive, scores_at_points

# Four evaluation points, two probe timescales (τ = 1, 10).
RETURNS = np.array([[1.0, 10.0], [2.0, 20.0], [3.0, 30.0], [4.0, 40.0]])
TAUS = [1.0, 10.0]


def test_scores_by_hand():
    mse, corr = scores_at_points(RETURNS + np.array([1.0, -2.0]), RETURNS)
    np.testing.assert_allclose(mse, [1.0, 4.0])
    np.testing.assert_allclose(corr, [1.0, 1.0])
    mse, corr = scores_at_points(RETURNS[::-1], RETURNS)
    np.testing.assert_allclose(mse, [5.0, 500.0])  # (9 + 1 + 1 + 9) / 4, times 100
    np.testing.assert_allclose(corr, [-1.0, -1.0])
    with pytest.raises(ValueError, match="must end in the returns' shape"):
        scores_at_points(RETURNS[:3], RETURNS)


def test_filter_positive_correlation_only():
    assert is_predictive([[0.5, 0.1], [0.2, 0.3]])
    assert not is_predictive([[0.5, -0.1], [0.2, 0.0]])  # mean 0 at the second τ
    assert not is_predictive([[0.5, np.nan]])  # constant predictions


def test_compare_filters_then_normalizes_by_tau():
    good = np.stack([RETURNS + 1.0, RETURNS - 1.0])  # two runs, MSE 1 at each τ
    half = np.stack([0.5 * RETURNS, 0.5 * RETURNS])  # MSE (1 + 4 + 9 + 16) / 16 = 1.875, and 187.5
    flat = np.full((2, 4, 2), 2.5)  # the mean of the returns: not predictive
    anti = np.stack([RETURNS[::-1], RETURNS[::-1]])
    result = compare_at_points({"good": good, "half": half, "flat": flat, "anti": anti}, RETURNS, TAUS)
    assert result.excluded == ("flat", "anti")
    assert result.comparison.names == ("good", "half")
    np.testing.assert_allclose(result.comparison.mean, [[1.0, 1.0], [1.875, 187.5]])
    np.testing.assert_allclose(result.comparison.norm_mean, [[1 / 1.875, 1 / 187.5], [1.0, 1.0]])
    np.testing.assert_allclose(result.comparison.bar_mean, [(1 / 1.875 + 1 / 187.5) / 2, 1.0])
    assert result.comparison.best() == "good"
    assert np.isnan(result.correlations["flat"]).all()
    assert result.to_json()["excluded"] == ["flat", "anti"]


def test_steady_state_uses_the_last_evaluations():
    # Run history: two evaluations anti-correlated (mean correlation -1/3 over all three), the last one good.
    history = np.stack([RETURNS[::-1], RETURNS[::-1], RETURNS + 1.0])[None]  # [1 run, 3 evaluations, P, n_tau]
    kept = compare_at_points({"net": history}, RETURNS, TAUS, last=1)
    np.testing.assert_allclose(kept.comparison.mean, [[1.0, 1.0]])
    dropped = compare_at_points({"net": history}, RETURNS, TAUS)
    assert dropped.excluded == ("net",) and dropped.comparison is None
