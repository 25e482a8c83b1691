"""HordeLearner with off-policy questions: TDC per question, equal to single learners; checkpoints; refusals."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from gamma_net_core.horde.learner import HordeLearner
from gamma_net_core.horde.policies import Policy, PolicyReadings
from gamma_net_core.horde.questions import AdaptationConfig, load_questions
from gamma_net_core.linear import GammaNetConfig, OffPolicyConfig, OffPolicyGammaNet
from gamma_net_core.reference import ReferenceOffPolicyTD
from gamma_net_core.timescales import TimescaleSampling

SINGLE = OffPolicyConfig(
    state_low=(0.0, 0.0), state_high=(1.0, 1.0), tilings=(6,), tile_widths=(0.5,), memory_size=128, step_size=0.2,
    secondary_step_size=0.3, rho_max=5.0, bias=False, timescale_input="both",
)  # fmt: skip
HORDE = GammaNetConfig(**{f.name: getattr(SINGLE, f.name) for f in dataclasses.fields(GammaNetConfig)})


def policy(**changes) -> Policy:
    base = Policy(action=None, target="sign", parameters=(("sign", "positive"),), behaviour="matching", rho_max=5.0,
                  secondary_step_size=0.3)  # fmt: skip
    return dataclasses.replace(base, **changes)


def test_a_horde_of_off_policy_questions_equals_single_learners_and_its_on_policy_one_td0():
    Q, K = 5, 4
    rng = np.random.default_rng(0)
    # Questions 0-3 off-policy, each its own target; question 4 on-policy (rho 1, TD(0)).
    horde = HordeLearner(HORDE, names=[f"q{i}" for i in range(Q)], rng=np.random.default_rng(7),
                         policies=[policy()] * 4 + [None])  # fmt: skip
    singles = [OffPolicyGammaNet(SINGLE, rng=np.random.default_rng(7)) for _ in range(4)]
    oracle = ReferenceOffPolicyTD(SINGLE, rng=np.random.default_rng(7))  # question 2's, in plain NumPy
    on_policy = HordeLearner(HORDE, names=["q4"], rng=np.random.default_rng(7), reference_kernels=True)
    pi = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5], [0.9, 0.1]])
    b = np.array([0.4, 0.6])
    for _ in range(120):
        s_t, s_tp1 = rng.random(2), rng.random(2)
        action = int(rng.random() < b[1])
        rhos = np.append(pi[:, action] / b[action], 1.0)
        cumulants = rng.normal(size=Q)
        ends = rng.random(Q) < 0.1
        gammas = rng.random(K) * 0.95
        deltas = horde.learn(s_t, cumulants, s_tp1, np.where(ends, 0.0, 1.0), gammas=gammas, rhos=rhos)
        for q, single in enumerate(singles):
            np.testing.assert_allclose(
                deltas[q], single.learn(s_t, cumulants[q], s_tp1, bool(ends[q]), gammas, rho=rhos[q]), atol=1e-12
            )
        oracle.learn(s_t, cumulants[2], s_tp1, bool(ends[2]), gammas, rho=rhos[2])
        on_policy.learn(s_t, cumulants[4:], s_tp1, np.where(ends[4:], 0.0, 1.0), gammas=gammas)
    for q, single in enumerate(singles):
        np.testing.assert_allclose(horde.weights[q], single.weights, rtol=0, atol=1e-12)
        np.testing.assert_allclose(horde.secondary_weights[q], single.secondary_weights, rtol=0, atol=1e-12)
    np.testing.assert_allclose(horde.weights[2], oracle.w, rtol=0, atol=1e-12)
    np.testing.assert_allclose(horde.secondary_weights[2], oracle.h, rtol=0, atol=1e-12)
    np.testing.assert_allclose(horde.weights[4], on_policy.weights[0], rtol=0, atol=1e-12)
    assert not horde.secondary_weights[4].any()  # beta 0: the on-policy question's h stays 0
    assert np.max(np.abs(horde.weights[0] - horde.weights[1])) > 1e-3
    # rho is clipped at each policy's rho_max, as the single learner clips at its own
    before = horde.weights.copy()
    horde.learn(s_t, np.zeros(Q), s_tp1, gammas=gammas, rhos=[100.0, 0, 0, 0, 1])
    singles[0].learn(s_t, 0.0, s_tp1, False, gammas, rho=100.0)
    np.testing.assert_allclose(horde.weights[0], singles[0].weights, rtol=0, atol=1e-12)
    assert not np.array_equal(horde.weights[0], before[0])


def doc(*, matching=True) -> dict:
    cmd = {"topic": "/cmd", "type": "geometry_msgs/msg/Twist"}
    behaviour = {"kind": "matching"} if matching else {"kind": "field", "signal": {**cmd, "field": "linear.z"}}
    spin = {"action": {**cmd, "field": "angular.z"}, "target": {"kind": "sign", "sign": "positive"},
            "behaviour": behaviour}  # fmt: skip
    still = {**spin, "target": {"kind": "interval", "low": -0.1, "high": 0.1}}
    return {
        "state": [{**cmd, "field": "linear.y", "low": 0.0, "high": 1.0}],
        "learner": {"tilings": [8], "memory_size": 256, "step_size": 0.1},
        "timescales": {"n_gamma": 2, "n_tau": 2, "tau_max": 20},
        "questions": [
            {"name": "speed_if_spinning", "cumulant": {**cmd, "field": "linear.x"}, "policy": spin},
            {"name": "speed_if_still", "cumulant": {**cmd, "field": "linear.x"}, "policy": still},
            {"name": "speed", "cumulant": {**cmd, "field": "linear.x"}},
        ],
    }


def stream(steps: int, seed: int = 1):
    """The speed C_{t+1} is the action A_t taken at the previous step plus the state: a target's values differ."""
    rng = np.random.default_rng(seed)
    a = 0.0
    for _ in range(steps):
        x = rng.random()
        c = a + x
        a = rng.choice([-2.0, 0.0, 1.0])
        yield np.array([x]), np.full(3, c), PolicyReadings(np.full(3, a), np.full(3, np.nan), np.full(3, np.nan))


