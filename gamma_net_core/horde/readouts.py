"""Readouts: returns other than geometric, read from one Γ-net as weighted sums over timescales.

A Γ-net predicts V(s, gamma) = E[sum_t gamma^t C_{t+1}] at any gamma, so any weighting
``sum_j a_j V(s, gamma_j)`` predicts the return under the discount function

    d(t) = sum_j a_j gamma_j^t,        return = sum_t d(t) C_{t+1}

(with a termination, each V_j stops where the return does, and so does the readout). No gamma
beyond the longest trained one, gamma_max = 1 - 1/tau_max, is read: a Γ-net extrapolates there
without bound. The kinds are a registry (:data:`READOUT_KINDS`, one :class:`ReadoutKind` each:
its weights, the discount it stands for, the keys it takes); three are built in:

- ``hyperbolic`` (Fedus et al. 2019), cut at gamma_max: d(t) = gamma_max^t / (1 + k t). The
  uncut 1 / (1 + k t) = integral_0^1 u^(k t) du is a mixture of gamma^t over gamma = u^k up to
  1; with gamma = gamma_max u^k instead, the same integral is gamma_max^t / (1 + k t), which
  Gauss-Legendre's ``n_gammas`` nodes u_j (weights w_j, positive, summing to 1) turn into gammas
  gamma_max u_j^k with coefficients w_j (within 3e-4 of d(t) at every t for k in [0.001, 100]).
  At k = 0.1 and tau_max = 100: d = 1, 0.452, 0.0333 at t = 0, 10, 100, where 1 / (1 + 0.1 t)
  is 1, 0.5, 0.0909.
- ``window``: about the sum of the next N = seconds * rate_hz cumulants, d(t) = 1 for t < N:
  coefficients fitted by ridge least squares over ``n_gammas`` taus spaced geometrically in
  [1, tau_max] and t up to where gamma_max^t < 1e-3 (the paper's figure of non-geometric
  returns). A learned readout's error is the fit's own (d against the box) plus sum_j a_j e_j,
  e_j the learned values' errors; with relative value errors eps (e_j about eps V_j, V_j up to
  tau_j times the cumulant) the second is at most eps G, G = sum_j |a_j| tau_j / N
  (:func:`relative_gain`) relative to the window's return. Small ridges fit the box best but
  with G 13-14 (Sum |a_j| 19 at 10 Hz, 32 at 30 Hz for 2 s): learned errors came out 2-5x the
  value errors. So the ridge is chosen per window, from :data:`RIDGES`, to minimize the expected
  relative error |d - box|_1 / N + :data:`VALUE_ERROR` G, the fit's error plus the learner's
  error level times the gain: G is then 1.4-2.2 (docs/results.md tabulates Sum |a_j| and G of
  every readout kind).
- ``forecast``: the expected cumulant around k = round(seconds * rate_hz) steps ahead,
  E[C_{t+k}]. V(s, gamma) is the generating function of the expected future cumulants
  m_a = E[C_{t+a+1}], so E[C_{t+k}] = m_{k-1} is its (k-1)-th coefficient; the readout asks d
  to be the indicator of t = k - 1, fitted over the window's gammas with the fixed :data:`RIDGE` and
  constrained to sum_t d(t) = 1, so a constant cumulant is forecast exactly. Recovering a
  coefficient from a few values of a generating function is ill-conditioned: the fitted d is a
  bump about k steps wide at half its height, with side lobes, so the readout is E[C] averaged
  over roughly [k/2, 3k/2] steps ahead, not at t + k alone (:func:`forecast_resolution` measures
  the kernel of any horizon; docs/horde.md tabulates it).

:func:`readout_weights` gives (gammas, coefficients); :func:`discount_function` the d(t) they
define, against which exact returns of a known signal are computed (:func:`exact_readout_returns`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from gamma_net_core.horde.questions import Readout
from gamma_net_core.horde.registry import Registry
from gamma_net_core.returns import discounted_returns

#: Ridge penalty of the forecast fits (see the module docstring; README.md tabulates the kernels it gives).
RIDGE = 1e-2
#: The ridges a window's fit chooses from (see the module docstring).
RIDGES = tuple(10.0 ** np.arange(-2.0, 3.01, 0.25))
#: The relative value error a window's fit plans for (the arm's Γ-nets: 0.1-0.4 at the probe taus, docs/results.md).
VALUE_ERROR = 0.2
#: The rest of the future below this weight is ignored (fits, online error).
TAIL = 1e-3


def horizon(gamma: float, tail: float = TAIL) -> int:
    """Steps until gamma^n < tail: after them the rest of a geometric return weighs less than ``tail``."""
    if gamma <= 0.0:
        return 1
    return max(1, math.ceil(math.log(tail) / math.log(gamma)))


def forecast_steps(readout: Readout, *, rate_hz: float) -> int:
    """k of a forecast readout: its horizon ``seconds`` in steps, at least 1 (E[C_{t+k}])."""
    return max(1, round(readout.seconds * rate_hz))


@dataclass(frozen=True)
class ReadoutKind:
    """A registered readout kind: how its weights are fitted and what discount they stand for.

    Attributes:
      name: its ``kind:`` in the questions file.
      weights: ``f(readout, *, rate_hz, tau_max) -> (gammas [J], coefficients [J])``.
      ideal: ``f(readout, t, *, rate_hz, tau_max) -> d(t)``: the discount function the weights
        approximate (t a float array of steps; ``d`` weighs C_{t+1}).
      keys: which of the readout's ``k`` and ``seconds`` it takes (``n_gammas`` every kind takes).
      required: the keys the file must give.
      refusals: {key it does not take: the phrase that refuses it}; a key without one is refused
        naming the keys it takes.
      horizon: what ``seconds`` is (``the window``), where ``seconds * rate_hz`` must be within
        the trained timescales; None: no such limit.
      check: ``f(readout, rate_hz) -> "key: what is wrong" | None``, for a limit of its own.
    """

    name: str
    weights: Callable[..., tuple[np.ndarray, np.ndarray]]
    ideal: Callable[..., np.ndarray]
    keys: tuple[str, ...] = ()
    required: tuple[str, ...] = ()
    refusals: Mapping[str, str] = field(default_factory=dict)
    horizon: str | None = None
    check: Callable[[Readout, float], str | None] | None = None


READOUT_KINDS: Registry[ReadoutKind] = Registry("readout kind")


def register_readout(kind: ReadoutKind) -> ReadoutKind:
    """Add ``kind`` to :data:`READOUT_KINDS` under its name; ValueError if the name is taken."""
    return READOUT_KINDS.add(kind.name, kind)


def readout_weights(readout: Readout, *, rate_hz: float, tau_max: float) -> tuple[np.ndarray, np.ndarray]:
    """The gammas and coefficients of a readout: its prediction is ``sum_j a_j V(s, gamma_j)``.

    Args:
      readout: from the questions file.
      rate_hz: steps per second (a window's length and a forecast's horizon are given in seconds).
      tau_max: the longest trained timescale, in steps; no gamma beyond it is read.

    Returns:
      (gammas [J], coefficients [J]).

    Raises:
      ValueError: a kind nobody registered, naming it and the known ones.
    """
    return READOUT_KINDS[readout.kind].weights(readout, rate_hz=rate_hz, tau_max=tau_max)


def _hyperbolic_weights(readout: Readout, *, rate_hz: float, tau_max: float) -> tuple[np.ndarray, np.ndarray]:
    nodes, weights = np.polynomial.legendre.leggauss(readout.n_gammas)
    u = (nodes + 1.0) / 2.0  # Gauss-Legendre on [0, 1]
    return (1.0 - 1.0 / tau_max) * u**readout.k, weights / 2.0


def _fit_basis(readout: Readout, tau_max: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The window's and the forecast's gammas, steps t and basis gamma_j^t."""
    gammas = 1.0 - 1.0 / np.geomspace(1.0, tau_max, readout.n_gammas)
    t = np.arange(horizon(1.0 - 1.0 / tau_max))
    return gammas, t, gammas[:, None] ** t[None, :]


