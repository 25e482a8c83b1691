"""n-step TD math for Γ-nets as pure functions, γ an array argument, shapes [B, G].

For one sample (S_t, C_{t+1..t+n}, S_{t+n}) and one γ of Γ_t, with the network output
``out`` (f with loss scaling, V without) and its scale s(γ) (1 - γ, or 1; see
:func:`gamma_net_core.neural.networks.output_scale`):

    target  = s(γ) (C_{t+1} + γ C_{t+2} + ... + γ^{n-1} C_{t+n}) + γ^n out_target(S_{t+n}, γ)
    δ       = target - out(S_t, γ)

With s = 1 - γ and out = f = (1 - γ) V this is the paper's derivation: δ_f =
(1 - γ)(G_{t:t+n} + γ^n V(S_{t+n}, γ) - V(S_t, γ)) = (1 - γ) δ_V, so the squared loss is
scaled by (1 - γ)² and its gradient with respect to f by (1 - γ). The bootstrap term is
computed by the target network and carries no gradient (semi-gradient TD). When an
episode ended inside the window, ``nstep_return`` and ``discount_t`` come from
:class:`gamma_net_core.neural.replay.NStepBatch` already shortened (γ^length, or 0 at a
terminal state).
"""

from __future__ import annotations

import torch


def td_targets(nstep_return: torch.Tensor, discount_t: torch.Tensor, out_t: torch.Tensor, scale: torch.Tensor):
    """target = scale · G + discount · out_t: [B, G]. ``scale`` is [G] (broadcast over the batch)."""
    return scale[None, :] * nstep_return + discount_t * out_t


def td_errors(
    out_tm1: torch.Tensor,
    nstep_return: torch.Tensor,
    discount_t: torch.Tensor,
    out_t: torch.Tensor,
    scale: torch.Tensor,
) -> torch.Tensor:
    """δ = scale · G + discount · out_t - out_tm1, [B, G], with no gradient through the bootstrap ``out_t``.

    Args:
      out_tm1: network output at the sampled states S_t, [B, G] (gradient flows here).
      nstep_return: the undiscounted-then-discounted window sums, [B, G].
      discount_t: γ^length, or 0 where a terminal state ended the window, [B, G].
      out_t: target-network output at the bootstrap states, [B, G].
      scale: (1 - γ) with loss scaling, else 1, [G].
    """
    return td_targets(nstep_return, discount_t, out_t.detach(), scale) - out_tm1


def weighted_squared_loss(delta: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """mean over samples and timescales of w_b δ_{b,k}² (the tiled batch of B·G as one batch)."""
    return (weights[:, None] * delta.square()).mean()