def test_steps_learn_from_policy_readings_and_a_resumed_learner_equals_the_uninterrupted_one(tmp_path):
    spec = load_questions(doc())
    whole, first = HordeLearner.from_spec(spec), HordeLearner.from_spec(spec)
    assert whole.off_policy
    data = list(stream(400))
    for inputs, cumulants, readings in data[:200]:
        whole.step(inputs, cumulants, policy=readings)
        first.step(inputs, cumulants, policy=readings)
    first.save(tmp_path / "horde.npz")
    resumed = HordeLearner.load(tmp_path / "horde.npz", spec=spec)
    np.testing.assert_array_equal(resumed.ratios.counts, first.ratios.counts)
    for inputs, cumulants, readings in data[200:]:
        whole.step(inputs, cumulants, policy=readings)
        resumed.step(inputs, cumulants, policy=readings)
    np.testing.assert_array_equal(resumed.weights, whole.weights)
    np.testing.assert_array_equal(resumed.secondary_weights, whole.secondary_weights)
    np.testing.assert_array_equal(resumed.ratios.counts, whole.ratios.counts)
    assert resumed.update_count == whole.update_count == 399
    # the behaviour took each of three actions about equally: b(positive) about 1/3, b(still) about 1/3
    np.testing.assert_allclose(whole.ratios.behaviour_estimates()[:2, 1], 1 / 3, atol=0.06)
    # the questions learned what differs: the cumulant under "spinning" is larger than under "still"
    x = np.array([0.5])
    v = whole.predict(x, gammas=[0.0])[:, 0]
    # E[C | x, pi]: spinning 1 + x, still 0 + x (the behaviour's, (-2 + 0 + 1) / 3 + x, is noisier: C's spread)
    np.testing.assert_allclose(v[:2], [1.5, 0.5], atol=0.3)
    assert v[2] < v[0] - 0.5
    # a checkpoint of other policies is refused
    other = load_questions({**doc(), "questions": doc()["questions"][::-1]})
    with pytest.raises(Exception, match="another configuration"):
        HordeLearner.load(tmp_path / "horde.npz", spec=other)