def _window_weights(readout: Readout, *, rate_hz: float, tau_max: float) -> tuple[np.ndarray, np.ndarray]:
    gammas, t, basis = _fit_basis(readout, tau_max)
    return gammas, _window_fit(gammas, basis, _window_ideal(readout, t, rate_hz=rate_hz, tau_max=tau_max))


def _forecast_weights(readout: Readout, *, rate_hz: float, tau_max: float) -> tuple[np.ndarray, np.ndarray]:
    gammas, t, basis = _fit_basis(readout, tau_max)
    return gammas, _ridge(basis, _forecast_ideal(readout, t, rate_hz=rate_hz, tau_max=tau_max), total=1.0)


def _hyperbolic_ideal(readout: Readout, t: np.ndarray, *, rate_hz: float, tau_max: float) -> np.ndarray:
    return (1.0 - 1.0 / tau_max) ** t / (1.0 + readout.k * t)


def _window_ideal(readout: Readout, t: np.ndarray, *, rate_hz: float, tau_max: float) -> np.ndarray:
    return (t < readout.seconds * rate_hz).astype(float)


def _forecast_ideal(readout: Readout, t: np.ndarray, *, rate_hz: float, tau_max: float) -> np.ndarray:
    return (t == forecast_steps(readout, rate_hz=rate_hz) - 1).astype(float)


