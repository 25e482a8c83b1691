"""Timescales: the discount gamma and the horizon tau = 1 / (1 - gamma), in steps.

The paper (section "Generalizing over Timescale") treats gamma as a probability of
continuation, so tau is the expected number of steps until the return terminates.
Both names are used for the same timescale; these functions convert and validate.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

Scale = Literal["gamma", "tau"]


def validate_gammas(gammas, *, name: str = "gamma") -> np.ndarray:
    """Return ``gammas`` as a float64 array, or raise naming the first bad value.

    Args:
      gammas: one discount or a sequence of them; each must be finite and in [0, 1).
      name: what to call the values in the error message.

    Raises:
      ValueError: empty input, NaN, infinity, or a value outside [0, 1).
    """
    g = np.atleast_1d(np.asarray(gammas, dtype=np.float64))
    if g.ndim != 1:
        raise ValueError(f"{name} must be a scalar or a 1-D sequence; got shape {g.shape}")
    if g.size == 0:
        raise ValueError(f"{name} must not be empty")
    bad = ~np.isfinite(g) | (g < 0.0) | (g >= 1.0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{name} must be in [0, 1); got {float(g[i])!r} at index {i}")
    return g


def validate_taus(taus, *, name: str = "tau") -> np.ndarray:
    """Return ``taus`` as a float64 array, or raise naming the first bad value (tau >= 1, finite)."""
    t = np.atleast_1d(np.asarray(taus, dtype=np.float64))
    if t.ndim != 1:
        raise ValueError(f"{name} must be a scalar or a 1-D sequence; got shape {t.shape}")
    if t.size == 0:
        raise ValueError(f"{name} must not be empty")
    bad = ~np.isfinite(t) | (t < 1.0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{name} must be finite and >= 1; got {float(t[i])!r} at index {i}")
    return t


def tau_from_gamma(gamma):
    """tau = 1 / (1 - gamma): expected steps until termination. Validates gamma in [0, 1)."""
    g = validate_gammas(gamma)
    tau = 1.0 / (1.0 - g)
    return tau if np.ndim(gamma) else float(tau[0])


def gamma_from_tau(tau):
    """gamma = 1 - 1 / tau. Validates tau >= 1 (tau = 1 is gamma = 0, the next cumulant only)."""
    t = validate_taus(tau)
    gamma = 1.0 - 1.0 / t
    return gamma if np.ndim(tau) else float(gamma[0])


def to_gammas(timescales, scale: Scale) -> np.ndarray:
    """Timescales given on either scale, as a validated array of gammas."""
    if scale == "gamma":
        return validate_gammas(timescales)
    if scale == "tau":
        return np.atleast_1d(gamma_from_tau(np.atleast_1d(np.asarray(timescales, dtype=np.float64))))
    raise ValueError(f"timescale scale must be 'gamma' or 'tau'; got {scale!r}")
