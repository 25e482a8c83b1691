"""The Horde's run kernels against the plain kernels, their oracle: the same learning to float rounding.

The run kernels (gamma_net_core/horde/kernels.py: ``constant_step_runs``, ``predict_runs``) regroup
the plain kernels' sums so that each distinct active row of the weights is touched about once per
step, so they agree to float rounding, not bit for bit. Tolerance: every weight and prediction
within :data:`TOL` (1e-12) of the plain kernels', relative to the largest magnitude of its kind (a
question's weights, or predictions), and every TD error relative to the larger of the step's TD
errors and the values it is a difference of (delta = s C + gamma V' - V: V's rounding is in it).
Measured: at most 1.2e-13 of its scale on the arm below (a readout; weights 1.2e-14 after 1,343
steps), 1.3e-14 on the chain (weights 1.0e-14 after 20,000 steps).
"""

from __future__ import annotations

import types

import numpy as np
import pytest
from test_lambda_between import OFF_LADDER_TAUS, exact, ring, stationary

from gamma_net_core.horde.kernels import BLOCK
from gamma_net_core.horde.learner import HordeLearner
from gamma_net_core.horde.questions import load_questions
from gamma_net_core.linear import GammaNetConfig
from gamma_net_core.paths import config_file
from gamma_net_core.signals.arm_recording import simulate_arm
from gamma_net_core.timescales import TimescaleSampling

#: Relative to the largest magnitude of its kind (see the module docstring).
TOL = 1e-12


def close(got, want, *, scale=None) -> None:
    """got equals want within TOL of ``scale`` (default: the largest |want|)."""
    want = np.asarray(want)
    scale = np.max(np.abs(want)) if scale is None else scale
    np.testing.assert_allclose(got, want, rtol=TOL, atol=TOL * scale)


def td_scale(deltas, values) -> float:
    """The scale of a step's TD errors: the larger of theirs and the values they are differences of."""
    return max(np.max(np.abs(deltas)), np.max(np.abs(values)))


def both(make):
    """(run kernels, plain kernels) learners made alike by ``make(reference_kernels)``."""
    return make(False), make(True)


def arm_rows(spec, recording):
    """Each step's (inputs, cumulants, continuations) of ``spec``'s questions on a simulated arm recording."""
    for t in range(recording.position.shape[0]):
        msg = types.SimpleNamespace(
            name=list(recording.joint_names),
            position=list(recording.position[t]),
            velocity=list(recording.velocity[t]),
            effort=list(recording.effort[t]),
        )
        inputs = np.array([s.path.resolve(msg) for s in spec.state])
        cumulants = np.array([q.cumulant.apply(q.cumulant.path.resolve(msg)) for q in spec.questions])
        continuations = np.array(
            [1.0 if q.termination is None else q.termination.continuation(q.termination.path.resolve(msg))
             for q in spec.questions]
        )  # fmt: skip
        yield inputs, cumulants, continuations


@pytest.mark.slow
def test_the_arms_questions_learn_the_same_on_the_run_kernels():
    """config/horde.yaml (100 tilings hashed into 2,048 + bias, |Gamma_t| = 32, an event question), 3 circuits."""
    spec = load_questions(config_file("horde"))
    fast, plain = both(lambda reference: HordeLearner.from_spec(spec, reference_kernels=reference))
    published = 1.0 - 1.0 / np.asarray(spec.publish_taus)
    recording = simulate_arm(circuits=3, rng=np.random.default_rng(0))
    ends = 0
    for t, (inputs, cumulants, continuations) in enumerate(arm_rows(spec, recording)):
        usable = None if t % 50 else np.array([True, False, True, True])  # now and then a question stops
        a = fast.step(inputs, cumulants, continuations, usable=usable)
        b = plain.step(inputs, cumulants, continuations, usable=usable)
        ends += continuations[3] == 0.0
        values, want = fast.predict(inputs, published), plain.predict(inputs, published)
        if b is not None:
            for q in range(len(spec.questions)):
                if usable is None or usable[q]:
                    close(a[q], b[q], scale=td_scale(b[q], want[q]))
        for q in range(len(spec.questions)):
            close(values[q], want[q])
        for name in plain.readout_names:
            close(fast.readout(inputs, name), plain.readout(inputs, name))
    assert ends > 0 and fast.update_count == plain.update_count > 1000
    for q in range(len(spec.questions)):
        close(fast.weights[q], plain.weights[q])
    assert np.count_nonzero(fast.weights) > 1000  # it learned


