"""numba kernels of the Horde: Algorithm 1's TD(0) vectorized over questions, sharing the tile coding.

The single-question kernels (:mod:`gamma_net_core.linear.kernels`) compute a state's tile keys once
and add each gamma's keys; here the active indices of (S_t, gamma_k) and (S_{t+1}, gamma_k) are
also computed once per step and shared by every question. Weights are stored ``W[feature,
question]`` so each active feature's row serves all questions from one cache line; per question
the arithmetic (sums over tilings in order, then the bias; all TD errors before any update; the
updates in gamma then tiling order) is the single-question kernel's, so N questions equal N
single learners fed the same stream, bit for bit with a constant step size.

Per question q, with output scale s_k (1 - gamma_k with loss scaling, else 1) and continuation
c_q of S_{t+1} (0 where its termination holds, which stops the return)::

    delta[q, k] = s_k C_q + gamma_k c_q f_q(S_{t+1}, gamma_k) - f_q(S_t, gamma_k)
    W[:, q]    += alpha[q] * sum_k delta[q, k] x(S_t, gamma_k)

Autostep (Mahmood et al. 2012) keeps a step size per question and feature instead
(:func:`autostep_update`; :mod:`gamma_net_core.horde.adaptive` is its plain reference).

TD(lambda) (:func:`lambda_step`; the trace form is :mod:`gamma_net_core.linear.traces`'s) keeps one
trace per fixed gamma_k and continuation group (questions whose continuations are always equal share
it), decayed by gamma_k lambda c_t, c_t the group's continuation of S_t; per question the update is
the single-question TD(lambda) kernel's, W[:, q] += alpha sum_k delta[q, k] z_k, summed in the same
order, so again N questions equal N single learners bit for bit.
"""

from __future__ import annotations

import numba
import numpy as np

from gamma_net_core.linear.kernels import _n_timescale_dims, _output_scale, _state_keys, _timescale_keys
from gamma_net_core.linear.traces import decay_and_add, restore_support, save_support
from gamma_net_core.tilecoding import finalize

CONSTANT = 0
AUTOSTEP = 1


@numba.njit(cache=True, inline="always")
def active_indices(keys_t, keys_tp1, gammas, ts, tiles, u_ts, keys_ts, idx_t, idx_tp1):  # pragma: no cover
    """idx_t[k, t], idx_tp1[k, t]: the active tile of tiling t for (S_t, gamma_k) and (S_{t+1}, gamma_k)."""
    memory_size = tiles[7]
    for k in range(gammas.shape[0]):
        _timescale_keys(gammas[k], ts, tiles, u_ts, keys_ts)
        for t in range(keys_t.shape[0]):
            idx_t[k, t] = finalize(keys_t[t] + keys_ts[t], memory_size)
            idx_tp1[k, t] = finalize(keys_tp1[t] + keys_ts[t], memory_size)


@numba.njit(cache=True, inline="always")
def td_errors(
    W, idx_t, idx_tp1, gammas, cumulants, continuations, loss_scaling, bias_index, f_t, f_tp1, deltas
):  # pragma: no cover - compiled
    """deltas[q, k]: the TD error of the weights' output f = s V for every question and gamma; W untouched."""
    K, n_tilings = idx_t.shape
    Q = W.shape[1]
    for k in range(K):
        f_t[:] = 0.0
        f_tp1[:] = 0.0
        for t in range(n_tilings):
            i = idx_t[k, t]
            j = idx_tp1[k, t]
            for q in range(Q):
                f_t[q] += W[i, q]
                f_tp1[q] += W[j, q]
        if bias_index >= 0:
            for q in range(Q):
                f_t[q] += W[bias_index, q]
                f_tp1[q] += W[bias_index, q]
        gamma = gammas[k]
        s = _output_scale(gamma, loss_scaling)
        for q in range(Q):
            c = continuations[q]
            if c == 0.0:
                deltas[q, k] = s * cumulants[q] - f_t[q]
            else:
                deltas[q, k] = s * cumulants[q] + gamma * c * f_tp1[q] - f_t[q]


@numba.njit(cache=True, inline="always")
def _bounded(W, steps, n_active, w_max, w_limit, ok_q):  # pragma: no cover - compiled
    """ok_q[q]: no weight of question q can leave [-w_limit, w_limit] by this step's ``steps[q, :]``.

    ``w_max[q]`` bounds max |W[:, q]| from above (kept loose and cheap; recomputed exactly only
    near the limit), so the check costs O(Q K) and a refused step needs no undo.
    """
    all_ok = True
    for q in range(steps.shape[0]):
        reach = 0.0
        for k in range(steps.shape[1]):
            reach += abs(steps[q, k])
        reach *= n_active
        if not np.isfinite(reach):
            ok_q[q] = False
            all_ok = False
            continue
        if w_max[q] + reach > w_limit:
            m = 0.0
            for i in range(W.shape[0]):
                m = max(m, abs(W[i, q]))
            w_max[q] = m
        ok_q[q] = w_max[q] + reach <= w_limit
        all_ok &= ok_q[q]
    if all_ok:
        for q in range(steps.shape[0]):
            reach = 0.0
            for k in range(steps.shape[1]):
                reach += abs(steps[q, k])
            w_max[q] += reach * n_active
    return all_ok


