"""TD(lambda) on drawn timescales, the forward view: each transition towards its truncated lambda-return.

This is a Γ-net's TD(lambda) by default (``lambda_view`` "forward"; truncated TD(lambda), Sutton & Barto
2018, 12.3). Why a forward view. The backward view keeps a trace per gamma, so it needs the same gammas at
every step: the ladder of :mod:`gamma_net_core.linear.traces`, whose traced step alpha (1 - lambda) also
gives the traces' reach up (that module, "The reach given up"). A lambda-return needs no past of its
gamma: for any gamma it is a function of the transitions that follow and the current weights. So the
Γ-net keeps each transition, with the Gamma_t drawn for it, in a :class:`Window` until its lambda-return
truncated after H = ``lambda_horizon`` transitions is complete, then moves its state S_m towards that
return of every gamma in its Gamma_t, at Algorithm 1's alpha scaled per gamma (p: ``lambda_step_power``)::

    G_j = s C_{j+1} + gamma [(1 - lambda) f(S_{j+1}, gamma) + lambda G_{j+1}]    (j = m .. l - 1)
    G_l = s C_{l+1} + gamma f(S_{l+1}, gamma)                                     (l = m + H - 1, the last)
    w += 1 / n_active * sum_k alpha_k (G_m(gamma_k) - f(S_m, gamma_k)) x(S_m, gamma_k)
    alpha_k = alpha (1 - gamma_k lambda)^p

in the weights' output f = s V (s: :func:`~gamma_net_core.linear.kernels.output_scale`). A terminal
transition (S_{j+1} ends) makes G_j = s C_{j+1}, a gap (:meth:`Window.cut`, the stream does not
continue) G_j = s C_{j+1} + gamma f(S_{j+1}, gamma): no return reaches past either, so every held
transition up to one is complete there and learned at once. With lambda 0 a return is one step, so
nothing waits. Offline, the sum of these updates is textbook TD(lambda)'s at alpha (ch. 12.1), so the
reach is kept; each update moves one state's features, as TD(0) does. Every gamma is trained where
Algorithm 1 trains it, on the transition it was drawn for: no ladder, nothing left between rungs.

The price is a lag and a window. A state is learned from up to H - 1 steps after it was seen, so the
weights trail the stream by that much (at 30 Hz with lambda 0.9 and H 44, about 1.4 s), and an update
evaluates f at up to H states per gamma. The truncation puts the weight lambda^(H-1) that the full
return gives to the steps beyond the window on the bootstrap f(S_{l+1}), so it bounds the reach, not
the fixed point: :func:`~gamma_net_core.linear.settings.default_horizon` is the smallest H with
lambda^H <= 0.01. H = 1 is TD(0), bit for bit.

With alpha decayed (``step_size_decay_steps`` > 0) lambda is decayed too, to 0 over the first half of
alpha's decay (:func:`~gamma_net_core.linear.traces.traced_decay_steps`, as in the backward view): a
lambda-return with a rare large cumulant is noisier than a one-step one, and late in a run what is left
to remove is noise. From there the learner is TD(0) on the same transitions and draws as Algorithm 1,
with no lag.

Measured (docs/results.md, "The forward view"; tests/test_lambda_between.py): on the event questions
of four chains (alpha 0.01, no bias feature, ten seeds) lambda 0.5 and 0.9 learn tau 45 and 86 faster
than TD(0) on every seed (0.34-0.85x its mean error over the learning curve, means over seeds), and
the control lambda 0.1 gains 2-5 %: the reach, not a larger step. It needs the smaller alpha textbook
TD(lambda) needs at a large lambda (at 0.03 lambda 0.9 is 1.08x TD(0) on the sparse chain), and a bias
feature, shared by every timescale, takes the gain on a chain with a rare large cumulant (1.06-1.13x at
alpha 0.01-0.03).

The window is learner state: checkpoints save it oldest first (``window_states_t``,
``window_states_tp1`` [n, n_state], ``window_cumulants`` [n], ``window_ends`` int8 [n],
``window_gammas`` [n, K], n < H), and a learner restored from one continues bit for bit.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from gamma_net_core.linear.kernels import (
    alpha_at,
    bias_feature,
    n_timescale_dims,
    named_coding,
    output_scale,
    record_probes,
    state_keys,
    timescale_keys,
)
from gamma_net_core.tilecoding import finalize

#: What follows a transition in the window: the stream goes on, S_{t+1} is terminal, or a gap (no return past it).
CONTINUES, TERMINAL, GAP = 0, 1, 2


class WindowArrays(NamedTuple):
    """A :class:`Window` as :func:`learn_many_lambda_return` takes it: a ring of H slots, ``fill`` [held, oldest]."""

    states_t: np.ndarray
    states_tp1: np.ndarray
    cumulants: np.ndarray
    ends: np.ndarray
    keys_t: np.ndarray
    keys_tp1: np.ndarray
    gammas: np.ndarray
    fill: np.ndarray


class Window:
    """The transitions not yet learned from, in a ring of ``horizon`` slots, with their tile keys and Gamma_t.

    Args:
      horizon: H, the transitions a lambda-return looks ahead.
      n_state: state inputs.
      n_tilings: the coder's tilings (the keys' width).
    """

    def __init__(self, horizon: int, n_state: int, n_tilings: int) -> None:
        self.states_t = np.zeros((horizon, n_state))
        self.states_tp1 = np.zeros((horizon, n_state))
        self.cumulants = np.zeros(horizon)
        self.ends = np.zeros(horizon, dtype=np.int8)
        self.keys_t = np.zeros((horizon, n_tilings), dtype=np.uint64)
        self.keys_tp1 = np.zeros((horizon, n_tilings), dtype=np.uint64)
        self.gammas = np.zeros((horizon, 0))  # [H, K]: each transition's Gamma_t, K set by the first
        self.fill = np.zeros(2, dtype=np.int64)  # [transitions held, slot of the oldest]

    @property
    def horizon(self) -> int:
        return self.cumulants.shape[0]

    def __len__(self) -> int:
        return int(self.fill[0])

    def copy(self) -> Window:
        out = Window.__new__(Window)
        for name in WindowArrays._fields:
            setattr(out, name, getattr(self, name).copy())
        return out

    def take(self, n_gammas: int) -> None:
        """Ready for transitions with Gamma_t of ``n_gammas``: each is learned on its own, so while one is held
        the size cannot change.

        Raises:
          ValueError: ``n_gammas`` differs from the held transitions' (named).
        """
        if n_gammas == self.gammas.shape[1]:
            return
        if len(self):
            raise ValueError(
                f"Gamma_t has {n_gammas} timescales, but the {len(self)} transitions held for their lambda-returns "
                f"were drawn {self.gammas.shape[1]} (each is learned on its own draw)"
            )
        self.gammas = np.zeros((self.horizon, n_gammas))

    def _order(self) -> np.ndarray:
        n, start = self.fill
        return (start + np.arange(n)) % self.horizon

    def cut(self) -> None:
        """The stream does not continue from the newest transition: no lambda-return reaches past it."""
        if len(self):
            newest = self._order()[-1]
            if self.ends[newest] == CONTINUES:
                self.ends[newest] = GAP

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The held transitions, oldest first (a checkpoint's ``window_*`` arrays)."""
        order = self._order()
        return {
            "window_states_t": self.states_t[order].copy(),
            "window_states_tp1": self.states_tp1[order].copy(),
            "window_cumulants": self.cumulants[order].copy(),
            "window_ends": self.ends[order].copy(),
            "window_gammas": self.gammas[order].copy(),
        }

    @classmethod
    def from_arrays(cls, horizon: int, n_state: int, plain_coding: tuple, arrays) -> Window:
        """The window :meth:`to_arrays` saved, its keys recomputed.

        Raises:
          ValueError: a missing array, a wrong dtype or shape, H transitions or more, a non-finite value, a
            gamma outside [0, 1) or an unknown end code (named).
        """
        names = ("window_states_t", "window_states_tp1", "window_cumulants", "window_ends", "window_gammas")
        missing = [name for name in names if name not in arrays]
        if missing:
            raise ValueError(f"lambda_horizon {horizon} but no {missing[0]} saved (the window is learner state)")
        s_t, s_tp1, c, ends, gammas = (np.asarray(arrays[name]) for name in names)
        n = c.shape[0] if c.ndim == 1 else -1
        if not 0 <= n < horizon or c.dtype != np.float64:
            raise ValueError(f"window_cumulants are {c.dtype}{list(c.shape)}; expected float64[n], n < {horizon}")
        for name, a, shape in (("window_states_t", s_t, (n, n_state)), ("window_states_tp1", s_tp1, (n, n_state))):
            if a.dtype != np.float64 or a.shape != shape:
                raise ValueError(f"{name} are {a.dtype}{list(a.shape)}; expected float64{list(shape)}")
        if gammas.dtype != np.float64 or gammas.ndim != 2 or gammas.shape[0] != n:
            raise ValueError(f"window_gammas are {gammas.dtype}{list(gammas.shape)}; expected float64[{n}, K]")
        if ends.dtype != np.int8 or ends.shape != (n,) or not np.all(np.isin(ends, (CONTINUES, TERMINAL, GAP))):
            raise ValueError(f"window_ends are {ends.dtype}{list(ends.shape)} with codes {np.unique(ends).tolist()}; "
                             f"expected int8[{n}] of 0, 1, 2")  # fmt: skip
        if not (np.all(np.isfinite(s_t)) and np.all(np.isfinite(s_tp1)) and np.all(np.isfinite(c))):
            raise ValueError("window states or cumulants hold non-finite values")
        if not np.all((gammas >= 0.0) & (gammas < 1.0)):
            raise ValueError("window_gammas hold values outside [0, 1)")
        out = cls(horizon, n_state, len(plain_coding[0][0]))
        out.take(gammas.shape[1])
        out.states_t[:n], out.states_tp1[:n], out.cumulants[:n], out.ends[:n] = s_t, s_tp1, c, ends
        out.gammas[:n] = gammas
        out.fill[0] = n
        fill_keys(out.states_t, out.states_tp1, out.keys_t, out.keys_tp1, n, plain_coding)
        return out

    @property
    def kernel_args(self) -> WindowArrays:
        return WindowArrays(*(getattr(self, name) for name in WindowArrays._fields))


