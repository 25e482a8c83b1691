"""Reflex rules as data: parsing refuses bad files in one line; evaluation is pure logic (no ROS)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gamma_net_core.horde.learner import HordeLearner
from gamma_net_core.horde.questions import load_questions
from gamma_net_core.paths import config_file
from gamma_net_core.reflex.evaluation import ReflexState, prediction_value
from gamma_net_core.reflex.rules import first_duplicate, load_rules

JOINTS = ("shoulder", "elbow")


@pytest.fixture(scope="module")
def questions():
    return load_questions(config_file("horde"))


def rule(**changes):
    out = {
        "name": "stall_ahead",
        "question": "shoulder_effort",
        "tau": 10,
        "above": 1.0,
        "release": 0.5,
        "hold_s": 0.3,
        "response": {"scale": 0.0, "joints": ["shoulder"]},
    }
    out.update(changes)
    return {k: v for k, v in out.items() if v is not None}


def rules(questions, *entries, **top):
    return load_rules({"rules": list(entries), **top}, questions=questions, joint_names=JOINTS)


def test_the_installed_rules_file_parses_against_the_installed_questions():
    spec = load_questions(config_file("reflex_questions"))
    rule_set = load_rules(config_file("reflex_rules"), questions=spec, joint_names=JOINTS)
    # The prediction of contact in front, the present effort as its floor.
    assert [r.name for r in rule_set.rules] == ["shoulder_stall_ahead", "shoulder_stall"]
    assert [r.source for r in rule_set.rules] == ["prediction", "signal"] and rule_set.joints == ("shoulder",)
    assert [r.question for r in rule_set.rules] == ["shoulder_contact", "shoulder_effort"]
    # the contact question's cumulant is 1 exactly where the floor acts: the effort above its threshold
    (contact,) = [q.cumulant for q in spec.questions if q.name == "shoulder_contact"]
    floor = rule_set.rules[1]
    assert floor.above and contact.threshold == floor.threshold and contact.direction == "above"
    assert [contact.apply(e) for e in (0.0, floor.threshold * 0.99, floor.threshold * 1.01, 2.0)] == [0, 0, 1, 1]


@pytest.mark.parametrize(
    "entry, message",
    [
        (rule(question="wrist_speed"), "rule 'stall_ahead': unknown question 'wrist_speed'"),
        (rule(tau=500), "rule 'stall_ahead': tau 500 is outside the learner's range [1, 100]"),
        (rule(tau=0.5), "rule 'stall_ahead': tau 0.5 is outside the learner's range [1, 100]"),
        (rule(response={"scale": 0.0, "joints": ["wrist"]}), "rule 'stall_ahead': unknown joint 'wrist'"),
        (rule(question=None), "rule 'stall_ahead': missing key 'question'"),
        (rule(response=None), "rule 'stall_ahead': missing key 'response'"),
        (rule(response={"joints": ["shoulder"]}), "rule 'stall_ahead': response: missing key 'scale'"),
        (rule(above=None), "rule 'stall_ahead': needs exactly one of 'above' or 'below'"),
        (rule(tau=None), "rule 'stall_ahead': a prediction rule needs exactly one of 'tau' or 'readout'"),
        (rule(tau=None, readout="next_5s"), "rule 'stall_ahead': unknown readout 'next_5s'"),
        (rule(source="signal"), "rule 'stall_ahead': a signal rule reads the present signal"),
        (rule(source="guess"), "rule 'stall_ahead': source must be one of ['prediction', 'signal']"),
        (rule(release=2.0), "rule 'stall_ahead': release 2 must be at or below the threshold 1"),
        (rule(thresold=1.0), "rule 'stall_ahead': unknown key 'thresold'"),
        (rule(response={"scale": 1.5, "joints": ["shoulder"]}), "rule 'stall_ahead': response scale must be within"),
        (rule(fail_safe="panic"), "rule 'stall_ahead': fail_safe must be one of ['hold', 'pass', 'stop']"),
        (rule(hold_s=1e308), "rule 'stall_ahead': hold_s must be within [0, 3600]; got 1e+308"),
    ],
)
def test_a_bad_rule_is_refused_in_one_line_naming_the_rule(questions, entry, message):
    with pytest.raises(ValueError) as refused:
        rules(questions, entry)
    text = str(refused.value)
    assert text.startswith(f"rules: {message}") and "\n" not in text, text


def test_a_rule_may_read_the_predictors_signal_instead_of_a_horde_question(questions):
    entry = rule(**{"from": "predictor", "question": "shoulder/velocity/abs", "tau": 30})
    (read,) = rules(questions, entry).rules
    assert (read.origin, read.question, read.tau) == ("predictor", "shoulder/velocity/abs", 30.0)
    one = {"questions": ["shoulder/velocity/abs"], "gammas": [1 - 1 / 10, 1 - 1 / 100], "values": [10.0, 100.0]}
    assert prediction_value(read, **one) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="rule 'stall_ahead': a predictor rule reads the predictor's Prediction"):
        rules(questions, entry | {"source": "signal"})
    with pytest.raises(ValueError, match=r"rule 'stall_ahead': tau must be within \[1, inf\]; got 0.5"):
        rules(questions, entry | {"tau": 0.5})


def test_a_bad_file_is_refused_naming_it(questions, tmp_path):
    path = tmp_path / "rules.yaml"
    path.write_text("rules:\n  - {name: a, question: shoulder_effort, tau: 1000, above: 1, response: {event: true}}\n")
    with pytest.raises(ValueError, match=rf"^{path}: rule 'a': tau 1000 is outside"):
        load_rules(path, questions=questions, joint_names=JOINTS)
    with pytest.raises(ValueError, match="rule 'a': the name is used more than once"):
        rules(questions, rule(name="a"), rule(name="a"))
    with pytest.raises(FileNotFoundError, match="no rules file"):
        load_rules(tmp_path / "none.yaml", questions=questions, joint_names=JOINTS)


def test_hysteresis_switches_on_above_the_threshold_and_off_only_below_the_release(questions):
    reflex = ReflexState(rules(questions, rule(hold_s=0.0)))
    seen = []
    for t, value in enumerate([0.2, 0.9, 1.1, 0.8, 0.6, 0.9, 0.4, 0.6, 0.9]):
        reflex.observe(0, value, now=0.1 * t)
        changes = reflex.decide(0.1 * t)
        seen.append(reflex.status[0].on)
        assert [c.reason for c in changes] == (["threshold"] if t == 2 else ["release"] if t == 6 else [])
    assert seen == [False, False, True, True, True, True, False, False, False]


def test_a_rule_stays_on_for_its_hold_time_however_soon_the_value_falls(questions):
    reflex = ReflexState(rules(questions, rule(hold_s=0.3)))
    reflex.observe(0, 2.0, now=1.0)
    assert [c.on for c in reflex.decide(1.0)] == [True]
    reflex.observe(0, 0.0, now=1.1)
    assert reflex.decide(1.1) == [] and reflex.decide(1.29) == []  # released, but held
    assert [(c.on, c.reason) for c in reflex.decide(1.3)] == [(False, "release")]


def test_below_rules_mirror_above_rules(questions):
    reflex = ReflexState(rules(questions, rule(above=None, below=0.2, release=0.4, hold_s=0.0)))
    for now, value, on in [(0, 0.5, False), (1, 0.1, True), (2, 0.3, True), (3, 0.5, False)]:
        reflex.observe(0, value, now)
        reflex.decide(now)
        assert reflex.status[0].on is on


def test_responses_scale_only_the_named_joints_moving_the_named_way(questions):
    reflex = ReflexState(
        rules(
            questions,
            rule(name="a", response={"scale": 0.0, "joints": ["shoulder"], "direction": "positive"}, hold_s=0.0),
            rule(name="b", question="elbow_speed", response={"scale": 0.5, "joints": ["elbow"]}, hold_s=0.0),
            rule(name="c", response={"event": True}),
        )
    )
    for i in range(3):
        reflex.observe(i, 5.0, now=0.0)
    assert len(reflex.decide(0.0)) == 3
    np.testing.assert_array_equal(reflex.apply(["shoulder", "elbow"], [0.4, -0.6]), [0.0, -0.3])
    np.testing.assert_array_equal(reflex.apply(["elbow", "shoulder"], [0.2, -0.4]), [0.1, -0.4])  # away: free
    np.testing.assert_array_equal(reflex.apply(["wrist"], [1.0]), [1.0])


@pytest.mark.parametrize(
    "fail_safe, on_when_stale, stopped", [("hold", True, False), ("pass", False, False), ("stop", False, True)]
)
def test_stale_input_applies_the_fail_safe_and_fresh_input_lifts_it(questions, fail_safe, on_when_stale, stopped):
    reflex = ReflexState(rules(questions, rule(hold_s=0.0), stale_after_s=0.5, fail_safe=fail_safe))
    assert reflex.decide(0.0) == [] and reflex.stale == ["stall_ahead"]  # never seen: stale from the start
    assert reflex.stopped is stopped
    reflex.observe(0, 2.0, now=1.0)
    assert [c.on for c in reflex.decide(1.0)] == [True] and not reflex.stopped and reflex.stale == []
    assert reflex.decide(1.5) == []  # exactly at the limit: still fresh
    changes = reflex.decide(1.51)
    assert reflex.status[0].on is on_when_stale and reflex.stopped is stopped
    assert [(c.on, c.reason) for c in changes] == ([] if on_when_stale else [(False, "stale")])
    expected = [0.0, 0.0] if stopped else [0.0, -0.5] if on_when_stale else [0.4, -0.5]
    np.testing.assert_array_equal(reflex.apply(["shoulder", "elbow"], [0.4, -0.5]), expected)
    reflex.observe(0, 0.0, now=2.0)
    reflex.decide(2.0)
    assert not reflex.stopped and not reflex.status[0].on
    reflex.observe(0, math.nan, now=2.1)  # says nothing: the value stays, and it still ages
    assert reflex.status[0].seen == 2.0


def test_a_prediction_rule_reads_the_scaled_prediction_at_its_timescale_interpolated_in_tau(questions):
    taus = np.array([1.0, 5.0, 20.0])
    gammas = 1 - 1 / taus
    values = np.array([[9.0, 9.0, 9.0], [2.0, 10.0, 80.0]])  # two questions; (1 - gamma) V: 2, 2, 4
    names = ["shoulder_speed", "shoulder_effort"]
    read = {"questions": names, "gammas": gammas, "values": values.ravel()}
    at = {tau: rules(questions, rule(tau=tau)).rules[0] for tau in (5, 10, 20, 50)}
    assert prediction_value(at[5], **read) == pytest.approx(2.0)
    assert prediction_value(at[20], **read) == pytest.approx(4.0)
    assert prediction_value(at[10], **read) == pytest.approx(2.0 + 2.0 * 5 / 15)  # linear in tau
    assert prediction_value(at[50], **read) is None  # beyond what is published: no value, never a guess
    readout = rules(questions, rule(tau=None, readout="next_2s")).rules[0]
    assert prediction_value(readout, **read, readouts=["hyperbolic", "next_2s"], readout_values=[1, 2, 3, 4]) == 4
    assert prediction_value(at[5], questions=["shoulder_speed"], gammas=gammas, values=values[0]) is None


def test_the_reflex_questions_learn_where_contact_comes_from_one_contact():
    """config/reflex_questions.yaml's promise: one contact, then 3 s of free motion on the route, and the
    shipped predictive rule's value is past its threshold approaching the edge, and below it on the route."""
    spec = load_questions(config_file("reflex_questions"))
    (ahead, _) = load_rules(config_file("reflex_rules"), questions=spec, joint_names=JOINTS).rules
    learner = HordeLearner.from_spec(spec, rng=np.random.default_rng(0))
    contact = spec.names.index(ahead.question)
    cumulants = np.zeros(len(spec.names))
    approach = np.array([-0.25, 2.0, 0.3, 0.0])  # shoulder, elbow (rad), their velocities (rad/s): toward the edge
    learner.step(approach, cumulants, np.ones_like(cumulants))
    cumulants[contact] = 1.0  # the next step meets the obstacle
    learner.step(np.array([-0.2, 2.0, 0.0, 0.0]), cumulants, np.ones_like(cumulants))
    cumulants[:] = 0.0
    for k in range(90):  # 3 s at 30 Hz on the route, well below the edge, no contact
        route = [-1.0 + 0.3 * np.sin(k / 15), 1.6 + 0.2 * np.cos(k / 15), 0.3 * np.cos(k / 15), -0.2 * np.sin(k / 15)]
        learner.step(np.array(route), cumulants, np.ones_like(cumulants))

    def value(state):  # what the rule compares: (1 - gamma) V at its tau
        return learner.predict(np.array(state), taus=[ahead.tau])[contact, 0] / ahead.tau

    assert value(approach) > ahead.threshold
    assert value([-1.0, 1.5, -0.3, 0.2]) < ahead.threshold


