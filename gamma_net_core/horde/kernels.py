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
(:func:`autostep_step`; :mod:`gamma_net_core.horde.adaptive` is its plain reference).

TD(lambda) (:func:`lambda_step`; the trace form is :mod:`gamma_net_core.linear.traces`'s) keeps one
trace per fixed gamma_k and continuation group (questions whose continuations are always equal share
it), decayed by gamma_k lambda c_t, c_t the group's continuation of S_t; per question the update is
the single-question TD(lambda) kernel's, W[:, q] += alpha sum_k delta[q, k] z_k, summed in the same
order, so again N questions equal N single learners bit for bit.

The plain kernels above touch a row of ``W`` (Q weights) for every active (tiling, gamma_k) pair:
with |Gamma_t| = 32 and 100 tilings, 3,232 rows of S_t and as many of S_{t+1}, while the 32 gammas
and two nearby states share most tiles (about 273 distinct rows). The run kernels
(:func:`constant_step_runs`, :func:`predict_runs`) walk the gammas in ascending order, along which
each tiling's active tile stays the same over runs of gammas: the first gamma's output is summed
over its tiles, each next one's is the last one's plus the rows that came in minus those that went
out (:func:`changes`; S_{t+1}'s mostly from S_t's at the same gamma), and the update adds to each
run's row the sum of the run's steps (differences of running sums, :func:`runs`): each distinct row
is read once or twice per state, not once per gamma. Questions go in blocks of :data:`BLOCK`, so a
block's outputs and steps stay in the nearest caches. The arithmetic is regrouped, so they equal the
plain kernels (their oracle) to float rounding, not bit for bit: weights, TD errors and predictions
within 1e-12 of the largest of their kind (tests/test_horde_runs.py).
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from gamma_net_core.linear.kernels import n_timescale_dims, named_coding, output_scale, state_keys, timescale_keys
from gamma_net_core.linear.traces import decay_and_add, restore_support, save_support
from gamma_net_core.tilecoding import finalize

CONSTANT = 0
AUTOSTEP = 1
#: Where a run kernel's sum at a gamma starts (:func:`changes`): anew, from the last gamma's, from the other state's.
FRESH = 0
CHAIN = 1
BESIDE = 2
#: Questions a run kernel takes at once: a block's outputs at 32 gammas ([32, BLOCK] floats) stay in L1/L2.
BLOCK = 64


class Scratch(NamedTuple):
    """Work arrays of every step kernel (:func:`make_scratch`), allocated once per learner.

    ``keys_t``, ``keys_tp1``, ``keys_timescale`` [n_tilings] are tile keys of S_t, S_{t+1} and one
    gamma; ``u_state`` [n_state] and ``u_timescale`` normalize inputs; ``idx_t``, ``idx_tp1`` [K_max,
    n_tilings] are the active tiles of (S_t, gamma_k), (S_{t+1}, gamma_k); ``f_t``, ``f_tp1`` [Q] the
    outputs of one gamma; ``deltas`` [Q, K_max] the TD errors (delta_V on return); ``steps`` [Q,
    K_max] and ``ok`` [Q] each question's step and whether it may take it.
    """

    keys_t: np.ndarray
    keys_tp1: np.ndarray
    keys_timescale: np.ndarray
    u_state: np.ndarray
    u_timescale: np.ndarray
    idx_t: np.ndarray
    idx_tp1: np.ndarray
    f_t: np.ndarray
    f_tp1: np.ndarray
    deltas: np.ndarray
    steps: np.ndarray
    ok: np.ndarray


class Autostep(NamedTuple):
    """Autostep's state, [n_features, Q] each: step sizes ``alphas``, the traces ``h`` of recent weight
    changes, the gradient scale ``v``; with its meta step size mu and 1 / tau."""

    alphas: np.ndarray
    h: np.ndarray
    v: np.ndarray
    meta_step_size: float
    inv_trace_tau: float


class AutostepWork(NamedTuple):
    """Zeroed scratch of :func:`autostep_step` (:func:`make_autostep_work`), left zeroed.

    ``gradient``, ``new_alpha``, ``new_v`` [n_features, Q]; ``z`` (sum_k x_k,i^2), ``count``
    [n_features]; ``order`` [n_features] lists the features active this step.
    """

    gradient: np.ndarray
    new_alpha: np.ndarray
    new_v: np.ndarray
    z: np.ndarray
    count: np.ndarray
    order: np.ndarray


class TraceGroups(NamedTuple):
    """Questions sharing TD(lambda) traces: ``of_question[q]`` is question q's group,
    ``members[g, :n_members[g]]`` the group's questions in order, ``continuation_t[g]`` the group's
    continuation of S_t (:func:`lambda_step` sets it to that of S_{t+1})."""

    of_question: np.ndarray
    members: np.ndarray
    n_members: np.ndarray
    continuation_t: np.ndarray


class LambdaWork(NamedTuple):
    """Clean scratch of :func:`lambda_step` (:func:`make_lambda_work`), left clean.

    ``dw`` [n_features, Q] sums each question's update; per group, ``mark``, ``touched`` [G,
    n_features] and ``n_touched`` [G] the features it touches; ``old_z``, ``old_support`` [G, K,
    n_features], ``old_n``, ``old_max`` [G, K] keep the traces a refused step restores.
    """

    dw: np.ndarray
    mark: np.ndarray
    touched: np.ndarray
    n_touched: np.ndarray
    old_z: np.ndarray
    old_support: np.ndarray
    old_n: np.ndarray
    old_max: np.ndarray


class RunWork(NamedTuple):
    """Scratch of the run kernels (:func:`make_run_work`) for up to K_max gammas and n tilings.

    ``order`` [K_max] lists the gammas in ascending order. The changes of S_t and of S_{t+1}
    (:func:`changes`): ``added_*``, ``removed_*`` [(K_max + 1) (n + 1)] the rows that come in and
    go out (-1: none) from one gamma of ``order`` to the next, ``at_*`` [K_max + 1] where each
    gamma's start, ``source_*`` [K_max] where each sum starts from. The runs of S_t (:func:`runs`):
    ``run_row``, ``run_start``, ``run_end`` [K_max (n + 1)]. One block's outputs ``values_t``,
    ``values_tp1`` [K_max, BLOCK], running sums of its steps ``sums`` [K_max + 1, BLOCK] and ``acc`` [BLOCK].
    """

    order: np.ndarray
    added_t: np.ndarray
    removed_t: np.ndarray
    at_t: np.ndarray
    source_t: np.ndarray
    added_tp1: np.ndarray
    removed_tp1: np.ndarray
    at_tp1: np.ndarray
    source_tp1: np.ndarray
    run_row: np.ndarray
    run_start: np.ndarray
    run_end: np.ndarray
    values_t: np.ndarray
    values_tp1: np.ndarray
    sums: np.ndarray
    acc: np.ndarray


@numba.njit(cache=True, inline="always")
def active_indices(keys_t, keys_tp1, gammas, coding, u_ts, keys_ts, idx_t, idx_tp1):  # pragma: no cover
    """idx_t[k, t], idx_tp1[k, t]: the active tile of tiling t for (S_t, gamma_k) and (S_{t+1}, gamma_k)."""
    memory_size = coding.tiles.memory_size
    for k in range(gammas.shape[0]):
        timescale_keys(gammas[k], coding, u_ts, keys_ts)
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
        s = output_scale(gamma, loss_scaling)
        for q in range(Q):
            c = continuations[q]
            if c == 0.0:
                deltas[q, k] = s * cumulants[q] - f_t[q]
            else:
                deltas[q, k] = s * cumulants[q] + gamma * c * f_tp1[q] - f_t[q]


@numba.njit(cache=True, inline="always")
def transition_errors(W, state_t, state_tp1, gammas, cumulants, continuations, coding, scratch):  # pragma: no cover
    """The step's shared part: active tiles of (S_t, gamma_k) and (S_{t+1}, gamma_k) into
    ``scratch.idx_t``, ``idx_tp1`` and the TD errors delta_f into ``scratch.deltas``."""
    K = gammas.shape[0]
    tiles = coding.tiles
    u_state = scratch.u_state
    keys_t = scratch.keys_t
    keys_tp1 = scratch.keys_tp1
    idx_t = scratch.idx_t[:K]
    idx_tp1 = scratch.idx_tp1[:K]
    state_keys(state_t, tiles, u_state, keys_t)
    state_keys(state_tp1, tiles, u_state, keys_tp1)
    active_indices(keys_t, keys_tp1, gammas, coding, scratch.u_timescale, scratch.keys_timescale, idx_t, idx_tp1)
    td_errors(
        W, idx_t, idx_tp1, gammas, cumulants, continuations, coding.loss_scaling, tiles.bias_index, scratch.f_t,
        scratch.f_tp1, scratch.deltas[:, :K],
    )  # fmt: skip


@numba.njit(cache=True, inline="always")
def to_cumulant_units(deltas, gammas, loss_scaling):  # pragma: no cover - compiled
    """deltas[q, k] /= s(gamma_k): delta_f to delta_V, in each cumulant's units."""
    for q in range(deltas.shape[0]):
        for k in range(gammas.shape[0]):
            deltas[q, k] /= output_scale(gammas[k], loss_scaling)


@numba.njit(cache=True, inline="always")
def first_refused(ok):  # pragma: no cover - compiled
    """The first question whose step was refused."""
    for q in range(ok.shape[0]):
        if not ok[q]:
            return q
    return -1


@numba.njit(cache=True, inline="always")
def _within_limit(W, q, reach, w_max, w_limit):  # pragma: no cover - compiled
    """Whether question q's weights stay within w_limit after moving at most ``reach`` each.

    ``w_max[q]`` bounds max |W[:, q]| from above; when it is too loose it is recomputed exactly.
    """
    if not np.isfinite(reach):
        return False
    if w_max[q] + reach <= w_limit:
        return True
    m = 0.0
    for i in range(W.shape[0]):
        m = max(m, abs(W[i, q]))
    w_max[q] = m
    return m + reach <= w_limit


@numba.njit(cache=True, inline="always")
def bounded(W, steps, n_active, w_max, w_limit, ok_q):  # pragma: no cover - compiled
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
    W, state_t, state_tp1, gammas, cumulants, continuations, alpha, plain_coding, w_max, scratch
):  # pragma: no cover - compiled
    """One transition for every question at step size ``alpha`` (per active feature).

    Returns:
      -1 when applied; else the first question whose update would make a weight non-finite or
      too large, with W unchanged. ``scratch`` (:class:`Scratch`) holds the TD errors delta_V [Q, K]
      (cumulant units) on return.
    """
    coding = named_coding(plain_coding)
    K = gammas.shape[0]
    Q = W.shape[1]
    idx_t = scratch.idx_t
    deltas = scratch.deltas
    steps = scratch.steps
    ok_q = scratch.ok
    n_tilings = idx_t.shape[1]
    bias_index = coding.tiles.bias_index
    transition_errors(W, state_t, state_tp1, gammas, cumulants, continuations, coding, scratch)
    for q in range(Q):
        for k in range(K):
            steps[q, k] = alpha * deltas[q, k]
    n_active = n_tilings + (1 if bias_index >= 0 else 0)
    ok = bounded(W, steps[:, :K], n_active, w_max, coding.w_limit, ok_q)
    to_cumulant_units(deltas, gammas, coding.loss_scaling)
    if not ok:
        return first_refused(ok_q)
    for k in range(K):
        for t in range(n_tilings):
            i = idx_t[k, t]
            for q in range(Q):
                W[i, q] += steps[q, k]
        if bias_index >= 0:
            for q in range(Q):
                W[bias_index, q] += steps[q, k]
    return -1


