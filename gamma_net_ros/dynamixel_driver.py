"""Node: Dynamixel servo bus -> ``joint_states``; ``joint_commands`` -> servo goals; health on /diagnostics.

Each cycle (a timer at ``rate_hz``) reads every servo in one group sync read and publishes a
``sensor_msgs/JointState`` (rad, rad/s, stamped when the successful request went out) with
sensor-data QoS, then writes every goal in one group sync write. Its ``effort`` is an estimate of
each servo's torque in N m: the Present Current read in the same sync read times
``torque_constant`` (N m per A; the XM430-W350's 4.1 N m at 2.3 A by default). Torque is only
roughly linear in current, so it is a load signal to predict, not a calibrated torque sensor.

Commands are ``sensor_msgs/JointState`` on ``joint_commands``, the message ROS 2 arm drivers
commonly take for joint goals: joints addressed by ``name`` (any subset, any order), with
``velocity`` entries read in velocity mode and ``position`` entries in position mode. Goals
are clamped to the configured limits (and to the servos' own); in velocity mode a joint slows
as it nears a position limit and is not driven past it, and every goal returns to zero when no
command came for ``command_timeout_s``. A malformed command is refused whole, counted and logged.

In position mode the goals at start (and after a reconnect) are where the joints are, even
outside the limits: only a command moves a joint, and only its goal is clamped.

Each sample is stamped with the time of the request its data answers; a reply that answers an
earlier request is refused and counted (``stale_replies``). At connect the sync-read round trip
is measured and the reply timeout set to cover it within one cycle (a USB adapter's latency
timer delays every reply); replies too slow for ``rate_hz`` are refused at start in one line.

One bus, one driver: the port is locked exclusively while the driver holds it, and a second
driver on the same port is refused at start in one line naming the process that holds it (two
would read each other's replies). Servo limits read back impossible (a minimum above the
maximum, beyond one revolution, a speed the register cannot hold) are never taken.

Timing: a cycle that starts half a period or more after it was due (the timer keeps its phase,
so a gap of k periods is k - 1 late cycles) is counted in ``late_cycles``, with ``on_time_rate``
and the last period's longest gap and work on /diagnostics: the measure of a ``rate_hz`` (100 Hz
in launch/reflex.launch.py) that the machine cannot keep. Lateness is the scheduler's, not the
bus's, so it leaves the status OK and is said in its message.

Faults: a failed read is retried within the cycle (see gamma_net_ros.hardware.bus); a cycle
without a good read publishes nothing and is counted as missed. If the port disappears the
node keeps trying to reopen it every ``reconnect_interval_s`` and resumes publishing when it
is back, servos reconfigured and holding still. Torque goes on at start and off at shutdown.
"""

from __future__ import annotations

import sys
import time

import numpy as np
from rcl_interfaces.msg import SetParametersResult
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import JointState

from gamma_net_ros.conversions import clock_seconds, seconds_to_stamp
from gamma_net_ros.diagnostics import ERROR, OK, WARN, Diagnostics, Health
from gamma_net_ros.hardware.bus import BusError, DynamixelBus, LatencyTooHigh, PortBusy, PortLost, ReadFailed
from gamma_net_ros.hardware.control_table import TORQUE_CONSTANT_NM_PER_A, OperatingMode
from gamma_net_ros.hardware.goals import JointGoals, JointLimits
from gamma_net_ros.node_main import run_node
from gamma_net_ros.params import declare

