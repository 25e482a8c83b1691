"""Teleop and the scripted operator, as real nodes exchanging real Joy and JointState messages."""

from __future__ import annotations

import numpy as np
import pytest
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import JointState, Joy

from gamma_net_core.signals.arm import ArmConfig, ArmKinematics, SimulatedArm
from gamma_net_core.signals.maze import MazeConfig, MazePath, ProgressTracker
from gamma_net_ros.conversions import seconds_to_stamp
from gamma_net_ros.operator import ScriptedOperator
from gamma_net_ros.teleop import Teleop

pytestmark = pytest.mark.ros


class Rig(Node):
    """The test's side: publishes Joy or JointState, records what comes back."""

    def __init__(self) -> None:
        super().__init__("test_rig")
        self.joy = self.create_publisher(Joy, "joy", 10)
        self.states = self.create_publisher(JointState, "joint_states", qos_profile_sensor_data)
        self.commands: list[JointState] = []
        self.joys: list[Joy] = []
        self.create_subscription(JointState, "joint_commands", self.commands.append, 10)
        self.create_subscription(Joy, "joy", self.joys.append, 10)


def _overrides(**values) -> dict:
    return {"parameter_overrides": [Parameter(k, value=v) for k, v in values.items()]}


def _teleop(executor, **overrides):
    node = Teleop(**_overrides(**overrides))
    executor.add_node(node)
    return node


def test_teleop_maps_axes_to_joint_velocities(executor, spin):
    _teleop(executor)
    rig = Rig()
    executor.add_node(rig)
    spin(executor, lambda: rig.count_subscribers("joy") >= 2, timeout=5)
    joy = Joy()
    joy.axes = [1.0, -0.5, 0.3]
    rig.joy.publish(joy)
    assert spin(executor, lambda: any(np.any(c.velocity) for c in rig.commands), timeout=5)
    command = next(c for c in rig.commands if np.any(c.velocity))
    assert list(command.name) == ["shoulder", "elbow"]
    # max 0.6 rad/s at full deflection; deadzone 0.05: -0.5 -> -(0.45 / 0.95) * 0.6
    np.testing.assert_allclose(command.velocity, [0.6, -0.45 / 0.95 * 0.6], rtol=1e-6)


def test_teleop_deadman_commands_zero_when_joy_stops(executor, spin):
    _teleop(executor, timeout=0.2)
    rig = Rig()
    executor.add_node(rig)
    spin(executor, lambda: rig.count_subscribers("joy") >= 2, timeout=5)
    joy = Joy()
    joy.axes = [0.8, 0.8]
    rig.joy.publish(joy)
    assert spin(executor, lambda: len(rig.commands) >= 1, timeout=5)
    assert np.any(rig.commands[-1].velocity)
    assert spin(executor, lambda: not np.any(rig.commands[-1].velocity), timeout=5)


def test_teleop_refuses_too_few_axes_and_respects_enable_button(executor, spin):
    _teleop(executor, enable_button=0)
    rig = Rig()
    executor.add_node(rig)
    spin(executor, lambda: rig.count_subscribers("joy") >= 2, timeout=5)
    joy = Joy()
    joy.axes = [1.0]  # too few axes: zero, never an IndexError
    rig.joy.publish(joy)
    joy = Joy()
    joy.axes = [1.0, 1.0]
    joy.buttons = [0]  # button not held: zero
    rig.joy.publish(joy)
    assert spin(executor, lambda: len(rig.commands) >= 2, timeout=5)
    assert all(not np.any(c.velocity) for c in rig.commands)
    joy.buttons = [1]
    rig.joy.publish(joy)
    assert spin(executor, lambda: any(np.any(c.velocity) for c in rig.commands), timeout=5)


def test_operator_and_teleop_steer_the_arm_around_the_maze(executor, spin):
    """Closed loop: simulated arm -> JointState -> operator -> Joy -> teleop -> commands -> arm."""
    executor.add_node(ScriptedOperator(**_overrides(seed=3)))
    _teleop(executor, timeout=5.0)
    rig = Rig()
    executor.add_node(rig)
    spin(executor, lambda: rig.count_subscribers("joint_states") >= 1, timeout=5)
    config = ArmConfig()
    kinematics = ArmKinematics.from_config(config)
    maze = MazePath.from_config(MazeConfig())
    start = kinematics.inverse(maze.point_at(0.0))
    arm = SimulatedArm(config, position=start)
    tracker = ProgressTracker(maze, arm.tool)
    dt = 1.0 / 30.0
    steps = 300  # 10 s of arm time, run as fast as the messages go round
    for step in range(steps):
        msg = JointState()
        msg.header.stamp = seconds_to_stamp(step * dt)
        msg.name = ["elbow", "gripper", "shoulder"]  # by name, whatever the order and extra joints
        msg.position = [float(arm.position[1]), 0.0, float(arm.position[0])]
        seen = len(rig.commands)
        rig.states.publish(msg)
        assert spin(executor, lambda seen=seen: len(rig.commands) > seen, timeout=5), f"no command at step {step}"
        command = rig.commands[-1]
        arm.command_velocity([command.velocity[list(command.name).index(j)] for j in config.joint_names])
        arm.step(dt)
        tracker.update(arm.tool)
    # The operator's pace is ~14 s per 0.76 m circuit: 10 s covers well over a third of it, counter-clockwise.
    assert tracker.progress > 0.4 * maze.length
    assert maze.closest(arm.tool).distance < 0.03