@numba.njit(cache=True, inline="always")
def ascending(gammas, order):  # pragma: no cover - compiled
    """order[:K] = the gammas' indices in ascending order of gamma (equal ones in their order; K is small)."""
    K = gammas.shape[0]
    for j in range(K):
        order[j] = j
    for j in range(1, K):
        o = order[j]
        g = gammas[o]
        i = j - 1
        while i >= 0 and gammas[order[i]] > g:
            order[i + 1] = order[i]
            i -= 1
        order[i + 1] = o


@numba.njit(cache=True, inline="always")
def changes(idx, order, K, bias_index, beside, use_beside, added, removed, at, source):  # pragma: no cover - compiled
    """The rows whose sum is f(S, gamma_{order[j]}), as changes from a sum already made, the cheapest of three.

    ``source[j]``: :data:`CHAIN`, from gamma_{order[j-1]}'s sum, the rows that came in (``added``)
    and went out (``removed``) tiling by tiling; with ``use_beside``, :data:`BESIDE`, from the
    other state's sum at the same gamma (its tiles ``beside`` [K, n]: S_t's for S_{t+1}, which
    share most); or :data:`FRESH`, the gamma's rows (tilings in order, then the bias) with nothing
    removed, at j = 0 and wherever more than half the tiles change (a change costs two rows, a
    fresh sum one per tiling). Gamma j's entries are ``at[j]:at[j + 1]``.
    """
    n_tilings = idx.shape[1]
    n_active = n_tilings + (1 if bias_index >= 0 else 0)
    n = 0
    for j in range(K):
        at[j] = n
        k = order[j]
        p = order[j - 1] if j > 0 else k
        cost_chain = n_active + 1
        if j > 0:
            moved = 0
            for t in range(n_tilings):
                moved += idx[k, t] != idx[p, t]
            cost_chain = 2 * moved
        cost_beside = n_active + 1
        if use_beside:
            moved = 0
            for t in range(n_tilings):
                moved += idx[k, t] != beside[k, t]
            cost_beside = 2 * moved
        if cost_beside <= min(cost_chain, n_active):
            source[j] = BESIDE
            for t in range(n_tilings):
                if idx[k, t] != beside[k, t]:
                    added[n] = idx[k, t]
                    removed[n] = beside[k, t]
                    n += 1
        elif cost_chain <= n_active:
            source[j] = CHAIN
            for t in range(n_tilings):
                if idx[k, t] != idx[p, t]:
                    added[n] = idx[k, t]
                    removed[n] = idx[p, t]
                    n += 1
        else:
            source[j] = FRESH
            for t in range(n_tilings):
                added[n] = idx[k, t]
                removed[n] = -1
                n += 1
            if bias_index >= 0:
                added[n] = bias_index
                removed[n] = -1
                n += 1
    at[K] = n


