"""numba kernels of the linear Γ-nets: tile keys of state and timescale, values, TD(0) and TD(lambda) updates.

Arguments follow one convention: ``tiles`` is :attr:`gamma_net_core.tilecoding.TileCoder.kernel_args`,
``ts`` = (timescale input code, tau_scale, n_state) with the code from
:data:`gamma_net_core.linear.settings.TIMESCALE_INPUTS`; a state's keys and a timescale's keys are
computed apart and summed per tiling, so a state's keys are computed once per step and shared by
every gamma (and, in :mod:`gamma_net_core.horde.kernels`, by every question).
"""

from __future__ import annotations

import numba
import numpy as np

from gamma_net_core.linear.traces import decay_and_add, restore_support, save_support
from gamma_net_core.tilecoding import add_keys, finalize, normalize


@numba.njit(cache=True, inline="always")
def _n_timescale_dims(mode):  # pragma: no cover - compiled
    return 0 if mode == 0 else (2 if mode == 3 else 1)


@numba.njit(cache=True, inline="always")
def _timescale_keys(gamma, ts, tiles, u, keys):  # pragma: no cover - compiled
    """keys[t] = the timescale dimensions' part of tiling t's key for ``gamma``."""
    mode, tau_scale, n_state = ts
    low, span, inv_width, offsets, mult, _, per_dim, _, _ = tiles
    keys[:] = 0
    if mode == 0:
        return
    if mode == 1:
        u[0] = gamma
    elif mode == 2:
        u[0] = 1.0 / (1.0 - gamma) / tau_scale
    else:
        u[0] = gamma
        u[1] = 1.0 / (1.0 - gamma) / tau_scale
    normalize(u, low[n_state:], span[n_state:], u)
    add_keys(u, n_state, inv_width, offsets, mult, per_dim, keys)


@numba.njit(cache=True, inline="always")
def _state_keys(state, tiles, u, keys):  # pragma: no cover - compiled
    """keys[t] = base[t] + the state dimensions' part of tiling t's key."""
    low, span, inv_width, offsets, mult, base, per_dim, _, _ = tiles
    n_state = state.shape[0]
    normalize(state, low[:n_state], span[:n_state], u)
    keys[:] = base
    add_keys(u, 0, inv_width, offsets, mult, per_dim, keys)


@numba.njit(cache=True, inline="always")
def _value(w, state_keys, ts_keys, tiles):  # pragma: no cover - compiled
    memory_size = tiles[7]
    bias_index = tiles[8]
    v = 0.0
    for t in range(state_keys.shape[0]):
        v += w[finalize(state_keys[t] + ts_keys[t], memory_size)]
    if bias_index >= 0:
        v += w[bias_index]
    return v


@numba.njit(cache=True, inline="always")
def _output_scale(gamma, loss_scaling):  # pragma: no cover - compiled
    """s(gamma): the weights' output is f = s V, so s = 1 - gamma with loss scaling, else 1."""
    return 1.0 - gamma if loss_scaling else 1.0


@numba.njit(cache=True, inline="always")
def _td_errors(
    w, keys_t, keys_tp1, gammas, cumulant, terminal, loss_scaling, ts, tiles, u_ts, keys_ts, idx, deltas
):  # pragma: no cover
    """Fill idx[k] with the active tiles of (S_t, gamma_k) and deltas[k] with the TD error of the weights' output.

    That output is f = s V (s = 1 - gamma_k with loss scaling, else 1), so deltas[k] is
    delta_f = s C + gamma_k f(S_{t+1}) - f(S_t) = s delta_V; w is untouched.
    """
    memory_size = tiles[7]
    for k in range(gammas.shape[0]):
        gamma = gammas[k]
        _timescale_keys(gamma, ts, tiles, u_ts, keys_ts)
        f_t = 0.0
        f_tp1 = 0.0
        for t in range(keys_t.shape[0]):
            i = finalize(keys_t[t] + keys_ts[t], memory_size)
            idx[k, t] = i
            f_t += w[i]
            if not terminal:
                f_tp1 += w[finalize(keys_tp1[t] + keys_ts[t], memory_size)]
        if tiles[8] >= 0:
            f_t += w[tiles[8]]
            f_tp1 += w[tiles[8]]
        scaled = _output_scale(gamma, loss_scaling) * cumulant
        if terminal:
            deltas[k] = scaled - f_t
        else:
            deltas[k] = scaled + gamma * f_tp1 - f_t


