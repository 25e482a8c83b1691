"""Staleness per topic in the horde node, on a robot stand-in: a real rclpy node publishing at its own rates.

The robot is not the project's arm: six joints named j1..j6 at 50 Hz and a BatteryState at 1 Hz,
on the wall clock. A quiet or wrong topic, or a joint the robot lacks, stops only the questions
that read it; the others learn and publish on every tick.
"""

from __future__ import annotations

import dataclasses
import math
import re
import sys

import numpy as np
import pytest
import yaml
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from gamma_net_msgs.msg import PredictionArray
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import BatteryState, JointState

from gamma_net_ros.diagnostics import WARN
from gamma_net_ros.horde.node import Horde
from gamma_net_ros.horde.rows import Reading
from gamma_net_ros.horde.topics import Sample
from gamma_net_ros.processes import NodeProcess

pytestmark = pytest.mark.ros
JOINTS = "sensor_msgs/msg/JointState"
JS = {"topic": "/my_robot/joint_states", "type": JOINTS}
BATTERY = {"topic": "/my_robot/battery", "type": "sensor_msgs/msg/BatteryState"}


class Robot(Node):
    """Joint states (j1..j6, with effort) at 50 Hz and a battery at 1 Hz; a gripper topic of ``gripper_type``."""

    def __init__(self, gripper_type=None) -> None:
        super().__init__("my_robot")
        self.joints = self.create_publisher(JointState, "/my_robot/joint_states", qos_profile_sensor_data)
        self.battery = self.create_publisher(BatteryState, "/my_robot/battery", qos_profile_sensor_data)
        self.gripper = gripper_type and self.create_publisher(
            gripper_type, "/my_robot/gripper", qos_profile_sensor_data
        )
        self.sent = {"joints": 0, "battery": 0}
        self.timers_ = [self.create_timer(0.02, self.publish_joints), self.create_timer(1.0, self.publish_battery)]

    def publish_joints(self) -> None:
        t = self.sent["joints"] * 0.02
        msg = JointState(name=[f"j{i}" for i in range(1, 7)])
        msg.position = [math.sin(t + i) for i in range(6)]
        msg.velocity = [math.cos(t + i) for i in range(6)]
        msg.effort = [0.5 * math.sin(2 * t + i) for i in range(6)]
        self.joints.publish(msg)
        self.sent["joints"] += 1

    def publish_battery(self) -> None:
        self.battery.publish(BatteryState(voltage=12.0 - 0.01 * self.sent["battery"]))
        self.sent["battery"] += 1

    def stop(self) -> None:
        for timer in self.timers_:
            timer.cancel()


class Listener(Node):
    def __init__(self) -> None:
        super().__init__("listener")
        self.predictions: list[PredictionArray] = []
        self.statuses: list[DiagnosticStatus] = []
        self.create_subscription(PredictionArray, "horde/predictions", self.predictions.append, 1000)
        self.create_subscription(
            DiagnosticArray, "/diagnostics", lambda m: self.statuses.extend(s for s in m.status), 100
        )

    def said(self, pattern: str) -> bool:
        return any(re.search(pattern, s.message) for s in self.statuses if s.name.endswith("horde"))


def questions(*extra) -> dict:
    return {
        "rate_hz": 50.0,
        "stale_after_s": 0.5,
        "publish_taus": [1, 10],
        "state": [
            {**JS, "field": "position[j1]", "low": -1.0, "high": 1.0},
            {**JS, "field": "position[j2]", "low": -1.0, "high": 1.0},
        ],
        "learner": {"tilings": [8], "memory_size": 512, "step_size": 0.1},
        "timescales": {"n_gamma": 1, "n_tau": 3, "tau_max": 20},
        "questions": [
            {"name": "j1_speed", "cumulant": {**JS, "field": "velocity[j1]", "transform": "abs"}},
            {"name": "j3_effort", "cumulant": {**JS, "field": "effort[j3]"}},
            {"name": "voltage", "cumulant": {**BATTERY, "field": "voltage"}},
            *extra,
        ],
    }


def start(executor, spin, tmp_path, doc) -> tuple[Horde, Robot, Listener]:
    path = tmp_path / "questions.yaml"
    path.write_text(yaml.safe_dump(doc))
    horde = Horde(
        parameter_overrides=[
            Parameter("questions_file", value=str(path)),
            Parameter("tick_topic", value="/my_robot/joint_states"),
        ]
    )
    listener = Listener()
    executor.add_node(horde)
    executor.add_node(listener)
    assert spin(executor, lambda: horde.count_publishers("horde/predictions") >= 1, timeout=10)
    robot = Robot()
    executor.add_node(robot)
    return horde, robot, listener


def values(msg: PredictionArray) -> np.ndarray:
    return np.reshape(msg.values, (len(msg.questions), len(msg.gammas)))


