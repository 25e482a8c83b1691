"""Target policies as data: a question's policy: in the questions YAML, rho per step, one-line refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest
from geometry_msgs.msg import Twist

from gamma_net_core.horde.policies import TARGETS, ImportanceRatios, PolicyReadings
from gamma_net_core.horde.questions import load_questions

CMD = {"topic": "/cmd", "type": "geometry_msgs/msg/Twist"}


def doc(policy, **more) -> dict:
    question = {"name": "q", "cumulant": {**CMD, "field": "linear.x"}, "policy": policy, **more}
    return {"state": [{**CMD, "field": "linear.y", "low": -1.0, "high": 1.0}], "questions": [question]}


def spin(sign="positive", behaviour=None, **policy) -> dict:
    return {
        "action": {**CMD, "field": "angular.z"},
        "target": {"kind": "sign", "sign": sign},
        "behaviour": behaviour or {"kind": "matching"},
        **policy,
    }


def readings(actions, references=None, probabilities=None) -> PolicyReadings:
    n = len(actions)
    nan = [math.nan] * n
    return PolicyReadings(np.array(actions, float), np.array(references or nan, float),
                          np.array(probabilities or nan, float))  # fmt: skip


def test_a_policy_is_read_from_the_file_and_its_action_from_a_message_like_a_cumulant():
    spec = load_questions(doc(spin(action={**CMD, "field": "angular.z", "transform": "clip", "min": -1.0,
                                           "max": 0.5}, rho_max=4)))  # fmt: skip
    (policy,) = spec.policies
    assert policy.target == "sign" and policy.behaviour == "matching" and policy.rho_max == 4.0
    assert policy.secondary_step_size == 0.1
    msg = Twist()
    msg.angular.z = 3.0
    assert policy.action.read(msg) == 0.5  # the cumulant's reader and transforms
    assert spec.question_topics() == [{"/cmd"}]
    # A file without policy: is on-policy, as before.
    assert load_questions(doc(None)).policies == (None,)


def test_matching_counts_the_behaviour_so_rho_is_one_over_b_on_a_match_and_zero_otherwise():
    ratios = ImportanceRatios([load_questions(doc(spin())).policies[0], None])
    rng = np.random.default_rng(0)
    actions = rng.choice([-1.0, 1.0], p=[0.75, 0.25], size=4000)
    rhos = np.array([ratios(readings([a, 0.0])) for a in actions])
    assert np.all(rhos[:, 1] == 1.0)  # the on-policy question
    assert np.all(rhos[actions < 0, 0] == 0.0)
    # b(positive) is about 0.25 once counted: rho about 4 on a match; Laplace's prior: (n + 1) / (N + 2)
    assert rhos[-1, 0] == pytest.approx(1.0 / 0.25, rel=0.1) or actions[-1] < 0
    matched = (actions > 0).sum()
    assert ratios.behaviour_estimates()[0, 1] == pytest.approx((matched + 1) / (actions.size + 2))
    assert np.mean(rhos[-1000:, 0]) == pytest.approx(1.0, rel=0.15)  # E_b[rho] = 1
    # count=False reads without counting
    before = ratios.counts.copy()
    ratios(readings([1.0, 0.0]), count=False)
    np.testing.assert_array_equal(ratios.counts, before)


def test_each_target_kind_gives_pi_and_rho_is_clipped_at_rho_max():
    probability = {"kind": "field", "signal": {**CMD, "field": "linear.z"}}
    cases = [
        ({"kind": "sign", "sign": "negative"}, [-0.5, 0.5], None, [1.0, 0.0]),
        ({"kind": "interval", "low": -0.1, "high": 0.2}, [0.2, 0.3], None, [1.0, 0.0]),
        ({"kind": "fixed", "value": 0.3, "within": 0.01}, [0.305, 0.32], None, [1.0, 0.0]),
        ({"kind": "equals", "signal": {**CMD, "field": "linear.x"}, "within": 0.1}, [1.0, 1.0], [1.05, 1.2], [1, 0]),
        ({"kind": "bins", "edges": [-1, 0, 1], "probabilities": [0.2, 0.8]}, [-0.5, 5.0], None, [0.2, 0.8]),
    ]
    for target, actions, references, pis in cases:
        policy = load_questions(doc({"action": {**CMD, "field": "angular.z"}, "target": target,
                                     "behaviour": probability, "rho_max": 3.0})).policies[0]  # fmt: skip
        ratios = ImportanceRatios([policy, policy])
        rho = ratios(readings(actions, references, [0.5, 0.5]))
        np.testing.assert_allclose(rho, np.minimum(np.array(pis) / 0.5, 3.0), err_msg=str(target))
    # A behaviour's probability out of (0, 1] or an unreadable action: NaN, the step is not learned.
    rho = ImportanceRatios([policy, policy])(readings([0.5, math.nan], None, [0.0, 0.5]))
    assert np.isnan(rho).all()


def test_counts_estimate_each_bin_of_a_stochastic_target():
    policy = load_questions(doc({"action": {**CMD, "field": "angular.z"}, "behaviour": {"kind": "counts"},
                                 "target": {"kind": "bins", "edges": [0, 1, 2, 3], "probabilities": [0.5, 0.5, 0]}})
                            ).policies[0]  # fmt: skip
    ratios = ImportanceRatios([policy])
    for a in [0.5] * 5 + [1.5] * 2 + [2.5] * 2:  # then counts 6, 3, 3 of 12
        rho = ratios(readings([a]))
    assert rho[0] == 0.0
    assert ratios(readings([1.5]))[0] == pytest.approx(0.5 / (4 / 13))


@pytest.mark.parametrize(
    ("policy", "says"),
    [
        ({**spin(), "target": {"kind": "sideways"}}, "question 'q'.policy.target.kind: must be one of ['bins', "),
        ({**spin(), "behaviour": {"kind": "guess"}}, "question 'q'.policy.behaviour.kind: must be one of ['counts',"),
        (spin(sign="up"), "question 'q'.policy.target.sign: must be 'positive' or 'negative'; got 'up'"),
        ({**spin(), "colour": 1}, "question 'q'.policy: unknown keys ['colour']"),
        ({k: v for k, v in spin().items() if k != "action"}, "question 'q'.policy.action: required"),
        (spin(rho_max=0.5), "question 'q'.policy.rho_max: must be in [1, 1e+09]; got 0.5"),
        (
            spin(secondary_step_size=0.5, secondary_regularization=3),
            "question 'q'.policy.secondary_step_size x secondary_regularization must be at most 1 (the ridge",
        ),
        (spin(secondary_regularization=-1), "question 'q'.policy.secondary_regularization: must be in [0, 10]"),
        ({**spin(), "target": {"kind": "interval", "low": 1, "high": 0}}, "low 1.0 must not be above high 0.0"),
        ({**spin(), "target": {"kind": "equals"}}, "policy.target.signal: required by an equals target"),
        (spin(behaviour={"kind": "field"}), "policy.behaviour.signal: required by a field behaviour"),
        (
            {
                **spin(behaviour={"kind": "counts"}),
                "target": {"kind": "bins", "edges": [0, 1, 2], "probabilities": [0.5, 0.6]},
            },
            "policy.target.probabilities: must sum to 1",
        ),
        (
            {**spin(), "target": {"kind": "bins", "edges": [0, 1, 2], "probabilities": [1.0, 0.0]}},
            "'matching' needs a deterministic target",
        ),
        ({**spin(), "target": {"kind": "sign", "sign": "positive", "within": 1}}, "target: unknown keys ['within']"),
        (spin(action={**CMD, "field": "angular.z", "transform": "log"}), "policy.action.transform: must be one of"),
        ("spin", "question 'q'.policy: must be a mapping; got 'spin'"),
    ],
)
def test_bad_policies_are_refused_in_one_line_naming_question_and_key(policy, says):
    with pytest.raises(ValueError) as info:
        load_questions(doc(policy))
    assert says in str(info.value)
    assert "\n" not in str(info.value)


def test_a_target_kind_is_a_registry_entry():
    assert set(TARGETS.names()) == {"bins", "equals", "fixed", "interval", "sign"}


def test_the_shipped_off_policy_example_loads_and_every_field_exists():
    import pathlib

    from gamma_net_core.horde.learner import HordeLearner
    from gamma_net_ros.horde.rows import check_signals

    spec = load_questions(pathlib.Path(__file__).resolve().parents[1] / "config" / "offpolicy_questions.yaml")
    check_signals(spec)  # as the node does at start
    assert [p is not None for p in spec.policies] == [True, True, True, False]
    assert spec.policies[1].reference.topic == "/joint_commands_in"
    assert HordeLearner.from_spec(spec).off_policy