@pytest.mark.slow
def test_on_a_chain_both_kernels_reach_the_same_errors_against_exact_values():
    """The 8-state ring: continuing, episodic (the return stops on entering state 0) and a rare cumulant;
    errors at timescales never trained on (OFF_LADDER_TAUS) against V = (I - gamma P B)^-1 P c."""
    steps = 20_000
    P, c = ring()
    n = len(c)
    rare = (np.arange(n) == 5).astype(float) * 4.0
    beta = np.ones(n)
    beta[0] = 0.0
    rng = np.random.default_rng(0)
    cumulative = np.cumsum(P, axis=1)
    s = np.zeros(steps + 1, dtype=np.int64)
    u = rng.random(steps)
    for t in range(steps):
        s[t + 1] = min(np.searchsorted(cumulative[s[t]], u[t]), n - 1)
    x = (s + 0.5) / n
    config = GammaNetConfig(bias_unit="scaled",
        state_low=(0.0,), state_high=(1.0,), tilings=(8,), tile_widths=(1 / 16,), memory_size=0, bias=True,
        step_size=0.03, step_size_decay_steps=steps, timescale_input="both", tau_scale=100.0,
    )  # fmt: skip
    sampling = TimescaleSampling(n_gamma=1, n_tau=29)
    names = ["continuing", "episodic", "rare"]
    fast, plain = both(
        lambda reference: HordeLearner(
            config, names=names, timescales=sampling, rng=np.random.default_rng(1), reference_kernels=reference
        )
    )
    for t in range(steps):
        cumulants = [c[s[t + 1]], c[s[t + 1]], rare[s[t + 1]]]
        continuations = [1.0, beta[s[t + 1]], 1.0]
        a = fast.learn([x[t]], cumulants, [x[t + 1]], continuations)
        b = plain.learn([x[t]], cumulants, [x[t + 1]], continuations)
        close(a, b, scale=td_scale(b, plain.predict([x[t + 1]], [0.99])))
    states = ((np.arange(n) + 0.5) / n)[:, None]
    d = stationary(P)
    questions = [(c, np.ones(n)), (c, beta), (rare, np.ones(n))]
    for q, (cumulant, continuation) in enumerate(questions):
        close(fast.weights[q], plain.weights[q])
        for tau in OFF_LADDER_TAUS:
            gamma = 1.0 - 1.0 / tau
            want = exact(P, cumulant, gamma, continuation)
            got = np.array([fast.predict(s, [gamma])[q, 0] for s in states])
            ref = np.array([plain.predict(s, [gamma])[q, 0] for s in states])
            close(got, ref)
            error = np.sqrt(d @ (got - want) ** 2 / (d @ want**2))
            error_plain = np.sqrt(d @ (ref - want) ** 2 / (d @ want**2))
            assert error == pytest.approx(error_plain, rel=1e-9, abs=1e-12)
            assert error < 0.25, (names[q], tau, error)  # both learned the values


#: Codings the arm does not use: hashing with collisions within one gamma's tiles, no bias, no loss
#: scaling, one timescale input.
CODINGS = {
    "collisions": GammaNetConfig(
        timescale_input="both",
        bias=True,
        bias_unit="scaled",
        tilings=(8,),
        memory_size=16,
        step_size=0.3,
        state_low=(0.0, 0.0),
        state_high=(1.0, 1.0),
    ),
    "unhashed-tau-no-bias": GammaNetConfig(
        bias_unit="scaled",
        tilings=(4, 4),
        tile_widths=(1.0, 0.5),
        memory_size=0,
        bias=False,
        loss_scaling=False,
        timescale_input="tau",
        step_size=0.1,
    ),
    "gamma-only": GammaNetConfig(
        bias_unit="scaled", tilings=(6,), memory_size=64, timescale_input="gamma", step_size=0.2
    ),
}


