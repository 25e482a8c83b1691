"""Node: a scripted operator that steers the arm around the maze by publishing Joy.

It stands in for the paper's human at the joystick so the whole loop runs without a
person: it watches ``joint_states`` and answers each with a ``sensor_msgs/Joy``, computed
by the same operator model that `gamma-net arm simulate` uses (look-ahead along the
wire, reaction delay, motor noise, pauses). The teleop node turns Joy into commands.
"""

from __future__ import annotations

import sys

import numpy as np
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import JointState, Joy

from gamma_net_core.data.joints import stamp_seconds, values_by_name
from gamma_net_core.signals.arm import ArmConfig, ArmKinematics, JoystickConfig
from gamma_net_core.signals.maze import MazeConfig, MazePath
from gamma_net_core.signals.operator import Operator, OperatorConfig
from gamma_net_ros.node_main import run_node
from gamma_net_ros.params import declare, declare_config


class ScriptedOperator(Node):
    def __init__(self, **kwargs) -> None:
        super().__init__("operator", **kwargs)
        arm = declare_config(self, ArmConfig, "arm")
        joystick = declare_config(self, JoystickConfig, "joystick")
        seed = declare(self, "seed", 0, "seed of the operator's noise, pace and pauses", low=0, high=2**31 - 1)
        self.operator = Operator(
            maze=MazePath.from_config(declare_config(self, MazeConfig, "maze")),
            kinematics=ArmKinematics.from_config(arm),
            joystick=joystick,
            config=declare_config(self, OperatorConfig, "operator"),
            rng=np.random.default_rng(seed),
        )
        self.joint_names = list(arm.joint_names)
        self.axes_index = list(joystick.axes)
        self.joy = self.create_publisher(Joy, "joy", 10)
        self.create_subscription(JointState, "joint_states", self.on_joint_state, qos_profile_sensor_data)
        self.last_stamp = None
        self.get_logger().info(f"scripted operator (seed {seed}) steering {self.joint_names} counter-clockwise")

    def on_joint_state(self, msg: JointState) -> None:
        position = values_by_name(msg.name, msg.position, self.joint_names)
        stamp = stamp_seconds(msg.header.stamp.sec, msg.header.stamp.nanosec)
        if position is None or not np.all(np.isfinite(position)):
            self.get_logger().warning("joint_states without finite shoulder/elbow positions", throttle_duration_sec=5.0)
            return
        if self.last_stamp is not None and stamp < self.last_stamp:
            return  # an old sample arriving late; the operator only looks forward in time
        self.last_stamp = stamp
        before = self.operator.circuits
        axes = self.operator.observe(stamp, position)
        if self.operator.circuits > before:
            self.get_logger().info(f"circuit {self.operator.circuits} completed")
        joy = Joy()
        joy.header.stamp = msg.header.stamp
        values = [0.0] * (max(self.axes_index) + 1)
        for index, value in zip(self.axes_index, axes):
            values[index] = float(value)
        joy.axes = values
        self.joy.publish(joy)


def main(args=None) -> int:
    return run_node(ScriptedOperator, args)


if __name__ == "__main__":
    sys.exit(main())
