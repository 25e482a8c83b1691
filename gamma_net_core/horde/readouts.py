"""Readouts: returns other than geometric, read from one Γ-net as weighted sums over timescales.

A Γ-net predicts V(s, gamma) = E[sum_t gamma^t C_{t+1}] at any gamma, so any weighting
``sum_j a_j V(s, gamma_j)`` predicts the return under the discount function

    d(t) = sum_j a_j gamma_j^t,        return = sum_t d(t) C_{t+1}

(with a termination, each V_j stops where the return does, and so does the readout). Two kinds:

- ``hyperbolic`` (Fedus et al. 2019): 1 / (1 + k t) = integral_0^1 gamma^t w(gamma) dgamma with
  w(gamma) = gamma^(1/k - 1) / k; the integral by the midpoint rule over ``n_gammas`` points of
  [0, gamma_max], gamma_max the longest trained timescale (1 - 1/tau_max). The weight above
  gamma_max (1 - gamma_max^(1/k)) is left out, so d(0) is below 1 by about that much.
- ``window``: about the sum of the next N = seconds * rate_hz cumulants, d(t) = 1 for t < N:
  coefficients fitted by ridge least squares (lambda = :data:`RIDGE`, which keeps them small so
  learned errors are not amplified) over ``n_gammas`` taus spaced geometrically in [1, tau_max]
  and t up to where gamma_max^t < 1e-3 (the paper's figure of non-geometric returns).

:func:`readout_weights` gives (gammas, coefficients); :func:`discount_function` the d(t) they
define, against which exact returns of a known signal are computed (:func:`exact_readout_returns`).
"""

from __future__ import annotations

import math

import numpy as np

from gamma_net_core.horde.questions import Readout
from gamma_net_core.returns import discounted_returns

#: Ridge penalty of the window fit (see the module docstring).
RIDGE = 1e-2
#: The rest of the future below this weight is ignored (fits, online error).
TAIL = 1e-3


def horizon(gamma: float, tail: float = TAIL) -> int:
    """Steps until gamma^n < tail: after them the rest of a geometric return weighs less than ``tail``."""
    if gamma <= 0.0:
        return 1
    return max(1, math.ceil(math.log(tail) / math.log(gamma)))


def readout_weights(readout: Readout, *, rate_hz: float, tau_max: float) -> tuple[np.ndarray, np.ndarray]:
    """The gammas and coefficients of a readout: its prediction is ``sum_j a_j V(s, gamma_j)``.

    Args:
      readout: from the questions file.
      rate_hz: steps per second (a window's length is given in seconds).
      tau_max: the longest trained timescale, in steps; no gamma beyond it is read.

    Returns:
      (gammas [J], coefficients [J]).
    """
    gamma_max = 1.0 - 1.0 / tau_max
    n = readout.n_gammas
    if readout.kind == "hyperbolic":
        width = gamma_max / n
        gammas = (np.arange(n) + 0.5) * width
        k = readout.k
        coefficients = gammas ** (1.0 / k - 1.0) / k * width
        return gammas, coefficients
    if readout.kind == "window":
        steps = readout.seconds * rate_hz
        gammas = 1.0 - 1.0 / np.geomspace(1.0, tau_max, n)
        t = np.arange(horizon(gamma_max))
        basis = gammas[:, None] ** t[None, :]
        target = (t < steps).astype(float)
        coefficients = np.linalg.solve(basis @ basis.T + RIDGE * np.eye(n), basis @ target)
        return gammas, coefficients
    raise ValueError(f"readout {readout.name!r}: unknown kind {readout.kind!r}")


def ideal_discount(readout: Readout, t, *, rate_hz: float) -> np.ndarray:
    """The discount function a readout approximates: 1 / (1 + k t), or 1 for t < seconds * rate_hz."""
    t = np.asarray(t, dtype=np.float64)
    if readout.kind == "hyperbolic":
        return 1.0 / (1.0 + readout.k * t)
    return (t < readout.seconds * rate_hz).astype(float)


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
