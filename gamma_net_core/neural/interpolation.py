"""Predictions between probe timescales by linear interpolation (the paper's "Estimation by Interpolation").

The baseline to a Γ-net: fixed-timescale probe networks, and at any other timescale the
weighted average of the two bracketing probes' predictions. The weight depends on the
scale the interpolation is done on, because τ = 1 / (1 - γ) is not linear in γ: at
x between probes x_lo and x_hi (x = γ or x = τ), w = (x - x_lo) / (x_hi - x_lo) and
V(x) = (1 - w) V(x_lo) + w V(x_hi). Values are interpolated in the cumulant's units.
"""

from __future__ import annotations

import numpy as np

from gamma_net_core.timescales import validate_gammas

SCALES = ("gamma", "tau")


def interpolation_weights(probe_gammas, gammas, *, scale: str = "tau") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bracketing probes and weights for each requested γ.

    Args:
      probe_gammas: the probes' timescales [P], strictly increasing.
      gammas: where to predict [G]; each must lie within [probe_gammas[0], probe_gammas[-1]].
      scale: ``tau`` or ``gamma``, the scale on which the weight is linear.

    Returns:
      (lo, hi, w): int [G], int [G], float64 [G], so V(γ_g) = (1 - w_g) V_lo + w_g V_hi.

    Raises:
      ValueError: a γ outside [0, 1) or outside the probes' range (no extrapolation), probes not increasing,
        or an unknown scale.
    """
    if scale not in SCALES:
        raise ValueError(f"interpolation scale must be one of {list(SCALES)}; got {scale!r}")
    probes = validate_gammas(probe_gammas, name="probe gamma")
    if probes.size > 1 and not np.all(np.diff(probes) > 0):
        raise ValueError(f"probe gammas must be strictly increasing; got {probes.tolist()}")
    g = validate_gammas(gammas)
    outside = (g < probes[0]) | (g > probes[-1])
    if outside.any():
        i = int(np.flatnonzero(outside)[0])
        raise ValueError(
            f"gamma {float(g[i])!r} (tau {1.0 / (1.0 - g[i]):.6g}) is outside the probes' range "
            f"[{probes[0]!r}, {probes[-1]!r}] (tau [{1.0 / (1.0 - probes[0]):.6g}, {1.0 / (1.0 - probes[-1]):.6g}]); "
            "interpolation does not extrapolate"
        )
    if probes.size == 1:
        zeros = np.zeros(g.size, dtype=np.int64)
        return zeros, zeros, np.zeros(g.size)
    to_scale = (lambda x: x) if scale == "gamma" else (lambda x: 1.0 / (1.0 - x))
    xp, x = to_scale(probes), to_scale(g)
    lo = np.clip(np.searchsorted(xp, x, side="right") - 1, 0, probes.size - 2)
    hi = lo + 1
    w = (x - xp[lo]) / (xp[hi] - xp[lo])
    return lo, hi, w


def interpolate(probe_gammas, probe_values, gammas, *, scale: str = "tau") -> np.ndarray:
    """Probe predictions [B, P] at probe_gammas [P] -> predictions [B, G] at ``gammas``.

    At a probe's own γ the result is that probe's prediction exactly.
    """
    values = np.asarray(probe_values, dtype=np.float64)
    probes = np.atleast_1d(np.asarray(probe_gammas, dtype=np.float64))
    if values.ndim != 2 or values.shape[1] != probes.size:
        raise ValueError(f"probe_values must be [B, {probes.size}]; got shape {values.shape}")
    lo, hi, w = interpolation_weights(probes, gammas, scale=scale)
    return values[:, lo] * (1.0 - w)[None, :] + values[:, hi] * w[None, :]