@numba.njit(cache=True, inline="always")
def runs(idx, order, K, bias_index, row, start, end):  # pragma: no cover - compiled
    """The runs of S_t: for each tiling, the spans [start, end) of gammas in ``order`` over which its
    active row stays ``row``; the bias one run over all. Returns how many."""
    n_tilings = idx.shape[1]
    n = 0
    for t in range(n_tilings):
        a = 0
        i = idx[order[0], t]
        for j in range(1, K + 1):
            nxt = idx[order[j], t] if j < K else -1
            if nxt != i:
                row[n] = i
                start[n] = a
                end[n] = j
                n += 1
                a = j
                i = nxt
    if bias_index >= 0:
        row[n] = bias_index
        start[n] = 0
        end[n] = K
        n += 1
    return n


@numba.njit(cache=True, inline="always")
def values_by_changes(W, K, added, removed, at, source, beside, q0, q1, values, acc):  # pragma: no cover - compiled
    """values[j, :q1 - q0] = the weights' output f(S, gamma_{order[j]}) of questions q0..q1-1 (:func:`changes`);
    ``beside`` [K, block] holds the other state's (read where ``source`` says :data:`BESIDE`)."""
    B = q1 - q0
    for j in range(K):
        if source[j] == FRESH:
            for b in range(B):
                acc[b] = 0.0
        elif source[j] == BESIDE:
            other = beside[j]
            for b in range(B):
                acc[b] = other[b]
        for c in range(at[j], at[j + 1]):
            w_in = W[added[c], q0:q1]
            h = removed[c]
            if h < 0:
                for b in range(B):
                    acc[b] += w_in[b]
            else:
                w_out = W[h, q0:q1]
                for b in range(B):
                    acc[b] += w_in[b] - w_out[b]
        out = values[j]
        for b in range(B):
            out[b] = acc[b]