@numba.njit(cache=True)
def constant_step(
    W, state_t, state_tp1, gammas, cumulants, continuations, alpha, loss_scaling, ts, tiles, w_max, w_limit, scratch
):  # pragma: no cover - compiled
    """One transition for every question at step size ``alpha`` (per active feature).

    Returns:
      -1 when applied; else the first question whose update would make a weight non-finite or
      too large, with W unchanged. ``scratch`` (from :func:`make_scratch`) holds the TD errors
      delta_V [Q, K] (cumulant units) on return.
    """
    keys_t, keys_tp1, keys_ts, u, u_ts, idx_t, idx_tp1, f_t, f_tp1, deltas, steps, ok_q = scratch
    K = gammas.shape[0]
    Q = W.shape[1]
    n_tilings = keys_t.shape[0]
    bias_index = tiles[8]
    _state_keys(state_t, tiles, u, keys_t)
    _state_keys(state_tp1, tiles, u, keys_tp1)
    active_indices(keys_t, keys_tp1, gammas, ts, tiles, u_ts, keys_ts, idx_t[:K], idx_tp1[:K])
    td_errors(
        W, idx_t[:K], idx_tp1[:K], gammas, cumulants, continuations, loss_scaling, bias_index, f_t, f_tp1, deltas[:, :K]
    )
    for q in range(Q):
        for k in range(K):
            steps[q, k] = alpha * deltas[q, k]
    n_active = n_tilings + (1 if bias_index >= 0 else 0)
    ok = _bounded(W, steps[:, :K], n_active, w_max, w_limit, ok_q)
    for q in range(Q):
        for k in range(K):
            deltas[q, k] /= _output_scale(gammas[k], loss_scaling)
    if not ok:
        for q in range(Q):
            if not ok_q[q]:
                return q
    for k in range(K):
        for t in range(n_tilings):
            i = idx_t[k, t]
            for q in range(Q):
                W[i, q] += steps[q, k]
        if bias_index >= 0:
            for q in range(Q):
                W[bias_index, q] += steps[q, k]
    return -1