MODES = {"velocity": OperatingMode.VELOCITY, "position": OperatingMode.POSITION}
LIMIT_PARAMETERS = ("position_min", "position_max", "velocity_max")
SILENCE_S = 1.0  # s without a good read (and 3 missed cycles) before the servos are reconfigured


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
        self.goals = JointGoals(
            self.joint_names,
            mode=p["command_mode"],
            limits=JointLimits.of(n, **{name: p[name] for name in LIMIT_PARAMETERS}),
            command_timeout_s=p["command_timeout_s"],
            soft_stop_s=p["soft_stop_s"],
        )
        self.add_on_set_parameters_callback(self._on_set_parameters)

        self.bus = DynamixelBus(
            p["port"],
            ids=p["ids"],
            baud_rate=p["baud_rate"],
            retries=p["retries"],
            timeout_ms=p["timeout_ms"],
            clock=lambda: clock_seconds(self),
        )
        self.rate_hz = p["rate_hz"]
        self.torque_constant = p["torque_constant"]
        self.reconnect_interval = p["reconnect_interval_s"]
        names = ("cycles", "late_cycles", "published", "missed_cycles", "reconnects", "commands",
                 "rejected_commands", "clamped_commands")  # fmt: skip
        self.counts = dict.fromkeys(names, 0)
        self.models: tuple[int, ...] = ()
        self.last_position: np.ndarray | None = None
        self._next_reconnect = 0.0
        self._silent_cycles, self._last_good = 0, time.monotonic()
        self.down_reason = ""
        self._last_attempts = self._last_failed = 0
        # On time: each cycle starts within half a period of when it was due (see _count_late).
        self.period = 1.0 / self.rate_hz
        self._cycle_start: float | None = None
        self._recent = {"late": 0, "cycles": 0, "gap": 0.0, "work": 0.0}  # since the last /diagnostics

        self.state_pub = self.create_publisher(JointState, "joint_states", qos_profile_sensor_data)
        self.create_subscription(JointState, "joint_commands", self._on_command, 10)
        try:
            self._connect()
        except LatencyTooHigh as exc:  # a setting to change, not a fault to wait out
            raise ValueError(f"{exc} (rate_hz {self.rate_hz:g})") from exc
        except PortBusy as exc:  # another driver on this bus: two would read each other's replies
            raise ValueError(str(exc)) from exc
        self.create_timer(1.0 / self.rate_hz, self._cycle)
        self.health = Diagnostics(
            self, "servo bus", self._report_health, period=p["diagnostics_period_s"], hardware_id=self.bus.port_name
        )

    # -- the bus -----------------------------------------------------------------------------
    def _connect(self) -> bool:
        """Connect and configure the servos; False (cause kept in ``down_reason``) if they are not ready.

        Raises:
          LatencyTooHigh, PortBusy: at start only (no servos configured yet); later each is a cause
            like any other (a program that took the port while it was gone may let it go).
        """
        self._next_reconnect = time.monotonic() + self.reconnect_interval
        try:
            info = self.bus.connect(self.mode, budget_ms=1000.0 / self.rate_hz)
        except BusError as exc:
            if isinstance(exc, (LatencyTooHigh, PortBusy)) and self.counts["cycles"] == 0:
                raise  # at start: refused; later it is a cause like any other
            self.down_reason = str(exc)  # the cause now, not the one that took the bus down
            self.get_logger().warning(
                f"servo bus on {self.bus.port_name} not ready ({exc}); retrying every {self.reconnect_interval} s",
                throttle_duration_sec=5.0,
            )
            return False
        self.down_reason = ""
        self._adopt(info)
        stats = self.bus.stats
        self.get_logger().info(
            f"servos {self.bus.ids} ({self.joint_names}) on {self.bus.port_name}: models "
            f"{list(info.model_numbers)}, {self.mode.name.lower()} mode, torque on; round trip "
            f"{stats.round_trip_ms:.1f} ms, reply timeout {stats.reply_timeout_ms:.1f} ms"
        )
        return True

    def _adopt(self, info) -> None:
        self.models = info.model_numbers
        servo = JointLimits(info.position_min, info.position_max, info.velocity_max)
        if not self.goals.limits.within(servo):
            self.get_logger().warning(
                f"configured limits exceed the servos' own (position {servo.position_min.tolist()}.."
                f"{servo.position_max.tolist()} rad, velocity {servo.velocity_max.tolist()} rad/s); using the tighter"
            )
        self.goals.servo_limits = servo
        self.goals.hold()  # after a (re)connect the servos hold still until the next command
        self.last_position = None
        self._silent_cycles, self._last_good = 0, time.monotonic()

    def _cycle(self) -> None:
        start = time.monotonic()
        self._count_late(start)
        try:
            self._read_and_write()
        finally:
            self._recent["work"] = max(self._recent["work"], time.monotonic() - start)

    def _count_late(self, start: float) -> None:
        """Count the slots this cycle missed: a start 1.5 periods or more after the last one is late.

        The timer keeps its phase (rcl skips to the next slot when behind), so a gap of k periods
        means k - 1 writes that did not go out when due: a changed command waited that much longer.
        """
        self.counts["cycles"] += 1
        self._recent["cycles"] += 1
        if self._cycle_start is not None:
            gap = start - self._cycle_start
            late = max(0, round(gap / self.period) - 1)
            self.counts["late_cycles"] += late
            self._recent["late"] += late
            self._recent["gap"] = max(self._recent["gap"], gap)
        self._cycle_start = start

    def _read_and_write(self) -> None:
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
                name=self.joint_names,
                position=sample.position.tolist(),
                velocity=sample.velocity.tolist(),
                effort=(sample.current * self.torque_constant).tolist(),
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
        timeouts = self.goals.timeouts
        goal = self.goals.to_write(self.last_position, now=time.monotonic())
        if self.goals.timeouts > timeouts:
            self.get_logger().info("no joint command for command_timeout_s: stopping", throttle_duration_sec=5.0)
        if goal is not None:
            (self.bus.write_velocity if self.goals.mode == "velocity" else self.bus.write_position)(goal)

    # -- commands and parameters -------------------------------------------------------------
    def _on_command(self, msg: JointState) -> None:
        values = msg.velocity if self.goals.mode == "velocity" else msg.position
        try:
            clamped = self.goals.command(msg.name, values, now=time.monotonic())
        except ValueError as exc:
            self.counts["rejected_commands"] += 1
            self.get_logger().warning(f"joint command refused: {exc}", throttle_duration_sec=1.0)
            return
        self.counts["commands"] += 1
        self.counts["clamped_commands"] += clamped

    def _on_set_parameters(self, parameters) -> SetParametersResult:
        changed = {p.name: p.value for p in parameters}
        if "command_timeout_s" in changed:
            self.goals.command_timeout_s = changed["command_timeout_s"]  # its range is checked by rclpy
        if not changed.keys() & set(LIMIT_PARAMETERS):
            return SetParametersResult(successful=True)
        values = {name: changed.get(name, self.get_parameter(name).value) for name in LIMIT_PARAMETERS}
        try:
            self.goals.limits = JointLimits.of(len(self.joint_names), **values)
        except ValueError as exc:
            return SetParametersResult(successful=False, reason=str(exc))
        return SetParametersResult(successful=True)

    # -- health ------------------------------------------------------------------------------
    def _report_health(self) -> Health:
        stats = self.bus.stats
        attempts, failed = stats.attempts - self._last_attempts, stats.failed_attempts - self._last_failed
        self._last_attempts, self._last_failed = stats.attempts, stats.failed_attempts
        success = f"{1.0 - stats.failed_attempts / stats.attempts:.4f}" if stats.attempts else "n/a"
        recent = f"{1.0 - failed / attempts:.4f}" if attempts else "n/a"
        if not self.bus.is_open:
            level, message = ERROR, f"servo bus down ({self.down_reason or stats.last_error}); reopening"
        elif failed:
            level, message = WARN, f"{failed} of {attempts} reads failed in the last period"
        else:
            level, message = OK, f"{self.rate_hz:g} Hz, reads fine"
        timing, self._recent = self._recent, {"late": 0, "cycles": 0, "gap": 0.0, "work": 0.0}
        if level == OK and timing["late"]:  # a busy machine's, not the bus's: said, not a warning
            message += f"; {timing['late']} of {timing['cycles'] + timing['late']} cycles late"
        due = self.counts["cycles"] + self.counts["late_cycles"]  # slots, the skipped ones included
        values = {
            "port_state": "open" if self.bus.is_open else "lost",
            "read_success_rate": success,
            "read_success_rate_recent": recent,
            "read_attempts": stats.attempts,
            "failed_attempts": stats.failed_attempts,
            "failed_reads": stats.failed_reads,
            "port_losses": stats.port_losses,
            "drained_bytes": stats.drained_bytes,
            "stale_replies": stats.stale_replies,
            "round_trip_ms": f"{stats.round_trip_ms:.1f}",
            "reply_timeout_ms": f"{stats.reply_timeout_ms:.1f}",
            "last_error": stats.last_error,
            "model_numbers": list(self.models),
            "command_timeouts": self.goals.timeouts,
            "on_time_rate": f"{1.0 - self.counts['late_cycles'] / due:.4f}" if due else "n/a",
            "late_cycles_recent": timing["late"],
            "cycle_gap_max_ms_recent": f"{timing['gap'] * 1e3:.1f}",
            "cycle_work_max_ms_recent": f"{timing['work'] * 1e3:.2f}",
            **self.counts,
        }
        return Health(level, message, values)

    def destroy_node(self) -> None:
        if self.bus is not None:
            self.bus.close()  # torque off, then release the port
        super().destroy_node()


def main(args=None) -> int:
    return run_node(DynamixelDriver, args)


if __name__ == "__main__":
    sys.exit(main())
