"""The parts every linear learner is built from: its tile coder, the kernels' :class:`Coding`, input checks, step size.

The linear Γ-net and its fixed-timescale baseline (:mod:`gamma_net_core.linear.learners`) and the
Horde (:mod:`gamma_net_core.horde.learner`) build from these, so a state is checked, tile-coded
with its timescale and stepped the same way in each: N Horde questions equal N single learners.
"""

from __future__ import annotations

import numpy as np

from gamma_net_core.linear.kernels import Coding, alpha_at, timescale_key_table
from gamma_net_core.linear.settings import N_TIMESCALE_DIMS, TIMESCALE_INPUTS, LinearTDConfig, coder_memory_size
from gamma_net_core.linear.traces import traced_decay_steps
from gamma_net_core.tilecoding import TileCoder


def make_coder(
    config: LinearTDConfig,
    timescale_input: str,
    *,
    rng: np.random.Generator | None = None,
    state: dict[str, np.ndarray] | None = None,
) -> TileCoder:
    """The tile coder over the state inputs, then the timescale inputs (laid out by :func:`coder_layout`).

    Args:
      config: the tiling and the state inputs' ranges.
      timescale_input: a key of :data:`~gamma_net_core.linear.settings.TIMESCALE_INPUTS`.
      rng: draws a new coder's offsets and hashing constants; or ``state``, a saved coder's
        (:meth:`TileCoder.to_state_dict`).
    """
    low, high, widths = coder_layout(config, timescale_input)
    return TileCoder(
        low=low,
        high=high,
        tilings=config.tilings,
        widths=widths,
        memory_size=coder_memory_size(config, len(low), widths),
        bias=config.bias,
        copies=config.copies if timescale_input == "knots" else 1,
        rng=rng,
        state=state,
    )


def coder_layout(
    config: LinearTDConfig, timescale_input: str
) -> tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]:
    """The coder's input ranges (low, high: state inputs, then the timescale inputs) and tile widths per group.

    The timescale inputs (gamma, tau / tau_scale) lie in [0, 1]. A tiling has one tile width over all its
    inputs, so a timescale tile width apart from the state's (``timescale_tile_width`` r times the first
    group's) is made by the ranges: r > 1 stretches the timescale inputs' range to [0, r]; r < 1 narrows every
    tile by r and stretches the state inputs' ranges by 1 / r, so a state's tiles keep their width. (A state
    above its range is then clipped at the stretched range's end, not at ``state_high``.)
    """
    n_ts = N_TIMESCALE_DIMS[timescale_input]
    state_low, state_high = tuple(config.state_low), tuple(config.state_high)
    widths = tuple(config.tile_widths)
    ratio = getattr(config, "timescale_tile_width", 0.0) / widths[0]
    if n_ts == 0 or ratio in (0.0, 1.0):
        return state_low + (0.0,) * n_ts, state_high + (1.0,) * n_ts, widths
    if ratio > 1.0:
        return state_low + (0.0,) * n_ts, state_high + (ratio,) * n_ts, widths
    stretched = tuple(lo + (hi - lo) / ratio for lo, hi in zip(state_low, state_high))
    return state_low + (0.0,) * n_ts, stretched + (1.0,) * n_ts, tuple(w * ratio for w in widths)


def weight_limit(n_active: int, loss_scaling: bool) -> float:
    """The largest weight magnitude a step may leave, so that every prediction stays finite."""
    # A prediction sums n_active weights (then, with loss scaling, divides by 1 - gamma >= 2**-53, the
    # smallest for a float gamma < 1): bounding each weight keeps every prediction finite.
    headroom = 2.0**-53 if loss_scaling else 1.0
    return float(np.finfo(np.float64).max) * headroom / n_active


def make_coding(config: LinearTDConfig, timescale_input: str, coder: TileCoder) -> Coding:
    """The kernels' view of a learner with ``coder`` (:func:`make_coder` of the same settings)."""
    return Coding(
        tiles=coder.kernel_args,
        timescale_input=TIMESCALE_INPUTS[timescale_input],
        tau_scale=float(getattr(config, "tau_scale", 1.0)),
        n_state=config.n_state,
        loss_scaling=bool(config.loss_scaling),
        w_limit=weight_limit(coder.n_active, config.loss_scaling),
        value_bias=config.bias_unit == "value",
        knots=int(getattr(config, "knots", 0)) if timescale_input == "knots" else 0,
    )


def check_state(x, n_state: int, name: str) -> np.ndarray:
    """One state as the kernels take it: contiguous float64 [n_state] (a scalar when n_state is 1).

    Raises:
      ValueError: another shape, or a value that is not finite (named, with its input).
    """
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 0 and n_state == 1:
        x = x.reshape(1)
    if x.ndim != 1 or x.shape[0] != n_state:
        raise ValueError(f"{name} must have {n_state} state inputs; got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        d = int(np.flatnonzero(~np.isfinite(x))[0])
        raise ValueError(f"{name} must be finite; got {float(x[d])!r} at input {d}")
    return np.ascontiguousarray(x)


def check_states(x, n_state: int, name: str, rows: int | None = None) -> np.ndarray:
    """Many states: contiguous float64 [rows, n_state] (or [rows] when n_state is 1); like :func:`check_state`."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 1 and n_state == 1:
        x = x[:, None]
    if x.ndim != 2 or x.shape[1] != n_state or (rows is not None and x.shape[0] != rows):
        want = f"[{rows if rows is not None else 'T'}, {n_state}]"
        raise ValueError(f"{name} must be {want}; got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        step, d = (int(i) for i in np.argwhere(~np.isfinite(x))[0])
        raise ValueError(f"{name} must be finite; got {float(x[step, d])!r} at step {step}, input {d}")
    return np.ascontiguousarray(x)


def step_size(config: LinearTDConfig, update_count: int, n_active: int) -> float:
    """alpha per active feature for update number ``update_count`` (after its decay)."""
    return float(alpha_at(config.step_size, config.step_size_decay_steps, update_count, n_active))


def traced_step_size(config: LinearTDConfig, update_count: int, n_active: int, *, draws: bool = True) -> float:
    """:func:`step_size` of TD(lambda)'s traced update: ``config.step_size`` x (1 - lambda) (linear/traces.py).

    With ``draws`` (a Γ-net: TD(0) on a draw beside the traces) it decays over
    :func:`~gamma_net_core.linear.traces.traced_decay_steps`; without (one timescale, the traces alone) over
    alpha's own ``step_size_decay_steps``.
    """
    decay = config.step_size_decay_steps
    return float(alpha_at(config.step_size * (1.0 - config.lam), traced_decay_steps(decay) if draws else decay,
                          update_count, n_active))  # fmt: skip


def output_scales(gammas: np.ndarray, loss_scaling: bool) -> np.ndarray:
    """s(gamma) of each gamma: the weights' output is f = s V, s = 1 - gamma with loss scaling, else 1."""
    return 1.0 - gammas if loss_scaling else np.ones_like(gammas)


def timescale_keys(coding: Coding, gammas: np.ndarray) -> np.ndarray:
    """[G, n_tilings] uint64: each gamma's part of every tiling's key (a state's part is added per step)."""
    return timescale_key_table(np.ascontiguousarray(gammas, dtype=np.float64), coding.plain())
