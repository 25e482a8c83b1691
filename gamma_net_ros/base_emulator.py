"""Node: a mobile base of the project's own, for trying a base's Horde and reflex without a base.

    ros2 run gamma_net_ros base_emulator --ros-args -p seed:=3 -p deceleration:=0.5
    ros2 launch gamma_net_ros base.launch.py       # with an operator, a Horde and a reflex

A thin adapter over :class:`gamma_net_core.signals.base.SimulatedBase` (a differential-drive
base in a room with obstacles), stepped in wall time on a timer. It publishes what a
TurtleBot-like base gives: ``scan`` (``sensor_msgs/LaserScan``, 36 beams, ``+inf`` past
``range_max`` as REP 117 says), ``bumper`` (``std_msgs/Bool``, true while its front touches
something), ``odom`` (``nav_msgs/Odometry``: pose and measured velocity), and ``base/counters``
(``std_msgs/Float64MultiArray``: bumps, contact s, distance m, elapsed s, for studies). It takes
``cmd_vel`` (``geometry_msgs/Twist``, or ``TwistStamped`` with ``command_type:=twist_stamped``):
linear.x and angular.z, reaching the wheels ``latency_s`` later, under acceleration and
deceleration limits; with no command for ``watchdog_s`` it brakes to a stop. A command that is
not finite is dropped with a warning: the base never moves on it, and the watchdog stops it if
nothing better follows.
"""

from __future__ import annotations

import math
import sys

import numpy as np
from geometry_msgs.msg import Twist, TwistStamped
from nav_msgs.msg import Odometry
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import LaserScan
from std_msgs.msg import Bool, Float64MultiArray

from gamma_net_core.signals.base import BaseConfig, SimulatedBase
from gamma_net_ros.node_main import run_node
from gamma_net_ros.params import declare

COMMAND_TYPES = {"twist": Twist, "twist_stamped": TwistStamped}


class BaseEmulator(Node):
    def __init__(self, **kwargs) -> None:
        super().__init__("base_emulator", **kwargs)
        defaults = BaseConfig()
        seed = declare(self, "seed", 0, "seed of the odometry's noise", low=0, high=2**31 - 1)
        self.command_type = declare(
            self, "command_type", "twist", "cmd_vel's type: twist or twist_stamped", constraints="twist, twist_stamped"
        )
        if self.command_type not in COMMAND_TYPES:
            raise ValueError(f"command_type must be one of {sorted(COMMAND_TYPES)}; got {self.command_type!r}")
        limits = {
            name: declare(self, name, getattr(defaults, name), text, low=low, high=high)
            for name, text, low, high in (
                ("max_linear", "m/s; linear.x commands are clipped to +-this", 0.01, 5.0),
                ("max_angular", "rad/s; angular.z commands are clipped to +-this", 0.01, 10.0),
                ("acceleration", "m/s^2; how fast linear speed may grow", 0.01, 20.0),
                ("deceleration", "m/s^2; how fast linear speed may shrink (braking)", 0.01, 20.0),
                ("latency_s", "s from a command to the wheels", 0.0, 2.0),
                ("watchdog_s", "s without a command before the base brakes to a stop", 0.01, 10.0),
                ("range_max", "m; a beam meeting nothing within it reads +inf (REP 117)", 0.5, 30.0),
            )
        }
        self.rate_hz = declare(self, "rate_hz", 50.0, "physics and odometry updates per second", low=1.0, high=1000.0)
        self.scan_rate_hz = declare(self, "scan_rate_hz", 10.0, "scans per second (a 2D lidar's)", low=0.5, high=100.0)
        self.frame_id = declare(self, "frame_id", "base_link", "frame of the base (scan, odom's child)")
        self.config = BaseConfig(**limits)
        self.base = SimulatedBase(self.config, rng=np.random.default_rng(seed))
        self.scan_pub = self.create_publisher(LaserScan, "scan", qos_profile_sensor_data)
        self.bumper_pub = self.create_publisher(Bool, "bumper", 10)
        self.odom_pub = self.create_publisher(Odometry, "odom", 10)
        self.counters_pub = self.create_publisher(Float64MultiArray, "base/counters", 10)
        self.create_subscription(COMMAND_TYPES[self.command_type], "cmd_vel", self.on_command, 10)
        self.last_step = self.get_clock().now()
        self.next_scan = 0.0
        self.create_timer(1.0 / self.rate_hz, self.on_tick)
        self.get_logger().info(
            f"base emulator: {self.config.beams}-beam scan at {self.scan_rate_hz:g} Hz, "
            f"{self.command_type} on cmd_vel, deceleration {self.config.deceleration:g} m/s^2, "
            f"latency {self.config.latency_s:g} s"
        )

    def on_command(self, msg) -> None:
        twist = msg.twist if self.command_type == "twist_stamped" else msg
        linear, angular = twist.linear.x, twist.angular.z
        if not (math.isfinite(linear) and math.isfinite(angular)):
            self.get_logger().warning(
                f"cmd_vel dropped: linear.x {linear}, angular.z {angular} (not finite)", throttle_duration_sec=2.0
            )
            return
        self.base.command(linear, angular)

    def on_tick(self) -> None:
        now = self.get_clock().now()
        # Wall time, not the timer's period: a late callback steps the base by the time that passed.
        dt = min((now - self.last_step).nanoseconds * 1e-9, 0.5)
        self.last_step = now
        if dt <= 0.0:
            return
        self.base.step(dt)
        stamp = now.to_msg()
        self.odom_pub.publish(self._odometry(stamp))
        self.bumper_pub.publish(Bool(data=bool(self.base.bumper)))
        if self.base.now >= self.next_scan:
            self.next_scan = self.base.now + 1.0 / self.scan_rate_hz
            self.scan_pub.publish(self._scan(stamp))
            c = self.base.counters
            self.counters_pub.publish(Float64MultiArray(data=[float(c.bumps), c.contact_s, c.distance_m, c.elapsed_s]))

    def _scan(self, stamp) -> LaserScan:
        c = self.config
        msg = LaserScan()
        msg.header.stamp, msg.header.frame_id = stamp, self.frame_id
        msg.angle_min = c.angle_min
        msg.angle_increment = self.base.angle_increment
        msg.angle_max = c.angle_min + (c.beams - 1) * msg.angle_increment
        msg.scan_time = 1.0 / self.scan_rate_hz
        msg.range_min, msg.range_max = c.range_min, c.range_max
        msg.ranges = self.base.scan().tolist()
        return msg

    def _odometry(self, stamp) -> Odometry:
        odometry = self.base.odometry()
        msg = Odometry()
        msg.header.stamp, msg.header.frame_id, msg.child_frame_id = stamp, "odom", self.frame_id
        msg.pose.pose.position.x, msg.pose.pose.position.y = odometry.x, odometry.y
        msg.pose.pose.orientation.z = math.sin(odometry.theta / 2)
        msg.pose.pose.orientation.w = math.cos(odometry.theta / 2)
        msg.twist.twist.linear.x, msg.twist.twist.angular.z = odometry.linear, odometry.angular
        return msg


def main(args=None) -> int:
    return run_node(BaseEmulator, args)


if __name__ == "__main__":
    sys.exit(main())
