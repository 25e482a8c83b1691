"""Linear Γ-nets: tile-coded linear value estimators over state and timescale, trained by TD(0) or TD(lambda).

The learner of the paper's square-wave and robot-arm experiments (Algorithm 1). The
timescale inputs (gamma, tau / tau_scale, or both) are extra input dimensions tile-coded
jointly with the state, so one weight vector predicts at any gamma.

Loss scaling (section "Generalizing over Timescale", Eq. scaled_v). With it on, the weights
learn the value of the scaled cumulant, f(s, gamma) = (1 - gamma) V(s, gamma) = w . x(s, gamma),
and the estimator is V = f / (1 - gamma): so returns of every timescale are learned in the
same range as the cumulant (a long timescale's return does not dominate the weights), and
every prediction this module gives is still V, in the cumulant's units. Without it the
weights learn V = w . x directly. In both cases s_k = 1 - gamma_k (scaling on) or 1 (off)
is the factor from V to the weights' output f = s V, and on each transition
(S_t, C_{t+1}, S_{t+1}) the TD errors of every gamma_k in Gamma_t are computed with the
weights before the step and their gradients summed:

    delta_k = s_k C_{t+1} + gamma_k f(S_{t+1}, gamma_k) - f(S_t, gamma_k)    (s_k C_{t+1} - f(S_t, gamma_k) if terminal)
    w      += alpha_n / n_active * sum_k delta_k x(S_t, gamma_k)

With scaling delta_k = (1 - gamma_k) delta_V,k, the TD error of V times 1 - gamma_k, as in the
paper's derivation; for one fixed gamma this is exactly unscaled TD(0) on the cumulant
(1 - gamma) C, whose predictions are then divided by 1 - gamma (the neural core,
:mod:`gamma_net_core.neural.networks`, reads the paper the same way). The TD errors
``learn`` returns are delta_V = delta_k / s_k, in the cumulant's units. ``n_active`` is
the number of active features per (state, gamma) and alpha_n decays linearly to zero over
``step_size_decay_steps`` updates when that is set. The bias unit's entry of x(S, gamma) is
1 - gamma with scaling by default (``bias_unit`` "value": its weight adds the same to V at every
timescale), or 1 as in the paper (``bias_unit`` "scaled": it adds w / (1 - gamma) to V, so a short
timescale's update of it moves a long timescale's value up to tau times as much; every tile entry
is 1). The fixed-timescale baseline
(:class:`FixedTimescaleTD`) is the same learner with no timescale input, trained on its one
gamma.

Two doors to the same kernels: :meth:`LinearGammaNet.learn` takes one transition (a
node feeding messages) and :meth:`LinearGammaNet.learn_recording` a whole recording at
numba speed, drawing each step's Gamma_t from a :class:`~gamma_net_core.timescales.TimescaleSampler`
(the same sequence the step-by-step path sees). Bad input raises ``ValueError`` naming the
value before any weight changes; an update that would make a weight non-finite, or so
large that a prediction (a sum of ``n_active`` weights) could overflow, raises
``FloatingPointError`` and leaves the learner as it was.

TD(lambda) (``lam`` > 0). A Γ-net learns it in the forward view by default (``lambda_view``
"forward"): each transition keeps its own Gamma_t and, once its lambda-return truncated after
``lambda_horizon`` transitions is complete, its state moves towards that return of every gamma in it,
at alpha (:mod:`gamma_net_core.linear.lambda_return`): every timescale is trained as Algorithm 1
trains it, and the reach of the traces is kept. In the backward view (``lambda_view`` "backward", and
always for the fixed-timescale baseline and a Horde) Gamma_t is a fixed ladder
(:func:`gamma_net_core.timescales.ladder`) followed by a draw; each step the update above on the draw,
then the same TD errors of the ladder applied through one eligibility trace per rung at alpha
(1 - lambda); :mod:`gamma_net_core.linear.traces`. With alpha decayed, lambda fades to 0 over the first
half of its decay in both. ``lam`` 0 (the default) is the TD(0) learner above, its kernels and draws
unchanged.

Checkpoint format (``save`` / ``load``, via :func:`gamma_net_core.checkpoint.save_npz`): an
``.npz`` whose JSON header holds kind ``"linear_gamma_net"`` (or ``"linear_fixed_timescale"``),
version :data:`~gamma_net_core.linear.checkpoints.VERSION`, the configuration
(:func:`gamma_net_core.config.to_mapping`) and
meta ``{"update_count", "n_features", "n_dims"}``; its arrays are

- ``weights``  float64 [n_features]: tiles (then the bias unit, last); they give f = s V
  (f = (1 - gamma) V with ``loss_scaling``, V without); version 1 files, written when scaled
  weights meant V itself, are refused;
- ``offsets``  float64 [n_tilings, n_dims]: tiling offsets in tile widths, in [0, 1);
- ``mult``     uint64  [n_tilings, n_dims]: hashing multipliers (strides when unhashed);
- ``base``     uint64  [n_tilings]: hashing offsets (first index of each tiling when unhashed);
- with ``lam`` > 0 in the backward view only: ``traces`` float64 [K, n_features] and ``trace_gammas``
  float64 [K], the eligibility traces and the fixed Gamma they belong to (K = 0 before the first
  update); in the forward view instead ``window_states_t``, ``window_states_tp1`` float64 [n, n_state],
  ``window_cumulants`` float64 [n], ``window_ends`` int8 [n] (0 continues, 1 terminal, 2 gap) and
  ``window_gammas`` float64 [n, K] (each one's Gamma_t), the n < H transitions whose lambda-returns
  are not yet complete, oldest first.

A file written before ``lam`` existed has no ``lam`` in its configuration and loads as lam 0; one
written before ``lambda_view`` existed with lam > 0 loads in the backward view, the only one it had.

Input dimensions are the state's, then gamma and/or tau / tau_scale. A file of another
kind, version, configuration or array shape is refused with :class:`~gamma_net_core.checkpoint.CheckpointError`.

Modules: :mod:`~gamma_net_core.linear.settings` (the configurations),
:mod:`~gamma_net_core.linear.coding` (what every linear learner is built from: the tile coder over
state and timescale, input checks, the step size, the kernels' view of a learner; the Horde builds
from it too), :mod:`~gamma_net_core.linear.kernels` (numba tile keys and TD(0) updates, shared with the
multi-question kernels of :mod:`gamma_net_core.horde`), :mod:`~gamma_net_core.linear.learners`
(the two learners), :mod:`~gamma_net_core.linear.traces` (TD(lambda)'s traces),
:mod:`~gamma_net_core.linear.lambda_return` (TD(lambda)'s forward view: truncated lambda-returns on the draws),
:mod:`~gamma_net_core.linear.td_delta` (TD(Delta), a baseline learning a ladder of value differences) and
:mod:`~gamma_net_core.linear.checkpoints` (save and load); off-policy (a target policy's values from a
behaviour's data, GTD(lambda) / TDC): :mod:`~gamma_net_core.linear.gradient_td`.
"""

