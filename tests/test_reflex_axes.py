"""A stop of some axes (no ROS): ``fail_safe: {stop: [...]}``, what it holds, and a range rule on a base.

A base whose range rule cannot see must not be locked: ``{stop: [linear.x]}`` holds forward motion
and leaves the base free to turn away. The property test (Hypothesis, derandomized) sends a
:class:`ReflexState` whose stop names any subset of joints any sequence of commands, readings and
rule switches, for every command form's hold: the stop's joints are held (the form's hold value)
and only those; every other joint goes out as the rules alone make it.
"""

from __future__ import annotations

import math
import pathlib
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_reflex_holds import FORMS  # every command form's hold, as gamma_net_ros/reflex/forms.py registers them

from gamma_net_core.horde.questions import load_questions
from gamma_net_core.paths import config_file
from gamma_net_core.reflex.commands import FIELDS, MOTION, TWIST_AXES, joint_command
from gamma_net_core.reflex.evaluation import ReflexState
from gamma_net_core.reflex.holds import KnownJoints
from gamma_net_core.reflex.rules import load_rules

POOL = ("shoulder", "elbow", "wrist", "gripper")
STALL = {
    "name": "stall_ahead",
    "question": "shoulder_effort",
    "tau": 10,
    "above": 1.0,
    "response": {"scale": 0.0, "joints": ["linear.x"], "direction": "positive"},
}


@pytest.fixture(scope="module")
def questions():
    return load_questions(config_file("horde"))


def parse(questions, *rules, joint_names=TWIST_AXES, **top):
    return load_rules({"stale_after_s": 0.5, "rules": list(rules), **top}, questions=questions, joint_names=joint_names)


# -- the rules file


def test_the_fail_safe_stops_every_joint_by_default_or_the_joints_it_names(questions):
    (rule,) = parse(questions, STALL).rules
    assert (rule.fail_safe, rule.stop_joints, rule.fail_safe_label) == ("stop", None, "stop")
    (rule,) = parse(questions, STALL, fail_safe={"stop": "all"}).rules
    assert (rule.fail_safe, rule.stop_joints) == ("stop", None)
    (rule,) = parse(questions, STALL, fail_safe={"stop": ["linear.x", "linear.y"]}).rules
    assert (rule.fail_safe, rule.stop_joints) == ("stop", ("linear.x", "linear.y"))
    assert rule.fail_safe_label == "stop ['linear.x', 'linear.y']"
    # A rule's own fail-safe wins over the file's, either way.
    own = parse(questions, STALL | {"fail_safe": {"stop": ["angular.z"]}}, STALL | {"name": "b"}, fail_safe="pass")
    assert [(r.fail_safe, r.stop_joints) for r in own.rules] == [("stop", ("angular.z",)), ("pass", None)]
    own = parse(questions, STALL | {"fail_safe": "stop"}, fail_safe={"stop": ["linear.x"]})
    assert own.rules[0].stop_joints is None


@pytest.mark.parametrize(
    "top, entry, named",
    [
        ({"fail_safe": {"stop": ["linear.q"]}}, STALL, "fail_safe stop: unknown joint 'linear.q'; the commanded"),
        ({"fail_safe": {"stop": []}}, STALL, "fail_safe stop must be 'all' or a non-empty list of joints; got []"),
        ({"fail_safe": {"stop": "linear.x"}}, STALL, "fail_safe stop must be 'all' or a non-empty list of joints"),
        ({"fail_safe": {"stop": ["linear.x", "linear.x"]}}, STALL, "fail_safe stop names 'linear.x' twice"),
        ({"fail_safe": {"stop": "all", "axes": 1}}, STALL, "fail_safe as a mapping takes one key, stop"),
        ({"fail_safe": "halt"}, STALL, "fail_safe must be one of ['hold', 'pass', 'stop'], {stop: all} or"),
        ({}, STALL | {"fail_safe": {"stop": ["wheel"]}}, "rule 'stall_ahead': fail_safe stop: unknown joint 'wheel'"),
        ({}, STALL | {"fail_safe": {"pass": "all"}}, "rule 'stall_ahead': fail_safe as a mapping takes one key"),
    ],
)
def test_a_bad_fail_safe_is_refused_in_one_line_naming_the_file_and_the_value(questions, tmp_path, top, entry, named):
    import yaml

    path = tmp_path / "base_rules.yaml"
    path.write_text(yaml.safe_dump({"rules": [entry], **top}))
    with pytest.raises(ValueError) as refused:
        load_rules(path, questions=questions, joint_names=TWIST_AXES)
    text = str(refused.value)
    assert text.startswith(f"{path}: ") and named in text and "\n" not in text, text


