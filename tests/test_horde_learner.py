"""The Horde learner against its oracle, N single-question Γ-nets fed the same stream; readouts; checkpoints."""

from __future__ import annotations

import numpy as np
import pytest

from gamma_net_core.checkpoint import CheckpointError
from gamma_net_core.horde.learner import HordeLearner
from gamma_net_core.horde.questions import AdaptationConfig, Readout, load_questions
from gamma_net_core.linear import GammaNetConfig, LinearGammaNet
from gamma_net_core.timescales import TimescaleSampler, TimescaleSampling

CONFIG = GammaNetConfig(
    timescale_input="both",
    bias_unit="scaled",
    tilings=(8,),
    memory_size=256,
    step_size=0.3,
    state_low=(0.0, 0.0),
    state_high=(1.0, 1.0),
)
SAMPLING = TimescaleSampling(n_gamma=1, n_tau=3, tau_max=20)


def stream(steps, n_questions, seed=1):
    """A walk of two inputs, cumulants of several scales, continuations with a few zeros."""
    rng = np.random.default_rng(seed)
    states = np.clip(0.5 + np.cumsum(rng.normal(0, 0.05, (steps + 1, 2)), axis=0), 0, 1)
    cumulants = rng.normal(0, 1, (steps, n_questions)) * np.arange(1, n_questions + 1)
    continuations = (rng.random((steps, n_questions)) > 0.1).astype(float)
    continuations[:, 0] = 1.0  # one question never terminates
    return states, cumulants, continuations


@pytest.mark.parametrize(
    "config",
    [
        CONFIG,
        GammaNetConfig(
            bias_unit="scaled",
            tilings=(4, 4),
            tile_widths=(1.0, 0.5),
            memory_size=0,
            bias=False,
            loss_scaling=False,
            timescale_input="tau",
        ),
    ],
)
def test_n_questions_equal_n_single_learners(config):
    Q, T = 4, 150
    states, cumulants, continuations = stream(T, Q)
    horde = HordeLearner(config, names=[f"q{i}" for i in range(Q)], timescales=SAMPLING, rng=np.random.default_rng(7))
    singles = [LinearGammaNet(config, rng=np.random.default_rng(7)) for _ in range(Q)]
    sampler = TimescaleSampler(SAMPLING, np.random.default_rng(3))
    for t in range(T):
        g = sampler.sample()
        deltas = horde.learn(states[t], cumulants[t], states[t + 1], continuations[t], gammas=g)
        for q, net in enumerate(singles):
            d = net.learn(states[t], cumulants[t, q], states[t + 1], continuations[t, q] == 0.0, g)
            np.testing.assert_allclose(deltas[q], d, rtol=1e-12, atol=1e-12)
    for q, net in enumerate(singles):
        np.testing.assert_allclose(horde.weights[q], net.weights, rtol=1e-12, atol=1e-12)
    probe = np.array([0.0, 0.5, 0.9, 0.95])
    for s in states[::37]:
        np.testing.assert_allclose(horde.predict(s, probe), [net.predict(s, probe) for net in singles], rtol=1e-10)


def test_step_learns_from_the_previous_inputs_and_draws_its_timescales():
    states, cumulants, continuations = stream(30, 2)
    a = HordeLearner(CONFIG, names=["a", "b"], timescales=SAMPLING, rng=np.random.default_rng(5))
    b = HordeLearner(CONFIG, names=["a", "b"], timescales=SAMPLING, rng=np.random.default_rng(5))
    assert a.step(states[0], cumulants[0], continuations[0]) is None
    for t in range(30):
        if t:
            a.step(states[t], cumulants[t - 1], continuations[t - 1])
        b_deltas = (
            None
            if t == 0
            else b.learn(states[t - 1], cumulants[t - 1], states[t], continuations[t - 1], gammas=b.sampler.sample())
        )
        assert (b_deltas is None) == (t == 0)
    np.testing.assert_array_equal(a.weights, b.weights)
    assert a.update_count == 29


def test_a_terminating_question_learns_the_return_until_its_event():
    """A constant cumulant 1 with the return stopping every 5th step: V = sum of gamma^j up to the event."""
    config = GammaNetConfig(
        bias_unit="scaled",
        tilings=(1,),
        memory_size=0,
        bias=False,
        step_size=0.5,
        state_low=(0.0,),
        state_high=(5.0,),
        timescale_input="gamma",
        tile_widths=(0.1,),
    )
    horde = HordeLearner(config, names=["forever", "until"], rng=np.random.default_rng(0))
    gammas = np.array([0.0, 0.5, 0.8])
    for n in range(4000):
        phase = n % 5
        cont = 0.0 if (phase + 1) % 5 == 0 else 1.0  # the state after phase 4 ends the return
        horde.learn([phase + 0.5], [1.0, 1.0], [(phase + 1) % 5 + 0.5], [1.0, cont], gammas=gammas)
    for phase in range(5):
        remaining = 5 - phase  # cumulants until (and including) the one into the terminating state
        want = [(1 - g**remaining) / (1 - g) for g in gammas]
        np.testing.assert_allclose(horde.predict([phase + 0.5], gammas)[1], want, rtol=0.03)
        np.testing.assert_allclose(horde.predict([phase + 0.5], gammas)[0], 1 / (1 - gammas), rtol=0.03)


