"""Autostep (Mahmood, Sutton, Degris and Pilarski 2012) for the Γ-net's TD(0): the plain reference.

A step size per feature, adapted online by a meta-gradient normalized so it needs no tuning of
its own: the step sizes grow while successive updates of a weight agree in sign (h, a trace of
the weight's recent changes, correlates with the current gradient) and shrink when they
disagree; ``v`` tracks the gradient's magnitude so the meta step is scale-free, and the
normalization by ``max(sum_i alpha_i x_i^2, 1)`` keeps one update from overshooting its target.

Algorithm 1 sums, at each step, the TD errors of every gamma in Gamma_t, each on its own
feature vector x_k = x(S_t, gamma_k); Autostep here treats that sum as one gradient
g_i = sum_k delta_k x_{k,i} with z_i = sum_k x_{k,i}^2 in place of x_i^2 (for one gamma this is
Autostep exactly)::

    v_i  = max(|g_i h_i|, v_i + alpha_i z_i (|g_i h_i| - v_i) / tau)
    alpha_i *= exp(mu g_i h_i / v_i)            (where v_i > 0)
    alpha_i /= max(sum_i alpha_i z_i, 1)        (over the active features, z_i > 0)
    w_i  += alpha_i g_i;   h_i = h_i (1 - alpha_i z_i) + alpha_i g_i

delta_k is the TD error of the weights' output f = (1 - gamma) V (loss scaling), as in
:class:`gamma_net_core.reference.ReferenceLinearTD`, whose tile coding and features this reuses.
Step sizes start at ``step_size / n_active``, the constant method's alpha. This is the oracle
of :func:`gamma_net_core.horde.kernels.autostep_step`.
"""

from __future__ import annotations

import numpy as np

from gamma_net_core.horde.questions import AdaptationConfig
from gamma_net_core.linear import GammaNetConfig
from gamma_net_core.reference import ReferenceLinearTD


class ReferenceAutostepTD(ReferenceLinearTD):
    """One question's Γ-net with Autostep step sizes, dense NumPy, written for clarity.

    Args:
      config: as for :class:`~gamma_net_core.linear.LinearGammaNet` (same tilings for the same rng).
      adaptation: Autostep's ``meta_step_size`` (mu) and ``trace_tau`` (tau).
      rng: draws the tilings.
    """

    def __init__(self, config: GammaNetConfig, adaptation: AdaptationConfig, *, rng: np.random.Generator) -> None:
        super().__init__(config, rng=rng)
        self.mu = adaptation.meta_step_size
        self.tau = adaptation.trace_tau
        self.alpha = np.full(self.coder.n_features, config.step_size / self.n_active)
        self.h = np.zeros(self.coder.n_features)
        self.v = np.zeros(self.coder.n_features)

    def dense(self, state, gamma: float) -> np.ndarray:
        """x(S, gamma) as a dense vector (a repeated hashed tile counts twice)."""
        return np.bincount(self.features(state, gamma), minlength=self.coder.n_features).astype(float)

    def learn(self, state_t, cumulant: float, state_tp1, terminal: bool, gammas) -> np.ndarray:
        """One Autostep TD(0) step over Gamma_t; returns the TD errors of V [K] before the update."""
        g = np.zeros_like(self.w)
        z = np.zeros_like(self.w)
        deltas_v = []
        for gamma in gammas:
            x_t = self.dense(state_t, gamma)
            f_tp1 = 0.0 if terminal else self.dense(state_tp1, gamma) @ self.w
            delta_f = self.scale(gamma) * cumulant + gamma * f_tp1 - x_t @ self.w
            g += delta_f * x_t
            z += x_t**2
            deltas_v.append(delta_f / self.scale(gamma))
        active = z > 0
        gh = g * self.h
        self.v = np.where(
            active, np.maximum(np.abs(gh), self.v + self.alpha * z * (np.abs(gh) - self.v) / self.tau), self.v
        )
        grow = active & (self.v > 0)
        self.alpha[grow] *= np.exp(self.mu * gh[grow] / self.v[grow])
        self.alpha[active] /= max(float(np.sum(self.alpha[active] * z[active])), 1.0)
        step = self.alpha * g
        self.w += step
        self.h = self.h * (1.0 - self.alpha * z) + step
        self.update_count += 1
        return np.array(deltas_v)