def test_an_unread_action_or_behaviour_probability_stops_only_its_question():
    spec = load_questions(doc(matching=False))
    horde = HordeLearner.from_spec(spec)
    nan = np.full(3, np.nan)
    horde.step([0.5], [1.0, 1.0, 1.0], policy=PolicyReadings(np.ones(3), nan, np.full(3, 0.5)))
    before = horde.weights.copy()
    # question 1's behaviour probability is not readable: it does not learn the transition out of this step
    horde.step([0.6], [1.0, 1.0, 1.0], policy=PolicyReadings(np.ones(3), nan, np.array([0.5, math.nan, 0.5])))
    assert not np.array_equal(horde.weights[0], before[0])
    np.testing.assert_array_equal(horde.weights[1], before[1])


def test_bad_off_policy_input_is_refused_in_one_line():
    with pytest.raises(ValueError, match=r"off-policy questions learn by TDC .* adaptation 'autostep'"):
        HordeLearner(HORDE, names=["a"], rng=np.random.default_rng(0), policies=[policy()],
                     adaptation=AdaptationConfig(method="autostep"))  # fmt: skip
    with pytest.raises(ValueError, match="policies must be 2, one per question"):
        HordeLearner(HORDE, names=["a", "b"], rng=np.random.default_rng(0), policies=[policy()])
    on = HordeLearner(HORDE, names=["a"], rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="rhos given, but no question has a policy"):
        on.learn([0.1, 0.1], [1.0], [0.2, 0.2], rhos=[1.0])
    off = HordeLearner(HORDE, names=["a", "b"], rng=np.random.default_rng(0), policies=[policy(), None])
    with pytest.raises(ValueError, match=r"got -1.0 for question 'a'"):
        off.learn([0.1, 0.1], [1.0, 1.0], [0.2, 0.2], rhos=[-1.0, 1.0])
    with pytest.raises(ValueError, match=r"and 1 for an on-policy question; got 2.0 for question 'b'"):
        off.learn([0.1, 0.1], [1.0, 1.0], [0.2, 0.2], rhos=[1.0, 2.0])
    with pytest.raises(ValueError, match=r"questions \['a'\] have target policies: give rhos"):
        off.learn([0.1, 0.1], [1.0, 1.0], [0.2, 0.2])  # e.g. horde train, which reads no actions
    with pytest.raises(ValueError, match="off-policy questions need PolicyReadings each step; got NoneType"):
        off.step([0.1, 0.1], [1.0, 1.0])
    assert off.update_count == 0 and not off.weights.any()
    assert TimescaleSampling  # the sampling's defaults serve an off-policy Horde too


def test_rupee_falls_where_the_question_learns_and_on_policy_questions_keep_their_return_errors():
    from gamma_net_core.horde.off_policy_error import ErrorsWithOffPolicy
    from gamma_net_core.horde.online_error import OnlineError

    gammas = np.array([0.0, 0.5])
    runs = {}
    for step_size in (0.1, 1e-5):  # learning, and all but frozen: h learns the error either way
        spec = load_questions({**doc(), "learner": {**doc()["learner"], "step_size": step_size}})
        learner = HordeLearner.from_spec(spec)
        errors = ErrorsWithOffPolicy(learner, gammas=gammas)
        plain = OnlineError(gammas=gammas, n_questions=3)
        for inputs, cumulants, readings in stream(3000, seed=2):
            learner.step(inputs, cumulants, policy=readings)
            table = learner.predict(inputs, gammas)
            errors.observe(cumulants, np.ones(3), table)
            plain.observe(cumulants, np.ones(3), table)
        runs[step_size] = errors.rmse()
        assert np.all(errors.counts[:2] == 2999)
        np.testing.assert_array_equal(errors.rmse()[2], plain.rmse()[2])  # the on-policy question: as before
        np.testing.assert_array_equal(errors.baseline_rmse()[2], plain.baseline_rmse()[2])
        assert np.isnan(errors.baseline_rmse()[:2]).all()
    learning, frozen = runs[0.1], runs[1e-5]
    assert np.all(frozen[:2] > 0.3)  # the frozen questions predict 0 where the target's cumulant is about 1.5 and 0.5
    assert np.all(learning[:2] < 0.6 * frozen[:2])  # measured: 0.08-0.16 (spinning), 0.28-0.52 (still)
