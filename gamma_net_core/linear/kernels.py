"""numba kernels of the linear Γ-nets: tile keys of state and timescale, values, TD(0) and TD(lambda) updates.

Arguments follow one convention: ``coding`` is a :class:`Coding` (the tile coder's
:class:`~gamma_net_core.tilecoding.Tiles`, how the timescale enters as input, the output scale and
the weight limit), fixed when a learner is built (:func:`gamma_net_core.linear.coding.make_coding`);
kernels called from Python take it as ``coding.plain()`` (``plain_coding``; why in :meth:`Coding.plain`).
A state's keys and a timescale's keys are computed apart and summed per tiling, so a state's keys
are computed once per step and shared by every gamma (and, in :mod:`gamma_net_core.horde.kernels`,
by every question). The public kernels here are the linear package's internal interface; the
Horde's kernels build on :func:`state_keys`, :func:`timescale_keys`, :func:`n_timescale_dims` and
:func:`output_scale`.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from gamma_net_core.linear.traces import decay_and_add, restore_support, save_support
from gamma_net_core.tilecoding import Tiles, add_keys, finalize, normalize


class Coding(NamedTuple):
    """A linear learner's features and output as the kernels take them, fixed at construction.

    ``timescale_input`` is the code of :data:`gamma_net_core.linear.settings.TIMESCALE_INPUTS`
    (0 none, 1 gamma, 2 tau / tau_scale, 3 both), whose dimensions follow the ``n_state`` state
    inputs in ``tiles``; ``loss_scaling`` makes the weights' output f = (1 - gamma) V; a step that
    would move a weight beyond ``w_limit`` in magnitude is refused. ``value_bias``: the bias unit's
    feature value at gamma is s(gamma) (:func:`bias_feature`), so its weight adds the same to V at every
    timescale; else 1, adding the same to f (and s(gamma)^-1 times that to V). ``knots``: with
    ``timescale_input`` 4 (knots), how many, tau from 1 to ``tau_scale`` on a log scale: a gamma picks the
    copy of the state's tiles of its nearest knot (linear/knots.py); else 0.
    """

    tiles: Tiles
    timescale_input: int
    tau_scale: float
    n_state: int
    loss_scaling: bool
    w_limit: float
    value_bias: bool
    knots: int

    def plain(self) -> tuple:
        """This coding as plain tuples, as the kernels take it (:func:`named_coding` names it again).

        numba finds a compiled kernel by a fingerprint of its arguments, and a named tuple's spells out
        its class and field names: about 3 µs for a Coding against 0.2 µs for its plain form, a tenth of
        a per-message update. Every kernel is called with the plain form; inside it is named.
        """
        return (tuple(self.tiles), self.timescale_input, self.tau_scale, self.n_state, self.loss_scaling, self.w_limit,
                self.value_bias, self.knots)  # fmt: skip


@numba.njit(cache=True, inline="always")
def named_coding(plain):  # pragma: no cover - compiled
    """The :class:`Coding` whose :meth:`Coding.plain` is ``plain`` (free: the compiler sees through it)."""
    tiles, timescale_input, tau_scale, n_state, loss_scaling, w_limit, value_bias, knots = plain
    return Coding(Tiles(*tiles), timescale_input, tau_scale, n_state, loss_scaling, w_limit, value_bias, knots)


class Recording(NamedTuple):
    """A recording's transitions for :func:`learn_many`: ``cumulants[n]`` is C_{n+1}; ``terminals[n]``: S_{n+1} ends;
    ``cuts[n]``: the stream does not continue after transition n (no lambda-return or trace reaches past it)."""

    states_t: np.ndarray
    states_tp1: np.ndarray
    cumulants: np.ndarray
    terminals: np.ndarray
    cuts: np.ndarray


class Schedule(NamedTuple):
    """The step size of update number ``first_count + n`` is :func:`alpha_at` of these."""

    step_size: float
    decay_steps: int
    first_count: int
    n_active: int


class Probes(NamedTuple):
    """Online predictions recorded by :func:`learn_many`.

    ``predictions[n - record_from, j]`` = V(S_n, probe j) before update n: the probe's timescale
    keys ``keys[j]`` (:func:`timescale_key_table`), divided by its output scale ``scales[j]``.
    """

    keys: np.ndarray
    scales: np.ndarray
    record_from: int
    predictions: np.ndarray


class TraceWork(NamedTuple):
    """Scratch of the TD(lambda) kernels (:func:`traced_work`), left clean by them.

    ``dw`` [n_features] sums a step's update, ``mark`` / ``touched`` the features it touches;
    ``old_z``, ``old_support`` [K, n_features], ``old_n``, ``old_max`` [K] keep the traces a refused
    step restores.
    """

    dw: np.ndarray
    mark: np.ndarray
    touched: np.ndarray
    old_z: np.ndarray
    old_support: np.ndarray
    old_n: np.ndarray
    old_max: np.ndarray


# A kernel reads the fields it uses into locals, one a line, before its loops: the compiler does not hoist
# a field read out of a loop (memory_size read in _value's loop made predictions 2-4x slower), and fields
# passed straight into inlined helpers cost some 8% of a prediction.


@numba.njit(cache=True, inline="always")
def n_timescale_dims(timescale_input):  # pragma: no cover - compiled
    """Input dimensions a timescale input code adds: 0 (none, knots), 1 (gamma or tau), 2 (both)."""
    return 0 if (timescale_input == 0 or timescale_input == 4) else (2 if timescale_input == 3 else 1)


@numba.njit(cache=True, inline="always")
def knot_index(gamma, tau_scale, knots):  # pragma: no cover - compiled
    """The knot nearest ``gamma`` on the log-tau scale, of ``knots`` knots from tau 1 to ``tau_scale``, clipped."""
    tau = 1.0 / (1.0 - gamma)
    k = np.int64(np.floor(np.log(tau) / np.log(tau_scale) * (knots - 1) + 0.5))
    return min(max(k, np.int64(0)), np.int64(knots - 1))


@numba.njit(cache=True, inline="always")
def timescale_keys(gamma, coding, u, keys):  # pragma: no cover - compiled
    """keys[t] = the timescale dimensions' part of tiling t's key for ``gamma`` (``u``: scratch)."""
    tiles = coding.tiles
    timescale_input = coding.timescale_input
    tau_scale = coding.tau_scale
    n_state = coding.n_state
    keys[:] = 0
    if timescale_input == 0:
        return
    if timescale_input == 4:
        copy = np.uint64(knot_index(gamma, tau_scale, coding.knots)) * tiles.copy_stride
        for t in range(keys.shape[0]):
            keys[t] = copy
        return
    if timescale_input == 1:
        u[0] = gamma
    elif timescale_input == 2:
        u[0] = 1.0 / (1.0 - gamma) / tau_scale
    else:
        u[0] = gamma
        u[1] = 1.0 / (1.0 - gamma) / tau_scale
    low = tiles.low
    span = tiles.span
    inv_width = tiles.inv_width
    offsets = tiles.offsets
    mult = tiles.mult
    per_dim = tiles.per_dim
    normalize(u, low[n_state:], span[n_state:], u)
    add_keys(u, n_state, inv_width, offsets, mult, per_dim, keys)


@numba.njit(cache=True, inline="always")
def state_keys(state, tiles, u, keys):  # pragma: no cover - compiled
    """keys[t] = base[t] + the state dimensions' part of tiling t's key (``u``: scratch)."""
    low = tiles.low
    span = tiles.span
    inv_width = tiles.inv_width
    offsets = tiles.offsets
    mult = tiles.mult
    base = tiles.base
    per_dim = tiles.per_dim
    n_state = state.shape[0]
    normalize(state, low[:n_state], span[:n_state], u)
    keys[:] = base
    add_keys(u, 0, inv_width, offsets, mult, per_dim, keys)


@numba.njit(cache=True, inline="always")
def _value(w, keys_state, keys_timescale, tiles, bias_x):  # pragma: no cover - compiled
    memory_size, bias_index = tiles.memory_size, tiles.bias_index
    v = 0.0
    for t in range(keys_state.shape[0]):
        v += w[finalize(keys_state[t] + keys_timescale[t], memory_size)]
    if bias_index >= 0:
        v += bias_x * w[bias_index]
    return v


@numba.njit(cache=True, inline="always")
def output_scale(gamma, loss_scaling):  # pragma: no cover - compiled
    """s(gamma): the weights' output is f = s V, so s = 1 - gamma with loss scaling, else 1."""
    return 1.0 - gamma if loss_scaling else 1.0


