"""Stop means every servo stops: the servo emulator, the real driver and the reflex, whatever the last command named.

The operator moves the shoulder, then sends a command naming only the elbow; then the stop
comes: the Horde's predictions go stale while the operator goes on, the operator goes silent and
every prediction stops, a rule's own fail-safe stops (the predictor's prediction goes stale), or a
rule zeroing the shoulder's motion up switches on (a response, not a stop: the elbow stays free).
Every servo's measured velocity must come to 0 and stay there, counted in driver cycles from the
driver's receipt of the hold: within 2 cycles plus one hold period, plus the servo's own stop
from where the hold found it (docs/reflex.md, "How soon a stop stops the servos"; the numbers
are printed). The driver's own command timeout is off here, so only the reflex's hold can stop the
shoulder. Each command form the driver takes (velocity, position, position with velocity) runs its
stops in one system per driver mode; the velocity system then checks the driver's own timeout, per
joint, without a stop.
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

from gamma_net_core.signals.servo import ServoLimits, ServoModel
from gamma_net_ros.hardware import control_table as ct

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


class DriverTap:
    """The real driver's commands as it took them and its readings as it published them, in its own order.

    Counted in driver cycles, not seconds: the n-th reading after a command is the n-th read cycle
    after the driver took it, however late a loaded machine runs the cycles. The steady times
    (a reading's: when its request went out) say what the servos did in between.
    """

    def __init__(self, driver) -> None:
        self.driver = driver
        self.reads: list[tuple[float, np.ndarray, np.ndarray]] = []  # (steady time, position, velocity)
        self.taken: list[tuple[int, list[str], float, np.ndarray | None, np.ndarray | None]] = []
        # ^ (readings before it, its names, steady time, the goals before it, the goals after it)
        (sub,) = [s for s in driver.subscriptions if s.topic_name.endswith("/joint_commands")]
        take, publish = sub.callback, driver.state_pub.publish
        copy = lambda goal: None if goal is None else goal.copy()  # noqa: E731

        def on_command(msg, info) -> None:  # the driver's own callback counts by the message's info
            at, before = time.monotonic(), copy(driver.goals.goal)
            take(msg, info)
            self.taken.append((len(self.reads), list(msg.name), at, before, copy(driver.goals.goal)))

        def on_state(msg) -> None:
            age = time.time() - (msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9)
            self.reads.append((time.monotonic() - age, np.array(msg.position), np.array(msg.velocity)))
            publish(msg)

        sub.callback, driver.state_pub.publish = on_command, on_state


def servo_stop_s(driver, reading, before, taken_at: float, goal) -> float:
    """Seconds the emulated servos take to read still under ``goal``, taken at ``taken_at``: their own stop.

    Args:
      reading: ``(steady time, position, velocity)``, the state to start from.
      before: the goals in force from the reading until ``taken_at`` (steady time).

    The emulator's motion is gamma_net_core's ServoModel at ServoLimits' response (the emulator's
    defaults: a 50 ms velocity lag, position gain 8/s); a reading is 0 below half a velocity unit.
    """
    lim = driver.goals.servo_limits
    servos = [ServoLimits(*one) for one in zip(lim.position_min, lim.position_max, lim.velocity_max)]
    at, position, velocity = reading
    model = ServoModel(servos, position)
    if driver.bus.profile_velocity is not None:  # position mode: the caps the driver wrote (Profile Velocity)
        model.set_profile_velocity(driver.bus.profile_velocity)
    model.velocity = np.asarray(velocity, dtype=np.float64).copy()
    command = model.command_velocity if driver.goals.mode == "velocity" else model.command_position
    dt = 0.001
    command(before)
    for _ in range(int(max(taken_at - at, 0.0) / dt)):  # the servos' motion until the driver took the goal
        model.step(dt)
    command(goal)
    half_unit, moving = ct.RAD_S_PER_VELOCITY_UNIT / 2, 0
    for step in range(1, 5000):
        model.step(dt)
        if np.any(np.abs(model.velocity) >= half_unit):
            moving = step
        push = model.goal_velocity if model.goal_position is None else model.position_gain * (goal - model.position)
        if np.all(np.abs(model.velocity) + np.abs(push) < half_unit / 10):  # settled: it cannot read moving again
            break
    return moving * dt


@pytest.mark.parametrize("mode", ["velocity", "position"])
def test_every_servo_stops_though_the_last_command_named_one_joint(tmp_path, start_emulator, executor, spin, mode):
    port, _client = start_emulator([0.0, 1.5])
    listener = Listener(executor)
    # Two publishers on joint_commands, the reflex and the listener's (unused here): both expected.
    driver = start_driver(executor, port, command_mode=mode, command_timeout_s=0.0, **{"graph.commands.expected": 2})
    tap = DriverTap(driver)
    rules = rules_file(tmp_path, STALL | {"hold_s": 0.0}, SPEED_WATCH, stale_after_s=0.3)
    reflex = make_reflex(rules, hold_period_s=0.1)
    executor.add_node(reflex)
    rig = Rig(executor, spin)
    predictor = rig.node.create_publisher(Prediction, "predictions", 10)
    flowing = {"horde": True, "predictor": True, "effort": 0.2}
    operator: list[JointState] = []  # what the operator repeats on each feed (none: silent)
    reached = {}  # case: (readings from the first hold's receipt to the first still one, the bound)
    hold_cycles = int(np.ceil(reflex.hold_period_s * driver.rate_hz - 1e-9))  # one hold period in driver cycles

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
            taken_before = len(tap.taken)
            # This stop, not a moment's gap in an input that flows (a loaded machine's): the stopped input stale.
            rule = 1 if trigger == "a rule's stop" else 0
            stopping = lambda rule=rule: reflex.state.stopped and reflex.state.status[rule].stale  # noqa: E731
            if trigger == "a rule's response":
                stopping = lambda: reflex.state.status[0].on  # noqa: E731
            assert rig.until(stopping, feed=feed), case
            at_stop = now()
            # Counted in the driver's cycles from its receipt of the stop's first command naming the shoulder
            # (the hold; for the rule's response, the restriction): the first still reading comes within 2
            # cycles (the write, then the read that sees it) plus one hold period, plus the servo's own stop
            # from its state at the receipt (a property of the servo, not of the command path): the last
            # reading's, moved on under the goals in force until the driver took the hold. Then it stays still.
            holds = lambda after=taken_before: [t for t in tap.taken[after:] if "shoulder" in t[1]]  # noqa: E731
            assert rig.until(holds, feed=feed), f"{case}: the driver took no command naming the shoulder"
            before, _, taken_at, was, goal_taken = holds()[0]
            reading = tap.reads[before - 1]  # the last before the receipt; the goal in force till then
            own = servo_stop_s(driver, reading, reading[1] if was is None else was, taken_at, goal_taken)
            own = int(np.ceil(own * driver.rate_hz))
            bound = 2 + hold_cycles + own
            assert rig.until(lambda enough=before + bound + 10: len(tap.reads) >= enough, feed=feed), case
            velocities = [list(v) for *_, v in tap.reads[before:]]
            moving = [n for n, v in enumerate(velocities) if np.any(v)]
            first_still = moving[-1] + 2 if moving else 1  # the n-th reading after the receipt: still from there
            reached[case] = (first_still, bound, own)
            assert first_still <= bound, f"{case}: still from reading {first_still} > {bound} ({own}): {velocities}"
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
    cases = ", ".join(f"{c} {n} ({b}; {o})" for c, (n, b, o) in reached.items())
    print(f"{mode} mode at {driver.rate_hz:g} Hz, the first still reading after the hold's receipt, in driver cycles "
          f"(the bound; the servo's own stop): {cases}")  # fmt: skip
