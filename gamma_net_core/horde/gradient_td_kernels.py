"""numba kernel of an off-policy Horde: TDC (GTD(0)) for many questions at once, each with its own target policy.

Each question q has its cumulant C_q, continuation c_q of S_{t+1} (0 stops the return) and importance ratio
rho_q = pi_q(A_t | S_t) / b(A_t | S_t) (the behaviour is shared, the targets are not). The active tiles of
(S_t, gamma_k) and (S_{t+1}, gamma_k) are computed once per step and shared by every question
(:func:`gamma_net_core.horde.kernels.active_indices`); per question the update is the single learner's
(:mod:`gamma_net_core.linear.gradient_td_kernels` at lambda 0), primary weights ``W[feature, question]``,
secondary ``H[feature, question]``::

    delta[q, k] = s_k C_q + gamma_k c_q W_q . x'_k - W_q . x_k
    W_q += alpha rho_q sum_k (delta[q, k] x_k - gamma_k c_q (H_q . x_k) x'_k)
    H_q += beta_q sum_k (rho_q delta[q, k] - H_q . x_k) x_k  -  beta_q kappa_q n [x touched] H_q

the last term the ridge of H_q on the features some x_k holds, each once (TDRC's; kappa_q the question's
``secondary_regularization``, n the active features; 0 is TDC), with H_q before the step, as every other term.

Each question has its own beta_q: a question with beta_q 0 keeps H_q at 0, and its update is then TD(0)'s
(rho_q 1: an on-policy question among off-policy ones learns as the Horde's TD(0) kernels teach it).

so N questions equal N single :class:`~gamma_net_core.linear.OffPolicyGammaNet` learners fed the same stream
(to float rounding: tests/test_gradient_td_horde.py). Its plain oracle is
:func:`gamma_net_core.reference.off_policy_step`, once per question.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from gamma_net_core.horde.kernels import bounded, first_refused, to_cumulant_units, transition_errors
from gamma_net_core.linear.kernels import named_coding


class OffPolicyQuestions(NamedTuple):
    """A step's per-question inputs [Q]: ``cumulants`` C_q, ``continuations`` c_q in [0, 1], ``rhos`` (clipped)."""

    cumulants: np.ndarray
    continuations: np.ndarray
    rhos: np.ndarray


class SecondarySteps(NamedTuple):
    """Per question [Q]: ``beta`` (beta_q per active feature) and ``shrink`` (beta_q kappa_q n: the ridge's factor
    on H before the step, once per feature the step touched); ``marked`` [n_features] uint8, all 0 between steps
    (the kernel's record of the features it touched)."""

    beta: np.ndarray
    shrink: np.ndarray
    marked: np.ndarray


class HordeWeights(NamedTuple):
    """``W`` [n_features, Q] primary and ``H`` [n_features, Q] secondary weights, one column per question;
    ``w_max`` [2, Q] bounds from above max |W[:, q]| and max |H[:, q]| (zeros for zero weights; kept by the kernel)."""

    W: np.ndarray
    H: np.ndarray
    w_max: np.ndarray