@numba.njit(cache=True, inline="always")
def bias_feature(gamma, coding):  # pragma: no cover - compiled
    """The bias unit's feature value at ``gamma``: s(gamma) with ``coding.value_bias``, else 1.

    With loss scaling a bias of value 1 in f adds w / (1 - gamma) to V: every timescale shares it, so a
    short timescale's update of it moves a long timescale's value by up to tau times its own. At
    s(gamma) it adds w to V at every timescale, and an update moves no value more than its own.
    """
    return output_scale(gamma, coding.loss_scaling) if coding.value_bias else 1.0


@numba.njit(cache=True, inline="always")
def _td_errors(
    w, keys_t, keys_tp1, gammas, cumulant, terminal, coding, u_ts, keys_ts, idx, deltas, bias_x
):  # pragma: no cover
    """Fill idx[k] with the active tiles of (S_t, gamma_k), bias_x[k] with the bias's feature value
    (:func:`bias_feature`) and deltas[k] with the TD error of the weights' output.

    That output is f = s V (s = 1 - gamma_k with loss scaling, else 1), so deltas[k] is
    delta_f = s C + gamma_k f(S_{t+1}) - f(S_t) = s delta_V; w is untouched.
    """
    tiles = coding.tiles
    memory_size = tiles.memory_size
    bias_index = tiles.bias_index
    loss_scaling = coding.loss_scaling
    for k in range(gammas.shape[0]):
        gamma = gammas[k]
        timescale_keys(gamma, coding, u_ts, keys_ts)
        f_t = 0.0
        f_tp1 = 0.0
        for t in range(keys_t.shape[0]):
            i = finalize(keys_t[t] + keys_ts[t], memory_size)
            idx[k, t] = i
            f_t += w[i]
            if not terminal:
                f_tp1 += w[finalize(keys_tp1[t] + keys_ts[t], memory_size)]
        b = bias_feature(gamma, coding)
        bias_x[k] = b
        if bias_index >= 0:
            f_t += b * w[bias_index]
            f_tp1 += b * w[bias_index]
        scaled = output_scale(gamma, loss_scaling) * cumulant
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