def test_the_shipped_base_rules_parse_with_forward_held_and_turning_free():
    spec = load_questions(config_file("base_reflex_questions"))
    rule_set = load_rules(config_file("base_reflex_rules"), questions=spec, joint_names=TWIST_AXES)
    assert {r.stop_joints for r in rule_set.rules} == {("linear.x", "linear.y")}
    assert "angular.z" not in rule_set.joints


def test_the_guides_base_example_is_the_shipped_file():
    import re

    import yaml

    repo = pathlib.Path(__file__).resolve().parents[1]
    guide = (repo / "docs" / "reflex.md").read_text()
    (block,) = re.findall(r"```yaml\n# config/base_reflex_rules.yaml, as shipped.*?\n(.*?)```", guide, flags=re.S)
    assert yaml.safe_load(block) == yaml.safe_load((repo / "config" / "base_reflex_rules.yaml").read_text())


# -- what a stop of some axes sends


def twist_state(questions, stop) -> ReflexState:
    rules = parse(questions, STALL, fail_safe={"stop": stop})
    state = ReflexState(rules, KnownJoints(TWIST_AXES, FORMS["twist"]))
    state.decide(0.0)  # the rule's input never seen: stale, its fail-safe acts
    return state


def twist(x: float = 0.0, z: float = 0.0, y: float = 0.0):
    return joint_command(TWIST_AXES, velocity=[[x, y, 0.0, 0.0, 0.0, z]])


def test_forward_held_while_the_operators_turn_passes_in_one_twist(questions):
    state = twist_state(questions, ["linear.x"])
    assert state.stopped and not state.stops_all and state.stop_joints == ("linear.x",)
    out = state.outputs(twist(0.5, 0.3, y=0.1), now=0.0)
    assert not out.held and out.holds == [] and out.unheld == ()
    (sent,) = out.commands
    assert sent.names == TWIST_AXES and sent.velocity.tolist() == [[0.0, 0.1, 0.0, 0.0, 0.0, 0.3]]
    # With nothing to take the free axes from (the operator silent), a twist holds every axis.
    (hold,) = state.hold_stopped().commands
    assert hold.velocity.tolist() == [[0.0] * 6]
    # The default: every axis held, the turn too.
    (sent,) = twist_state(questions, "all").outputs(twist(0.5, 0.3)).commands
    assert sent.velocity.tolist() == [[0.0] * 6]


def test_a_rule_on_and_a_stop_of_other_axes_both_apply(questions):
    rules = parse(
        questions, STALL | {"response": {"scale": 0.5, "joints": ["angular.z"]}, "fail_safe": "hold"},
        STALL | {"name": "blind", "fail_safe": {"stop": ["linear.x"]}},
    )  # fmt: skip
    state = ReflexState(rules, KnownJoints(TWIST_AXES, FORMS["twist"]))
    state.observe(0, 2.0, now=0.0)
    state.decide(0.0)
    assert state.active == ["stall_ahead"] and state.stale == ["blind"] and state.stop_joints == ("linear.x",)
    (sent,) = state.outputs(twist(0.5, 0.4)).commands
    assert sent.velocity.tolist() == [[0.0, 0.0, 0.0, 0.0, 0.0, 0.2]]
    state.observe(1, 0.0, now=0.1)  # the blind rule sees again: the stop lifts
    state.decide(0.1)
    assert not state.stopped and state.stop_joints is None
    assert state.outputs(twist(0.5, 0.4)).commands[0].velocity.tolist() == [[0.5, 0.0, 0.0, 0.0, 0.0, 0.2]]


