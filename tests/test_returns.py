"""Exact, periodic, n-step and Monte-Carlo returns against hand-computed sums."""

from __future__ import annotations

import numpy as np
import pytest

from gamma_net_core.returns import (
    discounted_returns,
    monte_carlo_return,
    nstep_returns,
    periodic_returns,
    truncation_horizon,
)


def test_backward_recursion_hand_computed():
    c = [1.0, 2.0, 3.0]
    out = discounted_returns(c, [0.0, 0.5])
    np.testing.assert_allclose(out[:, 0], c)
    np.testing.assert_allclose(out[:, 1], [1 + 0.5 * 2 + 0.25 * 3, 2 + 0.5 * 3, 3])


def test_terminal_stops_the_return():
    c = [1.0, 1.0, 1.0, 1.0]
    out = discounted_returns(c, [0.5], terminals=[False, True, False, False])
    np.testing.assert_allclose(out[:, 0], [1.5, 1.0, 1.5, 1.0])


def test_tail_value_continues_the_recording():
    out = discounted_returns([1.0], [0.5], tail_value=[4.0])
    np.testing.assert_allclose(out[0, 0], 1 + 0.5 * 4)


def test_periodic_matches_a_long_recursion():
    period = np.where(np.arange(100) < 50, 1.0, -1.0)
    gammas = [0.0, 0.9, 0.99]
    exact = periodic_returns(period, gammas)
    long = discounted_returns(np.tile(period, 60), gammas)[:100]  # 0.99**6000 ~ 6e-27
    np.testing.assert_allclose(exact, long, atol=1e-9)


def test_nstep_with_episode_end_inside_window():
    windows = np.array([[1.0, 1.0, 1.0, 1.0], [1.0, 2.0, 99.0, 99.0]])
    out = nstep_returns(windows, [0.5, 0.0], lengths=[4, 2])
    np.testing.assert_allclose(out[:, 0], [1 + 0.5 + 0.25 + 0.125, 1 + 0.5 * 2])
    np.testing.assert_allclose(out[:, 1], [1.0, 1.0])


def test_monte_carlo_return_and_horizon():
    np.testing.assert_allclose(monte_carlo_return([0, 0, 10], [0.9]), [8.1])
    assert truncation_horizon(0.99, 1e-4) == 917
    assert 0.99**917 < 1e-4 <= 0.99**916


def test_bad_inputs_name_the_value():
    with pytest.raises(ValueError, match="got nan at step 1"):
        discounted_returns([1.0, np.nan], [0.5])
    with pytest.raises(ValueError, match="gamma must be in"):
        discounted_returns([1.0], [1.0])