@numba.njit(cache=True, inline="always")
def _to_cumulant_units(deltas, gammas, loss_scaling):  # pragma: no cover - compiled
    """deltas[k] /= s(gamma_k): delta_f to delta_V."""
    for k in range(gammas.shape[0]):
        deltas[k] /= output_scale(gammas[k], loss_scaling)


@numba.njit(cache=True)
def learn_one(w, state_t, state_tp1, gammas, cumulant, terminal, alpha, plain_coding, deltas):  # pragma: no cover
    """One transition; returns True, or False with w unchanged when a weight would leave [-w_limit, w_limit].

    On return deltas[k] holds the TD error in the cumulant's units, delta_V = delta_f / s.
    """
    coding = named_coding(plain_coding)
    tiles = coding.tiles
    w_limit = coding.w_limit
    n_tilings = tiles.base.shape[0]
    bias_index = tiles.bias_index
    K = gammas.shape[0]
    u = np.empty(state_t.shape[0])
    u_ts = np.empty(n_timescale_dims(coding.timescale_input))
    keys_t = np.empty(n_tilings, dtype=np.uint64)
    keys_tp1 = np.empty(n_tilings, dtype=np.uint64)
    keys_ts = np.empty(n_tilings, dtype=np.uint64)
    idx = np.empty((K, n_tilings), dtype=np.int64)
    steps = np.empty(K)
    bias_x = np.empty(K)
    state_keys(state_t, tiles, u, keys_t)
    state_keys(state_tp1, tiles, u, keys_tp1)
    _td_errors(w, keys_t, keys_tp1, gammas, cumulant, terminal, coding, u_ts, keys_ts, idx, deltas, bias_x)
    ok = _step_sizes(deltas, alpha, steps)
    _to_cumulant_units(deltas, gammas, coding.loss_scaling)
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
            w[bias_index] += bias_x[k] * steps[k]
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


