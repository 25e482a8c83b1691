"""gamma <-> tau conversion and validation (hand-computed values from the paper's Table 1)."""

from __future__ import annotations

import numpy as np
import pytest

from gamma_net_core.timescales import gamma_from_tau, tau_from_gamma, to_gammas, validate_gammas


def test_paper_table_1():
    taus = np.array([1, 2, 5, 10, 20, 40, 80, 100], dtype=float)
    gammas = np.array([0, 0.5, 0.8, 0.9, 0.95, 0.975, 0.9875, 0.99])
    np.testing.assert_allclose(gamma_from_tau(taus), gammas)
    np.testing.assert_allclose(tau_from_gamma(gammas), taus)
    assert gamma_from_tau(60.0) == pytest.approx(0.98333, abs=1e-5)


def test_scalars_stay_scalars():
    assert isinstance(tau_from_gamma(0.9), float)
    assert isinstance(gamma_from_tau(10), float)


@pytest.mark.parametrize("bad", [1.0, -0.1, np.nan, np.inf, 1.5])
def test_bad_gamma_names_the_value(bad):
    with pytest.raises(ValueError, match="gamma must be in \\[0, 1\\)"):
        validate_gammas([0.5, bad])


@pytest.mark.parametrize("bad", [0.99, 0.0, -3, np.nan, np.inf])
def test_bad_tau_names_the_value(bad):
    with pytest.raises(ValueError, match="tau must be finite and >= 1"):
        gamma_from_tau([10, bad])


def test_empty_is_an_error():
    with pytest.raises(ValueError, match="must not be empty"):
        validate_gammas([])


def test_to_gammas_from_either_scale():
    np.testing.assert_allclose(to_gammas([1, 10], "tau"), [0.0, 0.9])
    np.testing.assert_allclose(to_gammas([0.0, 0.9], "gamma"), [0.0, 0.9])
    with pytest.raises(ValueError, match="'gamma' or 'tau'"):
        to_gammas([1], "seconds")
