"""Discounted returns of recorded cumulants: exact (backward recursion), n-step, Monte-Carlo.

Indexing convention used throughout the package: ``cumulants[t]`` is C_{t+1}, the
signal received on the transition out of state S_t, so the return from S_t is

    G_t(gamma) = cumulants[t] + gamma * cumulants[t+1] + gamma^2 * cumulants[t+2] + ...

A return is never stored for one gamma and reused for another (the paper's change to
Dopamine's replay): these functions take gammas as an array and return one column each.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from gamma_net_core.timescales import validate_gammas


@numba.njit(cache=True)
def _backward(cumulants, gammas, episode_end, tail):  # pragma: no cover - compiled
    T = cumulants.shape[0]
    G = gammas.shape[0]
    out = np.empty((T, G))
    for k in range(G):
        g = tail[k]
        for t in range(T - 1, -1, -1):
            if episode_end[t]:
                g = 0.0
            g = cumulants[t] + gammas[k] * g
            out[t, k] = g
    return out


def discounted_returns(
    cumulants,
    gammas,
    *,
    terminals=None,
    tail_value=None,
) -> np.ndarray:
    """Exact discounted return from every step, for every gamma: O(T) per gamma.

    Args:
      cumulants: shape [T]; ``cumulants[t]`` is C_{t+1}.
      gammas: shape [G], each in [0, 1).
      terminals: optional bool [T]; ``terminals[t]`` means S_{t+1} ends the episode, so
        the return from S_t stops after ``cumulants[t]``.
      tail_value: optional [G], the return from the state after the last step (e.g. the
        value of continuing a periodic signal); 0 treats the recording's end as terminal.

    Returns:
      float64 [T, G]: ``out[t, k]`` = G_t(gammas[k]).
    """
    c = np.asarray(cumulants, dtype=np.float64)
    if c.ndim != 1:
        raise ValueError(f"cumulants must be 1-D; got shape {c.shape}")
    if not np.all(np.isfinite(c)):
        i = int(np.flatnonzero(~np.isfinite(c))[0])
        raise ValueError(f"cumulants must be finite; got {float(c[i])!r} at step {i}")
    g = validate_gammas(gammas)
    if terminals is None:
        ends = np.zeros(c.shape[0], dtype=np.bool_)
    else:
        ends = np.asarray(terminals, dtype=np.bool_)
        if ends.shape != c.shape:
            raise ValueError(f"terminals {ends.shape} must match cumulants {c.shape}")
    tail = np.zeros(g.shape[0]) if tail_value is None else np.asarray(tail_value, dtype=np.float64)
    if tail.shape != g.shape:
        raise ValueError(f"tail_value {tail.shape} must have one value per gamma {g.shape}")
    return _backward(c, g, ends, tail)


def periodic_returns(period_cumulants, gammas) -> np.ndarray:
    """Exact returns of a signal that repeats ``period_cumulants`` forever: shape [P, G].

    The infinite sum is closed-form: G_t = sum_{j<P} gamma^j c_{t+j} / (1 - gamma^P).
    """
    c = np.asarray(period_cumulants, dtype=np.float64)
    if c.ndim != 1 or c.size == 0:
        raise ValueError(f"period_cumulants must be a non-empty 1-D array; got shape {c.shape}")
    g = validate_gammas(gammas)
    P = c.shape[0]
    window = np.stack([np.roll(c, -t) for t in range(P)])  # window[t, j] = c_{(t+j) mod P}
    return (window @ (g[None, :] ** np.arange(P)[:, None])) / (1.0 - g[None, :] ** P)


def nstep_returns(cumulant_windows, gammas, *, lengths=None) -> np.ndarray:
    """Discounted sums of n-step cumulant windows for each gamma, vectorized: [B, G].

    Args:
      cumulant_windows: [B, n]; row b holds C_{t+1..t+n} of sample b.
      gammas: [G].
      lengths: optional int [B]: only the first ``lengths[b]`` cumulants count (an
        episode ended inside the window); the rest are ignored whatever they hold.

    Returns:
      ``out[b, k] = sum_{j < len_b} gammas[k]**j * windows[b, j]``.
    """
    w = np.asarray(cumulant_windows, dtype=np.float64)
    g = validate_gammas(gammas)
    n = w.shape[1]
    if lengths is not None:
        mask = np.arange(n)[None, :] < np.asarray(lengths)[:, None]
        w = np.where(mask, w, 0.0)
    return w @ (g[None, :] ** np.arange(n)[:, None])


def monte_carlo_return(rewards, gammas) -> np.ndarray:
    """The discounted return of one rollout's rewards (rewards[0] = C_{t+1}), for each gamma: [G]."""
    r = np.asarray(rewards, dtype=np.float64)
    g = validate_gammas(gammas)
    if r.size == 0:
        return np.zeros_like(g)
    return discounted_returns(r, g)[0]


def truncation_horizon(gamma: float, tolerance: float = 1e-4) -> int:
    """Steps after which gamma**k < tolerance: a rollout cut there misses a weight below ``tolerance``.

    For gamma = 0.99 and tolerance 1e-4 this is 917 steps.
    """
    gamma = float(validate_gammas(gamma)[0])
    if not 0.0 < tolerance < 1.0:
        raise ValueError(f"tolerance must be in (0, 1); got {tolerance!r}")
    if gamma == 0.0:
        return 1
    return math.ceil(math.log(tolerance) / math.log(gamma))