@numba.njit(cache=True, inline="always")
def record_probes(w, keys_t, tiles, probes, n, value_bias):  # pragma: no cover - compiled
    """The probes' predictions V(S_n) (``keys_t``: S_n's keys) before update n, from ``record_from`` on."""
    keys, scales, record_from, predictions = probes.keys, probes.scales, probes.record_from, probes.predictions
    if n >= record_from:
        for j in range(keys.shape[0]):
            b = scales[j] if value_bias else 1.0  # the probe's bias_feature: scales[j] is its s(gamma)
            predictions[n - record_from, j] = _value(w, keys_t, keys[j], tiles, b) / scales[j]


@numba.njit(cache=True)
def learn_many(w, recording, gammas, schedule, plain_coding, probes):  # pragma: no cover - compiled
    """A recording's transitions in order, Gamma_t ``gammas[n]``; returns -1, or the first step that put a
    weight beyond w_limit.

    ``probes`` records V in the cumulant's units (see :class:`Probes`).
    """
    coding = named_coding(plain_coding)
    tiles = coding.tiles
    w_limit = coding.w_limit
    n_tilings = tiles.base.shape[0]
    bias_index = tiles.bias_index
    K = gammas.shape[1]
    u = np.empty(recording.states_t.shape[1])
    u_ts = np.empty(n_timescale_dims(coding.timescale_input))
    keys_t = np.empty(n_tilings, dtype=np.uint64)
    keys_tp1 = np.empty(n_tilings, dtype=np.uint64)
    keys_ts = np.empty(n_tilings, dtype=np.uint64)
    idx = np.empty((K, n_tilings), dtype=np.int64)
    deltas = np.empty(K)
    steps = np.empty(K)
    bias_x = np.empty(K)
    states_t, states_tp1 = recording.states_t, recording.states_tp1
    cumulants, terminals = recording.cumulants, recording.terminals
    step_size, decay_steps = schedule.step_size, schedule.decay_steps
    first_count, n_active = schedule.first_count, schedule.n_active
    for n in range(states_t.shape[0]):
        state_keys(states_t[n], tiles, u, keys_t)
        record_probes(w, keys_t, tiles, probes, n, coding.value_bias)
        state_keys(states_tp1[n], tiles, u, keys_tp1)
        g, c, end = gammas[n], cumulants[n], terminals[n]
        _td_errors(w, keys_t, keys_tp1, g, c, end, coding, u_ts, keys_ts, idx, deltas, bias_x)
        alpha = alpha_at(step_size, decay_steps, first_count + n, n_active)
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
                w[bias_index] += bias_x[k] * s
                ok &= abs(w[bias_index]) <= w_limit
        if not ok:
            return n
    return -1


@numba.njit(cache=True, inline="always")
def _accumulate(traces, g, deltas, dw, mark, touched, n):  # pragma: no cover - compiled
    """dw += sum_k deltas[k] z[g, k] over the traces' supports, k in order; returns the touched count."""
    z, _, support, n_support, _ = traces
    for k in range(deltas.shape[0]):
        d = deltas[k]
        for j in range(n_support[g, k]):
            i = support[g, k, j]
            if not mark[i]:
                mark[i] = True
                touched[n] = i
                n += 1
            dw[i] += d * z[g, k, i]
    return n


@numba.njit(cache=True, inline="always")
def _apply_traced(w, alpha, dw, mark, touched, n, w_limit):  # pragma: no cover - compiled
    """w[i] += alpha dw[i] on the touched features if none would leave [-w_limit, w_limit]; clears dw."""
    ok = True
    for j in range(n):
        i = touched[j]
        ok &= abs(w[i] + alpha * dw[i]) <= w_limit  # False for NaN too
    for j in range(n):
        i = touched[j]
        if ok:
            w[i] += alpha * dw[i]
        dw[i] = 0.0
        mark[i] = False
    return ok