@numba.njit(cache=True)
def constant_step_runs(
    W, state_t, state_tp1, gammas, cumulants, continuations, alpha, plain_coding, w_max, scratch, work
):  # pragma: no cover - compiled
    """:func:`constant_step` by runs of gammas (the module docstring): each distinct active row touched
    about once per state, the same TD errors and update to float rounding. ``work`` is a
    :class:`RunWork`. Returns like :func:`constant_step`."""
    coding = named_coding(plain_coding)
    K = gammas.shape[0]
    Q = W.shape[1]
    tiles = coding.tiles
    loss_scaling = coding.loss_scaling
    bias_index = tiles.bias_index
    n_tilings = tiles.base.shape[0]
    idx_t = scratch.idx_t[:K]
    idx_tp1 = scratch.idx_tp1[:K]
    deltas = scratch.deltas
    steps = scratch.steps
    order = work.order
    added_t = work.added_t
    removed_t = work.removed_t
    at_t = work.at_t
    source_t = work.source_t
    added_tp1 = work.added_tp1
    removed_tp1 = work.removed_tp1
    at_tp1 = work.at_tp1
    source_tp1 = work.source_tp1
    run_row = work.run_row
    run_start = work.run_start
    run_end = work.run_end
    values_t = work.values_t
    values_tp1 = work.values_tp1
    sums = work.sums
    acc = work.acc
    state_keys(state_t, tiles, scratch.u_state, scratch.keys_t)
    state_keys(state_tp1, tiles, scratch.u_state, scratch.keys_tp1)
    active_indices(
        scratch.keys_t, scratch.keys_tp1, gammas, coding, scratch.u_timescale, scratch.keys_timescale, idx_t, idx_tp1
    )
    ascending(gammas, order)
    changes(idx_t, order, K, bias_index, idx_t, False, added_t, removed_t, at_t, source_t)
    # S_{t+1} is near S_t: most of its sums are S_t's at the same gamma with a few tiles changed
    changes(idx_tp1, order, K, bias_index, idx_t, True, added_tp1, removed_tp1, at_tp1, source_tp1)
    for q0 in range(0, Q, BLOCK):
        q1 = min(q0 + BLOCK, Q)
        values_by_changes(W, K, added_t, removed_t, at_t, source_t, values_t, q0, q1, values_t, acc)
        values_by_changes(W, K, added_tp1, removed_tp1, at_tp1, source_tp1, values_t, q0, q1, values_tp1, acc)
        _block_td_errors(
            values_t, values_tp1, gammas, order, K, cumulants, continuations, alpha, loss_scaling, q0, q1, steps, deltas
        )
    n_active = n_tilings + (1 if bias_index >= 0 else 0)
    ok = bounded(W, steps[:, :K], n_active, w_max, coding.w_limit, scratch.ok)
    if not ok:
        return first_refused(scratch.ok)
    n_runs = runs(idx_t, order, K, bias_index, run_row, run_start, run_end)
    for q0 in range(0, Q, BLOCK):
        _block_update_by_runs(W, steps, order, K, run_row, run_start, run_end, n_runs, sums, q0, min(q0 + BLOCK, Q))
    return -1