@numba.njit(cache=True, inline="always")
def _step_sizes(deltas, alpha, steps):  # pragma: no cover - compiled
    """steps[k] = alpha * delta_f,k; False if any is not finite."""
    ok = True
    for k in range(deltas.shape[0]):
        steps[k] = alpha * deltas[k]
        if not np.isfinite(steps[k]):
            ok = False
    return ok


@numba.njit(cache=True)
def _learn_one(
    w, state_t, state_tp1, gammas, cumulant, terminal, alpha, loss_scaling, ts, tiles, w_limit, deltas
):  # pragma: no cover
    """One transition; returns True, or False with w unchanged when a weight would leave [-w_limit, w_limit].

    On return deltas[k] holds the TD error in the cumulant's units, delta_V = delta_f / s.
    """
    n_tilings = tiles[5].shape[0]
    bias_index = tiles[8]
    K = gammas.shape[0]
    u = np.empty(state_t.shape[0])
    u_ts = np.empty(_n_timescale_dims(ts[0]))
    keys_t = np.empty(n_tilings, dtype=np.uint64)
    keys_tp1 = np.empty(n_tilings, dtype=np.uint64)
    keys_ts = np.empty(n_tilings, dtype=np.uint64)
    idx = np.empty((K, n_tilings), dtype=np.int64)
    steps = np.empty(K)
    _state_keys(state_t, tiles, u, keys_t)
    _state_keys(state_tp1, tiles, u, keys_tp1)
    _td_errors(w, keys_t, keys_tp1, gammas, cumulant, terminal, loss_scaling, ts, tiles, u_ts, keys_ts, idx, deltas)
    ok = _step_sizes(deltas, alpha, steps)
    for k in range(K):
        deltas[k] /= _output_scale(gammas[k], loss_scaling)
    if not ok:
        return False
    # Undo log: old values in write order, restored in reverse, so repeated indices come back exactly.
    undo = np.empty(K * (n_tilings + 1))
    n = 0
    ok = True
    for k in range(K):
        for t in range(n_tilings):
            i = idx[k, t]
            undo[n] = w[i]
            n += 1
            w[i] += steps[k]
            ok &= abs(w[i]) <= w_limit  # False for NaN too
        if bias_index >= 0:
            undo[n] = w[bias_index]
            n += 1
            w[bias_index] += steps[k]
            ok &= abs(w[bias_index]) <= w_limit
    if not ok:
        for k in range(K - 1, -1, -1):
            if bias_index >= 0:
                n -= 1
                w[bias_index] = undo[n]
            for t in range(n_tilings - 1, -1, -1):
                n -= 1
                w[idx[k, t]] = undo[n]
    return ok


@numba.njit(cache=True)
def _learn_many(
    w,
    states_t,
    states_tp1,
    cumulants,
    terminals,
    gammas,
    step_size,
    decay_steps,
    count,
    n_active,
    loss_scaling,
    ts,
    tiles,
    w_limit,
    probe_keys,
    probe_scales,
    record_from,
    predictions,
):  # pragma: no cover - compiled
    """A recording's transitions in order; returns -1, or the first step that put a weight beyond w_limit.

    predictions[n - record_from, j] = f(S_n, probe j) / probe_scales[j], V in the cumulant's units.
    """
    n_tilings = tiles[5].shape[0]
    bias_index = tiles[8]
    K = gammas.shape[1]
    u = np.empty(states_t.shape[1])
    u_ts = np.empty(_n_timescale_dims(ts[0]))
    keys_t = np.empty(n_tilings, dtype=np.uint64)
    keys_tp1 = np.empty(n_tilings, dtype=np.uint64)
    keys_ts = np.empty(n_tilings, dtype=np.uint64)
    idx = np.empty((K, n_tilings), dtype=np.int64)
    deltas = np.empty(K)
    steps = np.empty(K)
    for n in range(states_t.shape[0]):
        _state_keys(states_t[n], tiles, u, keys_t)
        if n >= record_from:
            for j in range(probe_keys.shape[0]):
                predictions[n - record_from, j] = _value(w, keys_t, probe_keys[j], tiles) / probe_scales[j]
        _state_keys(states_tp1[n], tiles, u, keys_tp1)
        g, c, end = gammas[n], cumulants[n], terminals[n]
        _td_errors(w, keys_t, keys_tp1, g, c, end, loss_scaling, ts, tiles, u_ts, keys_ts, idx, deltas)
        alpha = _alpha(step_size, decay_steps, count + n, n_active)
        if not _step_sizes(deltas, alpha, steps):
            return n
        ok = True
        for k in range(K):
            s = steps[k]
            for t in range(n_tilings):
                i = idx[k, t]
                w[i] += s
                ok &= abs(w[i]) <= w_limit
            if bias_index >= 0:
                w[bias_index] += s
                ok &= abs(w[bias_index]) <= w_limit
        if not ok:
            return n
    return -1