def test_a_stop_of_some_joints_holds_those_a_command_leaves_out_and_latches_their_position(questions):
    rules = parse(questions, STALL, fail_safe={"stop": ["shoulder"]}, joint_names=("shoulder", "elbow", "linear.x"))
    state = ReflexState(rules, KnownJoints(["shoulder", "elbow"], FORMS["joint_state"]))
    state.decide(0.0)
    here = {"shoulder": 0.2, "elbow": 1.0}
    out = state.outputs(joint_command(["elbow"], position=[[1.5]], velocity=[[0.3]]), here)
    (sent,) = out.commands  # the elbow as commanded
    assert sent.names == ("elbow",) and sent.position.tolist() == [[1.5]] and sent.velocity.tolist() == [[0.3]]
    (hold,) = out.holds  # the shoulder, which the command did not name, held where it is
    assert hold.names == ("shoulder",) and hold.position.tolist() == [[0.2]] and hold.velocity.tolist() == [[0.0]]
    # Named later, the shoulder stays at its latched position, not where it has drifted to.
    out = state.outputs(joint_command(["shoulder", "elbow"], position=[[0.9, 1.4]]), {"shoulder": 0.25, "elbow": 1.4})
    assert out.commands[0].position.tolist() == [[0.2, 1.4]] and out.holds == []
    # No present position for a held joint's goal: not forwarded (never the goal).
    fresh = ReflexState(rules, KnownJoints(["shoulder", "elbow"], FORMS["joint_state"]))
    fresh.decide(0.0)
    assert fresh.outputs(joint_command(["shoulder", "elbow"], position=[[0.9, 1.4]]), {"elbow": 1.0}).commands == []


# -- the property: the stop's joints held, and only those


@st.composite
def scenarios(draw):
    form = draw(st.sampled_from(sorted(FORMS)))
    rule = FORMS[form]
    configured = draw(st.lists(st.sampled_from(POOL), unique=True, min_size=1, max_size=len(POOL)))
    stop = draw(st.lists(st.sampled_from(POOL), unique=True, min_size=1, max_size=len(POOL)))
    ruled = draw(st.sampled_from(POOL))  # the joint a fresh rule scales while on
    scale = draw(st.sampled_from([0.0, 0.5]))
    values = st.floats(-2, 2)
    steps = []
    for _ in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["command", "command", "states", "present", "predict", "timer"]))
        if kind == "command":
            names = configured if rule.layout else draw(st.lists(st.sampled_from(POOL), unique=True))
            given = rule.fields if rule.layout else draw(st.lists(st.sampled_from(FIELDS), unique=True, min_size=1))
            points = 1 if rule.layout else draw(st.integers(1, 2))
            fields = {f: [[draw(values) for _ in names] for _ in range(points)] for f in given}
            steps.append(("command", tuple(names), fields))
        elif kind == "states":
            steps.append(("states", draw(st.lists(st.sampled_from(POOL), unique=True))))
        elif kind == "present":
            steps.append(("present", draw(st.dictionaries(st.sampled_from(POOL), values | st.just(math.nan)))))
        elif kind == "predict":
            steps.append(("predict", draw(st.sampled_from([0.0, 2.0]))))
        else:
            steps.append(("timer",))
    return form, configured, tuple(stop), ruled, scale, steps


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=scenarios())
def test_a_stop_of_any_joints_holds_those_and_only_those_whatever_the_commands(questions, scenario):
    form, configured, stop, ruled, scale, steps = scenario
    rule = FORMS[form]
    rules = parse(
        questions,
        STALL | {"response": {"scale": scale, "joints": [ruled]}, "fail_safe": "hold"},  # fresh, on or off
        STALL | {"name": "blind", "response": {"event": True}, "fail_safe": {"stop": list(stop)}},  # never seen
        joint_names=POOL,
    )
    state = ReflexState(rules, KnownJoints(configured, rule))
    state.observe(0, 0.0, now=0.0)
    state.decide(0.0)
    assert state.stopped and state.stop_joints == stop and not state.stops_all
    seen, fields_used = list(configured), set(rule.fields)
    present: dict[str, float] = {}
    latched: dict[str, float] = {}  # where each stopped joint is held: where it was when first held
    on = False

    def check_holds(commands, unheld, expect):
        """Holds (on their own): exactly the joints ``expect``, no motion, positions latched."""
        named = [n for c in commands for n in c.names]
        assert len(named) == len(set(named)) and not set(named) & set(unheld)
        assert set(named) | set(unheld) == set(expect), (named, unheld, expect)
        here = {n: x for n, x in present.items() if math.isfinite(x)}
        for c in commands:
            assert c.points == 1 and c.is_finite()
            for f in c.fields:
                if f in MOTION:
                    assert not getattr(c, f).any()
            if "position" in c.fields:
                for n, x in zip(c.names, c.position[0]):
                    if n not in latched:
                        latched[n] = here[n]
                    assert x == latched[n]

    for step in steps:
        kind = step[0]
        if kind == "states":
            state.joints.saw_states(step[1])
            seen += [n for n in step[1] if n not in seen]
        elif kind == "present":
            present = step[1]
        elif kind == "predict":
            state.observe(0, step[1], now=0.0)
            state.decide(0.0)
            on = step[1] > 1.0
            assert state.active == (["stall_ahead"] if on else []) and state.stop_joints == stop
        elif kind == "timer":
            out = state.hold_stopped(present)
            if rule.layout:  # every joint in one message: no command to take the free ones from, all held
                expect = configured
            else:
                expect = [n for n in seen if n in stop] if fields_used else []
            check_holds(out.commands, out.unheld, expect)
        else:
            _, names, given = step
            command = joint_command(names, **given)
            seen += [n for n in names if n not in seen]
            if rule.fields_from_commands:
                fields_used.update(given)
            here = {n: x for n, x in present.items() if math.isfinite(x)}
            out = state.outputs(command, present, now=0.0)
            assert not out.held
            # A position goal cannot be decided without the present position of a joint a rule or the stop concerns.
            ruled_unknown = on and ruled in names and any(n not in here for n in names)
            held_unknown = any(n in stop and n not in here and n not in latched for n in names)
            if "position" in given and (ruled_unknown or held_unknown):
                assert out.commands == []
            else:
                (sent,) = out.commands
                assert sent.names == names and sent.fields == command.fields and sent.points == command.points
                for j, name in enumerate(names):
                    for f in command.fields:
                        asked, got = getattr(command, f)[:, j], getattr(sent, f)[:, j]
                        if name in stop:  # held: no motion, at its latched position
                            if f == "position" and name not in latched:
                                latched[name] = here[name]
                            want = np.full_like(asked, latched[name] if f == "position" else 0.0)
                        elif on and name == ruled:  # free, the rule that is on scales it
                            want = here[name] + scale * (asked - here[name]) if f == "position" else scale * asked
                        else:  # free and no rule on it: exactly as commanded
                            want = asked
                        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12, err_msg=f"{f} of {name}")
            expect = [] if rule.layout else [n for n in seen if n in stop and n not in names]
            check_holds(out.holds, out.unheld, expect)


