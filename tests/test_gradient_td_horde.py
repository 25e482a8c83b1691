"""An off-policy Horde: N questions with N target policies, one TDC kernel, equal N single learners."""

from __future__ import annotations

import numpy as np

from gamma_net_core.horde.gradient_td_kernels import HordeWeights, OffPolicyQuestions, SecondarySteps, tdc_step
from gamma_net_core.horde.kernels import make_scratch
from gamma_net_core.linear import OffPolicyConfig, OffPolicyGammaNet, coding
from gamma_net_core.linear.settings import N_TIMESCALE_DIMS
from gamma_net_core.reference import ReferenceOffPolicyTD

CONFIG = OffPolicyConfig(
    state_low=(0.0, 0.0), state_high=(1.0, 1.0), tilings=(6,), tile_widths=(0.5,), memory_size=128, step_size=0.2,
    secondary_step_size=0.3, rho_max=5.0, timescale_input="both",
)  # fmt: skip


def test_a_horde_of_off_policy_questions_equals_single_learners():
    Q, K, steps = 5, 4, 80
    rng = np.random.default_rng(0)
    coder = coding.make_coder(CONFIG, CONFIG.timescale_input, rng=np.random.default_rng(7))
    plain = coding.make_coding(CONFIG, CONFIG.timescale_input, coder).plain()
    n = coder.n_features
    weights = HordeWeights(np.zeros((n, Q)), np.zeros((n, Q)), np.zeros((2, Q)))
    scratch = make_scratch(2, N_TIMESCALE_DIMS[CONFIG.timescale_input], sum(CONFIG.tilings), K, Q)
    singles = [OffPolicyGammaNet(CONFIG, rng=np.random.default_rng(7)) for _ in range(Q)]
    oracle = ReferenceOffPolicyTD(CONFIG, rng=np.random.default_rng(7))  # question 3's, in plain NumPy
    # Five target policies over two actions, one behaviour: rho differs by question, 0 where pi_q never acts so.
    pi = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5], [0.9, 0.1], [0.3, 0.7]])
    b = np.array([0.4, 0.6])
    alpha = coding.step_size(CONFIG, 0, coder.n_active)
    beta = np.full(Q, CONFIG.secondary_step_size / coder.n_active)
    # The default ridge of H (kappa 1), as a single learner's.
    beta = SecondarySteps(beta, beta * CONFIG.secondary_regularization * coder.n_active, np.zeros(n, np.uint8))
    assert CONFIG.secondary_regularization > 0
    for _ in range(steps):
        s_t, s_tp1 = rng.random(2), rng.random(2)
        action = int(rng.random() < b[1])
        rhos = np.minimum(pi[:, action] / b[action], CONFIG.rho_max)
        cumulants = rng.normal(size=Q)
        ends = rng.random(Q) < 0.1  # each question's own termination
        gammas = rng.random(K) * 0.95
        questions = OffPolicyQuestions(cumulants, np.where(ends, 0.0, 1.0), rhos)
        assert tdc_step(weights, s_t, s_tp1, gammas, questions, alpha, beta, plain, scratch) == -1
        for q, single in enumerate(singles):
            deltas = single.learn(s_t, cumulants[q], s_tp1, bool(ends[q]), gammas, rho=rhos[q])
            np.testing.assert_allclose(scratch.deltas[q, :K], deltas, rtol=1e-12, atol=1e-12)
        oracle.learn(s_t, cumulants[3], s_tp1, bool(ends[3]), gammas, rho=rhos[3])
    for q, single in enumerate(singles):
        np.testing.assert_allclose(weights.W[:, q], single.weights, rtol=0, atol=1e-12)
        np.testing.assert_allclose(weights.H[:, q], single.secondary_weights, rtol=0, atol=1e-12)
    np.testing.assert_allclose(weights.W[:, 3], oracle.w, rtol=0, atol=1e-12)
    np.testing.assert_allclose(weights.H[:, 3], oracle.h, rtol=0, atol=1e-12)
    # The questions learned different things: their policies differ.
    assert np.max(np.abs(weights.W[:, 0] - weights.W[:, 1])) > 1e-3
    # A step that could carry a weight past the limit is refused whole, naming its question.
    before = weights.W.copy(), weights.H.copy()
    huge = OffPolicyQuestions(np.array([0.0, 0.0, 1e308, 0.0, 0.0]), np.ones(Q), np.ones(Q))
    assert tdc_step(weights, s_t, s_tp1, gammas, huge, alpha, beta, plain, scratch) == 2
    np.testing.assert_array_equal(weights.W, before[0])
    np.testing.assert_array_equal(weights.H, before[1])
    assert not np.any(beta.marked)  # the ridge's record is clear between steps, a refused one too
