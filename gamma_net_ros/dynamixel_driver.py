"""Node: Dynamixel servo bus -> ``joint_states``; ``joint_commands`` -> servo goals; health on /diagnostics.

Each cycle (a timer at ``rate_hz``) reads every servo in one group sync read and publishes a
``sensor_msgs/JointState`` (rad, rad/s, stamped when the successful request went out) with
sensor-data QoS, then writes every goal in one group sync write.

Commands are ``sensor_msgs/JointState`` on ``joint_commands``, the message ROS 2 arm drivers
commonly take for joint goals: joints addressed by ``name`` (any subset, any order), with
``velocity`` entries read in velocity mode and ``position`` entries in position mode. Goals
are clamped to the configured limits (and to the servos' own); in velocity mode a joint slows
as it nears a position limit and is not driven past it, and every goal returns to zero when no
command came for ``command_timeout_s``. A malformed command is refused whole, counted and logged.

Faults: a failed read is retried within the cycle (see gamma_net_ros.hardware.bus); a cycle
without a good read publishes nothing and is counted as missed. If the port disappears the
node keeps trying to reopen it every ``reconnect_interval_s`` and resumes publishing when it
is back, servos reconfigured and holding still. Torque goes on at start and off at shutdown.
"""

from __future__ import annotations

import sys
import time

import numpy as np
import rclpy
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rcl_interfaces.msg import SetParametersResult
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import JointState

from gamma_net_ros.conversions import seconds_to_stamp
from gamma_net_ros.hardware.bus import BusError, DynamixelBus, PortLost, ReadFailed, ServoInfo
from gamma_net_ros.hardware.control_table import OperatingMode
from gamma_net_ros.params import declare

MODES = {"velocity": OperatingMode.VELOCITY, "position": OperatingMode.POSITION}
LIMIT_PARAMETERS = ("position_min", "position_max", "velocity_max")
SILENCE_S = 1.0  # s without a good read (and 3 missed cycles) before the servos are reconfigured