@numba.njit(cache=True, inline="always")
def _block_td_errors(
    values_t, values_tp1, gammas, order, K, cumulants, continuations, alpha, loss_scaling, q0, q1, steps, deltas
):  # pragma: no cover - compiled
    """Questions q0..q1's TD errors at each of the K gammas (``values_t`` becomes delta_f), their steps and deltas."""
    for j in range(K):
        gamma = gammas[order[j]]
        s = output_scale(gamma, loss_scaling)
        f_t = values_t[j]
        f_tp1 = values_tp1[j]
        for q in range(q0, q1):
            c = continuations[q]
            if c == 0.0:
                f_t[q - q0] = s * cumulants[q] - f_t[q - q0]
            else:
                f_t[q - q0] = s * cumulants[q] + gamma * c * f_tp1[q - q0] - f_t[q - q0]
    # each question's K TD errors written together (a few cache lines), in cumulant units as the plain kernel's
    for q in range(q0, q1):
        for j in range(K):
            k = order[j]
            d = values_t[j, q - q0]
            steps[q, k] = alpha * d
            deltas[q, k] = d / output_scale(gammas[k], loss_scaling)


@numba.njit(cache=True, inline="always")
def _block_update_by_runs(W, steps, order, K, run_row, run_start, run_end, n_runs, sums, q0, q1):  # pragma: no cover
    """Add questions q0..q1's steps to each run's row once: a run's step is a difference of prefix sums over gammas."""
    B = q1 - q0
    for b in range(B):
        sums[0, b] = 0.0
    for b in range(B):
        for j in range(K):
            sums[j + 1, b] = sums[j, b] + steps[q0 + b, order[j]]
    for r in range(n_runs):
        w = W[run_row[r], q0:q1]
        upper = sums[run_end[r]]
        lower = sums[run_start[r]]
        for b in range(B):
            w[b] += upper[b] - lower[b]


@numba.njit(cache=True, inline="always")
def _autostep_gradient(idx_t, deltas, K, bias_index, work):  # pragma: no cover - compiled
    """g_i = sum_k delta_k x_{k,i} and z_i = sum_k x_{k,i}^2 of the features active at S_t, listed in
    ``work.order`` in first-touch order; returns how many."""
    n_tilings = idx_t.shape[1]
    g = work.gradient
    z = work.z
    count = work.count
    order = work.order
    Q = g.shape[1]
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
    return n


@numba.njit(cache=True, inline="always")
def _autostep_step_sizes(q, n, autostep, work):  # pragma: no cover - compiled
    """Question q's new step sizes and v on the n active features, normalized; returns the largest
    weight change they make."""
    alphas = autostep.alphas
    h = autostep.h
    v = autostep.v
    mu = autostep.meta_step_size
    inv_tau = autostep.inv_trace_tau
    g = work.gradient
    z = work.z
    order = work.order
    new_alpha = work.new_alpha
    new_v = work.new_v
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
    return reach


