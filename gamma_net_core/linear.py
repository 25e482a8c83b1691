"""Linear Γ-nets: tile-coded linear value estimators over state and timescale, trained by TD(0).

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
``step_size_decay_steps`` updates when that is set. The fixed-timescale baseline
(:class:`FixedTimescaleTD`) is the same learner with no timescale input, trained on its one
gamma.

Two doors to the same kernels: :meth:`LinearGammaNet.learn` takes one transition (a
node feeding messages) and :meth:`LinearGammaNet.learn_recording` a whole recording at
numba speed, drawing each step's Gamma_t from a :class:`~gamma_net_core.timescales.TimescaleSampler`
(the same sequence the step-by-step path sees). Bad input raises ``ValueError`` naming the
value before any weight changes; an update that would make a weight non-finite, or so
large that a prediction (a sum of ``n_active`` weights) could overflow, raises
``FloatingPointError`` and leaves the learner as it was.

Checkpoint format (``save`` / ``load``, via :func:`gamma_net_core.checkpoint.save_npz`): an
``.npz`` whose JSON header holds kind ``"linear_gamma_net"`` (or ``"linear_fixed_timescale"``),
version :data:`VERSION`, the configuration (:func:`gamma_net_core.config.to_mapping`) and
meta ``{"update_count", "n_features", "n_dims"}``; its arrays are

- ``weights``  float64 [n_features]: tiles (then the bias unit, last); they give f = s V
  (f = (1 - gamma) V with ``loss_scaling``, V without); version 1 files, written when scaled
  weights meant V itself, are refused;
- ``offsets``  float64 [n_tilings, n_dims]: tiling offsets in tile widths, in [0, 1);
- ``mult``     uint64  [n_tilings, n_dims]: hashing multipliers (strides when unhashed);
- ``base``     uint64  [n_tilings]: hashing offsets (first index of each tiling when unhashed).

Input dimensions are the state's, then gamma and/or tau / tau_scale. A file of another
kind, version, configuration or array shape is refused with :class:`~gamma_net_core.checkpoint.CheckpointError`.
"""

from __future__ import annotations

import os
import pathlib
from dataclasses import dataclass

import numba
import numpy as np

from gamma_net_core import config as config_lib
from gamma_net_core.checkpoint import CheckpointError, load_npz, save_npz
from gamma_net_core.config import setting
from gamma_net_core.tilecoding import TileCoder, add_keys, finalize, normalize
from gamma_net_core.timescales import TimescaleSampler, validate_gammas, validate_taus

#: 2: with loss scaling the weights hold f = (1 - gamma) V (version 1: V, its updates scaled).
VERSION = 2

#: numba code of each timescale input: how many input dimensions it adds and which.
TIMESCALE_INPUTS = {"none": 0, "gamma": 1, "tau": 2, "both": 3}
_N_TIMESCALE_DIMS = {"none": 0, "gamma": 1, "tau": 1, "both": 2}

#: Steps of Gamma_t drawn at a time by ``learn_recording`` (bounds memory on long recordings).
_CHUNK = 1 << 16


