"""numba kernel of an off-policy Horde: TDC (GTD(0)) for many questions at once, each with its own target policy.

Each question q has its cumulant C_q, continuation c_q of S_{t+1} (0 stops the return) and importance ratio
rho_q = pi_q(A_t | S_t) / b(A_t | S_t) (the behaviour is shared, the targets are not). The active tiles of
(S_t, gamma_k) and (S_{t+1}, gamma_k) are computed once per step and shared by every question
(:func:`gamma_net_core.horde.kernels.active_indices`); per question the update is the single learner's
(:mod:`gamma_net_core.linear.gradient_td_kernels` at lambda 0), primary weights ``W[feature, question]``,
secondary ``H[feature, question]``::

    delta[q, k] = s_k C_q + gamma_k c_q W_q . x'_k - W_q . x_k
    W_q += alpha rho_q sum_k (delta[q, k] x_k - gamma_k c_q (H_q . x_k) x'_k)
    H_q += beta sum_k (rho_q delta[q, k] - H_q . x_k) x_k

so N questions equal N single :class:`~gamma_net_core.linear.OffPolicyGammaNet` learners fed the same stream
(to float rounding: tests/test_gradient_td_horde.py). Its plain oracle is
:func:`gamma_net_core.reference.off_policy_step`, once per question.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from gamma_net_core.horde.kernels import _to_cumulant_units, _transition_errors
from gamma_net_core.linear.kernels import named_coding


class OffPolicyQuestions(NamedTuple):
    """A step's per-question inputs [Q]: ``cumulants`` C_q, ``continuations`` c_q in [0, 1], ``rhos`` (clipped)."""

    cumulants: np.ndarray
    continuations: np.ndarray
    rhos: np.ndarray


class HordeWeights(NamedTuple):
    """``W`` [n_features, Q] primary and ``H`` [n_features, Q] secondary weights, one column per question."""

    W: np.ndarray
    H: np.ndarray


@numba.njit(cache=True)
def tdc_step(weights, state_t, state_tp1, gammas, questions, alpha, beta, plain_coding, scratch):  # pragma: no cover
    """One transition for every question. Returns True, or False when a weight became non-finite or passed
    w_limit (the weights then hold the partial step: the caller restores). ``scratch.deltas`` [Q, K] holds the TD
    errors delta_V (cumulant units) on return; ``scratch.steps`` [Q, K] each H_q . x_k."""
    coding = named_coding(plain_coding)
    W, H = weights
    cumulants, continuations, rhos = questions
    K = gammas.shape[0]
    Q = W.shape[1]
    idx_t, idx_tp1, deltas, hx = scratch.idx_t, scratch.idx_tp1, scratch.deltas, scratch.steps
    n_tilings = idx_t.shape[1]
    bias_index = coding.tiles.bias_index
    _transition_errors(W, state_t, state_tp1, gammas, cumulants, continuations, coding, scratch)
    for k in range(K):
        for q in range(Q):
            hx[q, k] = 0.0
        for t in range(n_tilings):
            i = idx_t[k, t]
            for q in range(Q):
                hx[q, k] += H[i, q]
        if bias_index >= 0:
            for q in range(Q):
                hx[q, k] += H[bias_index, q]
    # Per (question, gamma) coefficients first, so that one pass over a step's rows writes W and H together.
    step_w, step_h, corr = scratch.f_t, scratch.f_tp1, np.empty(Q)
    w_limit = coding.w_limit
    ok = True
    for k in range(K):
        gamma = gammas[k]
        for q in range(Q):
            step_w[q] = alpha * rhos[q] * deltas[q, k]
            step_h[q] = beta * (rhos[q] * deltas[q, k] - hx[q, k])
            corr[q] = alpha * rhos[q] * gamma * continuations[q] * hx[q, k]
        for t in range(n_tilings):
            i = idx_t[k, t]
            j = idx_tp1[k, t]
            for q in range(Q):
                W[i, q] += step_w[q]
                H[i, q] += step_h[q]
                W[j, q] -= corr[q]
                ok &= abs(W[i, q]) <= w_limit and abs(H[i, q]) <= w_limit and abs(W[j, q]) <= w_limit
        if bias_index >= 0:
            for q in range(Q):
                W[bias_index, q] += step_w[q] - corr[q]
                H[bias_index, q] += step_h[q]
                ok &= abs(W[bias_index, q]) <= w_limit and abs(H[bias_index, q]) <= w_limit
    _to_cumulant_units(deltas, gammas, coding.loss_scaling)
    return ok