def _forecast_check(readout: Readout, rate_hz: float) -> str | None:
    if round(readout.seconds * rate_hz) < 1:
        return (
            f"seconds: {readout.seconds} s is {readout.seconds * rate_hz:g} steps at {rate_hz} Hz; "
            "a forecast looks at least one step ahead"
        )
    return None


def _no_k(kind: str) -> str:
    return (
        f"only a hyperbolic readout has k (1 / (1 + k t)); a {kind}'s horizon is seconds "
        "(k = round(seconds * rate_hz) steps)"
    )


register_readout(
    ReadoutKind(
        "hyperbolic",
        _hyperbolic_weights,
        _hyperbolic_ideal,
        keys=("k",),
        refusals={"seconds": "a hyperbolic readout has no horizon in seconds; its shape is k, per step"},
    )
)
register_readout(
    ReadoutKind(
        "window",
        _window_weights,
        _window_ideal,
        keys=("seconds",),
        refusals={"k": _no_k("window")},
        horizon="the window",
    )
)
register_readout(
    ReadoutKind(
        "forecast",
        _forecast_weights,
        _forecast_ideal,
        keys=("seconds",),
        required=("seconds",),
        refusals={"k": _no_k("forecast")},
        horizon="the horizon",
        check=_forecast_check,
    )
)


def relative_gain(gammas, coefficients, size: float) -> float:
    """G = sum_j |a_j| tau_j / size: how much relative value errors can grow in a readout whose return is ``size``.

    A value at tau_j is up to tau_j times the cumulant, so a relative error eps in every value moves
    the readout by at most eps G times the return of a readout of ``size`` cumulants (N for a
    window, 1 for a forecast). sum_j |a_j| (:attr:`ForecastResolution.gain`) is the same bound
    for absolute errors.
    """
    tau = 1.0 / (1.0 - np.asarray(gammas))
    return float(np.abs(np.asarray(coefficients)) @ tau / size)


def _window_fit(gammas: np.ndarray, basis: np.ndarray, target: np.ndarray) -> np.ndarray:
    """The ridge fit of :data:`RIDGES` with the least expected relative error |d - target|_1 / N + VALUE_ERROR G."""
    size = float(target.sum())
    best, best_error = None, np.inf
    for ridge in RIDGES:
        a = _ridge(basis, target, ridge=ridge)
        error = np.abs(a @ basis - target).sum() / size + VALUE_ERROR * relative_gain(gammas, a, size)
        if error < best_error:
            best, best_error = a, error
    return best