@dataclass(frozen=True)
class LinearTDConfig:
    """Settings shared by the linear Γ-net and its fixed-timescale baseline.

    Defaults are the paper's robot arm ("Predictions on a Robot Arm"): two normalized joint
    positions, 100 tilings of width 1.0 hashed into 2048 features plus a bias unit,
    alpha = 0.1 / active features, loss scaling on.
    """

    state_low: tuple[float, ...] = setting(
        (0.0, 0.0), "lower end of each state input's range; inputs are normalized to [0, 1] and clipped"
    )
    state_high: tuple[float, ...] = setting((1.0, 1.0), "upper end of each state input's range")
    tilings: tuple[int, ...] = setting(
        (100,), "tilings per group; paper: arm 100; square wave 20, 20, 30", low=1, high=100_000
    )
    tile_widths: tuple[float, ...] = setting(
        (1.0,),
        "tile width of each group, in normalized input units; paper: arm 1.0; square wave 1.0, 0.5, 0.1",
        low=1e-6,
        high=1e6,
    )
    memory_size: int = setting(
        2048,
        "features the tiles are hashed into; 0: one feature per tile, no hashing; paper: arm 2048",
        low=0,
        high=2**32 - 1,
    )
    bias: bool = setting(True, "add a bias unit active on every input; paper: arm yes (2048 + 1 features)")
    step_size: float = setting(
        0.1,
        "alpha before it is divided by the active features per (state, gamma); paper: arm 0.1",
        low=0.0,
        high=1e3,
    )
    step_size_decay_steps: int = setting(
        0,
        "decay alpha linearly to zero over this many updates; 0: constant; paper: arm the recording's length",
        low=0,
        high=2**62,
    )
    loss_scaling: bool = setting(
        True,
        "learn f = (1 - gamma) V, the value of the cumulant scaled by (1 - gamma), and predict V = f / (1 - gamma) "
        "(section 'Generalizing over Timescale', Eq. scaled_v); predictions stay in the cumulant's units; paper: on",
    )

    def __post_init__(self) -> None:
        config_lib.validate(self)
        if len(self.state_low) != len(self.state_high):
            raise ValueError(f"state_low {self.state_low} and state_high {self.state_high} must have equal length")
        for d, (lo, hi) in enumerate(zip(self.state_low, self.state_high)):
            if not lo < hi:
                raise ValueError(f"state input {d}: state_low {lo!r} must be below state_high {hi!r}")
        if len(self.tilings) != len(self.tile_widths):
            raise ValueError(f"tilings {self.tilings} and tile_widths {self.tile_widths} must have equal length")

    @property
    def n_state(self) -> int:
        return len(self.state_low)


@dataclass(frozen=True)
class GammaNetConfig(LinearTDConfig):
    """A linear Γ-net: the shared settings plus how the timescale enters as input."""

    timescale_input: str = setting(
        "both",
        "timescale inputs tile-coded with the state: gamma, tau / tau_scale, or both; paper: both",
        choices=("gamma", "tau", "both"),
    )
    tau_scale: float = setting(
        100.0,
        "the tau input is tau / tau_scale, clipped to [0, 1]; paper: the largest trained tau, 100",
        low=1.0,
        high=1e12,
    )


@dataclass(frozen=True)
class FixedTimescaleConfig(LinearTDConfig):
    """The fixed-timescale baseline: the shared settings and its one discount."""

    gamma: float = setting(0.9, "the discount this baseline learns, in [0, 1)", low=0.0, high=1.0)

    def __post_init__(self) -> None:
        super().__post_init__()
        validate_gammas(self.gamma, name="gamma")


# ----------------------------------------------------------------------------- kernels


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


# ----------------------------------------------------------------------------- learners