@numba.njit(cache=True)
def autostep_step(
    W,
    state_t,
    state_tp1,
    gammas,
    cumulants,
    continuations,
    loss_scaling,
    ts,
    tiles,
    w_max,
    w_limit,
    alphas,
    h,
    v,
    mu,
    inv_tau,
    scratch,
    dense,
):  # pragma: no cover - compiled
    """One transition for every question with Autostep's step size per question and feature.

    Autostep (Mahmood et al. 2012) on the step's gradient g_i = sum_k delta_k x_{k,i} (TD errors of
    f) with z_i = sum_k x_{k,i}^2 standing for x_i^2, for the features active at S_t::

        v_i  = max(|g_i h_i|, v_i + alpha_i z_i (|g_i h_i| - v_i) / tau)
        alpha_i *= exp(mu g_i h_i / v_i)            (where v_i > 0)
        alpha_i /= max(sum_i alpha_i z_i, 1)        (over the active features)
        w_i  += alpha_i g_i;   h_i = h_i (1 - alpha_i z_i) + alpha_i g_i

    ``alphas``, ``h``, ``v`` are [n_features, Q]; ``dense`` = (g, new_alpha, new_v [n_features, Q],
    z [n_features], count [n_features], order [n_features] int) is zeroed scratch, left zeroed.
    Returns like :func:`constant_step`; nothing changes when the step is refused.
    """
    keys_t, keys_tp1, keys_ts, u, u_ts, idx_t, idx_tp1, f_t, f_tp1, deltas, steps, ok_q = scratch
    g, new_alpha, new_v, z, count, order = dense
    K = gammas.shape[0]
    Q = W.shape[1]
    n_tilings = keys_t.shape[0]
    bias_index = tiles[8]
    _state_keys(state_t, tiles, u, keys_t)
    _state_keys(state_tp1, tiles, u, keys_tp1)
    active_indices(keys_t, keys_tp1, gammas, ts, tiles, u_ts, keys_ts, idx_t[:K], idx_tp1[:K])
    td_errors(
        W, idx_t[:K], idx_tp1[:K], gammas, cumulants, continuations, loss_scaling, bias_index, f_t, f_tp1, deltas[:, :K]
    )
    n = 0
    for k in range(K):
        # x_{k,i} is how often feature i is active for gamma_k (a hashed tile may repeat).
        for t in range(n_tilings):
            count[idx_t[k, t]] += 1.0
        if bias_index >= 0:
            count[bias_index] += 1.0
        for t in range(n_tilings + 1):
            if t < n_tilings:
                i = idx_t[k, t]
            elif bias_index >= 0:
                i = bias_index
            else:
                break
            c = count[i]
            if c == 0.0:
                continue
            count[i] = 0.0
            if z[i] == 0.0:
                order[n] = i
                n += 1
            z[i] += c * c
            for q in range(Q):
                g[i, q] += c * deltas[q, k]
    ok = True
    for q in range(Q):
        norm = 0.0
        for j in range(n):
            i = order[j]
            gh = g[i, q] * h[i, q]
            a = abs(gh)
            vi = max(a, v[i, q] + inv_tau * alphas[i, q] * z[i] * (a - v[i, q]))
            al = alphas[i, q]
            if vi > 0.0:
                al *= np.exp(mu * gh / vi)
            new_v[i, q] = vi
            new_alpha[i, q] = al
            norm += al * z[i]
        norm = max(norm, 1.0)
        reach = 0.0
        for j in range(n):
            i = order[j]
            new_alpha[i, q] /= norm
            reach = max(reach, abs(new_alpha[i, q] * g[i, q]))
        ok_q[q] = np.isfinite(reach) and w_max[q] + reach <= w_limit
        if not ok_q[q] and np.isfinite(reach):
            m = 0.0
            for i in range(W.shape[0]):
                m = max(m, abs(W[i, q]))
            w_max[q] = m
            ok_q[q] = m + reach <= w_limit
        steps[q, 0] = reach
        ok &= ok_q[q]
    if ok:
        for q in range(Q):
            w_max[q] += steps[q, 0]
            for j in range(n):
                i = order[j]
                al = new_alpha[i, q]
                step = al * g[i, q]
                W[i, q] += step
                h[i, q] = h[i, q] * (1.0 - al * z[i]) + step
                alphas[i, q] = al
                v[i, q] = new_v[i, q]
    for j in range(n):
        i = order[j]
        z[i] = 0.0
        for q in range(Q):
            g[i, q] = 0.0
    for q in range(Q):
        for k in range(K):
            deltas[q, k] /= _output_scale(gammas[k], loss_scaling)
    if not ok:
        for q in range(Q):
            if not ok_q[q]:
                return q
    return -1


@numba.njit(cache=True)
def lambda_step(
    W, state_t, state_tp1, gammas, cumulants, continuations, alpha, loss_scaling, ts, tiles, w_max, w_limit, scratch,
    lam, traces, groups, members, n_members, continuation_t, work,
):  # pragma: no cover - compiled  # fmt: skip
    """One TD(lambda) transition for every question on the traces' fixed Gamma ``gammas`` [K].

    ``groups[q]`` is question q's continuation group (its traces), ``members[g, :n_members[g]]`` the
    group's questions in order, ``continuation_t[g]`` the group's
    continuation of S_t (set to that of S_{t+1} on return). ``work`` is :func:`make_lambda_work`'s.
    Returns like :func:`constant_step`; a refused step leaves W, the traces and ``continuation_t`` as
    they were.
    """
    keys_t, keys_tp1, keys_ts, u, u_ts, idx_t, idx_tp1, f_t, f_tp1, deltas, steps, ok_q = scratch
    dw, mark, touched, n_touched, old_z, old_support, old_n, old_max = work
    K = gammas.shape[0]
    Q = W.shape[1]
    G = continuation_t.shape[0]
    bias_index = tiles[8]
    z, _, support, n_support, z_max = traces
    _state_keys(state_t, tiles, u, keys_t)
    _state_keys(state_tp1, tiles, u, keys_tp1)
    active_indices(keys_t, keys_tp1, gammas, ts, tiles, u_ts, keys_ts, idx_t[:K], idx_tp1[:K])
    td_errors(
        W, idx_t[:K], idx_tp1[:K], gammas, cumulants, continuations, loss_scaling, bias_index, f_t, f_tp1, deltas[:, :K]
    )
    for g in range(G):
        for k in range(K):
            save_support(traces, g, k, old_z[g], old_support[g])
            old_n[g, k] = n_support[g, k]
            old_max[g, k] = z_max[g, k]
            decay_and_add(traces, g, k, gammas[k] * lam * continuation_t[g], idx_t[k], bias_index)
    # dw[i, q] = sum_k delta[q, k] z_k[i] over the group's supports, k in order (as the single learner).
    for k in range(K):
        for g in range(G):
            n = n_touched[g]
            for j in range(n_support[g, k]):
                i = support[g, k, j]
                if not mark[g, i]:
                    mark[g, i] = True
                    touched[g, n] = i
                    n += 1
                zz = z[g, k, i]
                for m in range(n_members[g]):
                    q = members[g, m]
                    dw[i, q] += deltas[q, k] * zz
            n_touched[g] = n
    ok = True
    for q in range(Q):
        g = groups[q]
        reach = 0.0
        for j in range(n_touched[g]):
            reach = max(reach, abs(alpha * dw[touched[g, j], q]))
        ok_q[q] = np.isfinite(reach) and w_max[q] + reach <= w_limit
        if not ok_q[q] and np.isfinite(reach):
            m = 0.0
            for i in range(W.shape[0]):
                m = max(m, abs(W[i, q]))
            w_max[q] = m
            ok_q[q] = m + reach <= w_limit
        steps[q, 0] = reach
        ok &= ok_q[q]
    for q in range(Q):
        g = groups[q]
        if ok:
            w_max[q] += steps[q, 0]
        for j in range(n_touched[g]):
            i = touched[g, j]
            if ok:
                W[i, q] += alpha * dw[i, q]
            dw[i, q] = 0.0
    for g in range(G):
        for j in range(n_touched[g]):
            mark[g, touched[g, j]] = False
        n_touched[g] = 0
        for k in range(K):
            if not ok:
                restore_support(traces, g, k, old_z[g], old_support[g], old_n[g, k], old_max[g, k])
    for q in range(Q):
        for k in range(K):
            deltas[q, k] /= _output_scale(gammas[k], loss_scaling)
    if not ok:
        for q in range(Q):
            if not ok_q[q]:
                return q
    for q in range(Q):
        continuation_t[groups[q]] = continuations[q]
    return -1


