"""TD(lambda) over a recording: each step TD(0) on the draw, then TD(lambda) on the ladder's rungs.

The numba loop of :meth:`gamma_net_core.linear.LinearGammaNet.learn_recording` with ``lam`` > 0
(the update: :mod:`gamma_net_core.linear.traces`). It calls the TD(0) and TD(lambda) kernels of
:mod:`gamma_net_core.linear.kernels` one transition at a time, in that order, so a recording
learns exactly what :meth:`~gamma_net_core.linear.LinearGammaNet.learn` does step by step.
"""

from __future__ import annotations

import numba

from gamma_net_core.linear.kernels import _learn_many, _learn_many_lambda


@numba.njit(cache=True)
def learn_many_laddered(
    w,
    states_t,
    states_tp1,
    cumulants,
    terminals,
    drawn,
    ladder,
    step_size,
    traced_step_size,
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
    lam,
    traces,
    work,
):  # pragma: no cover - compiled
    """Each transition: TD(0) on ``drawn[n]`` at ``step_size``, then TD(lambda) on ``ladder`` at ``traced_step_size``.

    Predictions are recorded before the step, as :func:`_learn_many` records them. Returns -1, or
    the first step whose update was refused (the caller restores weights and traces).
    """
    none = probe_keys[:0]
    for n in range(states_t.shape[0]):
        one = slice(n, n + 1)
        if n >= record_from:
            out, rf = predictions[n - record_from : n - record_from + 1], 0
        else:
            out, rf = predictions[:0], 1
        bad = _learn_many(
            w, states_t[one], states_tp1[one], cumulants[one], terminals[one], drawn[one], step_size, decay_steps,
            count + n, n_active, loss_scaling, ts, tiles, w_limit, probe_keys, probe_scales, rf, out,
        )  # fmt: skip
        if bad >= 0:
            return n
        bad = _learn_many_lambda(
            w, states_t[one], states_tp1[one], cumulants[one], terminals[one], ladder, traced_step_size, decay_steps,
            count + n, n_active, loss_scaling, ts, tiles, w_limit, none, probe_scales[:0], 1, predictions[:0], lam,
            traces, work,
        )  # fmt: skip
        if bad >= 0:
            return n
    return -1
