"""numba kernels of the off-policy linear Γ-net: GTD(lambda) / TDC and off-policy TD(lambda) over timescale.

The update (its plain NumPy form: :func:`gamma_net_core.reference.off_policy_step`), per gamma_k of Gamma_t,
with f = s V the weights' output (s = 1 - gamma_k with loss scaling), theta the primary weights, h the
secondary ones (the same state x timescale coding), rho the step's clipped importance ratio pi / b, x_k =
x(S_t, gamma_k), x'_k = x(S_{t+1}, gamma_k) (0 when S_{t+1} is terminal)::

    delta_k = s_k C + gamma_k theta . x'_k - theta . x_k
    e_k     = rho (gamma_k lambda e_k + x_k)                              (lambda 0: e_k = rho x_k, no trace kept)
    GTD:    theta += alpha (delta_k e_k - gamma_k (1 - lambda) (e_k . h) x'_k)
            h     += beta  (delta_k e_k - (h . x_k) x_k) - beta kappa n [x touched] h   (the ridge, once a step)
    TD:     theta += alpha delta_k e_k                                       (off-policy TD(lambda), the naive one)

kappa is ``secondary_regularization`` (TDRC's ridge, kept to the features some x_k of the step holds, each once, so
a step stays sparse and a feature every gamma_k shares, the bias, is not shrunk K times; 0: GTD(lambda) / TDC)
and n the active features, so h . x settles at about 1 / (1 + kappa) of the expected TD error. Every TD error,
h . x_k, e_k . h and the ridge's h is computed with the weights before the step, then the updates of every
gamma_k are summed (Algorithm 1's order), so each drawn gamma gets its own correction. With lambda 0 (TDC,
Sutton et al. 2009; GTD(0)) Gamma_t may change every step; with lambda > 0 each trace belongs to one gamma, so
Gamma_t is a fixed ladder. A terminal S_{t+1} cuts the traces after its update.

Kernels speak in named bundles (:class:`OffPolicyWeights`, :class:`OffPolicyRecording`, :class:`OffPolicyRule`,
:class:`OffPolicyWork`);
like :mod:`gamma_net_core.linear.kernels` they take the coding in its plain form.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from gamma_net_core.linear.kernels import alpha_at, n_timescale_dims, named_coding, output_scale, state_keys
from gamma_net_core.linear.kernels import timescale_keys as _timescale_keys
from gamma_net_core.tilecoding import finalize

#: Codes of :attr:`OffPolicyRule.method`.
TD = 0
GTD = 1


class OffPolicyWeights(NamedTuple):
    """What an off-policy Γ-net learns: ``theta`` [n_features] (primary: f = s V), ``h`` [n_features] (secondary:
    the expected TD error's estimate, GTD only), ``z`` [K, n_features] (one trace per rung; K = 0 with lambda 0)."""

    theta: np.ndarray
    h: np.ndarray
    z: np.ndarray


class OffPolicyRecording(NamedTuple):
    """Transitions: ``cumulants[n]`` is C_{n+1}, ``terminals[n]``: S_{n+1} ends, ``rhos[n]``: clipped pi / b of A_n."""

    states_t: np.ndarray
    states_tp1: np.ndarray
    cumulants: np.ndarray
    terminals: np.ndarray
    rhos: np.ndarray


class OffPolicyRule(NamedTuple):
    """How to step: ``method`` (:data:`TD` or :data:`GTD`), ``lam``, the step sizes of update number
    ``first_count + n``: :func:`alpha_at` of (``step_size`` or ``secondary_step_size``, ``decay_steps``,
    ``first_count + n``, ``n_active``), and ``secondary_regularization`` (kappa)."""

    method: int
    lam: float
    step_size: float
    secondary_step_size: float
    secondary_regularization: float
    decay_steps: int
    first_count: int
    n_active: int


class OffPolicyWork(NamedTuple):
    """Scratch of one step: ``u_timescale``, ``keys_timescale`` (one gamma's normalized input and keys), ``idx_t``,
    ``idx_tp1`` [K, n_tilings] (the active tiles of (S_t, gamma_k), (S_{t+1}, gamma_k)), ``deltas`` [K] (delta_f),
    ``hx`` [K] (h . x_k), and the ridge's: ``marked`` [n_features] (1 on a feature the step touched; all 0
    between steps), ``touched`` [K (n_tilings + 1)] (those features, each once) and ``touched_h`` (h there before
    the step)."""

    u_timescale: np.ndarray
    keys_timescale: np.ndarray
    idx_t: np.ndarray
    idx_tp1: np.ndarray
    deltas: np.ndarray
    hx: np.ndarray
    marked: np.ndarray
    touched: np.ndarray
    touched_h: np.ndarray


@numba.njit(cache=True, inline="always")
def _active(keys_t, keys_tp1, gamma, coding, u_ts, keys_ts, idx_t, idx_tp1):  # pragma: no cover - compiled
    memory_size = coding.tiles.memory_size
    _timescale_keys(gamma, coding, u_ts, keys_ts)
    for t in range(keys_t.shape[0]):
        idx_t[t] = finalize(keys_t[t] + keys_ts[t], memory_size)
        idx_tp1[t] = finalize(keys_tp1[t] + keys_ts[t], memory_size)


@numba.njit(cache=True, inline="always")
def _dot(v, idx, bias_index):  # pragma: no cover - compiled
    total = 0.0
    for t in range(idx.shape[0]):
        total += v[idx[t]]
    if bias_index >= 0:
        total += v[bias_index]
    return total


@numba.njit(cache=True, inline="always")
def _add(v, idx, bias_index, amount):  # pragma: no cover - compiled
    for t in range(idx.shape[0]):
        v[idx[t]] += amount
    if bias_index >= 0:
        v[bias_index] += amount


@numba.njit(cache=True, inline="always")
def _mark(v, idx, bias_index, work, n):  # pragma: no cover - compiled
    """Records each feature of ``idx`` (and the bias) not yet touched this step, with v there; returns the count."""
    for t in range(idx.shape[0] + 1):
        i = idx[t] if t < idx.shape[0] else bias_index
        if i >= 0 and work.marked[i] == 0:
            work.marked[i] = 1
            work.touched[n] = i
            work.touched_h[n] = v[i]
            n += 1
    return n


@numba.njit(cache=True, inline="always")
def _shrink(v, work, n, amount):  # pragma: no cover - compiled
    """The ridge: every feature the step touched, once, by ``amount`` times its value before the step."""
    for j in range(n):
        i = work.touched[j]
        v[i] -= amount * work.touched_h[j]
        work.marked[i] = 0


@numba.njit(cache=True, inline="always")
def _within(v, w_limit):  # pragma: no cover - compiled
    for i in range(v.shape[0]):
        if not abs(v[i]) <= w_limit:  # False for NaN too
            return False
    return True


@numba.njit(cache=True, inline="always")
def _touched_within(v, idx_t, idx_tp1, bias_index, w_limit):  # pragma: no cover - compiled
    """Whether the weights a lambda-0 step wrote (those of x_k and x'_k, and the bias) are within w_limit."""
    ok = bias_index < 0 or abs(v[bias_index]) <= w_limit
    for k in range(idx_t.shape[0]):
        for t in range(idx_t.shape[1]):
            ok &= abs(v[idx_t[k, t]]) <= w_limit  # False for NaN too
            ok &= abs(v[idx_tp1[k, t]]) <= w_limit
    return ok


@numba.njit(cache=True, inline="always")
def _step(weights, keys_t, keys_tp1, gammas, c, end, rho, rule, alpha, beta, coding, work):  # pragma: no cover
    """One transition's update (the module docstring's); delta_f into work.deltas; returns False if not finite."""
    theta = weights.theta
    h = weights.h
    z = weights.z
    u_ts = work.u_timescale
    keys_ts = work.keys_timescale
    idx_t = work.idx_t
    idx_tp1 = work.idx_tp1
    deltas = work.deltas
    hx = work.hx
    bias_index = coding.tiles.bias_index
    loss_scaling = coding.loss_scaling
    K = gammas.shape[0]
    lam = rule.lam
    gtd = rule.method == GTD
    shrink = beta * rule.secondary_regularization * rule.n_active if gtd else 0.0  # the ridge's, per feature
    n_touched = 0
    for k in range(K):
        _active(keys_t, keys_tp1, gammas[k], coding, u_ts, keys_ts, idx_t[k], idx_tp1[k])
        f_t = _dot(theta, idx_t[k], bias_index)
        f_tp1 = 0.0 if end else _dot(theta, idx_tp1[k], bias_index)
        deltas[k] = output_scale(gammas[k], loss_scaling) * c + gammas[k] * f_tp1 - f_t
        hx[k] = _dot(h, idx_t[k], bias_index) if gtd else 0.0
        if shrink > 0.0:
            n_touched = _mark(h, idx_t[k], bias_index, work, n_touched)
        if not np.isfinite(deltas[k]):
            return False
    if lam == 0.0:
        for k in range(K):
            _add(theta, idx_t[k], bias_index, alpha * rho * deltas[k])
            if gtd:
                if not end:
                    _add(theta, idx_tp1[k], bias_index, -alpha * rho * gammas[k] * hx[k])
                _add(h, idx_t[k], bias_index, beta * (rho * deltas[k] - hx[k]))
        _shrink(h, work, n_touched, shrink)
        return True
    # lambda > 0: dense traces, one per rung; e . h with h before the step. Two passes over the features per rung:
    # the trace's decay (rho gamma lambda) with e . h, then theta and h together.
    n = theta.shape[0]
    eh = np.empty(K)
    for k in range(K):
        zk = z[k]
        decay = rho * gammas[k] * lam
        e_h = 0.0
        if gtd:
            for i in range(n):
                zk[i] *= decay
                e_h += zk[i] * h[i]
            for t in range(idx_t.shape[1]):
                zk[idx_t[k, t]] += rho
                e_h += rho * h[idx_t[k, t]]
            if bias_index >= 0:
                zk[bias_index] += rho
                e_h += rho * h[bias_index]
        else:
            for i in range(n):
                zk[i] *= decay
            _add(zk, idx_t[k], bias_index, rho)
        eh[k] = e_h
    for k in range(K):
        zk = z[k]
        a = alpha * deltas[k]
        if gtd:
            b = beta * deltas[k]
            for i in range(n):
                theta[i] += a * zk[i]
                h[i] += b * zk[i]
            if not end:
                _add(theta, idx_tp1[k], bias_index, -alpha * gammas[k] * (1.0 - lam) * eh[k])
            _add(h, idx_t[k], bias_index, -beta * hx[k])
        else:
            for i in range(n):
                theta[i] += a * zk[i]
    _shrink(h, work, n_touched, shrink)
    if end:
        z[:] = 0.0
    return True


@numba.njit(cache=True)
def learn_off_policy(weights, recording, gammas, rule, plain_coding, deltas_v):  # pragma: no cover - compiled
    """A recording's transitions in order, Gamma_t ``gammas[n]`` [T, K]; returns -1, or the first step that made
    a weight non-finite or larger than w_limit (the weights then hold that step's partial state: the caller
    restores). ``deltas_v`` [K] holds the last step's TD errors in the cumulant's units."""
    coding = named_coding(plain_coding)
    tiles = coding.tiles
    n_tilings = tiles.base.shape[0]
    K = gammas.shape[1]
    u = np.empty(recording.states_t.shape[1])
    keys_t = np.empty(n_tilings, dtype=np.uint64)
    keys_tp1 = np.empty(n_tilings, dtype=np.uint64)
    work = OffPolicyWork(
        np.empty(n_timescale_dims(coding.timescale_input)),
        np.empty(n_tilings, dtype=np.uint64),
        np.empty((K, n_tilings), dtype=np.int64),
        np.empty((K, n_tilings), dtype=np.int64),
        np.empty(K),
        np.empty(K),
        np.zeros(weights.h.shape[0], dtype=np.uint8),
        np.empty(K * (n_tilings + 1), dtype=np.int64),
        np.empty(K * (n_tilings + 1)),
    )
    deltas = work.deltas
    w_limit = coding.w_limit
    states_t, states_tp1 = recording.states_t, recording.states_tp1
    cumulants, terminals, rhos = recording.cumulants, recording.terminals, recording.rhos
    for n in range(states_t.shape[0]):
        state_keys(states_t[n], tiles, u, keys_t)
        state_keys(states_tp1[n], tiles, u, keys_tp1)
        count = rule.first_count + n
        alpha = alpha_at(rule.step_size, rule.decay_steps, count, rule.n_active)
        beta = alpha_at(rule.secondary_step_size, rule.decay_steps, count, rule.n_active)
        ok = _step(weights, keys_t, keys_tp1, gammas[n], cumulants[n], terminals[n], rhos[n], rule, alpha, beta,
                   coding, work)  # fmt: skip
        for k in range(K):
            deltas_v[k] = deltas[k] / output_scale(gammas[n, k], coding.loss_scaling)
        if not ok:
            return n
        if rule.lam == 0.0:
            ok = _touched_within(weights.theta, work.idx_t, work.idx_tp1, tiles.bias_index, w_limit)
            ok = ok and _touched_within(weights.h, work.idx_t, work.idx_tp1, tiles.bias_index, w_limit)
        else:
            ok = _within(weights.theta, w_limit) and _within(weights.h, w_limit)
        if not ok:
            return n
    return -1
