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
as it nears a position limit and is not driven past it, and each joint's goal returns to zero
when no command has named it for ``command_timeout_s`` (per joint: commands naming other joints
do not keep it alive). A malformed command is refused whole, counted and logged. A command
that changes the goals is written on receipt, up to 3 times between two cycles (later ones wait
for the cycle's write; :meth:`JointGoals.to_write`): a stop waits for no cycle, and a burst of
commands cannot crowd the bus's reads out.
The publishers on ``joint_commands`` are watched (:mod:`gamma_net_ros.graph_watch`, parameters
``graph.*``): while an unexpected one is on (by default, more than one publisher), commands are
refused (``refused``) and the joints held; ``received``, ``processed`` and ``lost`` count what came.

Time: the cycle timer and every timeout run on the steady clock, never on ``/clock``: a
simulated clock that stops (``use_sim_time``) cannot stop the cycles or hold a goal in force.

In position mode the goals at start (and after a reconnect) are where the joints are, even
outside the limits: only a command moves a joint, and only its goal is clamped (a command that
holds a joint where it is, as a reflex's hold of every joint does, moves and clamps nothing).

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
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import JointState

from gamma_net_ros.conversions import clock_seconds, servo_state_msg
from gamma_net_ros.diagnostics import Diagnostics, Health
from gamma_net_ros.dynamixel_driver.health import COUNTS, BusHealth, CycleTiming, connected_line
from gamma_net_ros.dynamixel_driver.settings import declare_settings, runtime_change, watch_commands
from gamma_net_ros.hardware.bus import BusError, DynamixelBus, LatencyTooHigh, PortBusy, PortLost, ReadFailed
from gamma_net_ros.hardware.goals import JointLimits
from gamma_net_ros.node_main import run_node

SILENCE_S = 1.0  # s without a good read (and 3 missed cycles) before the servos are reconfigured


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
        s = declare_settings(self)
        self.joint_names = s.joint_names
        self.mode = s.mode
        self.goals = s.goals()
        self.add_on_set_parameters_callback(self._on_set_parameters)

        self.bus = s.bus(clock=lambda: clock_seconds(self))
        self.rate_hz = s.rate_hz
        self.torque_constant = s.torque_constant
        self.reconnect_interval = s.reconnect_interval_s
        self.counts = dict.fromkeys(COUNTS, 0)
        self.models: tuple[int, ...] = ()
        self.last_position: np.ndarray | None = None
        self._next_reconnect = 0.0
        self._silent_cycles, self._last_good = 0, time.monotonic()
        self.down_reason = ""
        self.timing = CycleTiming(self.rate_hz, self.counts)
        self._bus_health = BusHealth(self.bus, self.timing, self.counts, self.rate_hz)

        self.state_pub = self.create_publisher(JointState, "joint_states", qos_profile_sensor_data)
        self.graph = watch_commands(self, self._on_command, on_stop=self.goals.hold)  # who commands the servos
        try:
            self._connect()
        except LatencyTooHigh as exc:  # a setting to change, not a fault to wait out
            raise ValueError(f"{exc} (rate_hz {self.rate_hz:g})") from exc
        except PortBusy as exc:  # another driver on this bus: two would read each other's replies
            raise ValueError(str(exc)) from exc
        # Steady: the servos move in real time whatever /clock says; a stopped clock must not stop the writes
        # (nor the report on them).
        steady = Clock(clock_type=ClockType.STEADY_TIME)
        self.create_timer(1.0 / self.rate_hz, self._cycle, clock=steady)
        self.health = Diagnostics(self, "servo bus", self._report_health, period=0, hardware_id=self.bus.port_name)
        self.create_timer(s.diagnostics_period_s, self.health.publish, clock=steady)

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
        self.get_logger().info(connected_line(self.bus, self.joint_names, info, self.mode))
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
        self.timing.count_late(start)
        try:
            self._read_and_write()
        finally:
            self.timing.worked(time.monotonic() - start)

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
            self.state_pub.publish(servo_state_msg(self.joint_names, sample, self.torque_constant))
            self.counts["published"] += 1
        self._write_goals()

    def _on_port_lost(self, exc: Exception | str) -> None:
        self._silent_cycles = 0
        self.down_reason = str(exc)
        self._next_reconnect = time.monotonic() + self.reconnect_interval
        self.get_logger().error(
            f"servo bus lost ({exc}); reopening every {self.reconnect_interval} s", throttle_duration_sec=5.0
        )

    def _write_goals(self, *, receipt: bool = False) -> None:
        timeouts = self.goals.timeouts
        goal = self.goals.to_write(self.last_position, now=time.monotonic(), receipt=receipt)
        if self.goals.timeouts > timeouts:
            self.get_logger().info("no command named a moving joint for command_timeout_s: stopping it",
                                   throttle_duration_sec=5.0)  # fmt: skip
        if goal is not None and self.bus.is_open:
            try:
                (self.bus.write_velocity if self.goals.mode == "velocity" else self.bus.write_position)(goal)
            except PortLost as exc:
                self._on_port_lost(exc)

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
        self._write_goals(receipt=True)  # a stop must not wait in the queue for the next cycle (up to 33 ms at 30 Hz)

    def _on_set_parameters(self, parameters) -> SetParametersResult:
        return runtime_change(self.goals, parameters, lambda name: self.get_parameter(name).value, self.bus)

    # -- health ------------------------------------------------------------------------------
    def _report_health(self) -> Health:
        return self.graph.amend(self._bus_health.report(
            down_reason=self.down_reason, models=self.models, command_timeouts=self.goals.timeouts
        ))  # fmt: skip

    def destroy_node(self) -> None:
        if self.bus is not None:
            self.bus.close()  # torque off, then release the port
        super().destroy_node()


def main(args=None) -> int:
    return run_node(DynamixelDriver, args)


if __name__ == "__main__":
    sys.exit(main())
