"""Node: a scripted operator that drives the emulated base by publishing Twist, as a person with a joystick.

    ros2 run gamma_net_ros base_operator --ros-args -p seed:=3 -r cmd_vel:=cmd_vel_in

It stands in for a person exploring a room so the base's loop runs without one: on each ``scan``
it answers a ``geometry_msgs/Twist`` on ``cmd_vel`` from the same operator the base study uses
(:class:`gamma_net_core.signals.base.WanderOperator`: cruise, turn now and then, sometimes head
for a wall at speed), reading the latest ``odom`` and ``bumper``. It commands on every scan, so
the base's watchdog only stops the base when the scans (or this node) stop.
"""

from __future__ import annotations

import dataclasses
import math
import sys

import numpy as np
from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import LaserScan
from std_msgs.msg import Bool

from gamma_net_core.signals.base import Odometry as BaseOdometry
from gamma_net_core.signals.base import WanderConfig, WanderOperator
from gamma_net_ros.node_main import run_node
from gamma_net_ros.params import declare


class BaseOperator(Node):
    def __init__(self, **kwargs) -> None:
        super().__init__("base_operator", **kwargs)
        defaults = WanderConfig()
        seed = declare(self, "seed", 0, "seed of the operator's turns and dashes", low=0, high=2**31 - 1)
        changes = {
            name: declare(self, name, getattr(defaults, name), text, low=low, high=high)
            for name, text, low, high in (
                ("cruise_speed", "m/s while wandering", 0.0, 5.0),
                ("dash_speed", "m/s when heading for a wall on purpose", 0.0, 5.0),
                ("dash_probability", "chance a second of heading for a wall", 0.0, 1.0),
            )
        }
        self.operator = WanderOperator(dataclasses.replace(defaults, **changes), rng=np.random.default_rng(seed))
        self.odometry = BaseOdometry(0.0, 0.0, 0.0, 0.0, 0.0)
        self.bumper = False
        self.last_scan: float | None = None
        self.commands = self.create_publisher(Twist, "cmd_vel", 10)
        self.create_subscription(LaserScan, "scan", self.on_scan, qos_profile_sensor_data)
        self.create_subscription(Odometry, "odom", self.on_odometry, 10)
        self.create_subscription(Bool, "bumper", self.on_bumper, 10)
        self.get_logger().info(f"base operator (seed {seed}): cruise {changes['cruise_speed']:g} m/s, dash "
                               f"{changes['dash_speed']:g} m/s")  # fmt: skip

    def on_odometry(self, msg: Odometry) -> None:
        q = msg.pose.pose.orientation
        theta = 2.0 * math.atan2(q.z, q.w)
        self.odometry = BaseOdometry(
            msg.pose.pose.position.x,
            msg.pose.pose.position.y,
            theta,
            msg.twist.twist.linear.x,
            msg.twist.twist.angular.z,
        )

    def on_bumper(self, msg: Bool) -> None:
        self.bumper = bool(msg.data)

    def on_scan(self, msg: LaserScan) -> None:
        now = self.get_clock().now().nanoseconds * 1e-9
        dt = 0.1 if self.last_scan is None else min(max(now - self.last_scan, 0.0), 1.0)
        self.last_scan = now
        ranges = np.asarray(msg.ranges, dtype=float)
        if ranges.size < 14:
            self.get_logger().warning(
                f"scan of {ranges.size} beams: the operator needs 14 or more", throttle_duration_sec=5.0
            )
            return
        ranges = np.where(np.isnan(ranges), np.inf, ranges)  # no reading: nothing seen there
        linear, angular = self.operator.observe(now, ranges, self.odometry, self.bumper, dt)
        command = Twist()
        command.linear.x, command.angular.z = float(linear), float(angular)
        self.commands.publish(command)


def main(args=None) -> int:
    return run_node(BaseOperator, args)


if __name__ == "__main__":
    sys.exit(main())
