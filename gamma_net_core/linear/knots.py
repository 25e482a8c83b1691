"""A Γ-net whose timescale enters through knots: one copy of the state's tiles per knot, linear in tau between.

With ``timescale_input`` "knots" the features of (s, gamma) are the state's tiles crossed with a
piecewise-linear ("hat") basis over tau: K knots from tau 1 to ``tau_scale``, evenly spaced in
log tau. Trained on Gamma_t = the knots (``TimescaleSampling(knots=K)``), each knot's weights
learn exactly what a fixed-timescale TD learner of that gamma learns (Algorithm 1 on the knots:
a knot's update touches only its own copy); between two knots the prediction is linear in tau,
and beyond the last knot it is the last knot's.

Why a default (docs/choosing-settings.md): on the zoo's problems, tiles shared by timescales carry
each timescale's error into its neighbours, and the Γ-net was within 1.5 times the fixed-gamma
baseline at every tau on 4 of 14 problems. A value is smooth in tau, so 16 knots from tau 1 to 100
interpolate the exact values to within 1 % (relative RMSE) between knots, and the knots' own error
is the baseline's.
"""

from __future__ import annotations

import numpy as np

from gamma_net_core.timescales import TimescaleSampling, knot_gammas, ladder

#: how far a gamma of Gamma_t may be from a knot, relative in tau, and still be that knot
_ON_KNOT = 1e-9


def config_knots(config) -> np.ndarray:
    """The knots of a :class:`~gamma_net_core.linear.settings.GammaNetConfig` with ``timescale_input`` knots, as
    gammas: float64 [knots], tau from 1 to ``tau_scale``."""
    return knot_gammas(1.0, config.tau_scale, config.knots)


def blend(gammas: np.ndarray, knots: np.ndarray) -> np.ndarray:
    """The weights that make a value at each of ``gammas`` from the values at ``knots``: float64 [G, K].

    Linear in tau between the two knots around a gamma; a gamma beyond the last knot takes its value.
    """
    knot_taus = 1.0 / (1.0 - knots)
    taus = np.clip(1.0 / (1.0 - np.asarray(gammas, dtype=np.float64)), knot_taus[0], knot_taus[-1])
    upper = np.clip(np.searchsorted(knot_taus, taus, side="left"), 1, knot_taus.shape[0] - 1)
    lower = upper - 1
    frac = (taus - knot_taus[lower]) / (knot_taus[upper] - knot_taus[lower])
    weights = np.zeros((taus.shape[0], knot_taus.shape[0]))
    rows = np.arange(taus.shape[0])
    weights[rows, lower] = 1.0 - frac
    weights[rows, upper] += frac
    return weights


def check_on_knots(gammas: np.ndarray, knots: np.ndarray, name: str = "Gamma_t") -> None:
    """Refuse a gamma that is not one of ``knots``: a knotted Γ-net learns its knots and nothing between.

    Raises:
      ValueError: naming the first such gamma, its tau and the knots.
    """
    taus = 1.0 / (1.0 - np.asarray(gammas, dtype=np.float64))
    knot_taus = 1.0 / (1.0 - knots)
    off = np.min(np.abs(taus[..., None] - knot_taus), axis=-1) > _ON_KNOT * taus
    if off.any():
        i = np.unravel_index(int(np.flatnonzero(off.ravel())[0]), off.shape)
        raise ValueError(
            f"{name} holds gamma {float(np.asarray(gammas)[i])!r} (tau {float(taus[i]):.4g}), not one of the "
            f"{knot_taus.shape[0]} knots this Γ-net learns (tau 1 to {knot_taus[-1]:.4g}, log-spaced): train it on "
            f"TimescaleSampling(knots={knot_taus.shape[0]}, tau_max={knot_taus[-1]:.4g})"
        )


def check_sampling(config, sampling) -> None:
    """Refuse a Gamma_t that is not a knotted Γ-net's knots, or knots for a Γ-net without them, before learning.

    Args:
      config: a :class:`~gamma_net_core.linear.settings.GammaNetConfig`.
      sampling: the :class:`~gamma_net_core.timescales.TimescaleSampling` it is to learn on.

    Raises:
      ValueError: one line naming both settings and what to set.
    """
    knotted = config.timescale_input == "knots"
    if not knotted and sampling.knots:
        raise ValueError(
            f"timescales knots: {sampling.knots} are for a Γ-net with timescale_input knots; this one has "
            f"{config.timescale_input!r}: draw its Gamma_t (timescales knots: 0 with n_gamma and n_tau)"
        )
    if knotted and not np.array_equal(ladder(sampling), config_knots(config)):
        raise ValueError(
            f"timescale_input 'knots' learns its {config.knots} knots (tau 1 to tau_scale {config.tau_scale:g}): set "
            f"timescales knots: {config.knots}, tau_min: 1, tau_max: {config.tau_scale:g}, no draws; got knots "
            f"{sampling.knots}, n_gamma {sampling.n_gamma}, n_tau {sampling.n_tau}, tau_min {sampling.tau_min:g}, "
            f"tau_max {sampling.tau_max:g}"
        )


def default_sampling(config, **settings):
    """The Gamma_t a Γ-net learns on unless told: its knots, or for tiles the draws of two bounds, 4 on the gamma
    scale and 29 on the tau scale (docs/choosing-settings.md); ``settings`` (tau_min, tau_max, ...) are added."""
    if config.timescale_input == "knots":
        return TimescaleSampling(knots=config.knots, tau_max=config.tau_scale, **settings)
    return TimescaleSampling(**{"n_gamma": 4, "n_tau": 29, **settings})
