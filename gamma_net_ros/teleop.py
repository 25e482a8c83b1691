"""Node: joystick (sensor_msgs/Joy) -> shoulder and elbow goal velocities, as the paper's operator drove them.

    ros2 run joy joy_node &
    ros2 run gamma_net_ros teleop --ros-args --params-file config/arm.yaml

Publishes ``sensor_msgs/JointState`` on ``joint_commands`` (joints by name, ``velocity``
filled), the driver's command topic. A deadman: with no Joy message for ``timeout``
seconds (a joystick unplugged, a node crashed) it commands zero, so the arm never runs
on with a stale deflection.
"""

from __future__ import annotations

import sys

import numpy as np
from rclpy.node import Node
from sensor_msgs.msg import JointState, Joy

from gamma_net_core.signals.arm import ArmConfig, JoystickConfig, joystick_to_joint_velocity
from gamma_net_ros.node_main import run_node
from gamma_net_ros.params import declare, declare_config


class Teleop(Node):
    def __init__(self, **kwargs) -> None:
        super().__init__("teleop", **kwargs)
        self.joystick = declare_config(self, JoystickConfig, "joystick")
        self.joint_names = list(
            declare(self, "arm.joint_names", list(ArmConfig().joint_names), "shoulder and elbow joint names")
        )
        if len(self.joint_names) != 2:
            raise ValueError(f"arm.joint_names must name 2 joints (shoulder, elbow); got {self.joint_names!r}")
        self.timeout = declare(self, "timeout", 0.5, "seconds without Joy before commanding zero", low=0.01, high=60.0)
        self.enable_button = declare(
            self, "enable_button", -1, "Joy button that must be held to move (-1: none)", low=-1, high=63
        )
        self.commands = self.create_publisher(JointState, "joint_commands", 10)
        self.create_subscription(Joy, "joy", self.on_joy, 10)
        self.last_joy = None
        self.stopped = True
        self.create_timer(0.1, self.watchdog)
        self.get_logger().info(
            f"teleop: Joy axes {list(self.joystick.axes)} -> {self.joint_names} velocities "
            f"(max {list(self.joystick.max_speed)} rad/s) on {self.commands.topic_name}"
        )

    def on_joy(self, msg: Joy) -> None:
        self.last_joy = self.get_clock().now()
        n = len(msg.axes)
        if max(self.joystick.axes) >= n:
            self.get_logger().warning(
                f"Joy has {n} axes; axes {list(self.joystick.axes)} are configured: commanding zero",
                throttle_duration_sec=5.0,
            )
            self.publish(np.zeros(2))
            return
        if self.enable_button >= 0 and not (self.enable_button < len(msg.buttons) and msg.buttons[self.enable_button]):
            self.publish(np.zeros(2))
            return
        axes = [msg.axes[i] for i in self.joystick.axes]
        velocity = joystick_to_joint_velocity(axes, max_speed=self.joystick.max_speed, deadzone=self.joystick.deadzone)
        self.publish(velocity)

    def watchdog(self) -> None:
        stale = self.last_joy is None or (self.get_clock().now() - self.last_joy).nanoseconds * 1e-9 > self.timeout
        if stale and not self.stopped:
            self.get_logger().warning(f"no Joy for {self.timeout} s: commanding zero velocity")
            self.publish(np.zeros(2))

    def publish(self, velocity: np.ndarray) -> None:
        self.stopped = not np.any(velocity)
        msg = JointState()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.name = self.joint_names
        msg.velocity = [float(v) for v in velocity]
        self.commands.publish(msg)


def main(args=None) -> int:
    return run_node(Teleop, args)


if __name__ == "__main__":
    sys.exit(main())
