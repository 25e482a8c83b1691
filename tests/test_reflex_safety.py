"""The reflex core's safety (no ROS): validated inputs, commands by form, holding, and its properties.

The property test (Hypothesis, derandomized so CI is reproducible) drives :class:`ReflexState`
with any sequence of predictions (malformed and non-finite among them), signals, commands (every
field, NaN and inf, wrong sizes), staleness and clock steps (backwards too), and check every output: finite, every rule
that is on obeyed, the fail-safe held, nothing raised but a malformed input's ValueError.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gamma_net_core.config import read_document
from gamma_net_core.horde.questions import load_questions
from gamma_net_core.horde.reading import PublishedPredictions
from gamma_net_core.paths import config_file
from gamma_net_core.reflex.commands import FIELDS, MOTION, JointCommand, joint_command, toward
from gamma_net_core.reflex.evaluation import ReflexState, rule_value
from gamma_net_core.reflex.rules import PredictorSpec, load_rules

JOINTS = ("shoulder", "elbow")
TAUS = np.array([1.0, 10.0, 100.0])
GAMMAS = (1.0 - 1.0 / TAUS).tolist()


@pytest.fixture(scope="module")
def questions():
    return load_questions(config_file("horde"))


def stall(**changes):
    out = {
        "name": "stall_ahead",
        "question": "shoulder_effort",
        "tau": 10,
        "above": 1.0,
        "release": 0.5,
        "response": {"scale": 0.0, "joints": ["shoulder"], "direction": "positive"},
    }
    return out | changes


def state_with(questions, *entries, fail_safe="stop", stale_after_s=0.5):
    rule_set = load_rules(
        {"stale_after_s": stale_after_s, "fail_safe": fail_safe, "rules": list(entries)},
        questions=questions,
        joint_names=JOINTS,
    )
    return ReflexState(rule_set)


def on(state: ReflexState, now: float = 0.0) -> ReflexState:
    for i in range(len(state.status)):
        state.observe(i, 2.0, now)
    state.decide(now)
    return state


# -- predictions (issue 23 item 2; issue 25 item 5: one reader)


@pytest.mark.parametrize(
    "arrays, named",
    [
        ((["q"], GAMMAS, [2.0, 2.0]), "2 values for 1 questions x 3 gammas"),
        ((["q"], GAMMAS, [1, 2, 3], ["r"], [1.0, 2.0]), "2 readout values for 1 readouts"),
        ((["q"], [0.0, math.nan, 0.99], [1, 2, 3]), "gamma nan is not in [0, 1)"),
        ((["q"], [0.0, 1.0, 0.99], [1, 2, 3]), "gamma 1.0 is not in [0, 1)"),
        ((["q"], [0.0, -0.5, 0.99], [1, 2, 3]), "gamma -0.5 is not in [0, 1)"),
        ((["q"], [0.0, 0.9, 0.9], [1, 2, 3]), "a gamma is published twice"),
        ((["q", "q"], [0.9], [1, 2]), "a question is published twice"),
    ],
)
def test_a_malformed_prediction_message_is_refused_naming_what_is_wrong(arrays, named):
    with pytest.raises(ValueError, match="malformed prediction message") as refused:
        PublishedPredictions(*arrays)
    assert named in str(refused.value)


def test_one_reader_gives_the_scaled_or_the_raw_value_interpolated_linearly_in_tau():
    published = PublishedPredictions(["q"], [0.9, 0.0], [20.0, 1.0])  # tau 10 then tau 1: any order
    assert published.value("q", tau=10, scaled=False) == (20.0, False)
    assert published.value("q", tau=10, scaled=True) == (pytest.approx(2.0), False)
    raw, interpolated = published.value("q", tau=5.5, scaled=False)
    assert interpolated and raw == pytest.approx(10.5)
    assert published.value("q", tau=5.5, scaled=True)[0] == pytest.approx(1.5)  # the scaled values, in tau
    with pytest.raises(ValueError, match=r"tau 50 of 'q' is outside the published timescales \(tau 1, 10\)"):
        published.value("q", tau=50, scaled=True)


# -- commands (items 3 and 4)


def test_a_command_of_the_wrong_sizes_is_refused():
    with pytest.raises(ValueError, match=r"velocity has shape \(1, 1\) for 2 joints"):
        joint_command(JOINTS, velocity=[[0.4]])
    with pytest.raises(ValueError, match=r"velocity has shape \(1, 3\) for 2 joints"):
        joint_command(JOINTS, velocity=[[0.4, 0.1, 0.2]])
    with pytest.raises(ValueError, match="a joint is named twice"):
        joint_command(["shoulder", "shoulder"], velocity=[[0.4, 0.1]])


def test_non_finite_commands_never_pass_they_are_held(questions):
    idle = state_with(questions, stall(), fail_safe="hold")
    rule_on = on(state_with(questions, stall(), fail_safe="hold"))
    for state in (idle, rule_on):
        for bad in ([math.inf, 0.5], [-math.inf, 0.5], [math.nan, 0.5]):
            np.testing.assert_array_equal(state.apply(JOINTS, bad), [0.0, 0.0])
    goal = joint_command(JOINTS, position=[[math.nan, 1.0]])
    held = idle.filter(goal, {"shoulder": 0.2, "elbow": 1.5})
    np.testing.assert_array_equal(held.position, [[0.2, 1.5]])


def test_a_non_finite_command_names_its_first_bad_value():
    assert joint_command(JOINTS, velocity=[[0.4, 0.1]]).non_finite() is None
    assert joint_command(JOINTS, velocity=[[0.4, math.nan]]).non_finite() == "velocity of 'elbow' is nan"
    trajectory = joint_command(JOINTS, position=[[0.1, 0.2], [-math.inf, 0.3]], velocity=[[math.inf, 0.0]] * 2)
    assert trajectory.non_finite() == "position of 'shoulder' at point 1 is -inf"  # fields in order: position first


def test_a_stop_holds_position_goals_at_the_present_position_not_the_goal(questions):
    state = state_with(questions, stall())  # never seen: stale, fail-safe stop
    state.decide(0.0)
    assert state.stopped
    present = {"shoulder": 0.2, "elbow": 1.5}
    both = joint_command(JOINTS, position=[[0.9, 1.0]], velocity=[[0.4, -0.3]])
    assert state.filter(both, None) is None  # no present position: not forwarded, never the goal
    held = state.filter(both, present)
    np.testing.assert_array_equal(held.position, [[0.2, 1.5]])
    np.testing.assert_array_equal(held.velocity, [[0.0, 0.0]])
    # While stopped, the hold is the position at the stop's start, not one that drifts after it.
    drifted = state.filter(both, {"shoulder": 0.3, "elbow": 1.4})
    np.testing.assert_array_equal(drifted.position, [[0.2, 1.5]])
    trajectory = joint_command(JOINTS, position=[[0.5, 1.0], [0.9, 1.0]])
    assert state.filter(trajectory, present).points == 1


def test_a_rule_scales_the_step_of_a_position_goal_toward_the_hazard_only(questions):
    state = on(state_with(questions, stall(response={"scale": 0.5, "joints": ["shoulder"], "direction": "positive"})))
    present = {"shoulder": 0.2, "elbow": 1.5}
    toward_it = state.filter(joint_command(JOINTS, position=[[0.6, 1.0]], velocity=[[0.4, 0.1]]), present)
    np.testing.assert_allclose(toward_it.position, [[0.4, 1.0]])  # half the step, the elbow untouched
    np.testing.assert_allclose(toward_it.velocity, [[0.2, 0.1]])
    away = state.filter(joint_command(JOINTS, position=[[-0.6, 1.0]]), present)
    np.testing.assert_allclose(away.position, [[-0.6, 1.0]])
    assert state.filter(joint_command(JOINTS, position=[[0.6, 1.0]]), None) is None
    assert state.filter(joint_command(JOINTS, velocity=[[0.4, 0.1]]), None) is not None  # needs no position


# -- rules files (item 6)


def test_a_duplicated_key_is_refused_in_every_yaml_file_naming_it(tmp_path):
    path = tmp_path / "rules.yaml"
    path.write_text("rules:\n  - name: a\n    above: 1.0\n    above: 2.0\n")
    with pytest.raises(ValueError, match=rf"^{path}: not valid YAML at line 4, column 5: duplicate key 'above'"):
        read_document(path, kind="rules")
    params = tmp_path / "params.yaml"
    params.write_text("reflex:\n  ros__parameters:\n    rules_file: a\n    rules_file: b\n")
    from gamma_net_core.config import load_section

    with pytest.raises(ValueError, match="duplicate key 'rules_file'"):
        load_section(params, "reflex")


def test_a_broken_yaml_file_is_named_by_the_reference_parser_not_libyaml(tmp_path):
    """Files are parsed by libyaml when PyYAML has it, for speed; a broken one is read again by the pure-Python
    parser, whose message names what is wrong (libyaml's says "found undefined alias", not which)."""
    from gamma_net_core.config import safe_load

    path = tmp_path / "rules.yaml"
    path.write_text("a: &x 1\nb: *y\n")
    with pytest.raises(ValueError, match=rf"^{path}: not valid YAML at line 2, column 4: found undefined alias 'y'$"):
        read_document(path, kind="rules")
    text = "a: {b: [1, 2.5, .inf, ~, yes, 0x10, '3']}\nc:\n  - d\n"
    assert safe_load(text) == yaml.safe_load(text)


@pytest.mark.parametrize(
    "top, entry, named",
    [
        ({"stale_after_s": 1e12}, stall(), "stale_after_s must be within [0, 60]; got 1000000000000.0"),
        ({}, stall(**{"from": "predictor", "question": "|shoulder.velocity|", "tau": 1e9}), "tau 1e+09 is beyond"),
        ({}, stall(**{"from": "predictor", "question": "elbow/torque"}), "unknown predictor cumulant 'elbow/torque'"),
    ],
)
def test_values_past_sane_bounds_are_refused_in_one_line(questions, top, entry, named):
    spec = PredictorSpec(("|shoulder.velocity|",), 100.0)
    with pytest.raises(ValueError) as refused:
        load_rules({"rules": [entry], **top}, questions=questions, joint_names=JOINTS, predictor=spec)
    assert named in str(refused.value) and "\n" not in str(refused.value)


# -- properties


ODD = [math.nan, math.inf, -math.inf, 0.0, 1e308, -1e-300]
NUMBERS = st.one_of(st.floats(-5, 5), st.sampled_from(ODD))  # mostly ordinary, now and then odd
NAMES = st.sampled_from([JOINTS, ("elbow", "shoulder"), ("shoulder",), ("elbow", "wrist", "shoulder")])


@st.composite
def commands(draw) -> tuple[tuple[str, ...], dict]:
    """A command of any form (every field), NaN and inf among its values, now and then the wrong size."""
    names = draw(NAMES)
    points = draw(st.integers(1, 3))
    fields = draw(st.lists(st.sampled_from(FIELDS), min_size=1, max_size=len(FIELDS), unique=True))
    width = len(names) + draw(st.sampled_from([0, 0, 0, 0, -1, 1]))
    values = st.lists(st.lists(NUMBERS, min_size=width, max_size=width), min_size=points, max_size=points)
    return names, {f: draw(values) for f in fields}


PRESENT = st.none() | st.dictionaries(st.sampled_from(["shoulder", "elbow", "wrist"]), NUMBERS)
STEPS = st.one_of(
    st.tuples(st.just("predict"), st.lists(NUMBERS, max_size=4)),  # 3 values are well formed
    st.tuples(st.just("signal"), NUMBERS),
    st.tuples(st.just("present"), PRESENT),
    st.tuples(st.just("command"), commands()),
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(
    scale=st.sampled_from([0.0, 0.5, 1.0]),
    direction=st.sampled_from(["positive", "negative", "both"]),
    fail_safe=st.sampled_from(["hold", "pass", "stop"]),
    # the clock steps forward, stays, or steps back; a step past stale_after_s lets inputs go stale
    steps=st.lists(st.tuples(st.floats(-0.3, 1.0), STEPS), max_size=60),
)
def test_any_sequence_of_inputs_gives_finite_commands_that_obey_the_rules_and_the_fail_safe(
    questions, scale, direction, fail_safe, steps
):
    """Any predictions, signals, commands, present positions and clock steps: every output checked."""
    response = {"scale": scale, "joints": ["shoulder"], "direction": direction}
    signal = stall(name="reactive", source="signal", response=response | {"joints": ["elbow", "shoulder"]})
    del signal["tau"]
    state = state_with(questions, stall(response=response, hold_s=0.2), signal, fail_safe=fail_safe)
    now, present = 0.0, None
    for step, (kind, what) in steps:
        now += step
        if kind == "predict":
            try:
                published = PublishedPredictions(["shoulder_effort"], GAMMAS, what)
            except ValueError:
                continue  # dropped, as the node drops it: the rule's input ages
            value = rule_value(state.rule_set.rules[0], published)
            if value is not None:
                state.observe(0, value, now)
        elif kind == "signal":
            state.observe(1, what, now)
        elif kind == "present":
            present = what
        else:
            names, fields = what
            try:
                command = joint_command(names, **fields)
            except ValueError:
                continue  # malformed: refused before any use
            state.decide(now)
            stale = [not 0.0 <= now - s.seen <= 0.5 for s in state.status]  # the fail-safe, checked independently
            assert state.stopped == any(s and r.fail_safe == "stop" for s, r in zip(stale, state.rule_set.rules))
            check(state, command, present, state.filter(command, present))


def check(state: ReflexState, command: JointCommand, present, out: JointCommand | None) -> None:
    here = None if present is None else {n: x for n, x in present.items() if math.isfinite(x)}
    if out is None:  # not forwarded: only for a position goal whose present position is not known
        known = {**(here or {}), **state.held}
        assert "position" in command.fields and any(n not in known for n in command.names)
        return
    assert out.names == command.names and out.is_finite()
    assert (command.non_finite() is None) == command.is_finite()
    if state.stopped or not command.is_finite():  # the hold: one point, no motion, at the present position
        assert out.points == 1
        for field in out.fields:
            if field in MOTION:
                assert not getattr(out, field).any()
        if "position" in out.fields:
            want = [state.held.get(n, (here or {}).get(n)) for n in out.names]
            np.testing.assert_array_equal(out.position[0], want)
        return
    np.testing.assert_array_equal(out.fields, command.fields)
    for rule, status in zip(state.rule_set.rules, state.status):
        if not status.on:
            continue
        r = rule.response
        for j, name in enumerate(command.names):
            if name not in r.joints:
                continue
            for field in command.fields:
                base = np.array([here[name]]) if field == "position" else 0.0
                sent, asked = getattr(out, field)[:, j] - base, getattr(command, field)[:, j] - base
                moving = toward(asked, r.direction)
                # toward the hazard: at most scale times what was asked; any other way: as asked
                assert np.all(np.abs(sent[moving]) <= r.scale * np.abs(asked[moving]) + 1e-9)
                assert np.all(~toward(sent, r.direction) | moving | (sent == 0))


def test_present_positions_are_known_only_while_fresh_and_finite():
    from gamma_net_core.reflex.commands import PresentPositions

    present = PresentPositions(stale_s=0.5)
    assert present.known(0.0) is None  # none yet
    present.update(["shoulder", "elbow"], [0.2, math.nan], now=1.0)
    assert present.known(1.2) == {"shoulder": 0.2}  # a NaN position is not a position
    present.update(["shoulder", "elbow"], [0.3], now=1.3)  # sizes disagree: ignored
    assert present.known(1.4) == {"shoulder": 0.2}
    assert present.known(1.6) is None  # stale
    assert present.known(0.5) is None  # the clock stepped back: a reading from the future is not the present


def test_a_clock_stepped_back_leaves_no_input_fresh_so_the_fail_safe_acts(questions):
    state = state_with(questions, stall())
    state.observe(0, 0.2, now=100.0)
    state.decide(100.0)
    assert not state.stopped
    state.decide(5.0)  # a simulated clock restarted: the value is from its future, not fresh for 95 s
    assert state.stopped
