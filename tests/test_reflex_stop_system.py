"""Stop means every servo stops: the servo emulator, the real driver and the reflex, whatever the last command named.

The operator moves the shoulder, then sends a command naming only the elbow; then the stop
comes: the Horde's predictions go stale while the operator goes on, the operator goes silent and
every prediction stops, a rule's own fail-safe stops (the predictor's prediction goes stale), or a
rule zeroing the shoulder's motion up switches on (a response, not a stop: the elbow stays free).
Every servo's measured velocity must come to 0 and stay there. The driver's own command timeout
is off here, so only the reflex's hold can stop the shoulder. Each command form the driver takes
(velocity, position, position with velocity) runs its three stops in one system per driver mode;
the velocity system then checks the driver's own timeout, per joint, without a stop.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from gamma_net_msgs.msg import Prediction
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState
from test_dynamixel_driver import Listener, start_driver
from test_reflex_node import GAMMAS, STALL, Rig, rules_file
from test_reflex_node_safety import make_reflex

pytestmark = pytest.mark.ros

SPEED_WATCH = {  # never on (|shoulder.velocity| above 100 rad/s); only its fail-safe acts
    "name": "speed_watch",
    "from": "predictor",
    "question": "|shoulder.velocity|",  # config/arm.yaml's cumulant
    "tau": 10,
    "above": 100.0,
    "response": {"event": True},
    "fail_safe": "stop",
}
TRIGGERS = ("stale predictions", "silent operator", "a rule's stop", "a rule's response")
FORMS = {"velocity": [("velocity",)], "position": [("position",), ("position", "velocity")]}


@pytest.mark.parametrize("mode", ["velocity", "position"])
def test_every_servo_stops_though_the_last_command_named_one_joint(tmp_path, start_emulator, executor, spin, mode):
    port, _client = start_emulator([0.0, 1.5])
    listener = Listener(executor)
    # Two publishers on joint_commands, the reflex and the listener's (unused here): both expected.
    driver = start_driver(executor, port, command_mode=mode, command_timeout_s=0.0, **{"graph.commands.expected": 2})
    rules = rules_file(tmp_path, STALL | {"hold_s": 0.0}, SPEED_WATCH, stale_after_s=0.3)
    reflex = make_reflex(rules, hold_period_s=0.1)
    executor.add_node(reflex)
    rig = Rig(executor, spin)
    predictor = rig.node.create_publisher(Prediction, "predictions", 10)
    flowing = {"horde": True, "predictor": True, "effort": 0.2}
    operator: list[JointState] = []  # what the operator repeats on each feed (none: silent)
    reached = {}

    def feed() -> None:
        if flowing["horde"]:
            rig.predict(flowing["effort"])  # 0.2, below the stall rule's threshold: commands pass
        if flowing["predictor"]:
            predictor.publish(Prediction(question="|shoulder.velocity|", gammas=GAMMAS.tolist(), values=[0.0] * 3))
        for msg in operator:
            rig.teleop.publish(msg)

    def now() -> np.ndarray:
        return np.asarray(listener.states[-1].position) if listener.states else None

    def shoulder_moving() -> bool:
        return bool(listener.states) and abs(listener.states[-1].velocity[0]) > 0.1

    def still() -> bool:  # a position hold may pass through 0 on its way back: still means still for a while
        return len(listener.states) >= 5 and not np.any([m.velocity for m in listener.states[-5:]])

    assert rig.until(lambda: listener.states, feed=feed)
    for fields in FORMS[mode]:
        for trigger in TRIGGERS:
            case = f"{'+'.join(fields)}, {trigger}"
            flowing.update(horde=True, predictor=True, effort=0.2)
            operator.clear()
            ready = lambda: not (reflex.state.stopped or reflex.state.status[0].on) and reflex.state.status[1].seen > 0  # noqa: E731
            assert rig.until(ready, feed=feed), case
            shoulder, elbow = now()
            sign = 1.0 if shoulder < 0.2 or trigger == "a rule's response" else -1.0  # back and forth, in the limits
            if mode == "velocity":
                move = JointState(name=["shoulder"], velocity=[0.2 * sign])
                only_elbow = JointState(name=["elbow"], velocity=[0.0])
                goal = None
            else:
                goal = shoulder + 1.2 * sign
                move = JointState(name=["shoulder"], position=[goal], velocity=[0.2 * sign][: len(fields) - 1])
                only_elbow = JointState(name=["elbow"], position=[elbow], velocity=[0.0][: len(fields) - 1])
            operator.append(move)  # repeated, as teleop repeats: a moment's stop on a loaded machine does not end it
            assert rig.until(shoulder_moving, feed=feed), case
            operator.clear()
            taken = driver.counts["commands"]
            rig.teleop.publish(only_elbow)
            assert rig.until(lambda taken=taken: driver.counts["commands"] > taken, feed=feed), case
            # The stop.
            if trigger == "stale predictions":
                flowing["horde"] = False
                operator.append(only_elbow)  # the operator goes on naming the elbow alone
            elif trigger == "silent operator":
                flowing.update(horde=False, predictor=False)
            elif trigger == "a rule's stop":
                flowing["predictor"] = False
                operator.append(only_elbow)
            else:  # the stall rule switches on: no shoulder motion up (its direction), the elbow free
                flowing["effort"] = 2.0
                operator.append(only_elbow)
            # This stop, not a moment's gap in an input that flows (a loaded machine's): the stopped input stale.
            rule = 1 if trigger == "a rule's stop" else 0
            stopping = lambda rule=rule: reflex.state.stopped and reflex.state.status[rule].stale  # noqa: E731
            if trigger == "a rule's response":
                stopping = lambda: reflex.state.status[0].on  # noqa: E731
            assert rig.until(stopping, feed=feed), case
            stopped_at, at_stop, first = time.time(), now(), len(listener.states)
            assert rig.until(still, feed=feed), f"{case}: {listener.states[-1].velocity}"
            seen = len(listener.states)
            moving = [i for i in range(first, seen) if any(listener.states[i].velocity)]
            if first < seen:  # the first read found still (none: still already at the stop)
                last = listener.states[moving[-1] + 1 if moving else first].header.stamp
                reached[case] = last.sec + last.nanosec * 1e-9 - stopped_at
            assert rig.until(lambda seen=seen: len(listener.states) >= seen + 10, feed=feed), case
            velocities = [list(m.velocity) for m in listener.states[seen:]]
            assert not np.any(velocities), f"{case}: a servo moved again while stopped: {velocities}"
            if trigger == "a rule's response":  # the shoulder's command in force restricted, though not the last
                assert not reflex.state.stopped, case
                np.testing.assert_allclose(driver.goals.goal[0], 0.0 if goal is None else now()[0], atol=0.1)
                continue
            # What the driver took: holds naming every joint, whatever the last command named.
            for out in rig.commands[-3:]:
                assert list(out.name) == ["shoulder", "elbow"] and not any(out.velocity), (case, out)
            if goal is None:  # it stopped where the stop found it (at 0.2 rad/s, 0.1 rad is half a second)
                assert abs(now()[0] - at_stop[0]) < 0.1, (case, now(), at_stop)
            else:
                held = rig.commands[-1].position
                np.testing.assert_allclose(driver.goals.goal, held, err_msg=case)  # the goals are the hold's
                if abs(at_stop[0] - goal) > 0.3:  # it was far from its goal at the stop: it did not carry on to it
                    assert abs(now()[0] - at_stop[0]) < 0.15, (case, now(), at_stop, goal)
    if mode == "velocity":  # without a stop, the driver's own timeout is per joint: the elbow's commands
        # do not keep the shoulder's goal alive (its command_timeout_s changed at run time, as a user may)
        assert driver.set_parameters([Parameter("command_timeout_s", value=0.3)])[0].successful
        flowing.update(horde=True, predictor=True)
        operator[:] = [JointState(name=["shoulder"], velocity=[-0.2])]
        assert rig.until(lambda: not reflex.state.stopped and shoulder_moving(), feed=feed)
        timeouts = driver.goals.timeouts
        operator[:] = [JointState(name=["elbow"], velocity=[0.1])]
        assert rig.until(lambda: driver.goals.timeouts > timeouts and driver.goals.goal[0] == 0.0, feed=feed)
        assert rig.until(lambda: listener.states[-1].velocity[0] == 0.0 and listener.states[-1].velocity[1] > 0.05,
                         feed=feed)  # fmt: skip
        assert not reflex.state.stopped  # the driver's doing, not the reflex's
    assert reflex.counts["errors"] == 0 and driver.counts["rejected_commands"] == 0, (reflex.counts, driver.counts)
    # Reported, not asserted (a loaded machine's scheduling): the stop to every servo measured still.
    print(f"{mode} mode at {driver.rate_hz:g} Hz: " + ", ".join(f"{c} {s:.3f} s" for c, s in reached.items()))