class _LinearTD:
    """The machinery shared by the Γ-net and the baseline: coder, weights, checks, checkpoints."""

    kind = ""
    _mode = "none"

    def __init__(self, config: LinearTDConfig, *, rng: np.random.Generator | None = None, _state=None) -> None:
        self.config = config
        n_ts = _N_TIMESCALE_DIMS[self._mode]
        spec = {
            "low": tuple(config.state_low) + (0.0,) * n_ts,
            "high": tuple(config.state_high) + (1.0,) * n_ts,
            "tilings": config.tilings,
            "widths": config.tile_widths,
            "memory_size": config.memory_size,
            "bias": config.bias,
        }
        if _state is None:
            if rng is None:
                raise ValueError("a new learner needs rng, a numpy Generator for its tile offsets")
            self.coder = TileCoder(**spec, rng=rng)
            self._weights = np.zeros(self.coder.n_features)
            self.update_count = 0
        else:
            self.coder = TileCoder(**spec, state=_state["tiles"])
            self._weights = _state["weights"]
            self.update_count = _state["update_count"]
        tau_scale = float(getattr(config, "tau_scale", 1.0))
        self._ts = (TIMESCALE_INPUTS[self._mode], tau_scale, config.n_state)
        self._tiles = self.coder.kernel_args
        # A prediction sums n_active weights (then, with loss scaling, divides by 1 - gamma >= 2**-53, the
        # smallest for a float gamma < 1): bounding each weight keeps every prediction finite.
        headroom = 2.0**-53 if config.loss_scaling else 1.0
        self._w_limit = float(np.finfo(np.float64).max) * headroom / self.coder.n_active

    # -- shape, step size

    @property
    def weights(self) -> np.ndarray:
        """The weight vector, read-only: tiles, then the bias unit."""
        view = self._weights.view()
        view.flags.writeable = False
        return view

    @property
    def n_features(self) -> int:
        return self.coder.n_features

    @property
    def n_active(self) -> int:
        """Active features per (state, gamma): one per tiling, plus the bias."""
        return self.coder.n_active

    def step_size(self) -> float:
        """alpha per active feature for the next update (after decay)."""
        return float(_alpha(self.config.step_size, self.config.step_size_decay_steps, self.update_count, self.n_active))

    # -- validation

    def _state(self, x, name: str) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        n = self.config.n_state
        if x.ndim == 0 and n == 1:
            x = x.reshape(1)
        if x.ndim != 1 or x.shape[0] != n:
            raise ValueError(f"{name} must have {n} state inputs; got shape {x.shape}")
        if not np.all(np.isfinite(x)):
            d = int(np.flatnonzero(~np.isfinite(x))[0])
            raise ValueError(f"{name} must be finite; got {float(x[d])!r} at input {d}")
        return np.ascontiguousarray(x)

    def _states(self, x, name: str, rows: int | None = None) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        n = self.config.n_state
        if x.ndim == 1 and n == 1:
            x = x[:, None]
        if x.ndim != 2 or x.shape[1] != n or (rows is not None and x.shape[0] != rows):
            want = f"[{rows if rows is not None else 'T'}, {n}]"
            raise ValueError(f"{name} must be {want}; got shape {x.shape}")
        if not np.all(np.isfinite(x)):
            step, d = (int(i) for i in np.argwhere(~np.isfinite(x))[0])
            raise ValueError(f"{name} must be finite; got {float(x[step, d])!r} at step {step}, input {d}")
        return np.ascontiguousarray(x)

    @staticmethod
    def _cumulant(c) -> float:
        try:
            value = float(c)
        except (TypeError, ValueError):
            raise ValueError(f"cumulant must be a number; got {c!r}") from None
        if not np.isfinite(value):
            raise ValueError(f"cumulant must be finite; got {value!r}")
        return value

    # -- the two doors

    def _learn(self, state_t, cumulant, state_tp1, terminal, gammas: np.ndarray) -> np.ndarray:
        terminal = bool(terminal)
        s_t = self._state(state_t, "state_t")
        s_tp1 = s_t if (terminal and state_tp1 is None) else self._state(state_tp1, "state_tp1")
        c = self._cumulant(cumulant)
        deltas = np.empty(gammas.shape[0])
        ok = _learn_one(
            self._weights,
            s_t,
            s_tp1,
            gammas,
            c,
            terminal,
            self.step_size(),
            self.config.loss_scaling,
            self._ts,
            self._tiles,
            self._w_limit,
            deltas,
        )
        if not ok:
            raise FloatingPointError(
                f"update {self.update_count} would make weights non-finite or predictions overflow (TD errors "
                f"{deltas.tolist()}, cumulant {c!r}); learner unchanged: lower step_size or check the cumulant's scale"
            )
        self.update_count += 1
        return deltas

    def _learn_recording(self, states_t, cumulants, states_tp1, terminals, gammas_of, probe_gammas, record_from):
        c = np.ascontiguousarray(np.asarray(cumulants, dtype=np.float64))
        if c.ndim != 1:
            raise ValueError(f"cumulants must be 1-D [T]; got shape {c.shape}")
        T = c.shape[0]
        if not np.all(np.isfinite(c)):
            step = int(np.flatnonzero(~np.isfinite(c))[0])
            raise ValueError(f"cumulants must be finite; got {float(c[step])!r} at step {step}")
        s_t = self._states(states_t, "states_t", T)
        s_tp1 = self._states(states_tp1, "states_tp1", T)
        if terminals is None:
            ends = np.zeros(T, dtype=np.bool_)
        else:
            ends = np.ascontiguousarray(np.asarray(terminals, dtype=np.bool_))
            if ends.shape != (T,):
                raise ValueError(f"terminals must be [{T}] like cumulants; got shape {ends.shape}")
        if not 0 <= record_from <= T:
            raise ValueError(f"record_from must be in [0, {T}]; got {record_from!r}")
        probes = np.empty(0) if probe_gammas is None else validate_gammas(probe_gammas, name="probe_gammas")
        probe_keys = self._timescale_keys(probes)
        probe_scales = 1.0 - probes if self.config.loss_scaling else np.ones_like(probes)
        predictions = np.empty((T - record_from, probes.shape[0]))
        # A failure part way restores these, so the learner is as it was before the call.
        before, count = self._weights.copy(), self.update_count
        cfg = self.config
        for start in range(0, T, _CHUNK):
            stop = min(T, start + _CHUNK)
            gammas = gammas_of(start, stop)
            rf = min(max(record_from - start, 0), stop - start)
            out = predictions[max(start - record_from, 0) : max(stop - record_from, 0)]
            bad = _learn_many(
                self._weights,
                s_t[start:stop],
                s_tp1[start:stop],
                c[start:stop],
                ends[start:stop],
                gammas,
                cfg.step_size,
                cfg.step_size_decay_steps,
                self.update_count,
                self.n_active,
                cfg.loss_scaling,
                self._ts,
                self._tiles,
                self._w_limit,
                probe_keys,
                probe_scales,
                rf,
                out,
            )
            if bad >= 0:
                self._weights[:] = before
                self.update_count = count
                raise FloatingPointError(
                    f"update at step {start + bad} (cumulant {float(c[start + bad])!r}) would make weights non-finite "
                    "or predictions overflow; learner unchanged: lower step_size or check the cumulant's scale"
                )
            self.update_count += stop - start
        return predictions if probe_gammas is not None else None

    def _timescale_keys(self, gammas: np.ndarray) -> np.ndarray:
        keys = np.empty((gammas.shape[0], self.coder.n_tilings), dtype=np.uint64)
        u = np.empty(_N_TIMESCALE_DIMS[self._mode])
        for k, g in enumerate(gammas):
            _timescale_keys_py(g, self._ts, self._tiles, u, keys[k])
        return keys

    def _predict(self, state, gammas: np.ndarray) -> np.ndarray:
        """[G] for one state ([n_state], or a scalar with one state input), [N, G] for [N, n_state] or [N]."""
        x = np.asarray(state, dtype=np.float64)
        n = self.config.n_state
        scaling = self.config.loss_scaling
        if x.ndim == 0 or (x.ndim == 1 and x.shape[0] == n):
            one = self._state(x, "state")[None, :]
            return _predict_many(self._weights, one, gammas, scaling, self._ts, self._tiles)[0]
        return _predict_many(self._weights, self._states(x, "states"), gammas, scaling, self._ts, self._tiles)

    # -- checkpoints

    def to_state_dict(self) -> dict[str, np.ndarray]:
        """Weights and tile coder state (copies), as saved in a checkpoint."""
        return {"weights": self._weights.copy(), **self.coder.to_state_dict()}

    def save(self, path: str | os.PathLike) -> pathlib.Path:
        """Atomically write the full state (see the module docstring for the format)."""
        meta = {"update_count": int(self.update_count), "n_features": self.n_features, "n_dims": self.coder.n_dims}
        return save_npz(
            path,
            kind=self.kind,
            version=VERSION,
            config=config_lib.to_mapping(self.config),
            arrays=self.to_state_dict(),
            meta=meta,
        )

    @classmethod
    def load(cls, path: str | os.PathLike, *, config: LinearTDConfig | None = None):
        """A learner restored from :meth:`save`; with ``config``, the file must have been made with it.

        Raises:
          CheckpointError: another kind, version, configuration, or arrays of the wrong shape.
        """
        config_cls = cls._config_class
        expected = None if config is None else config_lib.to_mapping(config)
        saved, arrays, meta = load_npz(path, kind=cls.kind, version=VERSION, config=expected)
        try:
            cfg = config_lib.from_mapping(config_cls, saved, where=str(path))
        except ValueError as exc:
            raise CheckpointError(f"{path}: unusable configuration: {exc}") from None
        return cls.from_arrays(cfg, arrays, update_count=meta.get("update_count"), source=str(path))

    @classmethod
    def from_arrays(cls, config: LinearTDConfig, arrays, *, update_count, source: str = "state"):
        """A learner from :meth:`to_state_dict` arrays (e.g. a checkpoint holding more than the learner).

        Raises:
          CheckpointError: arrays that do not fit ``config``, non-finite weights, a bad count.
        """
        weights = arrays.get("weights")
        try:
            coder_state = {k: arrays[k] for k in ("offsets", "mult", "base")}
            learner = cls(config, _state={"tiles": coder_state, "weights": np.zeros(0), "update_count": 0})
        except (KeyError, ValueError) as exc:
            raise CheckpointError(f"{source}: tile coder state does not fit its configuration: {exc}") from None
        if weights is None or weights.dtype != np.float64 or weights.shape != (learner.n_features,):
            got = None if weights is None else f"{weights.dtype}{list(weights.shape)}"
            raise CheckpointError(f"{source}: weights are {got}; expected float64[{learner.n_features}]")
        if not np.all(np.isfinite(weights)):
            raise CheckpointError(f"{source}: weights hold non-finite values")
        if not isinstance(update_count, int) or update_count < 0:
            raise CheckpointError(f"{source}: bad update_count {update_count!r}")
        learner._weights = np.array(weights)
        learner.update_count = update_count
        return learner