@numba.njit(cache=True)
def learn_one_lambda(
    w, state_t, state_tp1, gammas, cumulant, terminal, alpha, plain_coding, deltas, lam, traces, work
):  # pragma: no cover
    """One TD(lambda) transition on the fixed ``gammas`` with their traces (group 0 of ``traces``).

    ``traces`` is :attr:`gamma_net_core.linear.traces.Traces.kernel_args`. Returns like
    :func:`learn_one`; when the step is refused the weights and traces are as before. ``work`` is
    :func:`traced_work` scratch, left clean.
    """
    coding = named_coding(plain_coding)
    tiles = coding.tiles
    n_tilings = tiles.base.shape[0]
    bias_index = tiles.bias_index
    K = gammas.shape[0]
    u = np.empty(state_t.shape[0])
    u_ts = np.empty(n_timescale_dims(coding.timescale_input))
    keys_t = np.empty(n_tilings, dtype=np.uint64)
    keys_tp1 = np.empty(n_tilings, dtype=np.uint64)
    keys_ts = np.empty(n_tilings, dtype=np.uint64)
    idx = np.empty((K, n_tilings), dtype=np.int64)
    steps = np.empty(K)
    bias_x = np.empty(K)
    state_keys(state_t, tiles, u, keys_t)
    state_keys(state_tp1, tiles, u, keys_tp1)
    _td_errors(w, keys_t, keys_tp1, gammas, cumulant, terminal, coding, u_ts, keys_ts, idx, deltas, bias_x)
    ok = _step_sizes(deltas, alpha, steps)
    if ok:
        _, _, _, n_support, z_max = traces
        dw, mark, touched = work.dw, work.mark, work.touched
        old_z, old_support, old_n, old_max = work.old_z, work.old_support, work.old_n, work.old_max
        for k in range(K):
            save_support(traces, 0, k, old_z, old_support)
            old_n[k] = n_support[0, k]
            old_max[k] = z_max[0, k]
            decay_and_add(traces, 0, k, gammas[k] * lam, idx[k], bias_index, bias_x[k])
        n = _accumulate(traces, 0, deltas, dw, mark, touched, 0)
        ok = _apply_traced(w, alpha, dw, mark, touched, n, coding.w_limit)
        if not ok:
            for k in range(K):
                restore_support(traces, 0, k, old_z, old_support, old_n[k], old_max[k])
    _to_cumulant_units(deltas, gammas, coding.loss_scaling)
    return ok


@numba.njit(cache=True)
def learn_many_lambda(
    w, recording, gammas, schedule, plain_coding, probes, lam, traces, work
):  # pragma: no cover - compiled
    """:func:`learn_many` with TD(lambda) traces on the fixed Gamma ``gammas`` [K] (the same every step).

    A terminal transition, or a cut after it, cuts the traces after its update. Returns -1, or the first step whose
    update was refused (weights and traces then hold that step's partial state: the caller restores).
    """
    coding = named_coding(plain_coding)
    tiles = coding.tiles
    n_tilings = tiles.base.shape[0]
    bias_index = tiles.bias_index
    K = gammas.shape[0]
    u = np.empty(recording.states_t.shape[1])
    u_ts = np.empty(n_timescale_dims(coding.timescale_input))
    keys_t = np.empty(n_tilings, dtype=np.uint64)
    keys_tp1 = np.empty(n_tilings, dtype=np.uint64)
    keys_ts = np.empty(n_tilings, dtype=np.uint64)
    idx = np.empty((K, n_tilings), dtype=np.int64)
    deltas = np.empty(K)
    steps = np.empty(K)
    bias_x = np.empty(K)
    decays = np.empty(K)
    for k in range(K):
        decays[k] = gammas[k] * lam
    states_t, states_tp1 = recording.states_t, recording.states_tp1
    cumulants, terminals = recording.cumulants, recording.terminals
    step_size, decay_steps = schedule.step_size, schedule.decay_steps
    first_count, n_active = schedule.first_count, schedule.n_active
    dw, mark, touched, w_limit = work.dw, work.mark, work.touched, coding.w_limit
    for n in range(states_t.shape[0]):
        state_keys(states_t[n], tiles, u, keys_t)
        record_probes(w, keys_t, tiles, probes, n, coding.value_bias)
        state_keys(states_tp1[n], tiles, u, keys_tp1)
        end = terminals[n]
        _td_errors(w, keys_t, keys_tp1, gammas, cumulants[n], end, coding, u_ts, keys_ts, idx, deltas, bias_x)
        alpha = alpha_at(step_size, decay_steps, first_count + n, n_active)
        if not _step_sizes(deltas, alpha, steps):
            return n
        for k in range(K):
            decay_and_add(traces, 0, k, decays[k], idx[k], bias_index, bias_x[k])
        m = _accumulate(traces, 0, deltas, dw, mark, touched, 0)
        if not _apply_traced(w, alpha, dw, mark, touched, m, w_limit):
            return n
        if end or recording.cuts[n]:
            for k in range(K):
                decay_and_add(traces, 0, k, 0.0, idx[k, :0], -1, 1.0)
    return -1