def make_lambda_work(n_features: int, n_questions: int, n_groups: int, n_gammas: int) -> tuple:
    """Clean scratch of :func:`lambda_step`."""
    return (
        np.zeros((n_features, n_questions)),
        np.zeros((n_groups, n_features), dtype=np.bool_),
        np.zeros((n_groups, n_features), dtype=np.int64),
        np.zeros(n_groups, dtype=np.int64),
        np.zeros((n_groups, n_gammas, n_features)),
        np.zeros((n_groups, n_gammas, n_features), dtype=np.int64),
        np.zeros((n_groups, n_gammas), dtype=np.int64),
        np.zeros((n_groups, n_gammas)),
    )


@numba.njit(cache=True)
def predict(W, state, gammas, loss_scaling, ts, tiles, out):  # pragma: no cover - compiled
    """out[q, g] = V_q(state, gammas[g]) in each question's cumulant units."""
    n_tilings = tiles[5].shape[0]
    memory_size = tiles[7]
    bias_index = tiles[8]
    Q = W.shape[1]
    u = np.empty(state.shape[0])
    u_ts = np.empty(_n_timescale_dims(ts[0]))
    keys = np.empty(n_tilings, dtype=np.uint64)
    keys_ts = np.empty(n_tilings, dtype=np.uint64)
    _state_keys(state, tiles, u, keys)
    for k in range(gammas.shape[0]):
        _timescale_keys(gammas[k], ts, tiles, u_ts, keys_ts)
        for q in range(Q):
            out[q, k] = 0.0
        for t in range(n_tilings):
            i = finalize(keys[t] + keys_ts[t], memory_size)
            for q in range(Q):
                out[q, k] += W[i, q]
        s = _output_scale(gammas[k], loss_scaling)
        for q in range(Q):
            if bias_index >= 0:
                out[q, k] += W[bias_index, q]
            out[q, k] /= s


def make_scratch(n_state: int, n_ts_dims: int, n_tilings: int, k_max: int, n_questions: int) -> tuple:
    """Work arrays of :func:`constant_step` / :func:`autostep_step`, allocated once per learner."""
    return (
        np.empty(n_tilings, dtype=np.uint64),
        np.empty(n_tilings, dtype=np.uint64),
        np.empty(n_tilings, dtype=np.uint64),
        np.empty(n_state),
        np.empty(max(n_ts_dims, 1)),
        np.empty((k_max, n_tilings), dtype=np.int64),
        np.empty((k_max, n_tilings), dtype=np.int64),
        np.empty(n_questions),
        np.empty(n_questions),
        np.empty((n_questions, k_max)),
        np.empty((n_questions, k_max)),
        np.empty(n_questions, dtype=np.bool_),
    )


def make_dense(n_features: int, n_questions: int) -> tuple:
    """Zeroed scratch of :func:`autostep_step`."""
    return (
        np.zeros((n_features, n_questions)),
        np.zeros((n_features, n_questions)),
        np.zeros((n_features, n_questions)),
        np.zeros(n_features),
        np.zeros(n_features),
        np.zeros(n_features, dtype=np.int64),
    )