@numba.njit(cache=True)
def fill_keys(states_t, states_tp1, keys_t, keys_tp1, n, plain_coding):  # pragma: no cover - compiled
    """The tile keys of the first ``n`` slots' states."""
    tiles = named_coding(plain_coding).tiles
    u = np.empty(states_t.shape[1])
    for j in range(n):
        state_keys(states_t[j], tiles, u, keys_t[j])
        state_keys(states_tp1[j], tiles, u, keys_tp1[j])


@numba.njit(cache=True)
def lam_at(lam, fade_steps, count):  # pragma: no cover - compiled
    """lambda for update number ``count``: decayed linearly to 0 over ``fade_steps`` (0: constant)."""
    if fade_steps > 0:
        return lam * max(0.0, 1.0 - count / fade_steps)
    return lam


@numba.njit(cache=True, inline="always")
def _output(w, keys_state, keys_timescale, memory_size, bias_index, bias_x):  # pragma: no cover - compiled
    f = 0.0
    for t in range(keys_state.shape[0]):
        f += w[finalize(keys_state[t] + keys_timescale[t], memory_size)]
    if bias_index >= 0:
        f += bias_x * w[bias_index]
    return f


@numba.njit(cache=True, inline="always")
def _return_ends_at(ends, held, oldest, lam, H):  # pragma: no cover - compiled
    """Where the oldest transition's lambda-return stops (its offset in the window), or -1 if it is not complete:
    after one step with lambda 0, else at the first end (terminal or gap), else after H steps once H are held."""
    if lam == 0.0:
        return 0
    for j in range(held):
        if ends[(oldest + j) % H] != CONTINUES:
            return j
    return H - 1 if held == H else -1