def traced_work(n_features: int, n_gammas: int) -> TraceWork:
    """Clean scratch of the TD(lambda) kernels."""
    return TraceWork(
        dw=np.zeros(n_features),
        mark=np.zeros(n_features, dtype=np.bool_),
        touched=np.zeros(n_features, dtype=np.int64),
        old_z=np.zeros((n_gammas, n_features)),
        old_support=np.zeros((n_gammas, n_features), dtype=np.int64),
        old_n=np.zeros(n_gammas, dtype=np.int64),
        old_max=np.zeros(n_gammas),
    )


@numba.njit(cache=True)
def alpha_at(step_size, decay_steps, count, n_active):  # pragma: no cover - compiled
    """alpha for update number ``count`` (0-based), per active feature: ``step_size`` decayed linearly to 0
    over ``decay_steps`` updates (0: constant), divided by the ``n_active`` active features."""
    if decay_steps > 0:
        return step_size * max(0.0, 1.0 - count / decay_steps) / n_active
    return step_size / n_active


@numba.njit(cache=True)
def predict_many(w, states, gammas, plain_coding):  # pragma: no cover - compiled
    """V(S_n, gamma_k) = f / s(gamma_k) for each state and gamma: [N, G], in the cumulant's units."""
    coding = named_coding(plain_coding)
    tiles = coding.tiles
    n_tilings = tiles.base.shape[0]
    out = np.empty((states.shape[0], gammas.shape[0]))
    u = np.empty(states.shape[1])
    u_ts = np.empty(n_timescale_dims(coding.timescale_input))
    keys_ts = np.empty((gammas.shape[0], n_tilings), dtype=np.uint64)
    scales = np.empty(gammas.shape[0])
    bias_x = np.empty(gammas.shape[0])
    for k in range(gammas.shape[0]):
        timescale_keys(gammas[k], coding, u_ts, keys_ts[k])
        scales[k] = output_scale(gammas[k], coding.loss_scaling)
        bias_x[k] = bias_feature(gammas[k], coding)
    keys = np.empty(n_tilings, dtype=np.uint64)
    for n in range(states.shape[0]):
        state_keys(states[n], tiles, u, keys)
        for k in range(gammas.shape[0]):
            out[n, k] = _value(w, keys, keys_ts[k], tiles, bias_x[k]) / scales[k]
    return out


@numba.njit(cache=True)
def timescale_key_table(gammas, plain_coding):  # pragma: no cover - compiled
    """[G, n_tilings]: each gamma's part of every tiling's key (:func:`timescale_keys`)."""
    coding = named_coding(plain_coding)
    keys = np.empty((gammas.shape[0], coding.tiles.base.shape[0]), dtype=np.uint64)
    u = np.empty(n_timescale_dims(coding.timescale_input))
    for k in range(gammas.shape[0]):
        timescale_keys(gammas[k], coding, u, keys[k])
    return keys
