"""Interpolation between probe timescales on the τ and γ scales, against hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest

from gamma_net_core.neural.interpolation import interpolate, interpolation_weights

# Probes at τ = 1, 5, 10 (γ = 0, 0.8, 0.9), predicting 1, 5 and 10 for one state and 0, 4, 2 for another.
PROBE_GAMMAS = [0.0, 0.8, 0.9]
VALUES = [[1.0, 5.0, 10.0], [0.0, 4.0, 2.0]]


def test_tau_scale_by_hand():
    # τ = 2: w = (2 - 1) / (5 - 1) = 0.25.  τ = 7.5: w = (7.5 - 5) / (10 - 5) = 0.5.
    out = interpolate(PROBE_GAMMAS, VALUES, [0.5, 1 - 1 / 7.5], scale="tau")
    np.testing.assert_allclose(out, [[1 + 0.25 * 4, 5 + 0.5 * 5], [0 + 0.25 * 4, 4 - 0.5 * 2]])


def test_gamma_scale_by_hand():
    # γ = 0.5: w = 0.5 / 0.8 = 0.625.  γ = 1 - 1/7.5 = 0.8667: w = 0.0667 / 0.1 = 2/3.
    out = interpolate(PROBE_GAMMAS, VALUES, [0.5, 1 - 1 / 7.5], scale="gamma")
    np.testing.assert_allclose(out, [[1 + 0.625 * 4, 5 + (2 / 3) * 5], [0.625 * 4, 4 - (2 / 3) * 2]])


def test_probe_timescales_are_exact_and_scales_differ_between():
    out_tau = interpolate(PROBE_GAMMAS, VALUES, PROBE_GAMMAS, scale="tau")
    out_gamma = interpolate(PROBE_GAMMAS, VALUES, PROBE_GAMMAS, scale="gamma")
    np.testing.assert_array_equal(out_tau, VALUES)
    np.testing.assert_array_equal(out_gamma, VALUES)
    lo, hi, w = interpolation_weights(PROBE_GAMMAS, [0.5], scale="tau")
    assert (lo[0], hi[0]) == (0, 1) and w[0] == pytest.approx(0.25)


def test_outside_the_probes_is_refused_by_name():
    with pytest.raises(ValueError, match=r"gamma 0.95 \(tau 20\) is outside the probes' range"):
        interpolate(PROBE_GAMMAS, VALUES, [0.5, 0.95])
    with pytest.raises(ValueError, match="gamma must be in"):
        interpolate(PROBE_GAMMAS, VALUES, [1.0])
    with pytest.raises(ValueError, match="strictly increasing"):
        interpolate([0.8, 0.0, 0.9], VALUES, [0.5])
    with pytest.raises(ValueError, match="scale must be one of"):
        interpolate(PROBE_GAMMAS, VALUES, [0.5], scale="log")
    with pytest.raises(ValueError, match=r"probe_values must be \[B, 3\]"):
        interpolate(PROBE_GAMMAS, [[1.0, 2.0]], [0.5])
    np.testing.assert_array_equal(interpolate([0.5], [[3.0]], [0.5]), [[3.0]])