@numba.njit(cache=True)
def learn_many_lambda_return(
    w, recording, gammas, schedule, lam, fade_steps, step_power, plain_coding, probes, window, deltas
):  # pragma: no cover - compiled
    """Each transition into the window, with its Gamma_t ``gammas[n]``; then every held transition whose
    lambda-return is complete, oldest first, moves towards it on its own Gamma_t and leaves, at alpha
    (1 - gamma lambda)^``step_power`` for each gamma (``lambda_step_power``; lambda as faded at that step).

    ``recording``, ``schedule`` and ``probes`` are those of :func:`~gamma_net_core.linear.kernels.learn_many`;
    ``window`` is :attr:`Window.kernel_args` (its Gamma_t as wide as ``gammas``). ``deltas`` [K] holds, after
    the call, the last update's lambda-return errors G - V in the cumulant's units (0 if the last step updated
    nothing). Returns -1, or the first step whose update put a weight beyond w_limit (the caller restores
    weights and window).
    """
    coding = named_coding(plain_coding)
    tiles = coding.tiles
    memory_size = tiles.memory_size
    bias_index = tiles.bias_index
    w_limit = coding.w_limit
    loss_scaling = coding.loss_scaling
    n_tilings = tiles.base.shape[0]
    K = gammas.shape[1]
    w_ends = window.ends
    w_keys_t = window.keys_t
    w_gammas = window.gammas
    fill = window.fill
    H = window.cumulants.shape[0]
    u = np.empty(recording.states_t.shape[1])
    u_ts = np.empty(n_timescale_dims(coding.timescale_input))
    keys_ts = np.empty(n_tilings, dtype=np.uint64)
    idx = np.empty((K, n_tilings), dtype=np.int64)
    steps = np.empty(K)
    bias_x = np.empty(K)
    states_t = recording.states_t
    step_size, decay_steps = schedule.step_size, schedule.decay_steps
    first_count, n_active = schedule.first_count, schedule.n_active
    held, oldest = fill[0], fill[1]
    for n in range(states_t.shape[0]):
        slot = (oldest + held) % H
        _hold(window, slot, recording, n, gammas, tiles, u)
        record_probes(w, w_keys_t[slot], tiles, probes, n, coding.value_bias)
        held += 1
        deltas[:] = 0.0
        lam_n = lam_at(lam, fade_steps, first_count + n)
        alpha = alpha_at(step_size, decay_steps, first_count + n, n_active)
        while held > 0:
            last = _return_ends_at(w_ends, held, oldest, lam_n, H)
            if last < 0:
                break
            for k in range(K):
                gamma = w_gammas[oldest, k]
                timescale_keys(gamma, coding, u_ts, keys_ts)
                b = bias_feature(gamma, coding)
                bias_x[k] = b
                G = _lambda_return(w, window, oldest, last, gamma, output_scale(gamma, loss_scaling), lam_n, keys_ts,
                                   memory_size, bias_index, b)  # fmt: skip
                f_m = 0.0
                for t in range(n_tilings):
                    i = finalize(w_keys_t[oldest, t] + keys_ts[t], memory_size)
                    idx[k, t] = i
                    f_m += w[i]
                if bias_index >= 0:
                    f_m += b * w[bias_index]
                deltas[k] = G - f_m
            ok = True
            for k in range(K):
                steps[k] = alpha * (1.0 - w_gammas[oldest, k] * lam_n) ** step_power * deltas[k]
                ok &= np.isfinite(steps[k])
            if not ok:
                fill[0], fill[1] = held, oldest
                return n
            ok = _apply_steps(w, idx, steps, bias_x, bias_index, w_limit)
            for k in range(K):
                deltas[k] /= output_scale(w_gammas[oldest, k], loss_scaling)
            oldest = (oldest + 1) % H
            held -= 1
            if not ok:
                fill[0], fill[1] = held, oldest
                return n
    fill[0], fill[1] = held, oldest
    return -1