@numba.njit(cache=True, inline="always")
def _autostep_apply(W, q, n, autostep, work):  # pragma: no cover - compiled
    """w_i += alpha_i g_i and h_i = h_i (1 - alpha_i z_i) + alpha_i g_i; the new alpha and v kept."""
    alphas = autostep.alphas
    h = autostep.h
    v = autostep.v
    g = work.gradient
    z = work.z
    order = work.order
    new_alpha = work.new_alpha
    new_v = work.new_v
    for j in range(n):
        i = order[j]
        al = new_alpha[i, q]
        step = al * g[i, q]
        W[i, q] += step
        h[i, q] = h[i, q] * (1.0 - al * z[i]) + step
        alphas[i, q] = al
        v[i, q] = new_v[i, q]


@numba.njit(cache=True)
def autostep_step(
    W, state_t, state_tp1, gammas, cumulants, continuations, plain_coding, w_max, autostep, scratch, work
):  # pragma: no cover - compiled
    """One transition for every question with Autostep's step size per question and feature.

    Autostep (Mahmood et al. 2012) on the step's gradient g_i = sum_k delta_k x_{k,i} (TD errors of
    f) with z_i = sum_k x_{k,i}^2 standing for x_i^2, for the features active at S_t::

        v_i  = max(|g_i h_i|, v_i + alpha_i z_i (|g_i h_i| - v_i) / tau)
        alpha_i *= exp(mu g_i h_i / v_i)            (where v_i > 0)
        alpha_i /= max(sum_i alpha_i z_i, 1)        (over the active features)
        w_i  += alpha_i g_i;   h_i = h_i (1 - alpha_i z_i) + alpha_i g_i

    ``autostep`` (:class:`Autostep`) is its state; ``work`` (:class:`AutostepWork`) zeroed scratch,
    left zeroed. Returns like :func:`constant_step`; nothing changes when the step is refused.
    """
    coding = named_coding(plain_coding)
    Q = W.shape[1]
    steps = scratch.steps
    ok_q = scratch.ok
    w_limit = coding.w_limit
    order = work.order
    z = work.z
    g = work.gradient
    transition_errors(W, state_t, state_tp1, gammas, cumulants, continuations, coding, scratch)
    n = _autostep_gradient(scratch.idx_t, scratch.deltas, gammas.shape[0], coding.tiles.bias_index, work)
    ok = True
    for q in range(Q):
        reach = _autostep_step_sizes(q, n, autostep, work)
        ok_q[q] = _within_limit(W, q, reach, w_max, w_limit)
        steps[q, 0] = reach
        ok &= ok_q[q]
    if ok:
        for q in range(Q):
            w_max[q] += steps[q, 0]
            _autostep_apply(W, q, n, autostep, work)
    for j in range(n):
        i = order[j]
        z[i] = 0.0
        for q in range(Q):
            g[i, q] = 0.0
    to_cumulant_units(scratch.deltas, gammas, coding.loss_scaling)
    if not ok:
        return first_refused(ok_q)
    return -1


@numba.njit(cache=True, inline="always")
def _decay_traces(gammas, lam, idx_t, bias_index, traces, groups, work):  # pragma: no cover - compiled
    """Every group's trace of every gamma_k decayed by gamma_k lambda c_t and x(S_t, gamma_k) added,
    after keeping what a refused step restores."""
    _, _, _, n_support, z_max = traces
    continuation_t = groups.continuation_t
    old_z = work.old_z
    old_support = work.old_support
    old_n = work.old_n
    old_max = work.old_max
    for g in range(continuation_t.shape[0]):
        for k in range(gammas.shape[0]):
            save_support(traces, g, k, old_z[g], old_support[g])
            old_n[g, k] = n_support[g, k]
            old_max[g, k] = z_max[g, k]
            decay_and_add(traces, g, k, gammas[k] * lam * continuation_t[g], idx_t[k], bias_index, 1.0)


@numba.njit(cache=True, inline="always")
def _sum_traced(deltas, K, traces, groups, work):  # pragma: no cover - compiled
    """dw[i, q] = sum_k delta[q, k] z_k[i] over the group's supports, k in order (as the single learner)."""
    z, _, support, n_support, _ = traces
    members = groups.members
    n_members = groups.n_members
    dw = work.dw
    mark = work.mark
    touched = work.touched
    n_touched = work.n_touched
    for k in range(K):
        for g in range(n_touched.shape[0]):
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