@numba.njit(cache=True, inline="always")
def _accumulate(traces, g, deltas, dw, mark, touched, n):  # pragma: no cover - compiled
    """dw += sum_k deltas[k] z[g, k] over the traces' supports, k in order; returns the touched count."""
    z, _, support, n_support, _ = traces
    for k in range(deltas.shape[0]):
        d = deltas[k]
        for j in range(n_support[g, k]):
            i = support[g, k, j]
            if not mark[i]:
                mark[i] = True
                touched[n] = i
                n += 1
            dw[i] += d * z[g, k, i]
    return n


@numba.njit(cache=True, inline="always")
def _apply_traced(w, alpha, dw, mark, touched, n, w_limit):  # pragma: no cover - compiled
    """w[i] += alpha dw[i] on the touched features if none would leave [-w_limit, w_limit]; clears dw."""
    ok = True
    for j in range(n):
        i = touched[j]
        ok &= abs(w[i] + alpha * dw[i]) <= w_limit  # False for NaN too
    for j in range(n):
        i = touched[j]
        if ok:
            w[i] += alpha * dw[i]
        dw[i] = 0.0
        mark[i] = False
    return ok


@numba.njit(cache=True)
def _learn_one_lambda(
    w,
    state_t,
    state_tp1,
    gammas,
    cumulant,
    terminal,
    alpha,
    loss_scaling,
    ts,
    tiles,
    w_limit,
    deltas,
    lam,
    traces,
    work,
):  # pragma: no cover
    """One TD(lambda) transition on the fixed ``gammas`` with their traces (group 0 of ``traces``).

    Returns like :func:`_learn_one`; when the step is refused the weights and traces are as before.
    ``work`` is :func:`traced_work` scratch, left clean.
    """
    dw, mark, touched, old_z, old_support, old_n, old_max = work
    n_tilings = tiles[5].shape[0]
    bias_index = tiles[8]
    K = gammas.shape[0]
    u = np.empty(state_t.shape[0])
    u_ts = np.empty(_n_timescale_dims(ts[0]))
    keys_t = np.empty(n_tilings, dtype=np.uint64)
    keys_tp1 = np.empty(n_tilings, dtype=np.uint64)
    keys_ts = np.empty(n_tilings, dtype=np.uint64)
    idx = np.empty((K, n_tilings), dtype=np.int64)
    steps = np.empty(K)
    _state_keys(state_t, tiles, u, keys_t)
    _state_keys(state_tp1, tiles, u, keys_tp1)
    _td_errors(w, keys_t, keys_tp1, gammas, cumulant, terminal, loss_scaling, ts, tiles, u_ts, keys_ts, idx, deltas)
    ok = _step_sizes(deltas, alpha, steps)
    if ok:
        n_support = traces[3]
        for k in range(K):
            save_support(traces, 0, k, old_z, old_support)
            old_n[k] = n_support[0, k]
            old_max[k] = traces[4][0, k]
            decay_and_add(traces, 0, k, gammas[k] * lam, idx[k], bias_index)
        n = _accumulate(traces, 0, deltas, dw, mark, touched, 0)
        ok = _apply_traced(w, alpha, dw, mark, touched, n, w_limit)
        if not ok:
            for k in range(K):
                restore_support(traces, 0, k, old_z, old_support, old_n[k], old_max[k])
    for k in range(K):
        deltas[k] /= _output_scale(gammas[k], loss_scaling)
    return ok