import importlib

from gamma_net_core.linear.settings import (
    TIMESCALE_INPUTS,
    FixedTimescaleConfig,
    GammaNetConfig,
    LinearTDConfig,
    default_horizon,
    fixed_timescale_config,
    lambda_horizon,
    uses_ladder,
)

__all__ = [
    "TIMESCALE_INPUTS",
    "VERSION",
    "FixedTimescaleConfig",
    "FixedTimescaleTD",
    "GammaNetConfig",
    "LinearGammaNet",
    "LinearTDConfig",
    "OffPolicyConfig",
    "OffPolicyGammaNet",
    "default_horizon",
    "fixed_timescale_config",
    "lambda_horizon",
    "uses_ladder",
]

#: Names whose modules compile numba kernels, imported on first use: a configuration (the reflex reads its
#: questions' learner settings and never learns) then loads no numba, about 0.3 CPU s of every node's start.
_LAZY = {
    "VERSION": "gamma_net_core.linear.checkpoints",
    "OffPolicyConfig": "gamma_net_core.linear.gradient_td",
    "OffPolicyGammaNet": "gamma_net_core.linear.gradient_td",
    "FixedTimescaleTD": "gamma_net_core.linear.learners",
    "LinearGammaNet": "gamma_net_core.linear.learners",
}


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
