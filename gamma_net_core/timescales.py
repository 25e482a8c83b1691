"""Timescales: the discount gamma and the horizon tau = 1 / (1 - gamma), in steps.

The paper (section "Generalizing over Timescale") treats gamma as a probability of
continuation, so tau is the expected number of steps until the return terminates.
Both names are used for the same timescale; these functions convert and validate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from gamma_net_core.config import setting

Scale = Literal["gamma", "tau"]

#: The paper's probe timescales, as tau in steps (Table 1; the square-wave, robot-arm and Atari
#: evaluations all probe these).
PROBE_TAUS = (1.0, 2.0, 5.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0)


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


#: Gamma_t's knots when neither they nor draws are given (linear/knots.py: within 1 % of the exact values
#: between them from tau 1 to 100).
DEFAULT_KNOTS = 16


def knot_gammas(tau_min: float, tau_max: float, knots: int) -> np.ndarray:
    """The gammas of ``knots`` knots from ``tau_min`` to ``tau_max``, evenly spaced in log tau: float64 [knots]."""
    return 1.0 - 1.0 / np.geomspace(tau_min, tau_max, knots)


@dataclass(frozen=True)
class TimescaleSampling:
    """How Gamma_t, the set of timescales trained on at one step, is chosen: the knots, or drawn.

    The default is 16 knots, tau_min to tau_max evenly on a log scale, every step: what a Γ-net
    with ``timescale_input`` knots (``GammaNetConfig()``'s) learns (linear/knots.py). Drawn, Gamma_t
    holds the bounds tau_min and tau_max (when ``include_bounds``), plus ``n_gamma`` timescales drawn
    uniformly on the gamma scale and ``n_tau`` drawn uniformly on the tau scale, both between the
    bounds; giving either draws makes ``knots`` 0 unless it is set. The paper's settings: square
    wave 2 + 2 + 2 (section "Square-wave"), robot arm 2 + 1 + 29 ("Predictions on a Robot Arm"),
    Atari 2 + 3 + 3 with integer tau ("Training"). For a tile-coded Γ-net, 2 + 4 + 29 learned the
    zoo's problems best (docs/choosing-settings.md).
    """

    n_gamma: int = setting(0, "timescales drawn uniformly on the gamma scale per step; paper: arm 1, square wave 2",
                           low=0, high=4096)  # fmt: skip
    n_tau: int = setting(0, "timescales drawn uniformly on the tau scale per step; paper: arm 29, square wave 2",
                         low=0, high=4096)  # fmt: skip
    tau_min: float = setting(1.0, "lower bound of the timescales, as tau (steps); paper: 1", low=1.0, high=1e9)
    tau_max: float = setting(100.0, "upper bound of the timescales, as tau (steps); paper: 100", low=1.0, high=1e9)
    include_bounds: bool = setting(True, "always train on tau_min and tau_max (the paper always does)")
    integer_tau: bool = setting(False, "draw tau from the integers in [tau_min, tau_max) (the paper's Atari runs)")
    knots: int = setting(
        -1,
        "above 0: Gamma_t is this many knots every step, tau_min to tau_max evenly on a log scale, and nothing is "
        "drawn (include_bounds and integer_tau are not used), for a Γ-net with timescale_input knots, whose knots "
        "they must be; 0: drawn; -1 (the default): 16, or 0 where n_gamma or n_tau draws are given",
        low=-1,
        high=1024,
    )

    def __post_init__(self) -> None:
        if self.knots == -1:
            object.__setattr__(self, "knots", 0 if (self.n_gamma or self.n_tau) else DEFAULT_KNOTS)
        if self.knots and (self.n_gamma or self.n_tau):
            raise ValueError(
                f"Gamma_t is the knots or drawn, not both: knots {self.knots} with n_gamma {self.n_gamma} and n_tau "
                f"{self.n_tau}; set knots: 0 to draw, or n_gamma: 0 and n_tau: 0 for the knots"
            )
        if not self.tau_min < self.tau_max:
            raise ValueError(f"tau_min {self.tau_min!r} must be below tau_max {self.tau_max!r}")
        if self.knots == 1:
            raise ValueError("knots must be 0 (draw Gamma_t) or at least 2 (tau_min and tau_max); got 1")
        if self.size == 0:
            raise ValueError("Gamma_t would be empty: set n_gamma, n_tau or include_bounds")
        if self.integer_tau and self.n_tau and math.floor(self.tau_max - 1e-12) < math.ceil(self.tau_min):
            raise ValueError(f"no integer tau in [{self.tau_min}, {self.tau_max})")

    @property
    def size(self) -> int:
        """|Gamma_t|."""
        if self.knots:
            return self.knots
        return self.n_gamma + self.n_tau + (2 if self.include_bounds else 0)

    @classmethod
    def split(cls, n_drawn: int, scale: Literal["gamma", "tau", "both"], **kwargs) -> TimescaleSampling:
        """``n_drawn`` timescales all on one scale, or half on each (the paper's distribution comparison)."""
        kwargs = {"knots": 0, **kwargs}
        if scale == "gamma":
            return cls(n_gamma=n_drawn, n_tau=0, **kwargs)
        if scale == "tau":
            return cls(n_gamma=0, n_tau=n_drawn, **kwargs)
        if scale == "both":
            return cls(n_gamma=n_drawn - n_drawn // 2, n_tau=n_drawn // 2, **kwargs)
        raise ValueError(f"scale must be 'gamma', 'tau' or 'both'; got {scale!r}")


def ladder(sampling: TimescaleSampling) -> np.ndarray:
    """The fixed Gamma_t that stands for ``sampling``'s draws: one timescale per equal-probability stratum.

    The bounds (when ``include_bounds``), then ``n_gamma`` gammas at the midpoints of equal
    slices of [gamma(tau_min), gamma(tau_max)], then ``n_tau`` at the midpoints of equal slices
    of [tau_min, tau_max] (rounded down to integers with ``integer_tau``): the same size and
    order as a draw, spread over the same distribution. TD(lambda) keeps its traces on it,
    because an eligibility trace belongs to one timescale and a timescale drawn afresh has no
    past to trace, and trains TD(0) on a draw beside it (:mod:`gamma_net_core.linear.traces`).

    Returns:
      float64 [sampling.size] gammas.
    """
    if sampling.knots:
        return knot_gammas(sampling.tau_min, sampling.tau_max, sampling.knots)
    gamma_min, gamma_max = 1.0 - 1.0 / sampling.tau_min, 1.0 - 1.0 / sampling.tau_max
    bounds = [gamma_min, gamma_max] if sampling.include_bounds else []
    mid_g = (np.arange(sampling.n_gamma) + 0.5) / max(sampling.n_gamma, 1)
    mid_t = (np.arange(sampling.n_tau) + 0.5) / max(sampling.n_tau, 1)
    taus = sampling.tau_min + (sampling.tau_max - sampling.tau_min) * mid_t
    if sampling.integer_tau:
        taus = np.maximum(np.floor(taus), math.ceil(sampling.tau_min))
    return np.concatenate([bounds, gamma_min + (gamma_max - gamma_min) * mid_g, 1.0 - 1.0 / taus])


class TimescaleSampler:
    """Draws Gamma_t as gammas: the bounds first, then the gamma-scale draws, then the tau-scale draws.

    Args:
      sampling: how Gamma_t is drawn.
      rng: the draws' generator.
      fixed: give :func:`ladder`, then a draw, every step: [2 size] (TD(lambda) needs it: traces on
        the ladder, TD(0) on the draw, :mod:`gamma_net_core.linear.traces`); the draws are those
        the sampler gives without ``fixed``, from the same generator.
    """

    def __init__(self, sampling: TimescaleSampling, rng: np.random.Generator, *, fixed: bool = False) -> None:
        self.sampling = sampling
        self.rng = rng
        self.fixed = bool(fixed)
        self.gamma_min = 1.0 - 1.0 / sampling.tau_min
        self.gamma_max = 1.0 - 1.0 / sampling.tau_max
        self._bounds = np.array([self.gamma_min, self.gamma_max]) if sampling.include_bounds else np.empty(0)
        self._ladder = ladder(sampling)

    @property
    def ladder(self) -> np.ndarray:
        """:func:`ladder` of the sampling (a copy)."""
        return self._ladder.copy()

    def sample(self) -> np.ndarray:
        """One Gamma_t: float64 [size] (with ``fixed``: the ladder, then the draw, [2 size]), each in the bounds."""
        if self.sampling.knots:
            # the knots are the ladder and the draw alike
            return np.concatenate([self._ladder, self._ladder]) if self.fixed else self._ladder.copy()
        if self.fixed:
            return np.concatenate([self._ladder, self._draw()])
        return self._draw()

    def _draw(self) -> np.ndarray:
        s = self.sampling
        on_gamma = self.rng.uniform(self.gamma_min, self.gamma_max, size=s.n_gamma)
        if s.integer_tau:
            taus = self.rng.integers(math.ceil(s.tau_min), math.ceil(s.tau_max), size=s.n_tau).astype(np.float64)
        else:
            taus = self.rng.uniform(s.tau_min, s.tau_max, size=s.n_tau)
        return np.concatenate([self._bounds, on_gamma, 1.0 - 1.0 / taus])

    def sample_many(self, n: int) -> np.ndarray:
        """``n`` successive Gamma_t at once: float64 [n, size], equal to ``n`` calls of :meth:`sample`.

        The fast learners draw a whole recording's Gamma_t up front with this and must see
        exactly the sequence a step-by-step learner sees. ``Generator.uniform(low, high)`` is
        ``low + (high - low) * u`` with one ``u`` from ``random()`` per value, so the draws of
        ``n`` steps are one ``random`` call, row by row (tests check the equality). Integer
        tau uses ``integers``, whose consumption of the bit stream varies, so it loops.
        """
        if n < 0:
            raise ValueError(f"n must be >= 0; got {n!r}")
        if self.sampling.knots:
            return np.repeat(self.sample()[None, :], n, axis=0)
        if self.fixed:
            return np.concatenate([np.repeat(self._ladder[None, :], n, axis=0), self._draw_many(n)], axis=1)
        return self._draw_many(n)

    def _draw_many(self, n: int) -> np.ndarray:
        s = self.sampling
        if s.integer_tau and s.n_tau:
            rows = [self._draw() for _ in range(n)]
            return np.stack(rows) if rows else np.empty((0, s.size))
        u = self.rng.random((n, s.n_gamma + s.n_tau))
        on_gamma = self.gamma_min + (self.gamma_max - self.gamma_min) * u[:, : s.n_gamma]
        taus = s.tau_min + (s.tau_max - s.tau_min) * u[:, s.n_gamma :]
        bounds = np.broadcast_to(self._bounds, (n, self._bounds.size))
        return np.concatenate([bounds, on_gamma, 1.0 - 1.0 / taus], axis=1)