@numba.njit(cache=True)
def tdc_step(
    weights, state_t, state_tp1, gammas, questions, alpha, secondary, plain_coding, scratch
):  # pragma: no cover - compiled
    """One transition for every question (``secondary``: :class:`SecondarySteps`). Returns -1 when applied; else the
    first question whose update could move a weight beyond w_limit (or make it non-finite), with the weights
    unchanged. ``scratch.deltas`` [Q, K] holds the TD errors delta_V (cumulant units) on return; ``scratch.steps``
    [Q, K] each H_q . x_k."""
    coding = named_coding(plain_coding)
    W, H, w_max = weights
    cumulants, continuations, rhos = questions
    K = gammas.shape[0]
    Q = W.shape[1]
    idx_t, idx_tp1, deltas, hx = scratch.idx_t, scratch.idx_tp1, scratch.deltas, scratch.steps
    beta, shrink, marked = secondary
    n_tilings = idx_t.shape[1]
    bias_index = coding.tiles.bias_index
    transition_errors(W, state_t, state_tp1, gammas, cumulants, continuations, coding, scratch)
    ridge = np.any(shrink > 0.0)
    # The features the step touches, each once, with H there before the step: the ridge's.
    touched = np.empty(K * (n_tilings + 1) if ridge else 0, dtype=np.int64)
    touched_h = np.empty((touched.shape[0], Q))
    n_touched = _read_secondary(H, idx_t, K, bias_index, hx, ridge, marked, touched, touched_h)
    # Every coefficient first: the weight limit is checked on them (a bound on how far a weight can move, as the
    # Horde's TD(0) does), so the pass over a step's rows that writes W and H has no test in it.
    step_w = np.empty((K, Q))
    step_h = np.empty((K, Q))
    corr = np.empty((K, Q))
    reach_w = np.empty((Q, K))
    reach_h = np.empty((Q, K))
    for k in range(K):
        gamma = gammas[k]
        for q in range(Q):
            step_w[k, q] = alpha * rhos[q] * deltas[q, k]
            step_h[k, q] = beta[q] * (rhos[q] * deltas[q, k] - hx[q, k])
            corr[k, q] = alpha * rhos[q] * gamma * continuations[q] * hx[q, k]
            reach_w[q, k] = abs(step_w[k, q]) + abs(corr[k, q])
            # The ridge, once a step, pulls H towards 0 (its factor is below 1: policies.py)
            reach_h[q, k] = abs(step_h[k, q])
    n_active = n_tilings + (1 if bias_index >= 0 else 0)
    ok_q = scratch.ok
    ok = bounded(W, reach_w, n_active, w_max[0], coding.w_limit, ok_q)
    if ok:
        ok = bounded(H, reach_h, n_active, w_max[1], coding.w_limit, ok_q)
    to_cumulant_units(deltas, gammas, coding.loss_scaling)
    if not ok:
        _clear(marked, touched, n_touched)
        return first_refused(ok_q)
    for k in range(K):
        sw = step_w[k]
        sh = step_h[k]
        cr = corr[k]
        for t in range(n_tilings):
            i = idx_t[k, t]
            j = idx_tp1[k, t]
            for q in range(Q):
                W[i, q] += sw[q]
                H[i, q] += sh[q]
            for q in range(Q):
                W[j, q] -= cr[q]
        if bias_index >= 0:
            for q in range(Q):
                W[bias_index, q] += sw[q] - cr[q]
                H[bias_index, q] += sh[q]
    _ridge(H, shrink, marked, touched, touched_h, n_touched)
    return -1


@numba.njit(cache=True, inline="always")
def _read_secondary(H, idx_t, K, bias_index, hx, ridge, marked, touched, touched_h):  # pragma: no cover - compiled
    """hx[q, k] = H_q . x_k for the step's K gammas (``idx_t`` may have more rows); with ``ridge``, records each
    feature of the step once (``touched``, and H there in ``touched_h``) and marks it; returns how many."""
    n_tilings = idx_t.shape[1]
    Q = H.shape[1]
    n_touched = 0
    for k in range(K):
        for q in range(Q):
            hx[q, k] = 0.0
        for t in range(n_tilings + 1):
            i = idx_t[k, t] if t < n_tilings else bias_index
            if i < 0:
                continue
            for q in range(Q):
                hx[q, k] += H[i, q]
            if ridge and marked[i] == 0:
                marked[i] = 1
                touched[n_touched] = i
                for q in range(Q):
                    touched_h[n_touched, q] = H[i, q]
                n_touched += 1
    return n_touched


@numba.njit(cache=True, inline="always")
def _ridge(H, shrink, marked, touched, touched_h, n_touched):  # pragma: no cover - compiled
    """H_q -= shrink_q H_q (before the step) on each recorded feature, and clears the record."""
    for j in range(n_touched):
        i = touched[j]
        for q in range(H.shape[1]):
            H[i, q] -= shrink[q] * touched_h[j, q]
    _clear(marked, touched, n_touched)


@numba.njit(cache=True, inline="always")
def _clear(marked, touched, n_touched):  # pragma: no cover - compiled
    """Unmarks the recorded features: the record is all 0 between steps, a refused one too."""
    for j in range(n_touched):
        marked[touched[j]] = 0
