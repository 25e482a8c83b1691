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


def test_sampler_always_includes_bounds_and_stays_inside():
    from gamma_net_core.timescales import TimescaleSampler, TimescaleSampling

    sampler = TimescaleSampler(TimescaleSampling(n_gamma=2, n_tau=2), np.random.default_rng(0))
    for _ in range(200):
        g = sampler.sample()
        assert g.shape == (6,)
        np.testing.assert_allclose(g[:2], [0.0, 0.99])
        assert np.all((g >= 0.0) & (g <= 0.99))


def test_sampler_distributions_are_uniform_on_their_scales():
    from gamma_net_core.timescales import TimescaleSampler, TimescaleSampling

    n = 20000
    on_gamma = TimescaleSampler(TimescaleSampling(n_gamma=1, n_tau=0, include_bounds=False), np.random.default_rng(1))
    g = np.array([on_gamma.sample()[0] for _ in range(n)])
    # Uniform on [0, 0.99): each tenth of the range holds ~10% of draws (binomial sd ~0.2%).
    counts = np.histogram(g, bins=10, range=(0.0, 0.99))[0] / n
    np.testing.assert_allclose(counts, 0.1, atol=0.01)
    on_tau = TimescaleSampler(TimescaleSampling(n_gamma=0, n_tau=1, include_bounds=False), np.random.default_rng(2))
    tau = 1.0 / (1.0 - np.array([on_tau.sample()[0] for _ in range(n)]))
    counts = np.histogram(tau, bins=9, range=(1.0, 100.0))[0] / n
    np.testing.assert_allclose(counts, 1 / 9, atol=0.01)
    # On the gamma scale, half the draws have tau < 2; on the tau scale, about 1%.
    assert abs(np.mean(1 / (1 - g) < 2) - 0.505) < 0.02 and np.mean(tau < 2) < 0.02


def test_integer_tau_and_reproducibility():
    from gamma_net_core.timescales import TimescaleSampler, TimescaleSampling

    sampling = TimescaleSampling(n_gamma=3, n_tau=3, integer_tau=True)
    a = TimescaleSampler(sampling, np.random.default_rng(7))
    b = TimescaleSampler(sampling, np.random.default_rng(7))
    draws = np.array([a.sample() for _ in range(500)])
    np.testing.assert_array_equal(draws, np.array([b.sample() for _ in range(500)]))
    taus = 1.0 / (1.0 - draws[:, 5:])
    np.testing.assert_allclose(taus, np.round(taus), atol=1e-9)
    assert round(taus.min()) >= 1 and round(taus.max()) <= 99


def test_sampling_split_and_bad_settings():
    from gamma_net_core.timescales import TimescaleSampling

    assert TimescaleSampling.split(4, "both").size == 6
    assert (TimescaleSampling.split(4, "gamma").n_gamma, TimescaleSampling.split(4, "tau").n_tau) == (4, 4)
    with pytest.raises(ValueError, match="must be below"):
        TimescaleSampling(tau_min=100.0, tau_max=10.0)
    with pytest.raises(ValueError, match="would be empty"):
        TimescaleSampling(n_gamma=0, n_tau=0, include_bounds=False, knots=0)
