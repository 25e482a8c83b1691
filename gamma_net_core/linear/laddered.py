"""TD(lambda) over a recording: each step TD(0) on the draw, then TD(lambda) on the ladder's rungs.

The numba loop of :meth:`gamma_net_core.linear.LinearGammaNet.learn_recording` with ``lam`` > 0
(the update: :mod:`gamma_net_core.linear.traces`). It calls the TD(0) and TD(lambda) kernels of
:mod:`gamma_net_core.linear.kernels` one transition at a time, in that order, so a recording
learns exactly what :meth:`~gamma_net_core.linear.LinearGammaNet.learn` does step by step.
"""

from __future__ import annotations

import numba

from gamma_net_core.linear.kernels import Probes, Recording, Schedule, learn_many, learn_many_lambda


@numba.njit(cache=True)
def learn_many_laddered(
    w, recording, drawn, ladder, schedule, traced_schedule, plain_coding, probes, lam, traces, work
):  # pragma: no cover - compiled
    """Each transition: TD(0) on ``drawn[n]`` at ``schedule``, then TD(lambda) on ``ladder`` at ``traced_schedule``.

    ``recording``, ``schedule`` and ``probes`` are those of :func:`learn_many` (``traced_schedule``
    the same with alpha (1 - lambda)); ``traces`` and ``work`` those of :func:`learn_many_lambda`.
    Predictions are recorded before the step, as :func:`learn_many` records them. Returns -1, or
    the first step whose update was refused (the caller restores weights and traces).
    """
    states_t = recording.states_t
    states_tp1 = recording.states_tp1
    cumulants = recording.cumulants
    terminals = recording.terminals
    keys = probes.keys
    scales = probes.scales
    record_from = probes.record_from
    predictions = probes.predictions
    first_count = schedule.first_count
    none = Probes(keys[:0], scales[:0], 1, predictions[:0])  # the traced step records nothing
    for n in range(states_t.shape[0]):
        one = Recording(states_t[n : n + 1], states_tp1[n : n + 1], cumulants[n : n + 1], terminals[n : n + 1],
                        recording.cuts[n : n + 1])  # fmt: skip
        if n >= record_from:
            here = Probes(keys, scales, 0, predictions[n - record_from : n - record_from + 1])
        else:
            here = Probes(keys, scales, 1, predictions[:0])
        step = Schedule(schedule.step_size, schedule.decay_steps, first_count + n, schedule.n_active)
        if learn_many(w, one, drawn[n : n + 1], step, plain_coding, here) >= 0:
            return n
        traced = Schedule(traced_schedule.step_size, traced_schedule.decay_steps, first_count + n,
                          traced_schedule.n_active)  # fmt: skip
        if learn_many_lambda(w, one, ladder, traced, plain_coding, none, lam, traces, work) >= 0:
            return n
    return -1