def _ridge(basis: np.ndarray, target: np.ndarray, *, total: float | None = None, ridge: float = RIDGE) -> np.ndarray:
    """Coefficients a minimizing |a @ basis - target|^2 + ridge |a|^2, and with sum(a @ basis) = total if given."""
    gram = basis @ basis.T + ridge * np.eye(basis.shape[0])
    coefficients = np.linalg.solve(gram, basis @ target)
    if total is None:
        return coefficients
    # The one linear constraint by its Lagrange multiplier: move along gram^-1 s until it holds.
    sums = basis.sum(axis=1)
    direction = np.linalg.solve(gram, sums)
    return coefficients + direction * (total - sums @ coefficients) / (sums @ direction)


def ideal_discount(readout: Readout, t, *, rate_hz: float, tau_max: float) -> np.ndarray:
    """The discount function a readout stands for, which its weights approximate.

    Hyperbolic: gamma_max^t / (1 + k t); window: 1 for t < seconds * rate_hz; forecast: 1 at
    t = k - 1 (the weight of C_{t+k}), else 0; another kind: its registered ``ideal``.

    Raises:
      ValueError: a kind nobody registered, naming it and the known ones.
    """
    t = np.asarray(t, dtype=np.float64)
    return READOUT_KINDS[readout.kind].ideal(readout, t, rate_hz=rate_hz, tau_max=tau_max)


@dataclass(frozen=True)
class ForecastResolution:
    """What a forecast readout's kernel d(t) really averages: E[C_{t+a+1}] weighted by d(a).

    Steps ahead count from 1 (C_{t+1} is one step ahead).
    """

    steps: int  #: k, the horizon asked for
    peak: int  #: steps ahead where d is largest
    half_low: int  #: the first step ahead where d reaches half its peak
    half_high: int  #: the last step ahead where d is at least half its peak
    negative: float  #: -sum of d where it is negative: the side lobes' weight (d sums to 1)
    gain: float  #: sum_j |a_j|: how much errors in the learned values can be amplified

    @property
    def width(self) -> int:
        """Full width at half maximum, in steps."""
        return self.half_high - self.half_low + 1


def forecast_resolution(readout: Readout, *, rate_hz: float, tau_max: float) -> ForecastResolution:
    """The kernel a forecast readout actually applies: where it peaks, how wide, its side lobes.

    Args:
      readout: a ``forecast`` readout.
      rate_hz: steps per second.
      tau_max: the longest trained timescale, in steps.

    Returns:
      The :class:`ForecastResolution` of its fitted discount function.
    """
    if readout.kind != "forecast":
        raise ValueError(f"readout {readout.name!r} is a {readout.kind}, not a forecast")
    gammas, coefficients = readout_weights(readout, rate_hz=rate_hz, tau_max=tau_max)
    d = discount_function(gammas, coefficients, np.arange(horizon(gammas.max())))
    peak = int(np.argmax(d))
    # the half-maximum band is the contiguous stretch around the peak
    low = peak
    while low > 0 and d[low - 1] >= d[peak] / 2:
        low -= 1
    high = peak
    while high + 1 < d.shape[0] and d[high + 1] >= d[peak] / 2:
        high += 1
    return ForecastResolution(
        steps=forecast_steps(readout, rate_hz=rate_hz),
        peak=peak + 1,
        half_low=low + 1,
        half_high=high + 1,
        negative=float(-d[d < 0].sum()),
        gain=float(np.abs(coefficients).sum()),
    )


def discount_function(gammas, coefficients, t) -> np.ndarray:
    """d(t) = sum_j a_j gamma_j^t, the discount a readout applies to C_{t+1}."""
    t = np.asarray(t, dtype=np.float64)
    return np.asarray(coefficients) @ (np.asarray(gammas)[:, None] ** t[None, :])


def exact_readout_returns(cumulants, gammas, coefficients, *, continuations=None) -> np.ndarray:
    """The readout's exact return from every step of a recorded signal: sum_j a_j G_t(gamma_j).

    Args:
      cumulants: [T]; ``cumulants[t]`` is C_{t+1}.
      gammas, coefficients: from :func:`readout_weights`.
      continuations: optional [T]; 0 where S_{t+1} stops the return.

    Returns:
      [T]; the end of the recording is treated as the end of the return.
    """
    terminals = None if continuations is None else np.asarray(continuations) == 0.0
    return discounted_returns(cumulants, gammas, terminals=terminals) @ np.asarray(coefficients)