# -- a range rule on a base: nothing in range is range_max, never stale


def laser_scan(ranges, range_max=3.5):
    return SimpleNamespace(range_min=0.12, range_max=range_max, ranges=[float(r) for r in ranges])


def test_a_range_rule_reads_open_space_as_range_max_and_never_goes_stale():
    spec = load_questions(config_file("base_reflex_questions"))
    rule_set = load_rules(config_file("base_reflex_rules"), questions=spec, joint_names=TWIST_AXES)
    (front,) = [r for r in rule_set.rules if r.source == "signal"]
    (cumulant,) = [q.cumulant for q in spec.questions if q.name == front.question]
    assert cumulant.field == "min(ranges[0:5])" and not front.above
    index = rule_set.rules.index(front)
    state = ReflexState(rule_set, KnownJoints(TWIST_AXES, FORMS["twist"]))
    now = 0.0
    scans = [[math.inf] * 36, [math.inf, 2.0] + [math.inf] * 34, [math.inf] * 4 + [0.2] + [math.inf] * 31]
    scans += [[math.nan] * 2 + [math.inf] * 34, [math.inf] * 36]
    reads = []
    for ranges in scans * 4:
        now += 0.1
        value = cumulant.read(laser_scan(ranges))
        reads.append(value)
        state.observe(index, value, now)
        for other in set(range(len(rule_set.rules))) - {index}:
            state.observe(other, 0.0, now)  # the predictions quiet and fresh: only the range rule is watched
        state.decide(now)
        assert front.name not in state.stale and not state.stopped
    assert reads[:5] == [3.5, 2.0, 0.2, 3.5, 3.5]  # nothing in range: range_max; NaN beams are no reading
    assert state.status[index].value == 3.5 and not state.status[index].on