def _timescale_keys_py(gamma, ts, tiles, u, keys):
    _timescale_keys_kernel(float(gamma), ts, tiles, u, keys)


@numba.njit(cache=True)
def _timescale_keys_kernel(gamma, ts, tiles, u, keys):  # pragma: no cover - compiled
    _timescale_keys(gamma, ts, tiles, u, keys)


class LinearGammaNet(_LinearTD):
    """A linear Γ-net: one tile-coded weight vector predicting the return at any gamma in [0, 1).

    Args:
      config: its settings (:class:`GammaNetConfig`).
      rng: draws the tile offsets and hashing constants (seed it per run).

    A node's loop (one message at a time)::

        net = LinearGammaNet(GammaNetConfig(...), rng=np.random.default_rng(seed))
        sampler = TimescaleSampler(TimescaleSampling(n_gamma=1, n_tau=29), rng)
        net.learn(previous_state, cumulant, state, False, sampler.sample())
        values = net.predict(state, published_gammas)
    """

    kind = "linear_gamma_net"
    _config_class = GammaNetConfig

    def __init__(self, config: GammaNetConfig, *, rng: np.random.Generator | None = None, _state=None) -> None:
        if not isinstance(config, GammaNetConfig):
            raise TypeError(f"LinearGammaNet needs a GammaNetConfig; got {type(config).__name__}")
        self._mode = config.timescale_input
        super().__init__(config, rng=rng, _state=_state)

    def learn(self, state_t, cumulant, state_tp1, terminal, gammas) -> np.ndarray:
        """One TD(0) update on a transition, summed over every gamma in Gamma_t (Algorithm 1).

        Args:
          state_t: the state inputs of S_t [n_state], in the units of ``state_low``/``state_high``.
          cumulant: C_{t+1}, in the signal's units.
          state_tp1: S_{t+1} [n_state]; may be None when ``terminal``.
          terminal: S_{t+1} ends the episode: delta = C - v(S_t, gamma).
          gammas: Gamma_t, the discounts trained on at this step [K], each in [0, 1).

        Returns:
          The TD errors delta_V [K] of each gamma before the update, in the cumulant's units
          (with loss scaling the update used (1 - gamma) times these).
        """
        return self._learn(state_t, cumulant, state_tp1, terminal, validate_gammas(gammas, name="Gamma_t"))

    def learn_recording(
        self,
        *,
        states_t,
        cumulants,
        states_tp1,
        timescales: TimescaleSampler | np.ndarray,
        terminals=None,
        probe_gammas=None,
        record_from: int = 0,
    ) -> np.ndarray | None:
        """Learn from a whole recording at numba speed; the same updates as calling :meth:`learn` per step.

        Args:
          states_t, states_tp1: [T, n_state] (or [T] for one state input).
          cumulants: [T]; ``cumulants[t]`` is C_{t+1}.
          timescales: a sampler drawing each step's Gamma_t (the same sequence as calling its
            ``sample()`` once per step), or the gammas themselves [T, K].
          terminals: optional bool [T]; ``terminals[t]`` means S_{t+1} is terminal.
          probe_gammas: optional [P]: record online predictions V(S_t, gamma) made before each update.
          record_from: the first step whose predictions are recorded.

        Returns:
          Predictions [T - record_from, P] in cumulant units when ``probe_gammas`` is given, else None.
        """
        T = np.shape(cumulants)[0] if np.ndim(cumulants) else 0
        gammas_of = _gamma_source(timescales, T)
        return self._learn_recording(states_t, cumulants, states_tp1, terminals, gammas_of, probe_gammas, record_from)

    def predict(self, state, gammas=None, *, taus=None) -> np.ndarray:
        """Predicted returns in the cumulant's units at each timescale.

        Args:
          state: one state [n_state], or many [N, n_state]; with one state input, also a
            scalar (one state) or [N] with N > 1 (N states).
          gammas: discounts [G] in [0, 1); or ``taus`` [G] >= 1 instead (tau = 1 / (1 - gamma)).

        Returns:
          [G] for one state, [N, G] for many.
        """
        if (gammas is None) == (taus is None):
            raise ValueError("give exactly one of gammas or taus")
        if gammas is not None:
            g = validate_gammas(gammas, name="gammas")
        else:
            g = 1.0 - 1.0 / validate_taus(taus, name="taus")
        return self._predict(state, np.ascontiguousarray(g))


