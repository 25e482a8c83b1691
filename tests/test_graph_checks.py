"""A stranger on the command path is named on /diagnostics and stopped: real rogue processes, as users start them.

The rogues are `ros2 topic pub` processes (a second Horde on ``horde/predictions``, a second teleop
on ``joint_commands_in``, a stray on ``joint_commands``). Each must be named (its node, its topic)
on /diagnostics, the reflex must hold every joint or the driver refuse commands while it is on
(for the driver: the emulated servos stand still), and all must pass again once it is gone. How
long the naming took after the rogue was discovered is printed (``-s``), not asserted.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from ros2_cli import Background
from sensor_msgs.msg import JointState
from test_dynamixel_driver import Listener, start_driver
from test_reflex_node import GAMMAS, STALL, Rig, rules_file
from test_reflex_node_safety import make_reflex
from waiting import bound

pytestmark = pytest.mark.ros


def rogue(tmp_path, name: str, topic: str, type_name: str, values: str) -> Background:
    """``ros2 topic pub -r 10 -n NAME TOPIC TYPE VALUES`` in the background, as a user starts it."""
    command = ["ros2", "topic", "pub", "-r", "10", "-n", name, topic, type_name, values]
    return Background(command, cwd=tmp_path, log_path=tmp_path / f"{name}.log")


def named(statuses: list, prefix: str, *texts: str) -> bool:
    """Whether the latest status of the node ``prefix`` names every one of ``texts`` in its unexpected publishers."""
    mine = [s for s in statuses if s.name.startswith(prefix)]
    if not mine:
        return False
    values = {kv.key: kv.value for kv in mine[-1].values}
    return all(text in values.get("unexpected_publishers", "") for text in texts) and texts[0] in mine[-1].message


def clean(statuses: list, prefix: str) -> bool:
    mine = [s for s in statuses if s.name.startswith(prefix)]
    return bool(mine) and {kv.key: kv.value for kv in mine[-1].values}.get("unexpected_publishers") == "none"


def discovered(node, topic: str, name: str):
    """A predicate: the test's own node sees ``name`` publish on ``topic``; it keeps the time it first did."""
    seen = {}

    def check() -> bool:
        if any(i.node_name == name for i in node.get_publishers_info_by_topic(topic)):
            seen.setdefault("at", time.monotonic())
        return "at" in seen

    check.seen = seen
    return check


def test_a_second_horde_on_the_predictions_is_named_and_stops_the_reflex(tmp_path, executor, spin):
    reflex = make_reflex(rules_file(tmp_path, STALL | {"hold_s": 0.0}, stale_after_s=1.0), hold_period_s=0.1)
    executor.add_node(reflex)
    rig = Rig(executor, spin)
    feed = lambda: rig.predict(0.2)  # noqa: E731  below the rule's threshold: commands pass
    assert rig.until(lambda: reflex.state.status[0].seen > 0 and not reflex.state.stopped, feed=feed)
    assert rig.command(0.4, 0.3) == [0.4, 0.3]
    values = [0.0] * GAMMAS.size * 2  # a Horde's message saying nothing alarming: only its presence stops
    fake = f"{{questions: [shoulder_speed, shoulder_effort], gammas: {GAMMAS.tolist()}, values: {values}}}"
    there = discovered(rig.node, "/horde/predictions", "second_horde")
    with_rogue = rogue(tmp_path, "second_horde", "/horde/predictions", "gamma_net_msgs/msg/PredictionArray", fake)
    try:
        assert rig.until(there, feed=feed, timeout=60), with_rogue.output
        assert rig.until(lambda: named(rig.diagnostics, "reflex", "/horde/predictions", "/second_horde"), feed=feed)
        print(f"named {time.monotonic() - there.seen['at']:.2f} s after the test saw it")
        assert rig.until(lambda: reflex.state.stopped, feed=feed)
        assert rig.command(0.4, 0.3) == [0.0, 0.0]  # every joint held
        rig.during(1.0, lambda: False, feed=feed)  # five looks at the graph later: still one appearance
        assert reflex.graph.appearances == 1
    finally:
        with_rogue.interrupt()  # ros2 topic pub ends with 2 on Ctrl-C
    assert rig.until(lambda: clean(rig.diagnostics, "reflex") and not reflex.state.stopped, feed=feed, timeout=60)
    assert rig.command(0.4, 0.3) == [0.4, 0.3]
    assert reflex.counts["errors"] == 0