def test_a_1_hz_topic_stops_only_its_questions_while_the_50_hz_ones_publish_on_every_message(
    executor, spin, tmp_path, capfd
):
    elbow = {"name": "elbow_effort", "cumulant": {**JS, "field": "effort[elbow]"}}  # no joint 'elbow' here
    horde, robot, listener = start(executor, spin, tmp_path, questions(elbow))
    # the battery publishes once a second and is stale half of it (0.5 s): /diagnostics says what it stops
    assert spin(
        executor,
        lambda: (
            robot.sent["battery"] >= 3
            and listener.said(r"/my_robot/battery stale on \d+ of the last \d+ ticks: stops questions \['voltage'\]")
            and horde.stopped.get("voltage", 0) > 0
        ),
        timeout=30,
    )
    robot.stop()
    # one PredictionArray per JointState message (the first only records the state), the quiet battery's none lost
    assert spin(executor, lambda: len(listener.predictions) == horde.ticks - 1, timeout=10)
    ticks = horde.ticks
    assert ticks >= 50 and ticks == horde.sampler.topics["/my_robot/joint_states"].received
    table = np.array([values(m) for m in listener.predictions])  # [N, Q, G]
    fast = table[:, :2]
    assert np.all(np.isfinite(fast)) and np.all(np.any(np.diff(fast, axis=0) != 0, axis=0))  # their values move
    voltage = table[:, 2]
    stale = np.isnan(voltage).all(axis=1)
    assert stale.any() and (~stale).any()  # published NaN where its topic is stale, else its prediction
    assert horde.skipped == {"silent": 0, "stale": 0, "unreadable": 0, "refused": 0, "warming_up": 0}
    # the joint the robot lacks: said once for that question, naming the names there are; only it stops
    assert np.all(np.isnan(table[:, 3])) and horde.stopped["elbow_effort"] == ticks
    assert not np.any(horde.learner.weights[3]) and np.any(horde.learner.weights[0])
    err = capfd.readouterr().err
    said = [line for line in err.splitlines() if "question 'elbow_effort' stopped" in line]
    assert len(said) == 1, err
    assert "field 'effort[elbow]' of sensor_msgs/msg/JointState: no 'elbow' in name ['j1', 'j2', 'j3'" in said[0]
    assert listener.said(re.escape("elbow_effort: field 'effort[elbow]'"))


def test_a_topic_stale_between_reports_is_named_at_the_next_one_though_fresh_at_it(executor, spin, tmp_path):
    """A 1 Hz topic read by the 1 Hz report just after each of its messages: fresh at every report."""
    horde, robot, _ = start(executor, spin, tmp_path, questions())
    battery = "/my_robot/battery"
    assert spin(executor, lambda: all(t.latest is not None for t in horde.sampler.topics.values()), timeout=30)
    robot.stop()
    before = horde._health().values.get(f"stale.{battery}", 0)  # the reports so far are not this test's
    reading = Reading(
        inputs=np.zeros(2), cumulants=np.zeros(3), continuations=np.ones(3),
        usable=np.array([True, True, False]), state_ok=True,
    )  # fmt: skip
    fresh = dataclasses.replace(reading, usable=np.ones(3, bool))
    for tick in range(50):  # stale for the 24 ticks before its message, fresh for the 26 after
        horde.watch.note(Sample(stale=[battery] if tick < 24 else []), reading if tick < 24 else fresh)
    health = horde._health()
    assert f"{battery} stale on 24 of the last 50 ticks: stops questions ['voltage']" in health.message
    assert health.level == WARN and health.values[f"stale.{battery}"] == before + 24
    for _ in range(50):
        horde.watch.note(Sample(), fresh)
    assert "stale" not in horde._health().message  # a report says the ticks since the last one only


GRIPPER = """
import rclpy
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import BatteryState

rclpy.init()
node = rclpy.create_node("gripper")
publisher = node.create_publisher(BatteryState, "/my_robot/gripper", qos_profile_sensor_data)
node.create_timer(0.1, lambda: publisher.publish(BatteryState()))
try:
    rclpy.spin(node)
except KeyboardInterrupt:
    pass
"""


def test_a_topic_published_with_another_type_is_refused_in_one_line_naming_both(
    executor, spin, tmp_path, capfd, request
):
    grip = {"name": "grip", "cumulant": {"topic": "/my_robot/gripper", "type": JOINTS, "field": "effort[j1]"}}
    horde, robot, listener = start(executor, spin, tmp_path, questions(grip))
    # another process: one participant carries one type per topic (rmw refuses a second publisher's type)
    gripper = NodeProcess([sys.executable, "-c", GRIPPER], log_path=tmp_path / "gripper.log").start()
    request.addfinalizer(lambda: gripper.stop(timeout=10))
    refusal = "/my_robot/gripper is sensor_msgs/msg/BatteryState, not sensor_msgs/msg/JointState: stops questions"
    assert spin(
        executor,
        lambda: any(
            s.level == DiagnosticStatus.ERROR and refusal in s.message
            for s in listener.statuses
            if s.name.endswith("horde")
        ),
        timeout=30,
    )
    assert spin(executor, lambda: len(listener.predictions) >= 20, timeout=10)  # the others go on
    latest = values(listener.predictions[-1])
    assert np.all(np.isnan(latest[3])) and np.all(np.isfinite(latest[:2]))
    assert horde.sampler.topics["/my_robot/gripper"].received == 0
    robot.stop()
    err = capfd.readouterr().err
    lines = [line for line in err.splitlines() if "refusing /my_robot/gripper" in line]
    assert lines, err
    assert (
        "published as sensor_msgs/msg/BatteryState, but the questions declare sensor_msgs/msg/JointState; "
        "questions ['grip'] stopped" in lines[0]
    )
