"""A stop holds the robot, not the last message (no ROS): the joints known, the hold of each form, the clock guard.

The property test (Hypothesis, derandomized) sends a stopped :class:`ReflexState` any sequence of
commands naming any subsets of joints (none too), in any fields, between joint_states readings
naming any subsets, for every command form's hold; each output must cover every joint seen, each
with the form's hold value.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gamma_net_core.horde.questions import load_questions
from gamma_net_core.paths import config_file
from gamma_net_core.reflex.commands import FIELDS, MOTION, joint_command
from gamma_net_core.reflex.evaluation import ReflexState
from gamma_net_core.reflex.holds import ClockGuard, HoldRule, KnownJoints, hold_commands
from gamma_net_core.reflex.rules import load_rules

POOL = ("shoulder", "elbow", "wrist", "gripper")
#: Every command form's hold (gamma_net_ros/reflex/forms.py registers these).
FORMS = {
    "joint_state": HoldRule((), fields_from_commands=True),
    "float64_multi_array/position": HoldRule(("position",), layout=True),
    "float64_multi_array/velocity": HoldRule(("velocity",), layout=True),
    "float64_multi_array/effort": HoldRule(("effort",), layout=True),
    "joint_trajectory": HoldRule(("position", "velocity"), motion_alone=False),
    "twist": HoldRule(("velocity",), layout=True),
}


@pytest.fixture(scope="module")
def rule_set():
    rule = {
        "name": "stall_ahead",
        "question": "shoulder_effort",
        "tau": 10,
        "above": 1.0,
        "response": {"scale": 0.0, "joints": ["shoulder"], "direction": "positive"},
    }
    return load_rules(
        {"stale_after_s": 0.5, "fail_safe": "stop", "rules": [rule]},
        questions=load_questions(config_file("horde")),
        joint_names=POOL,
    )


def test_the_reflex_forms_register_the_holds_tested_here():
    from gamma_net_ros.reflex.forms import make_form

    for name, rule in FORMS.items():
        kind, _, interface = name.partition("/")
        assert make_form(kind, interface or "velocity", ["shoulder", "elbow"]).holding == rule, name


SUBSETS = st.lists(st.sampled_from(POOL), unique=True, max_size=len(POOL))
POSITIONS = st.dictionaries(st.sampled_from(POOL), st.floats(-3, 3) | st.just(math.nan))
STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("command"), SUBSETS, st.lists(st.sampled_from(FIELDS), unique=True)),
        st.tuples(st.just("states"), SUBSETS),
        st.tuples(st.just("present"), POSITIONS),
    ),
    max_size=12,
)


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(form=st.sampled_from(sorted(FORMS)), configured=SUBSETS.filter(bool), steps=STEPS)
def test_a_stop_covers_every_joint_seen_with_the_forms_hold_value(rule_set, form, configured, steps):
    rule = FORMS[form]
    state = ReflexState(rule_set, KnownJoints(configured, rule))
    state.decide(0.0)  # the rule's input never seen: fail-safe stop
    assert state.stopped
    seen, on_states, fields = list(configured), set(), set(rule.fields)
    present: dict[str, float] = {}
    latched: dict[str, float] = {}
    for kind, *what in steps:
        if kind == "states":
            state.joints.saw_states(what[0])
            on_states.update(what[0])
            seen += [n for n in what[0] if n not in seen]
            continue
        if kind == "present":
            present = what[0]
            continue
        names, given = what
        command = joint_command(names, **{f: [[0.5] * len(names)] for f in given})
        seen += [n for n in names if n not in seen]
        if rule.fields_from_commands:
            fields.update(given)
        out = state.outputs(command, present)
        assert out.held
        # The expected hold, worked out here from what was sent, not read back from the state.
        joints = list(configured) if rule.layout else seen
        here = {n: x for n, x in present.items() if math.isfinite(x)}
        if "position" in fields:
            latched.update((n, here[n]) for n in joints if n in here and n not in latched)
        if not fields:  # a JointState path before any command gave a field: nothing in force to hold
            assert out.commands == [] and out.unheld == ()
            continue
        named = [n for c in out.commands for n in c.names]
        assert len(named) == len(set(named)), "a joint held twice"
        assert set(named) | set(out.unheld) == set(joints), "a joint seen is not covered"
        assert not set(named) & set(out.unheld)
        motion = [f for f in FIELDS if f in fields and f in MOTION]
        for c in out.commands:
            assert c.points == 1 and c.is_finite()
            positioned = "position" in c.fields
            # Every field the form holds, or (a joint without its present position) the motion fields alone.
            assert list(c.fields) == [f for f in FIELDS if f in fields and (positioned or f in MOTION)]
            for field in c.fields:
                if field in MOTION:
                    assert not getattr(c, field).any()
            if positioned:
                np.testing.assert_array_equal(c.position[0], [latched[n] for n in c.names])
            if on_states and not rule.layout:  # the robot's own joints apart from names never on joint_states
                assert len({n in on_states for n in c.names}) == 1
        # Unheld: only a position goal without the joint's position and no motion to hold it by, or a
        # layout (every joint in one array) with any such joint.
        if "position" not in fields:
            assert out.unheld == ()
        elif rule.layout:
            assert bool(out.unheld) == any(n not in latched for n in joints)
        else:
            for n in out.unheld:
                assert n not in latched and not (motion and rule.motion_alone)


def test_the_issues_sequence_holds_the_shoulder_the_last_command_did_not_name(rule_set):
    state = ReflexState(rule_set, KnownJoints(["shoulder", "elbow"], FORMS["joint_state"]))
    state.observe(0, 0.0, now=0.0)
    state.decide(0.0)
    assert not state.stopped
    state.outputs(joint_command(["shoulder"], velocity=[[0.2]]))
    state.outputs(joint_command(["elbow"], velocity=[[0.0]]))
    state.decide(1.0)  # the predictions stopped: stale
    assert state.stopped
    (hold,) = state.hold_all().commands
    assert hold.names == ("shoulder", "elbow") and hold.velocity.tolist() == [[0.0, 0.0]]
    trajectory = ReflexState(rule_set, KnownJoints(["shoulder", "elbow"], FORMS["joint_trajectory"]))
    trajectory.decide(0.0)
    out = trajectory.outputs(joint_command([]), {"shoulder": 0.1, "elbow": 1.2})  # an empty trajectory
    (hold,) = out.commands
    assert hold.names == ("shoulder", "elbow") and hold.position.tolist() == [[0.1, 1.2]]


def test_a_rule_switching_on_restricts_what_earlier_commands_left_in_force(rule_set):
    def after(shoulder: float, *, at: float) -> list:
        state = ReflexState(rule_set, KnownJoints(["shoulder", "elbow"], FORMS["joint_state"]))
        state.observe(0, 0.0, now=0.0)
        state.decide(0.0)
        state.outputs(joint_command(["shoulder"], velocity=[[shoulder]]), now=0.0)
        state.outputs(joint_command(["elbow"], velocity=[[0.1]]), now=0.1)  # the last command: the elbow's
        state.observe(0, 2.0, now=at)
        changes = state.decide(at)
        assert [c.on for c in changes] == [True]
        return state.restricted(changes, None, now=at, stale_s=0.5, exclude=("elbow",))

    (out,) = after(0.2, at=0.2)  # the shoulder moving up, toward the hazard: its zero goes out
    assert out.names == ("shoulder",) and out.velocity.tolist() == [[0.0]]
    assert after(-0.2, at=0.2) == []  # moving away: as commanded, not re-sent (that would only keep it alive)
    (out,) = after(0.2, at=5.0)  # a stop goes out however old the command (a zero keeps nothing alive)
    assert out.names == ("shoulder",) and out.velocity.tolist() == [[0.0]]


def test_a_name_never_on_joint_states_is_held_in_a_message_of_its_own():
    joints = KnownJoints(["shoulder", "elbow"], FORMS["joint_state"])
    joints.saw_states(["shoulder", "elbow"])
    joints.saw_command(joint_command(["wirst"], velocity=[[0.3]]))  # a sender's typo
    commands, unheld = hold_commands(joints, {})
    assert [c.names for c in commands] == [("shoulder", "elbow"), ("wirst",)] and unheld == ()


def test_the_clock_guard_stalls_on_a_frozen_stopped_or_backward_clock_after_its_limit():
    guard = ClockGuard(limit_s=0.5)
    assert not guard.stalled(100.0, steady=0.0)
    assert not guard.stalled(100.1, steady=0.1)
    assert not guard.stalled(100.1, steady=0.6)  # frozen for 0.5 s: at the limit
    assert guard.stalled(100.1, steady=0.61)
    assert not guard.stalled(100.2, steady=0.7)  # advancing again
    assert not guard.stalled(50.0, steady=0.9)  # stepped back: no advance, not yet long
    assert guard.stalled(49.0, steady=1.21)  # still going back
    assert not guard.stalled(49.5, steady=1.3)  # forward from where it is: advancing