@numba.njit(cache=True, inline="always")
def _hold(window, slot, recording, n, gammas, tiles, u):  # pragma: no cover - compiled
    """Transition ``n`` of ``recording`` into the window's ``slot``, its keys computed once."""
    window.states_t[slot] = recording.states_t[n]
    window.states_tp1[slot] = recording.states_tp1[n]
    window.cumulants[slot] = recording.cumulants[n]
    window.ends[slot] = TERMINAL if recording.terminals[n] else (GAP if recording.cuts[n] else CONTINUES)
    window.gammas[slot] = gammas[n]
    state_keys(recording.states_t[n], tiles, u, window.keys_t[slot])
    state_keys(recording.states_tp1[n], tiles, u, window.keys_tp1[slot])


@numba.njit(cache=True, inline="always")
def _lambda_return(w, window, oldest, last, gamma, s, lam, keys_ts, memory_size, bias_index, b):  # pragma: no cover
    """The (scaled) lambda-return at ``gamma`` of the oldest held transition, whose return ends ``last`` steps on."""
    H = window.cumulants.shape[0]
    at = (oldest + last) % H
    if window.ends[at] == TERMINAL:
        G = s * window.cumulants[at]
    else:
        G = s * window.cumulants[at] + gamma * _output(w, window.keys_tp1[at], keys_ts, memory_size, bias_index, b)
    for j in range(last - 1, -1, -1):
        at = (oldest + j) % H
        f_next = _output(w, window.keys_tp1[at], keys_ts, memory_size, bias_index, b)
        G = s * window.cumulants[at] + gamma * ((1.0 - lam) * f_next + lam * G)
    return G


@numba.njit(cache=True, inline="always")
def _apply_steps(w, idx, steps, bias_x, bias_index, w_limit):  # pragma: no cover - compiled
    """Add each gamma's step to its active rows (and the bias); whether every weight stayed within w_limit."""
    ok = True
    for k in range(steps.shape[0]):
        s_k = steps[k]
        for t in range(idx.shape[1]):
            i = idx[k, t]
            w[i] += s_k
            ok &= abs(w[i]) <= w_limit  # False for NaN too
        if bias_index >= 0:
            w[bias_index] += bias_x[k] * s_k
            ok &= abs(w[bias_index]) <= w_limit
    return ok
