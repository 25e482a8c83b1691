"""Which publishers on a watched topic are unexpected (a pure decision), and what a keep-last queue lost."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from gamma_net_ros.graph_watch import Arrivals, allows, topic_line, unexpected

NAMES = st.sampled_from(["/teleop", "/rogue", "/ns/teleop", "/horde", "/_ros2cli_4711", "/reflex_rig"])
ENTRIES = st.sampled_from(["teleop", "/teleop", "horde", "/ns/teleop", "reflex_rig"])


def test_one_publisher_as_expected_is_fine_and_a_second_names_both():
    assert unexpected(["/teleop"], expected=1) == ()
    assert unexpected([], expected=1) == ()  # silence is staleness's business, not the graph's
    assert unexpected(["/teleop", "/rogue"], expected=1) == ("/teleop", "/rogue")
    assert unexpected(["/horde", "/horde_1"], expected=2) == ()


def test_an_allow_list_names_the_stranger_alone():
    assert unexpected(["/teleop", "/rogue"], expected=1, allowed=["teleop"]) == ("/rogue",)
    assert unexpected(["/rogue"], expected=1, allowed=["teleop"]) == ("/rogue",)
    # the same allowed node twice (a launch started twice): which is the stray cannot be told
    assert unexpected(["/teleop", "/teleop"], expected=1, allowed=["teleop"]) == ("/teleop", "/teleop")
    assert unexpected(["/ns/teleop"], expected=1, allowed=["teleop"]) == ()  # a bare name, in any namespace
    assert unexpected(["/ns/teleop"], expected=1, allowed=["/teleop"]) == ("/ns/teleop",)  # a full one exactly


def test_the_line_names_the_topic_and_the_publishers():
    line = topic_line("/horde/predictions", ["/horde", "/rogue"], ["/horde", "/rogue"], 1)
    assert line == "/horde/predictions: 2 publishers (/horde, /rogue), 1 expected"
    assert topic_line("/joint_commands", ["/teleop", "/rogue"], ["/rogue"], 1) == "/joint_commands: /rogue not allowed"


@settings(max_examples=300, derandomize=True, deadline=None)
@given(st.lists(NAMES, max_size=6), st.integers(1, 4), st.lists(ENTRIES, max_size=3))
def test_unexpected_is_exactly_the_strangers_and_a_crowd(publishers, expected, allowed):
    out = unexpected(publishers, expected=expected, allowed=allowed)
    is_allowed = [not allowed or any(allows(e, p) for e in allowed) for p in publishers]
    strangers = [p for p, ok in zip(publishers, is_allowed) if not ok]
    known = [p for p, ok in zip(publishers, is_allowed) if ok]
    assert not Counter(out) - Counter(publishers)  # only publishers that are there, each as often as it is
    assert Counter(strangers) <= Counter(out)  # every stranger is named
    assert (out == ()) == (not strangers and len(known) <= expected)
    if not allowed:  # count-based: all of them or none
        assert out in ((), tuple(publishers))


def _info(seq: int, gid: bytes = b"a") -> dict:
    return {"publication_sequence_number": seq, "publisher_gid": {"data": gid}}


def test_arrivals_count_the_gaps_in_each_publishers_sequence():
    a = Arrivals()
    for seq in (91, 92, 95, 100):  # 1-90 sent before the first seen: not counted
        a.arrived(_info(seq))
    a.arrived(_info(5, b"b"))
    a.arrived(_info(6, b"b"))
    a.arrived(None)  # no info (another middleware): received, nothing lost
    assert (a.received, a.lost) == (7, 2 + 4)


def test_a_stop_asked_of_the_rules_holds_every_joint_with_fresh_inputs_and_keeps_its_latch():
    """ReflexState.decide(stop=True), as the reflex calls it while a stranger is on: fresh inputs, still stopped."""
    from gamma_net_core.horde.questions import load_questions
    from gamma_net_core.paths import config_file
    from gamma_net_core.reflex.commands import joint_command
    from gamma_net_core.reflex.evaluation import ReflexState
    from gamma_net_core.reflex.holds import HoldRule, KnownJoints
    from gamma_net_core.reflex.rules import load_rules

    rule = {"name": "stall", "question": "shoulder_effort", "tau": 10, "above": 1.0,
            "response": {"scale": 0.0, "joints": ["shoulder"], "direction": "positive"}}  # fmt: skip
    rules = load_rules({"stale_after_s": 0.5, "rules": [rule]}, questions=load_questions(config_file("horde")),
                       joint_names=["shoulder", "elbow"])  # fmt: skip
    state = ReflexState(rules, KnownJoints(["shoulder", "elbow"], HoldRule(("position",), layout=True)))
    state.observe(0, 0.0, now=0.0)
    assert state.decide(0.1, stop=True) == [] and state.stopped and state.stale == []  # no rule switched
    goal = joint_command(["shoulder", "elbow"], position=[[1.0, 1.0]])
    (held,) = state.outputs(goal, {"shoulder": 0.1, "elbow": 0.2}).commands
    assert held.position.tolist() == [[0.1, 0.2]]  # held where they were, not sent to the goal
    state.decide(0.2, stop=True)
    (again,) = state.outputs(goal, {"shoulder": 0.3, "elbow": 0.4}).commands  # the arm sagged: the latch holds
    assert again.position.tolist() == [[0.1, 0.2]]
    state.decide(0.3)
    assert not state.stopped and state.outputs(goal, {"shoulder": 0.3, "elbow": 0.4}).commands[0].position.tolist() == [
        [1.0, 1.0]
    ]