def test_a_second_teleop_not_on_the_allow_list_is_named_and_held(tmp_path, executor, spin):
    rules = rules_file(tmp_path, STALL | {"hold_s": 0.0}, stale_after_s=1.0)
    reflex = make_reflex(rules, hold_period_s=0.1, **{"graph.commands.allowed": "[reflex_rig]"})
    executor.add_node(reflex)
    rig = Rig(executor, spin)
    feed = lambda: rig.predict(0.2)  # noqa: E731
    assert rig.until(lambda: reflex.state.status[0].seen > 0 and not reflex.state.stopped, feed=feed)
    fast = "{name: [shoulder, elbow], velocity: [1.5, -1.5]}"
    there = discovered(rig.node, "/joint_commands_in", "second_teleop")
    with_rogue = rogue(tmp_path, "second_teleop", "/joint_commands_in", "sensor_msgs/msg/JointState", fast)
    try:
        assert rig.until(there, feed=feed, timeout=60), with_rogue.output
        assert rig.until(lambda: named(rig.diagnostics, "reflex", "/joint_commands_in", "/second_teleop not allowed"))
        print(f"named {time.monotonic() - there.seen['at']:.2f} s after the test saw it")
        assert rig.until(lambda: reflex.state.stopped, feed=feed)
        seen = len(rig.commands)
        assert rig.command(0.4, 0.3) == [0.0, 0.0]
        assert rig.until(lambda: len(rig.commands) >= seen + 10, feed=feed)  # the rogue's, answered by holds
        assert not np.any([list(m.velocity) for m in rig.commands[seen:]])
    finally:
        with_rogue.interrupt()  # ros2 topic pub ends with 2 on Ctrl-C
    assert rig.until(lambda: clean(rig.diagnostics, "reflex") and not reflex.state.stopped, feed=feed, timeout=60)
    assert rig.command(0.4, 0.3) == [0.4, 0.3]


def test_a_stray_on_joint_commands_leaves_the_servos_still(tmp_path, start_emulator, executor, spin):
    port, _client = start_emulator([0.0, 1.5])
    listener = Listener(executor)  # the one expected commander
    driver = start_driver(executor, port, command_timeout_s=1.0)
    command = lambda: listener.publisher.publish(JointState(name=["shoulder"], velocity=[0.3]))  # noqa: E731

    def feeding(predicate, timeout=30.0):
        deadline = time.monotonic() + bound(timeout)
        while time.monotonic() < deadline:
            command()
            if spin(executor, predicate, timeout=0.05):
                return True
        return predicate()

    def still(n=5) -> bool:
        return len(listener.states) >= n and not np.any([m.velocity for m in listener.states[-n:]])

    statuses = lambda: [s for d in listener.diagnostics for s in d.status]  # noqa: E731
    assert feeding(lambda: listener.states and listener.states[-1].velocity[0] > 0.1)  # the shoulder moves
    there = discovered(listener.node, "/joint_commands", "stray")
    stray = rogue(
        tmp_path, "stray", "/joint_commands", "sensor_msgs/msg/JointState", "{name: [elbow], velocity: [1.5]}"
    )
    try:
        assert feeding(there, timeout=60), stray.output
        assert feeding(lambda: named(statuses(), "dynamixel_driver", "/joint_commands", "/stray"))
        print(f"named {time.monotonic() - there.seen['at']:.2f} s after the test saw it")
        assert feeding(still)  # both commanders go on: the servos stand still
        seen = len(listener.states)
        assert feeding(lambda: len(listener.states) >= seen + 15)
        velocities = [list(m.velocity) for m in listener.states[seen:]]
        assert not np.any(velocities), f"a servo moved while the stray was on: {velocities}"
        assert driver.graph.refused > 0
    finally:
        stray.interrupt()  # ros2 topic pub ends with 2 on Ctrl-C
    assert feeding(lambda: clean(statuses(), "dynamixel_driver"), timeout=60)
    assert feeding(lambda: listener.states[-1].velocity[0] > 0.1)  # the expected commander's commands pass again
    values = {kv.key: kv.value for kv in statuses()[-1].values}
    assert int(values["received"]) >= int(values["processed"]) > 0, values


def test_an_allow_list_entry_that_is_not_a_node_name_is_refused_in_one_line(tmp_path, executor):
    rules = rules_file(tmp_path, STALL)
    with pytest.raises(ValueError, match=r"^parameter graph.commands.allowed: ' ' is not a node name; got \[' '\]$"):
        make_reflex(rules, **{"graph.commands.allowed": "[' ']"})