@numba.njit(cache=True)
def lambda_step(
    W,
    state_t,
    state_tp1,
    gammas,
    cumulants,
    continuations,
    alpha,
    plain_coding,
    w_max,
    scratch,
    lam,
    traces,
    groups,
    work,
):  # pragma: no cover - compiled
    """One TD(lambda) transition for every question on the traces' fixed Gamma ``gammas`` [K].

    ``traces`` is :attr:`gamma_net_core.linear.traces.Traces.kernel_args` (one trace per group and
    gamma), ``groups`` the :class:`TraceGroups`, ``work`` a :class:`LambdaWork`. Returns like
    :func:`constant_step`; a refused step leaves W, the traces and ``groups.continuation_t`` as
    they were.
    """
    coding = named_coding(plain_coding)
    K = gammas.shape[0]
    Q = W.shape[1]
    of_question = groups.of_question
    continuation_t = groups.continuation_t
    G = continuation_t.shape[0]
    deltas = scratch.deltas
    steps = scratch.steps
    ok_q = scratch.ok
    dw = work.dw
    mark = work.mark
    touched = work.touched
    n_touched = work.n_touched
    old_z = work.old_z
    old_support = work.old_support
    old_n = work.old_n
    old_max = work.old_max
    w_limit = coding.w_limit
    transition_errors(W, state_t, state_tp1, gammas, cumulants, continuations, coding, scratch)
    _decay_traces(gammas, lam, scratch.idx_t, coding.tiles.bias_index, traces, groups, work)
    _sum_traced(deltas, K, traces, groups, work)
    ok = True
    for q in range(Q):
        g = of_question[q]
        reach = 0.0
        for j in range(n_touched[g]):
            reach = max(reach, abs(alpha * dw[touched[g, j], q]))
        ok_q[q] = _within_limit(W, q, reach, w_max, w_limit)
        steps[q, 0] = reach
        ok &= ok_q[q]
    for q in range(Q):
        g = of_question[q]
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
    to_cumulant_units(deltas, gammas, coding.loss_scaling)
    if not ok:
        return first_refused(ok_q)
    for q in range(Q):
        continuation_t[of_question[q]] = continuations[q]
    return -1


def make_lambda_work(n_features: int, n_questions: int, n_groups: int, n_gammas: int) -> LambdaWork:
    """Clean scratch of :func:`lambda_step`."""
    return LambdaWork(
        dw=np.zeros((n_features, n_questions)),
        mark=np.zeros((n_groups, n_features), dtype=np.bool_),
        touched=np.zeros((n_groups, n_features), dtype=np.int64),
        n_touched=np.zeros(n_groups, dtype=np.int64),
        old_z=np.zeros((n_groups, n_gammas, n_features)),
        old_support=np.zeros((n_groups, n_gammas, n_features), dtype=np.int64),
        old_n=np.zeros((n_groups, n_gammas), dtype=np.int64),
        old_max=np.zeros((n_groups, n_gammas)),
    )


@numba.njit(cache=True)
def predict(W, state, gammas, plain_coding, out):  # pragma: no cover - compiled
    """out[q, g] = V_q(state, gammas[g]) in each question's cumulant units."""
    coding = named_coding(plain_coding)
    tiles = coding.tiles
    n_tilings = tiles.base.shape[0]
    memory_size = tiles.memory_size
    bias_index = tiles.bias_index
    loss_scaling = coding.loss_scaling
    Q = W.shape[1]
    u = np.empty(state.shape[0])
    u_ts = np.empty(n_timescale_dims(coding.timescale_input))
    keys = np.empty(n_tilings, dtype=np.uint64)
    keys_ts = np.empty(n_tilings, dtype=np.uint64)
    state_keys(state, tiles, u, keys)
    for k in range(gammas.shape[0]):
        timescale_keys(gammas[k], coding, u_ts, keys_ts)
        for q in range(Q):
            out[q, k] = 0.0
        for t in range(n_tilings):
            i = finalize(keys[t] + keys_ts[t], memory_size)
            for q in range(Q):
                out[q, k] += W[i, q]
        s = output_scale(gammas[k], loss_scaling)
        for q in range(Q):
            if bias_index >= 0:
                out[q, k] += W[bias_index, q]
            out[q, k] /= s