@numba.njit(cache=True)
def _learn_many_lambda(
    w,
    states_t,
    states_tp1,
    cumulants,
    terminals,
    gammas,
    step_size,
    decay_steps,
    count,
    n_active,
    loss_scaling,
    ts,
    tiles,
    w_limit,
    probe_keys,
    probe_scales,
    record_from,
    predictions,
    lam,
    traces,
    work,
):  # pragma: no cover - compiled
    """:func:`_learn_many` with TD(lambda) traces on the fixed Gamma ``gammas`` [K] (the same every step).

    A terminal transition cuts the traces after its update. Returns -1, or the first step whose
    update was refused (weights and traces then hold that step's partial state: the caller restores).
    """
    dw, mark, touched = work[0], work[1], work[2]
    n_tilings = tiles[5].shape[0]
    bias_index = tiles[8]
    K = gammas.shape[0]
    u = np.empty(states_t.shape[1])
    u_ts = np.empty(_n_timescale_dims(ts[0]))
    keys_t = np.empty(n_tilings, dtype=np.uint64)
    keys_tp1 = np.empty(n_tilings, dtype=np.uint64)
    keys_ts = np.empty(n_tilings, dtype=np.uint64)
    idx = np.empty((K, n_tilings), dtype=np.int64)
    deltas = np.empty(K)
    steps = np.empty(K)
    decays = np.empty(K)
    for k in range(K):
        decays[k] = gammas[k] * lam
    for n in range(states_t.shape[0]):
        _state_keys(states_t[n], tiles, u, keys_t)
        if n >= record_from:
            for j in range(probe_keys.shape[0]):
                predictions[n - record_from, j] = _value(w, keys_t, probe_keys[j], tiles) / probe_scales[j]
        _state_keys(states_tp1[n], tiles, u, keys_tp1)
        end = terminals[n]
        _td_errors(w, keys_t, keys_tp1, gammas, cumulants[n], end, loss_scaling, ts, tiles, u_ts, keys_ts, idx, deltas)
        alpha = _alpha(step_size, decay_steps, count + n, n_active)
        if not _step_sizes(deltas, alpha, steps):
            return n
        for k in range(K):
            decay_and_add(traces, 0, k, decays[k], idx[k], bias_index)
        m = _accumulate(traces, 0, deltas, dw, mark, touched, 0)
        if not _apply_traced(w, alpha, dw, mark, touched, m, w_limit):
            return n
        if end:
            for k in range(K):
                decay_and_add(traces, 0, k, 0.0, idx[k, :0], -1)
    return -1


def traced_work(n_features: int, n_gammas: int) -> tuple:
    """Scratch of the TD(lambda) kernels: (dw, mark, touched, old_z, old_support, old_n, old_max), clean."""
    return (
        np.zeros(n_features),
        np.zeros(n_features, dtype=np.bool_),
        np.zeros(n_features, dtype=np.int64),
        np.zeros((n_gammas, n_features)),
        np.zeros((n_gammas, n_features), dtype=np.int64),
        np.zeros(n_gammas, dtype=np.int64),
        np.zeros(n_gammas),
    )


@numba.njit(cache=True)
def _alpha(step_size, decay_steps, count, n_active):  # pragma: no cover - compiled
    """alpha for update number ``count`` (0-based), per active feature."""
    if decay_steps > 0:
        return step_size * max(0.0, 1.0 - count / decay_steps) / n_active
    return step_size / n_active


@numba.njit(cache=True)
def _predict_many(w, states, gammas, loss_scaling, ts, tiles):  # pragma: no cover - compiled
    """V(S_n, gamma_k) = f / s(gamma_k) for each state and gamma: [N, G], in the cumulant's units."""
    n_tilings = tiles[5].shape[0]
    out = np.empty((states.shape[0], gammas.shape[0]))
    u = np.empty(states.shape[1])
    u_ts = np.empty(_n_timescale_dims(ts[0]))
    keys_ts = np.empty((gammas.shape[0], n_tilings), dtype=np.uint64)
    scales = np.empty(gammas.shape[0])
    for k in range(gammas.shape[0]):
        _timescale_keys(gammas[k], ts, tiles, u_ts, keys_ts[k])
        scales[k] = _output_scale(gammas[k], loss_scaling)
    keys = np.empty(n_tilings, dtype=np.uint64)
    for n in range(states.shape[0]):
        _state_keys(states[n], tiles, u, keys)
        for k in range(gammas.shape[0]):
            out[n, k] = _value(w, keys, keys_ts[k], tiles) / scales[k]
    return out


def _timescale_keys_py(gamma, ts, tiles, u, keys):
    _timescale_keys_kernel(float(gamma), ts, tiles, u, keys)


@numba.njit(cache=True)
def _timescale_keys_kernel(gamma, ts, tiles, u, keys):  # pragma: no cover - compiled
    _timescale_keys(gamma, ts, tiles, u, keys)