class FixedTimescaleTD(_LinearTD):
    """The fixed-timescale baseline: the same tile-coded TD(0) learner, no timescale input, one gamma."""

    kind = "linear_fixed_timescale"
    _config_class = FixedTimescaleConfig

    def __init__(self, config: FixedTimescaleConfig, *, rng: np.random.Generator | None = None, _state=None) -> None:
        if not isinstance(config, FixedTimescaleConfig):
            raise TypeError(f"FixedTimescaleTD needs a FixedTimescaleConfig; got {type(config).__name__}")
        super().__init__(config, rng=rng, _state=_state)
        self._gammas = np.array([config.gamma])

    @property
    def gamma(self) -> float:
        return self.config.gamma

    def learn(self, state_t, cumulant, state_tp1, terminal=False) -> float:
        """One TD(0) update at the baseline's gamma; returns its TD error before the update."""
        return float(self._learn(state_t, cumulant, state_tp1, terminal, self._gammas)[0])

    def learn_recording(
        self, *, states_t, cumulants, states_tp1, terminals=None, record_predictions: bool = False, record_from: int = 0
    ) -> np.ndarray | None:
        """Learn from a whole recording at numba speed (see :meth:`LinearGammaNet.learn_recording`).

        Returns:
          With ``record_predictions``, the online predictions [T - record_from] before each update.
        """
        T = np.shape(cumulants)[0] if np.ndim(cumulants) else 0
        gammas_of = _gamma_source(np.broadcast_to(self._gammas, (T, 1)), T)
        probes = self._gammas if record_predictions else None
        out = self._learn_recording(states_t, cumulants, states_tp1, terminals, gammas_of, probes, record_from)
        return None if out is None else out[:, 0]

    def predict(self, state) -> np.ndarray | float:
        """Predicted return at the baseline's gamma: a float for one state [n_state], [N] for many."""
        out = self._predict(state, self._gammas)
        return float(out[0]) if out.ndim == 1 else out[:, 0]


def _gamma_source(timescales, T: int):
    """A function (start, stop) -> Gamma_t of those steps [stop - start, K], validated."""
    if isinstance(timescales, TimescaleSampler):
        return lambda start, stop: np.ascontiguousarray(timescales.sample_many(stop - start))
    g = np.asarray(timescales, dtype=np.float64)
    if g.ndim != 2 or g.shape[0] != T or g.shape[1] == 0:
        raise ValueError(f"timescales must be a TimescaleSampler or gammas [T={T}, K >= 1]; got shape {g.shape}")
    validate_gammas(g.reshape(-1), name="Gamma_t")
    return lambda start, stop: np.ascontiguousarray(g[start:stop])