@numba.njit(cache=True)
def predict_runs(W, state, gammas, plain_coding, out):  # pragma: no cover - compiled
    """:func:`predict` by runs of gammas (the module docstring): out[q, g] = V_q(state, gammas[g]) to float rounding."""
    coding = named_coding(plain_coding)
    tiles = coding.tiles
    n_tilings = tiles.base.shape[0]
    memory_size = tiles.memory_size
    bias_index = tiles.bias_index
    loss_scaling = coding.loss_scaling
    Q = W.shape[1]
    G = gammas.shape[0]
    u = np.empty(state.shape[0])
    u_ts = np.empty(max(n_timescale_dims(coding.timescale_input), 1))
    keys = np.empty(n_tilings, dtype=np.uint64)
    keys_ts = np.empty(n_tilings, dtype=np.uint64)
    idx = np.empty((G, n_tilings), dtype=np.int64)
    order = np.empty(G, dtype=np.int64)
    size = (G + 1) * (n_tilings + 1)
    added = np.empty(size, dtype=np.int64)
    removed = np.empty(size, dtype=np.int64)
    at = np.empty(G + 1, dtype=np.int64)
    source = np.empty(G, dtype=np.int64)
    values = np.empty((G, min(BLOCK, Q)))
    acc = np.empty(min(BLOCK, Q))
    state_keys(state, tiles, u, keys)
    for k in range(G):
        timescale_keys(gammas[k], coding, u_ts, keys_ts)
        for t in range(n_tilings):
            idx[k, t] = finalize(keys[t] + keys_ts[t], memory_size)
    ascending(gammas, order)
    changes(idx, order, G, bias_index, idx, False, added, removed, at, source)
    for q0 in range(0, Q, BLOCK):
        q1 = min(q0 + BLOCK, Q)
        values_by_changes(W, G, added, removed, at, source, values, q0, q1, values, acc)
        for j in range(G):
            k = order[j]
            s = output_scale(gammas[k], loss_scaling)
            f = values[j]
            for q in range(q0, q1):
                out[q, k] = f[q - q0] / s


def make_scratch(n_state: int, n_ts_dims: int, n_tilings: int, k_max: int, n_questions: int) -> Scratch:
    """Work arrays of the step kernels for up to ``k_max`` gammas a step, allocated once per learner."""
    return Scratch(
        keys_t=np.empty(n_tilings, dtype=np.uint64),
        keys_tp1=np.empty(n_tilings, dtype=np.uint64),
        keys_timescale=np.empty(n_tilings, dtype=np.uint64),
        u_state=np.empty(n_state),
        u_timescale=np.empty(max(n_ts_dims, 1)),
        idx_t=np.empty((k_max, n_tilings), dtype=np.int64),
        idx_tp1=np.empty((k_max, n_tilings), dtype=np.int64),
        f_t=np.empty(n_questions),
        f_tp1=np.empty(n_questions),
        deltas=np.empty((n_questions, k_max)),
        steps=np.empty((n_questions, k_max)),
        ok=np.empty(n_questions, dtype=np.bool_),
    )


def make_autostep_work(n_features: int, n_questions: int) -> AutostepWork:
    """Zeroed scratch of :func:`autostep_step`."""
    return AutostepWork(
        gradient=np.zeros((n_features, n_questions)),
        new_alpha=np.zeros((n_features, n_questions)),
        new_v=np.zeros((n_features, n_questions)),
        z=np.zeros(n_features),
        count=np.zeros(n_features),
        order=np.zeros(n_features, dtype=np.int64),
    )


def make_run_work(n_tilings: int, k_max: int, n_questions: int) -> RunWork:
    """Scratch of :func:`constant_step_runs` for up to ``k_max`` gammas a step."""
    size = (k_max + 1) * (n_tilings + 1)
    n_runs = k_max * (n_tilings + 1)
    block = min(BLOCK, n_questions)

    def rows(n: int) -> np.ndarray:
        return np.empty(n, dtype=np.int64)

    return RunWork(
        order=rows(k_max),
        added_t=rows(size),
        removed_t=rows(size),
        at_t=rows(k_max + 1),
        source_t=rows(k_max),
        added_tp1=rows(size),
        removed_tp1=rows(size),
        at_tp1=rows(k_max + 1),
        source_tp1=rows(k_max),
        run_row=rows(n_runs),
        run_start=rows(n_runs),
        run_end=rows(n_runs),
        values_t=np.empty((k_max, block)),
        values_tp1=np.empty((k_max, block)),
        sums=np.empty((k_max + 1, block)),
        acc=np.empty(block),
    )