@pytest.mark.parametrize("coding", CODINGS)
def test_other_codings_blocks_and_repeated_gammas_learn_the_same(coding):
    """More questions than a block (the last block short), Gamma_t unsorted with repeated gammas, terminations;
    a refused step leaves both unchanged and names the same question."""
    config = CODINGS[coding]
    Q, T = BLOCK + 37, 60
    rng = np.random.default_rng(3)
    states = np.clip(0.5 + np.cumsum(rng.normal(0, 0.08, (T + 1, 2)), axis=0), 0, 1)[:, : config.n_state]
    cumulants = rng.normal(0, 1, (T, Q)) * rng.uniform(0.1, 5.0, Q)
    continuations = (rng.random((T, Q)) > 0.1).astype(float)
    sampling = TimescaleSampling(n_gamma=2, n_tau=4, tau_max=30)
    fast, plain = both(
        lambda reference: HordeLearner(
            config, names=[f"q{i}" for i in range(Q)], timescales=sampling, rng=np.random.default_rng(4),
            reference_kernels=reference,
        )
    )  # fmt: skip
    probe = np.array([0.9, 0.0, 0.5, 0.9, 0.97, 0.5])  # unsorted, repeated
    for t in range(T):
        gammas = fast.sampler.sample()
        if t % 3 == 0:
            gammas = np.concatenate([gammas[::-1], gammas[:2]])  # repeated gammas, descending
        plain.sampler.sample()  # the two learners draw alike
        a = fast.learn(states[t], cumulants[t], states[t + 1], continuations[t], gammas=gammas)
        b = plain.learn(states[t], cumulants[t], states[t + 1], continuations[t], gammas=gammas)
        close(a, b)
        close(fast.predict(states[t + 1], probe), plain.predict(states[t + 1], probe))
    close(fast.weights, plain.weights)
    before = fast.weights.copy()
    huge = cumulants[0].copy()
    huge[Q - 2] = 1e308  # in the last block
    for learner in (fast, plain):
        with pytest.raises(FloatingPointError, match=f"question 'q{Q - 2}'"):
            learner.learn(states[0], huge, states[1], gammas=np.array([0.5, 0.9, 0.95, 0.99]))
    np.testing.assert_array_equal(fast.weights, before)


def test_td_lambda_learns_on_the_plain_kernels_and_predicts_on_the_run_kernel():
    """With lam > 0 the learning stays on the plain kernels (bit for bit N single learners, tests/test_lambda.py);
    the predictions take the run kernel."""
    config = GammaNetConfig(timescale_input="both", bias=True, bias_unit="scaled", tilings=(8,), memory_size=256,
                            step_size=0.2, lam=0.6, lambda_view="backward", state_low=(0.0, 0.0),
                            state_high=(1.0, 1.0))  # fmt: skip
    sampling = TimescaleSampling(n_gamma=1, n_tau=3, tau_max=20)
    rng = np.random.default_rng(5)
    T, Q = 80, 3
    states = np.clip(0.5 + np.cumsum(rng.normal(0, 0.05, (T + 1, 2)), axis=0), 0, 1)
    cumulants = rng.normal(0, 1, (T, Q))
    fast, plain = both(
        lambda reference: HordeLearner(
            config, names=["a", "b", "c"], timescales=sampling, rng=np.random.default_rng(6),
            reference_kernels=reference,
        )
    )  # fmt: skip
    probe = np.array([0.0, 0.6, 0.9, 0.95])
    for t in range(T):
        a = fast.step(states[t], cumulants[t])
        b = plain.step(states[t], cumulants[t])
        if b is not None:
            np.testing.assert_array_equal(a, b)
        close(fast.predict(states[t], probe), plain.predict(states[t], probe))
    np.testing.assert_array_equal(fast.weights, plain.weights)
    np.testing.assert_array_equal(fast.traces, plain.traces)