def test_bad_input_is_refused_naming_it_and_changes_nothing():
    horde = HordeLearner(CONFIG, names=["a", "b"], timescales=SAMPLING, rng=np.random.default_rng(0))
    horde.learn([0.1, 0.2], [1.0, 2.0], [0.2, 0.3])
    before = horde.weights.copy()
    cases = [
        (([0.1], [1, 2], [0.2, 0.3], None), "state_t must have 2 state inputs"),
        (([0.1, 0.2], [1.0], [0.2, 0.3], None), "cumulants must be [2], one per question"),
        (([0.1, 0.2], [1.0, np.nan], [0.2, 0.3], None), "cumulants must be finite; got nan for question 'b'"),
        (([0.1, 0.2], [1.0, 1.0], [0.2, 0.3], [1.0, 2.0]), "continuations must be in [0, 1]; got 2.0 for question 'b'"),
    ]
    for args, says in cases:
        with pytest.raises(ValueError) as err:
            horde.learn(*args)
        assert says in str(err.value)
    with pytest.raises(FloatingPointError, match="question 'a'"):
        horde.learn([0.1, 0.2], [1e308, 1.0], [0.2, 0.3])
    np.testing.assert_array_equal(horde.weights, before)
    assert horde.update_count == 1


@pytest.mark.parametrize("method", ["constant", "autostep"])
def test_checkpoint_round_trip_resumes_the_same_stream(tmp_path, method):
    states, cumulants, continuations = stream(40, 3)

    def make():
        return HordeLearner(
            CONFIG,
            names=["a", "b", "c"],
            timescales=SAMPLING,
            adaptation=AdaptationConfig(method=method),
            readouts=[Readout(name="h", kind="hyperbolic")],
            rng=np.random.default_rng(2),
        )

    a, b = make(), make()
    for t in range(20):
        a.step(states[t], cumulants[t], continuations[t])
        b.step(states[t], cumulants[t], continuations[t])
    a.save(tmp_path / "h.npz")
    c = HordeLearner.load(tmp_path / "h.npz")
    for t in range(20, 40):
        b.step(states[t], cumulants[t], continuations[t])
        c.step(states[t], cumulants[t], continuations[t])
    np.testing.assert_array_equal(b.weights, c.weights)
    np.testing.assert_array_equal(b.readout(states[3], "h"), c.readout(states[3], "h"))


def test_checkpoint_of_another_spec_or_shape_is_refused(tmp_path):
    spec = load_questions(_small_spec())
    horde = HordeLearner.from_spec(spec)
    horde.save(tmp_path / "h.npz")
    HordeLearner.load(tmp_path / "h.npz", spec=spec)
    doc = _small_spec()
    doc["learner"]["step_size"] = 0.5
    with pytest.raises(CheckpointError, match=r"learner\.step_size: file has 0\.2, expected 0\.5"):
        HordeLearner.load(tmp_path / "h.npz", spec=load_questions(doc))
    np.savez(tmp_path / "bad.npz", weights=np.zeros(3))
    with pytest.raises(CheckpointError, match="not a gamma_net_ros checkpoint"):
        HordeLearner.load(tmp_path / "bad.npz")


def _small_spec():
    js = {"topic": "/joint_states", "type": "sensor_msgs/msg/JointState"}
    return {
        "state": [{**js, "field": "position[0]", "low": -1.0, "high": 1.0}],
        "learner": {"tilings": [4], "memory_size": 128, "step_size": 0.2},
        "timescales": {"n_gamma": 1, "n_tau": 1, "tau_max": 10},
        "questions": [{"name": "speed", "cumulant": {**js, "field": "velocity[0]", "transform": "abs"}}],
    }


def test_autostep_kernel_equals_its_reference():
    from gamma_net_core.horde.adaptive import ReferenceAutostepTD

    Q, T = 3, 60
    adaptation = AdaptationConfig(method="autostep", meta_step_size=0.05, trace_tau=100.0)
    states, cumulants, continuations = stream(T, Q, seed=4)
    horde = HordeLearner(
        CONFIG, names=["a", "b", "c"], timescales=SAMPLING, adaptation=adaptation, rng=np.random.default_rng(9)
    )
    refs = [ReferenceAutostepTD(CONFIG, adaptation, rng=np.random.default_rng(9)) for _ in range(Q)]
    sampler = TimescaleSampler(SAMPLING, np.random.default_rng(1))
    for t in range(T):
        g = sampler.sample()
        deltas = horde.learn(states[t], cumulants[t], states[t + 1], continuations[t], gammas=g)
        for q, ref in enumerate(refs):
            d = ref.learn(states[t], cumulants[t, q], states[t + 1], continuations[t, q] == 0.0, g)
            np.testing.assert_allclose(deltas[q], d, rtol=1e-9, atol=1e-9)
    for q, ref in enumerate(refs):
        np.testing.assert_allclose(horde.weights[q], ref.w, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(horde.step_sizes[q], ref.alpha, rtol=1e-9)
    assert not np.allclose(horde.step_sizes, CONFIG.step_size / 9)  # the step sizes did adapt