def check_limits(n: int, position_min, position_max, velocity_max) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-joint limits as arrays; ValueError naming the offending values."""
    arrays = [np.asarray(v, dtype=np.float64) for v in (position_min, position_max, velocity_max)]
    for name, values in zip(LIMIT_PARAMETERS, arrays):
        if values.shape != (n,) or not np.all(np.isfinite(values)):
            raise ValueError(f"{name} must be {n} finite numbers (one per joint); got {values.tolist()}")
    low, high, speed = arrays
    if not np.all(low < high):
        raise ValueError(f"position_min {low.tolist()} must be below position_max {high.tolist()} for every joint")
    if not np.all(speed > 0):
        raise ValueError(f"velocity_max {speed.tolist()} must be positive for every joint")
    return low, high, speed


# name, default, description, (low, high) or None. Fixed once the node is up.
PARAMETERS = (
    ("port", "/dev/ttyUSB0", "serial device of the servo bus", None),
    ("baud_rate", 1_000_000, "bits per second; must match the servos' Baud Rate register", (9600, 4_500_000)),
    ("ids", [1, 2], "servo ids, in the order of joint_names", None),
    ("joint_names", ["shoulder", "elbow"], "joint names, published and commanded", None),
    ("rate_hz", 30.0, "read/publish/write cycles per second", (1.0, 500.0)),
    ("command_mode", "velocity", "what joint_commands set: velocity or position", None),
    ("retries", 2, "extra sync-read attempts within one cycle", (0, 10)),
    ("timeout_ms", 0.0, "sync-read reply timeout, ms; 0: the SDK's own (about 34 ms)", (0.0, 1000.0)),
    ("reconnect_interval_s", 0.5, "wait between attempts to reopen a vanished port, s", (0.01, 60.0)),
    ("diagnostics_period_s", 1.0, "period of /diagnostics, s", (0.1, 60.0)),
    ("soft_stop_s", 0.3, "velocity mode: braking horizon near a position limit, s", (0.01, 5.0)),
)
# Changeable at run time (validated in _on_set_parameters).
RUNTIME_PARAMETERS = (
    ("command_timeout_s", 1.0, "velocity mode: zero the goals after this long without a command, s (0: never)",
     (0.0, 3600.0)),
    ("position_min", [-1.5707963, -1.5707963], "lowest commanded position per joint, rad", None),
    ("position_max", [1.5707963, 1.5707963], "highest commanded position per joint, rad", None),
    ("velocity_max", [2.0, 2.0], "fastest commanded speed per joint, rad/s", None),
)  # fmt: skip


class DynamixelDriver(Node):
    def __init__(self, **kwargs) -> None:
        super().__init__("dynamixel_driver", **kwargs)
        self.bus: DynamixelBus | None = None
        try:
            self._setup()
        except Exception:
            self.destroy_node()
            raise

    def _setup(self) -> None:
        p = {}
        for specs, read_only in ((PARAMETERS, True), (RUNTIME_PARAMETERS, False)):
            for name, default, description, bounds in specs:
                low, high = bounds or (None, None)
                p[name] = declare(self, name, default, description, low=low, high=high, read_only=read_only)
        self.joint_names = list(p["joint_names"])
        n = len(self.joint_names)
        if len(p["ids"]) != n or len(set(self.joint_names)) != n or n == 0:
            raise ValueError(f"need one distinct joint name per servo id; got ids {p['ids']}, names {self.joint_names}")
        if p["command_mode"] not in MODES:
            raise ValueError(f"command_mode must be one of {list(MODES)}; got {p['command_mode']!r}")
        self.mode = MODES[p["command_mode"]]
        self.limits = check_limits(n, *(p[name] for name in LIMIT_PARAMETERS))
        self.servo_limits: tuple[np.ndarray, ...] | None = None
        self.add_on_set_parameters_callback(self._on_set_parameters)

        self.bus = DynamixelBus(
            p["port"],
            ids=p["ids"],
            baud_rate=p["baud_rate"],
            retries=p["retries"],
            timeout_ms=p["timeout_ms"],
            clock=lambda: self.get_clock().now().nanoseconds * 1e-9,
        )
        self.rate_hz = p["rate_hz"]
        self.reconnect_interval = p["reconnect_interval_s"]
        self.soft_stop = p["soft_stop_s"]
        names = ("cycles", "published", "missed_cycles", "reconnects", "commands", "rejected_commands",
                 "clamped_commands", "command_timeouts")  # fmt: skip
        self.counts = dict.fromkeys(names, 0)
        self.models: tuple[int, ...] = ()
        self.last_position: np.ndarray | None = None
        self.goal: np.ndarray | None = np.zeros(n)
        self.last_command = time.monotonic()
        self._next_reconnect = 0.0
        self._silent_cycles, self._last_good = 0, time.monotonic()
        self.down_reason = ""
        self._last_attempts = self._last_failed = 0

        self.state_pub = self.create_publisher(JointState, "joint_states", qos_profile_sensor_data)
        self.diagnostics_pub = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self.create_subscription(JointState, "joint_commands", self._on_command, 10)
        self._connect()
        self.create_timer(1.0 / self.rate_hz, self._cycle)
        self.create_timer(p["diagnostics_period_s"], self._publish_diagnostics)

    # -- the bus -----------------------------------------------------------------------------
    def _connect(self) -> bool:
        self._next_reconnect = time.monotonic() + self.reconnect_interval
        try:
            info = self.bus.connect(self.mode)
        except BusError as exc:
            self.get_logger().warning(
                f"servo bus on {self.bus.port_name} not ready ({exc}); retrying every {self.reconnect_interval} s",
                throttle_duration_sec=5.0,
            )
            return False
        self._adopt(info)
        self.get_logger().info(
            f"servos {self.bus.ids} ({self.joint_names}) on {self.bus.port_name}: models "
            f"{list(info.model_numbers)}, {self.mode.name.lower()} mode, torque on"
        )
        return True

    def _adopt(self, info: ServoInfo) -> None:
        self.models = info.model_numbers
        self.servo_limits = (info.position_min, info.position_max, info.velocity_max)
        low, high, speed = self.limits
        if np.any(low < info.position_min) or np.any(high > info.position_max) or np.any(speed > info.velocity_max):
            self.get_logger().warning(
                f"configured limits exceed the servos' own (position {info.position_min.tolist()}.."
                f"{info.position_max.tolist()} rad, velocity {info.velocity_max.tolist()} rad/s); using the tighter"
            )
        self._silent_cycles, self._last_good = 0, time.monotonic()
        # After a (re)connect the servos hold still until the next command.
        self.goal = np.zeros(len(self.joint_names)) if self.mode == OperatingMode.VELOCITY else None
        self.last_position = None

    def effective_limits(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The configured limits, tightened by the servos' own once connected."""
        low, high, speed = self.limits
        if self.servo_limits is not None:
            s_low, s_high, s_speed = self.servo_limits
            low, high, speed = np.maximum(low, s_low), np.minimum(high, s_high), np.minimum(speed, s_speed)
        return low, high, speed

    def _cycle(self) -> None:
        self.counts["cycles"] += 1
        if not self.bus.is_open:
            self.counts["missed_cycles"] += 1
            if time.monotonic() >= self._next_reconnect and self._connect():
                self.counts["reconnects"] += 1
            return
        try:
            sample = self.bus.read()
        except ReadFailed as exc:
            self.counts["missed_cycles"] += 1
            self._silent_cycles += 1
            self.get_logger().warning(f"missed cycle: {exc}", throttle_duration_sec=2.0)
            silent_s = time.monotonic() - self._last_good
            if self._silent_cycles >= 3 and silent_s >= SILENCE_S:
                # No answer for a while (servo power lost?): reconfigure from scratch, since
                # servos that come back have rebooted with torque off.
                self.bus.close(torque_off=False)
                self._on_port_lost(f"no valid reply for {silent_s:.1f} s ({self._silent_cycles} cycles)")
                return
            sample = None
        except PortLost as exc:
            self.counts["missed_cycles"] += 1
            self._on_port_lost(exc)
            return
        if sample is not None:
            self._silent_cycles, self._last_good = 0, time.monotonic()
            self.last_position = sample.position
            msg = JointState(
                name=self.joint_names, position=sample.position.tolist(), velocity=sample.velocity.tolist()
            )
            msg.header.stamp = seconds_to_stamp(sample.stamp)
            self.state_pub.publish(msg)
            self.counts["published"] += 1
        try:
            self._write_goals()
        except PortLost as exc:
            self._on_port_lost(exc)

    def _on_port_lost(self, exc: Exception | str) -> None:
        self._silent_cycles = 0
        self.down_reason = str(exc)
        self._next_reconnect = time.monotonic() + self.reconnect_interval
        self.get_logger().error(
            f"servo bus lost ({exc}); reopening every {self.reconnect_interval} s", throttle_duration_sec=5.0
        )

    def _write_goals(self) -> None:
        low, high, speed = self.effective_limits()
        if self.mode == OperatingMode.VELOCITY:
            timeout = self.get_parameter("command_timeout_s").value
            if timeout > 0 and np.any(self.goal) and time.monotonic() - self.last_command > timeout:
                self.goal = np.zeros_like(self.goal)
                self.counts["command_timeouts"] += 1
                self.get_logger().info(f"no joint command for {timeout} s: stopping", throttle_duration_sec=5.0)
            goal = np.clip(self.goal, -speed, speed)
            if self.last_position is not None:
                # Toward a position limit no faster than would cover the room left in soft_stop_s: a
                # soft stop (in velocity mode the servos themselves ignore their position limits).
                room_up = np.maximum(high - self.last_position, 0.0) / self.soft_stop
                room_down = np.maximum(self.last_position - low, 0.0) / self.soft_stop
                goal = np.clip(goal, -room_down, room_up)
            self.bus.write_velocity(goal)
        else:
            if self.goal is None:
                if self.last_position is None:
                    return  # holding the position written at connect until a read tells where we are
                self.goal = self.last_position.copy()
            self.bus.write_position(np.clip(self.goal, low, high))

    # -- commands and parameters -------------------------------------------------------------
    def _on_command(self, msg: JointState) -> None:
        field = "velocity" if self.mode == OperatingMode.VELOCITY else "position"
        values = np.asarray(getattr(msg, field), dtype=np.float64)
        try:
            if len(set(msg.name)) != len(msg.name) or not msg.name:
                raise ValueError(f"joint names must be distinct and not empty; got {list(msg.name)}")
            unknown = [name for name in msg.name if name not in self.joint_names]
            if unknown:
                raise ValueError(f"unknown joints {unknown}; this driver has {self.joint_names}")
            if values.shape != (len(msg.name),):
                raise ValueError(f"{len(msg.name)} names but {values.size} {field} values ({field} mode)")
            if not np.all(np.isfinite(values)):
                raise ValueError(f"{field} values must be finite; got {values.tolist()}")
            if self.goal is None and len(msg.name) < len(self.joint_names):
                raise ValueError("a partial position command before the first read; name every joint")
        except ValueError as exc:
            self.counts["rejected_commands"] += 1
            self.get_logger().warning(f"joint command refused: {exc}", throttle_duration_sec=1.0)
            return
        index = [self.joint_names.index(name) for name in msg.name]
        goal = np.zeros(len(self.joint_names)) if self.goal is None else self.goal.copy()
        goal[index] = values
        low, high, speed = self.effective_limits()
        limited = np.clip(goal, -speed, speed) if field == "velocity" else np.clip(goal, low, high)
        if np.any(limited[index] != goal[index]):
            self.counts["clamped_commands"] += 1
        self.goal = goal
        self.last_command = time.monotonic()
        self.counts["commands"] += 1

    def _on_set_parameters(self, parameters) -> SetParametersResult:
        changed = {p.name: p.value for p in parameters if p.name in LIMIT_PARAMETERS}
        if not changed:
            return SetParametersResult(successful=True)
        values = {name: changed.get(name, self.get_parameter(name).value) for name in LIMIT_PARAMETERS}
        try:
            limits = check_limits(len(self.joint_names), *(values[name] for name in LIMIT_PARAMETERS))
        except ValueError as exc:
            return SetParametersResult(successful=False, reason=str(exc))
        self.limits = limits
        return SetParametersResult(successful=True)

    # -- health ------------------------------------------------------------------------------
    def _publish_diagnostics(self) -> None:
        stats = self.bus.stats
        attempts, failed = stats.attempts - self._last_attempts, stats.failed_attempts - self._last_failed
        self._last_attempts, self._last_failed = stats.attempts, stats.failed_attempts
        success = 1.0 - stats.failed_attempts / stats.attempts if stats.attempts else 0.0
        recent = 1.0 - failed / attempts if attempts else 0.0
        status = DiagnosticStatus(name=f"{self.get_name()}: servo bus", hardware_id=self.bus.port_name)
        if not self.bus.is_open:
            status.level = DiagnosticStatus.ERROR
            status.message = f"servo bus down ({self.down_reason or stats.last_error}); reopening"
        elif failed:
            status.level = DiagnosticStatus.WARN
            status.message = f"{failed} of {attempts} reads failed in the last period"
        else:
            status.level, status.message = DiagnosticStatus.OK, f"{self.rate_hz:g} Hz, reads fine"
        values = {
            "port_state": "open" if self.bus.is_open else "lost",
            "read_success_rate": f"{success:.4f}",
            "read_success_rate_recent": f"{recent:.4f}",
            "read_attempts": stats.attempts,
            "failed_attempts": stats.failed_attempts,
            "failed_reads": stats.failed_reads,
            "port_losses": stats.port_losses,
            "drained_bytes": stats.drained_bytes,
            "stale_replies": stats.stale_replies,
            "last_error": stats.last_error,
            "model_numbers": list(self.models),
            **self.counts,
        }
        status.values = [KeyValue(key=key, value=str(value)) for key, value in values.items()]
        array = DiagnosticArray(status=[status])
        array.header.stamp = self.get_clock().now().to_msg()
        self.diagnostics_pub.publish(array)

    def destroy_node(self) -> None:
        if self.bus is not None:
            self.bus.close()  # torque off, then release the port
        super().destroy_node()


def main(args=None) -> int:
    rclpy.init(args=args)
    try:
        node = DynamixelDriver()
    except ValueError as exc:  # a bad parameter: say which, without a traceback
        print(f"dynamixel_driver: {exc}", file=sys.stderr)
        rclpy.try_shutdown()
        return 2
    try:
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