def test_a_binary_rules_file_is_refused_naming_it(questions, tmp_path):
    path = tmp_path / "rules.yaml"
    path.write_bytes(b"rules:\n\xff\xfe\x00\x89PNG")
    with pytest.raises(ValueError) as refused:
        load_rules(path, questions=questions, joint_names=JOINTS)
    text = str(refused.value)
    assert text.startswith(f"{path}: not a text (UTF-8) file") and "\n" not in text, text


def test_duplicate_names_are_found_in_one_pass():
    assert first_duplicate(["a", "b", "c"]) is None
    assert first_duplicate(["a", "b", "a", "b"]) == "a"

    class Counted(str):
        compared = 0

        def __eq__(self, other):
            Counted.compared += 1
            return str.__eq__(self, other)

        __hash__ = str.__hash__

    # a list's count() compares every pair; a set compares a name only with its hash's few neighbours
    assert first_duplicate(Counted(f"rule_{i}") for i in range(20_000)) is None
    assert Counted.compared < 20_000


@pytest.mark.slow
def test_a_20000_rule_file_loads(questions, tmp_path):
    path = tmp_path / "rules.yaml"
    lines = ["rules:"]
    lines += [
        f"  - {{name: r{i}, question: shoulder_effort, tau: 10, above: 1, response: {{event: true}}}}"
        for i in range(20_000)
    ]
    path.write_text("\n".join(lines) + "\n")
    rule_set = load_rules(path, questions=questions, joint_names=JOINTS)
    assert len(rule_set.rules) == 20_000 and rule_set.rules[-1].name == "r19999"
    path.write_text("\n".join([*lines, lines[1]]) + "\n")
    with pytest.raises(ValueError, match=rf"^{path}: rule 'r0': the name is used more than once"):
        load_rules(path, questions=questions, joint_names=JOINTS)
