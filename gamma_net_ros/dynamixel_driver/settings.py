"""The Dynamixel driver's parameters: declared and checked at construction, limits changed at run time."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rcl_interfaces.msg import SetParametersResult
from rclpy.node import Node
from sensor_msgs.msg import JointState

from gamma_net_ros.graph_watch import GraphWatch
from gamma_net_ros.hardware.bus import BusError, DynamixelBus
from gamma_net_ros.hardware.control_table import TORQUE_CONSTANT_NM_PER_A, OperatingMode
from gamma_net_ros.hardware.goals import JointGoals, JointLimits
from gamma_net_ros.params import declare

MODES = {"velocity": OperatingMode.VELOCITY, "position": OperatingMode.POSITION}
LIMIT_PARAMETERS = ("position_min", "position_max", "velocity_max")

# name, default, description, (low, high) or None. Fixed once the node is up.
PARAMETERS = (
    ("port", "/dev/ttyUSB0", "serial device of the servo bus", None),
    ("baud_rate", 1_000_000, "bits per second; must match the servos' Baud Rate register", (9600, 4_500_000)),
    ("ids", [1, 2], "servo ids, in the order of joint_names", None),
    ("joint_names", ["shoulder", "elbow"], "joint names, published and commanded", None),
    ("rate_hz", 30.0, "read/publish/write cycles per second", (1.0, 500.0)),
    ("command_mode", "velocity", "what joint_commands set: velocity or position", None),
    ("retries", 2, "extra sync-read attempts within one cycle", (0, 10)),
    (
        "timeout_ms",
        0.0,
        "sync-read reply timeout, ms; 0: the SDK's own (about 34 ms); lengthened to cover the "
        "round trip measured at connect, within one cycle",
        (0.0, 1000.0),
    ),
    ("reconnect_interval_s", 0.5, "wait between attempts to reopen a vanished port, s", (0.01, 60.0)),
    ("diagnostics_period_s", 1.0, "period of /diagnostics, s", (0.1, 60.0)),
    ("soft_stop_s", 0.3, "velocity mode: braking horizon near a position limit, s", (0.01, 5.0)),
    (
        "torque_constant",
        TORQUE_CONSTANT_NM_PER_A,
        "N m per A: the published effort is Present Current times this (an estimate of the torque)",
        (0.01, 20.0),
    ),
)
# Changeable at run time (validated in runtime_change).
RUNTIME_PARAMETERS = (
    ("command_timeout_s", 1.0, "velocity mode: zero a joint's goal this long after a command last named it, s (0: off)",
     (0.0, 3600.0)),
    ("position_min", [-1.5707963, -1.5707963], "lowest commanded position per joint, rad", None),
    ("position_max", [1.5707963, 1.5707963], "highest commanded position per joint, rad", None),
    ("velocity_max", [2.0, 2.0], "fastest commanded speed per joint, rad/s", None),
)  # fmt: skip


@dataclass(frozen=True)
class DriverSettings:
    """What the driver reads at construction; the limits and ``command_timeout_s`` change later in its goals."""

    port: str
    baud_rate: int
    ids: list
    joint_names: list
    rate_hz: float
    command_mode: str
    retries: int
    timeout_ms: float
    reconnect_interval_s: float
    diagnostics_period_s: float
    soft_stop_s: float
    torque_constant: float
    command_timeout_s: float
    position_min: list
    position_max: list
    velocity_max: list

    @property
    def mode(self) -> OperatingMode:
        return MODES[self.command_mode]

    def bus(self, clock: Callable[[], float]) -> DynamixelBus:
        """The servo bus, not yet connected; ``clock`` stamps its samples (s)."""
        return DynamixelBus(
            self.port,
            ids=self.ids,
            baud_rate=self.baud_rate,
            retries=self.retries,
            timeout_ms=self.timeout_ms,
            clock=clock,
            velocity_max=self.velocity_max,
        )

    def goals(self) -> JointGoals:
        """The joints' goals, empty, under the configured limits."""
        return JointGoals(
            self.joint_names,
            mode=self.command_mode,
            limits=JointLimits.of(len(self.joint_names), **{name: getattr(self, name) for name in LIMIT_PARAMETERS}),
            command_timeout_s=self.command_timeout_s,
            soft_stop_s=self.soft_stop_s,
        )


def declare_settings(node: Node) -> DriverSettings:
    """Declare every parameter on ``node`` (the fixed ones read-only) and check them together.

    Raises:
      ValueError: ids and joint names that do not pair one to one, or an unknown ``command_mode``.
    """
    p = {}
    for specs, read_only in ((PARAMETERS, True), (RUNTIME_PARAMETERS, False)):
        for name, default, description, bounds in specs:
            low, high = bounds or (None, None)
            p[name] = declare(node, name, default, description, low=low, high=high, read_only=read_only)
    p["joint_names"] = list(p["joint_names"])
    names = p["joint_names"]
    n = len(names)
    if len(p["ids"]) != n or len(set(names)) != n or n == 0:
        raise ValueError(f"need one distinct joint name per servo id; got ids {p['ids']}, names {names}")
    if p["command_mode"] not in MODES:
        raise ValueError(f"command_mode must be one of {list(MODES)}; got {p['command_mode']!r}")
    return DriverSettings(**p)


def watch_commands(node: Node, on_command: Callable, *, on_stop: Callable) -> GraphWatch:
    """Subscribe ``on_command`` to ``joint_commands``, whose publishers are watched: while a stranger publishes
    there too, commands are refused and ``on_stop()`` holds the joints; each change is on /diagnostics at once
    (the node's ``health``)."""
    watch = GraphWatch(node, ["commands"], acting="commands refused, every joint held",
                       on_change=lambda: node.health.publish(), on_stop=on_stop)  # fmt: skip
    watch.subscribe(JointState, "joint_commands", on_command, 10, role="commands", refuse=True)
    return watch


def runtime_change(goals: JointGoals, parameters, current, bus: DynamixelBus | None = None) -> SetParametersResult:
    """Apply a run-time change of ``command_timeout_s`` or the limits to ``goals``, or refuse it.

    Args:
      parameters: the changed parameters, as rclpy passes them.
      current: ``name -> value`` of a parameter not among them (the node's ``get_parameter``'s value).
      bus: gets the new ``velocity_max`` (a position mode's Profile Velocity) before the goals do.
    """
    changed = {p.name: p.value for p in parameters}
    if "command_timeout_s" in changed:
        goals.command_timeout_s = changed["command_timeout_s"]  # its range is checked by rclpy
    if not changed.keys() & set(LIMIT_PARAMETERS):
        return SetParametersResult(successful=True)
    values = {name: changed.get(name, current(name)) for name in LIMIT_PARAMETERS}
    try:
        limits = JointLimits.of(len(goals.joint_names), **values)
        if bus is not None:
            bus.change_velocity_max(limits.velocity_max)
    except (ValueError, BusError) as exc:
        return SetParametersResult(successful=False, reason=str(exc))
    goals.limits = limits
    return SetParametersResult(successful=True)
