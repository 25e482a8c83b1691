"""The base emulator node in-process with real messages: TwistStamped by parameter, bad commands, REP 117 scans."""

from __future__ import annotations

import math

import numpy as np
import pytest
from geometry_msgs.msg import Twist, TwistStamped
from nav_msgs.msg import Odometry
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import LaserScan
from std_msgs.msg import Bool

from gamma_net_ros.base_emulator import BaseEmulator

pytestmark = pytest.mark.ros


class Rig:
    """Sends commands to the emulator and keeps what it publishes."""

    def __init__(self, node: Node, command_type=Twist) -> None:
        self.command_type = command_type
        self.commands = node.create_publisher(command_type, "/cmd_vel", 10)
        self.odometry: list[Odometry] = []
        self.scans: list[LaserScan] = []
        self.bumper: list[Bool] = []
        node.create_subscription(Odometry, "/odom", self.odometry.append, 100)
        node.create_subscription(LaserScan, "/scan", self.scans.append, qos_profile_sensor_data)
        node.create_subscription(Bool, "/bumper", self.bumper.append, 100)

    def drive(self, linear: float) -> None:
        msg = self.command_type()
        twist = msg.twist if self.command_type is TwistStamped else msg
        twist.linear.x = linear
        self.commands.publish(msg)

    def moved(self) -> float:
        if len(self.odometry) < 2:
            return 0.0
        a, b = self.odometry[0].pose.pose.position, self.odometry[-1].pose.pose.position
        return math.hypot(b.x - a.x, b.y - a.y)


def _start(executor, **params) -> tuple[BaseEmulator, Rig]:
    emulator = BaseEmulator(parameter_overrides=[Parameter(k, value=v) for k, v in params.items()])
    node = Node("base_emulator_rig")
    rig = Rig(node, TwistStamped if params.get("command_type") == "twist_stamped" else Twist)
    executor.add_node(emulator)
    executor.add_node(node)
    return emulator, rig


def test_twist_stamped_by_parameter_drives_the_base_and_scans_follow_rep_117(executor, spin):
    emulator, rig = _start(executor, command_type="twist_stamped")

    def driving() -> bool:
        rig.drive(0.3)
        return rig.moved() > 0.1

    assert spin(executor, driving, timeout=30), f"moved {rig.moved():.3f} m"
    assert rig.odometry[-1].twist.twist.linear.x > 0.1
    assert spin(executor, lambda: bool(rig.scans and rig.bumper), timeout=30)
    scan = rig.scans[-1]
    ranges = np.array(scan.ranges)
    assert len(ranges) == 36 and scan.range_max == pytest.approx(3.5)
    # REP 117: a beam with nothing within range_max reads +inf, never range_max or NaN
    assert not np.any(np.isnan(ranges)) and np.all(np.isposinf(ranges) | (ranges <= scan.range_max))
    assert np.any(np.isposinf(ranges))  # from the room's centre some walls are past 3.5 m
    assert emulator.base.counters.distance_m > 0.1


def test_a_command_that_is_not_finite_is_dropped_and_the_watchdog_stops_the_base(executor, spin):
    emulator, rig = _start(executor)
    assert spin(executor, lambda: rig.drive(0.3) or emulator.base.linear > 0.25, timeout=30)

    def stopped() -> bool:
        rig.drive(math.nan)  # every one dropped: to the base, no command at all
        return emulator.base.linear == 0.0 and emulator.base.watchdog_on

    assert spin(executor, stopped, timeout=30)
    assert emulator.base.counters.watchdog_stops == 1
    assert all(math.isfinite(o.twist.twist.linear.x) for o in rig.odometry)


def test_an_unknown_command_type_is_refused_naming_it(rclpy_session):
    with pytest.raises(ValueError, match=r"command_type must be one of .* got 'twist_stampd'"):
        BaseEmulator(parameter_overrides=[Parameter("command_type", value="twist_stampd")])
