"""The dynamixel_driver node: real rclpy nodes, the real dynamixel_sdk, the servo emulator in its own process."""

from __future__ import annotations

import os
import subprocess
import time

import numpy as np
import pytest
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import qos_profile_sensor_data
from waiting import bound, spin_for, spin_until

from gamma_net_ros.hardware import control_table as ct
from gamma_net_ros.paths import config_file
from gamma_net_ros.processes import NodeProcess, node_command

pytestmark = pytest.mark.ros

HELD = [0.5, -0.3]  # rad, where the emulated shoulder and elbow start
NAMES = ["shoulder", "elbow"]


@pytest.fixture
def emulator(start_emulator):
    """A servo emulator process holding HELD; yields (port, client)."""
    return start_emulator(HELD)


def start_driver(executor, port, **params):
    from gamma_net_ros.dynamixel_driver.node import DynamixelDriver

    params = {"port": port, "diagnostics_period_s": 0.2, **params}
    args = ["--ros-args", "--params-file", str(config_file("dynamixel"))]
    for key, value in params.items():
        args += ["-p", f"{key}:={value}"]
    driver = DynamixelDriver(cli_args=args)
    executor.add_node(driver)
    # A node of an earlier test's process that ended may be listed on joint_commands a moment longer (until
    # discovery drops it), and the driver refuses commands while it is: a test starts once the graph is clean.
    if not spin_until(executor, lambda: driver.graph.polls > 0 and not driver.graph.lines, timeout=60):
        raise AssertionError(f"joint_commands never had only the expected publishers: {driver.graph.lines}")
    return driver


class Listener:
    """What a user of the driver sees: joint_states, /diagnostics, and a joint_commands publisher."""

    def __init__(self, executor):
        from diagnostic_msgs.msg import DiagnosticArray
        from sensor_msgs.msg import JointState

        self.node = Node("dxl_test_listener")
        self.states, self.diagnostics = [], []
        self.node.create_subscription(JointState, "joint_states", self.states.append, qos_profile_sensor_data)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self.diagnostics.append, 10)
        self.publisher = self.node.create_publisher(JointState, "joint_commands", 10)
        executor.add_node(self.node)

    def command(self, spin, executor, **fields):
        from sensor_msgs.msg import JointState

        assert spin(executor, lambda: self.publisher.get_subscription_count() > 0, timeout=10)
        self.publisher.publish(JointState(**fields))

    def status(self) -> dict:
        """The latest diagnostics as a dict of values, plus level and message."""
        if not self.diagnostics:
            return {}
        (status,) = self.diagnostics[-1].status
        return {"level": status.level, "message": status.message, **{kv.key: kv.value for kv in status.values}}


def servo_state(client, key):
    servos = client.state()["servos"]
    return np.array([servos[1][key], servos[2][key]])


def test_joint_states_match_the_emulated_servos(emulator, executor, spin):
    from diagnostic_msgs.msg import DiagnosticStatus

    port, client = emulator
    listener = Listener(executor)
    start_driver(executor, port)
    assert spin(executor, lambda: len(listener.states) >= 10 and listener.status(), timeout=15)
    held = ct.ticks_to_rad(servo_state(client, "present_position"))
    for msg in listener.states:
        assert list(msg.name) == NAMES
        np.testing.assert_array_equal(msg.position, held)
        np.testing.assert_array_equal(msg.velocity, [0.0, 0.0])
        np.testing.assert_array_equal(msg.effort, [0.0, 0.0])  # holding still: no load
    stamps = [m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec for m in listener.states]
    assert all(np.diff(stamps) > 0)
    assert servo_state(client, "torque").all() and (servo_state(client, "operating_mode") == 1).all()
    status = listener.status()
    assert status["level"] == DiagnosticStatus.OK and status["port_state"] == "open"
    assert float(status["read_success_rate"]) == 1.0 and status["model_numbers"] == "[1020, 1020]"


def test_commands_move_the_servos_within_the_limits(emulator, executor, spin):
    port, client = emulator
    listener = Listener(executor)
    driver = start_driver(executor, port, command_timeout_s=0.0)

    def elbow_at_speed() -> bool:
        return bool(listener.states) and listener.states[-1].velocity[1] > 1.9

    # Replies late for a second on a loaded machine make the driver reopen the port, the servos then
    # holding still until the next command (its recovery): teleop would command again, and so does this.
    sent = 0
    while sent <= driver.counts["reconnects"] and not elbow_at_speed():
        listener.command(spin, executor, name=["elbow"], velocity=[5.0])  # above velocity_max 2.0: clamped
        sent += 1
        spin(executor, lambda sent=sent: elbow_at_speed() or driver.counts["reconnects"] >= sent, timeout=10)
    assert elbow_at_speed(), (sent, driver.counts)
    assert listener.states[-1].velocity[0] == 0.0  # the shoulder was not commanded
    # effort: Present Current x torque_constant, N m; the emulated elbow's viscous friction at ~2 rad/s
    assert listener.states[-1].effort[0] == 0.0 and 0.07 < listener.states[-1].effort[1] < 0.14
    assert driver.counts["clamped_commands"] == sent  # each command, clamped
    # The elbow slows as it nears position_max (2.9 rad, config/dynamixel.yaml) and stops there: the soft stop.
    assert spin(executor, lambda: abs(listener.states[-1].velocity[1]) < 0.05, timeout=10)
    elbow = servo_state(client, "position")[1]
    assert 2.78 < elbow < 2.91
    # Malformed commands are refused whole and change nothing.
    for bad in ({"name": ["wrist"], "velocity": [1.0]}, {"name": NAMES, "velocity": [0.5, float("nan")]},
                {"name": NAMES, "velocity": [0.5]}):  # fmt: skip
        listener.command(spin, executor, **bad)
    assert spin(executor, lambda: driver.counts["rejected_commands"] == 3, timeout=5)
    np.testing.assert_allclose(servo_state(client, "goal_velocity")[0], 0.0)
    # A tighter limit set at run time is validated and used.
    assert not driver.set_parameters([Parameter("velocity_max", value=[1.0])])[0].successful
    assert driver.set_parameters([Parameter("velocity_max", value=[0.5, 0.5])])[0].successful
    listener.command(spin, executor, name=NAMES, velocity=[-3.0, -3.0])
    assert spin(executor, lambda: np.allclose(servo_state(client, "goal_velocity"), -0.5, atol=0.02), timeout=5)
    # A command is written when the driver takes it, not on its next cycle: spin_until checks right after
    # the callback that took it, before any cycle could run, and the driver has already written it. (A sync
    # write has no reply: the emulator's process applies it when it next runs, so the servos are waited for.)
    taken = driver.counts["commands"]
    listener.command(spin, executor, name=NAMES, velocity=[0.3, 0.0])
    assert spin(executor, lambda: driver.counts["commands"] > taken, timeout=5)
    if driver.bus.is_open and driver.last_position is not None:  # (not while late replies have it reopening)
        np.testing.assert_allclose(driver.goals.written, [0.3, 0.0], atol=1e-9)
    assert spin(executor, lambda: np.allclose(servo_state(client, "goal_velocity"), [0.3, 0.0], atol=0.02), timeout=10)


def test_position_commands_are_followed_within_the_limits(emulator, executor, spin):
    port, client = emulator
    listener = Listener(executor)
    start_driver(executor, port, command_mode="position")
    listener.command(spin, executor, name=["elbow", "shoulder"], position=[3.0, 0.2])  # elbow beyond 2.9
    assert spin(executor, lambda: np.allclose(listener.states[-1].position if listener.states else [9, 9],
                                              [0.2, 2.9], atol=0.01), timeout=10)  # fmt: skip
    np.testing.assert_allclose(servo_state(client, "goal_position"), [0.2, 2.9], atol=ct.RAD_PER_TICK)


def test_under_faults_it_keeps_publishing_counts_and_never_publishes_a_damaged_value(emulator, executor, spin):
    from diagnostic_msgs.msg import DiagnosticStatus

    port, client = emulator
    listener = Listener(executor)
    start_driver(executor, port)
    assert spin(executor, lambda: len(listener.states) >= 3, timeout=15)
    held = ct.ticks_to_rad(servo_state(client, "present_position"))
    client.set_faults(drop=0.2, corrupt=0.2, delay=0.1, delay_s=0.06)
    before = len(listener.states)
    levels = set()

    def enough():
        levels.add(listener.status().get("level"))
        status = listener.status()
        return len(listener.states) >= before + 15 and int(status.get("missed_cycles", 0)) > 0

    assert spin(executor, enough, timeout=20)
    counters = client.state()["counters"]
    assert counters["dropped"] and counters["corrupted"] and counters["delayed"]
    for msg in listener.states:  # the servos hold still: any other value would be damaged data
        np.testing.assert_array_equal(msg.position, held)
        np.testing.assert_array_equal(msg.velocity, [0.0, 0.0])
    status = listener.status()
    assert DiagnosticStatus.WARN in levels
    assert int(status["failed_attempts"]) > 0 and float(status["read_success_rate"]) < 1.0
    assert status["last_error"].startswith("sync read")
    # Every cycle either published a good read or was counted as missed.
    assert int(status["cycles"]) == int(status["published"]) + int(status["missed_cycles"])


def test_it_recovers_after_the_port_disappears(emulator, executor, spin):
    from diagnostic_msgs.msg import DiagnosticStatus

    port, client = emulator
    listener = Listener(executor)
    driver = start_driver(executor, port, reconnect_interval_s=0.2)
    assert spin(executor, lambda: len(listener.states) >= 3, timeout=15)
    client.disconnect()  # until reconnect
    assert spin(executor, lambda: listener.status().get("port_state") == "lost", timeout=10)
    assert listener.status()["level"] == DiagnosticStatus.ERROR
    during = len(listener.states)
    spin_for(executor, 0.5)  # retrying to reopen a port that is not there
    assert len(listener.states) == during
    client.reconnect()
    assert spin(executor, lambda: len(listener.states) >= during + 5, timeout=10)
    assert spin(executor, lambda: listener.status().get("port_state") == "open", timeout=5)
    assert driver.counts["reconnects"] == 1 and int(listener.status()["port_losses"]) == 1
    # Same node, same subscriptions: commands work again.
    listener.command(spin, executor, name=["shoulder"], velocity=[0.3])
    assert spin(executor, lambda: servo_state(client, "goal_velocity")[0] > 0.25, timeout=5)


def test_servos_that_stop_answering_are_reconfigured_when_they_return(emulator, executor, spin):
    port, client = emulator
    listener = Listener(executor)
    start_driver(executor, port, reconnect_interval_s=0.2)
    assert spin(executor, lambda: len(listener.states) >= 3, timeout=15)
    client.set_faults(drop=1.0)  # servo power lost: the port stays, nobody answers
    assert spin(executor, lambda: listener.status().get("port_state") == "lost", timeout=10)
    assert "no valid reply" in listener.status()["message"]
    client.reboot()  # power back: the servos restart with torque off
    client.set_faults(drop=0.0)
    assert not servo_state(client, "torque").any()
    count = len(listener.states)
    assert spin(executor, lambda: len(listener.states) >= count + 5, timeout=10)
    assert servo_state(client, "torque").all()  # reconfigured: torque on again


def test_ros_run_style_process_turns_torque_off_on_sigint(emulator, executor, spin):
    port, client = emulator
    listener = Listener(executor)
    command = node_command("gamma_net_ros.dynamixel_driver.node", params_file=config_file("dynamixel"),
                           params={"port": port})  # fmt: skip
    driver = NodeProcess(command).start(stdout=subprocess.DEVNULL)
    try:
        assert spin(executor, lambda: len(listener.states) >= 3, timeout=30)
        assert servo_state(client, "torque").all()
    finally:
        assert driver.stop(timeout=bound(10.0)) == 0  # SIGINT: the clean path
    assert not servo_state(client, "torque").any()


def test_bad_configuration_is_refused_at_start(executor):
    from gamma_net_ros.dynamixel_driver.node import DynamixelDriver

    with pytest.raises(ValueError, match="one distinct joint name per servo id"):
        DynamixelDriver(parameter_overrides=[Parameter("ids", value=[1, 2, 3])])
    with pytest.raises(ValueError, match="position_min"):
        DynamixelDriver(parameter_overrides=[Parameter("position_min", value=[2.0, 0.0])])
    with pytest.raises(ValueError, match="command_mode"):
        DynamixelDriver(parameter_overrides=[Parameter("command_mode", value="torque")])


def test_position_mode_holds_joints_found_outside_the_limits_until_commanded(start_emulator, executor, spin):
    # config/dynamixel.yaml: shoulder -1.5708..1.5708, elbow 0.1..2.9; both servos start outside.
    outside = [2.2, 3.05]
    port, client = start_emulator(outside)
    listener = Listener(executor)
    start_driver(executor, port, command_mode="position")
    assert spin(executor, lambda: len(listener.states) >= 15, timeout=15)  # half a second of cycles
    np.testing.assert_allclose(servo_state(client, "position"), outside, atol=2 * ct.RAD_PER_TICK)
    np.testing.assert_allclose(servo_state(client, "goal_position"), outside, atol=ct.RAD_PER_TICK)
    assert servo_state(client, "torque").all()
    listener.command(spin, executor, name=["elbow"], position=[3.1])  # a command: now the elbow is clamped
    assert spin(executor, lambda: abs(listener.states[-1].position[1] - 2.9) < 0.01, timeout=10)
    np.testing.assert_allclose(servo_state(client, "goal_position"), [outside[0], 2.9], atol=ct.RAD_PER_TICK)
    np.testing.assert_allclose(servo_state(client, "position")[0], outside[0], atol=2 * ct.RAD_PER_TICK)


def sample_ages_ms(states, history, joint: int, servo_id: int) -> np.ndarray:
    """How much older each sample's data is than its stamp, from where the emulated servo truly was when.

    The servo moves one way, so the time it reached a published position is found by
    interpolating its history; positive: the data predates the request it is stamped with.
    """
    times = np.array([t for t, _ in history])
    positions = np.array([p[servo_id] for _, p in history])
    assert np.all(np.diff(positions) >= 0), "the servo must move one way for positions to tell times"
    stamps = np.array([m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec for m in states])
    reached = np.interp([m.position[joint] for m in states], positions, times)
    return 1000.0 * (stamps - reached)


def test_no_sample_is_older_than_its_stamp_under_lost_damaged_and_late_replies(start_emulator, executor, spin):
    """A late reply taken as the answer to a retry is refused (stale_replies), never stamped as the retry."""
    port, client = start_emulator([-2.8, -2.8])
    listener = Listener(executor)
    wide = {"position_min": [-3.0, -3.0], "position_max": [3.0, 3.0], "command_timeout_s": 0.0}
    driver = start_driver(executor, port, **wide)
    listener.command(spin, executor, name=NAMES, velocity=[1.0, 1.0])  # ~5 s of travel
    assert spin(executor, lambda: listener.states and listener.states[-1].velocity[0] > 0.9, timeout=10)
    # Replies 45 ms late (after the SDK's ~34 ms wait) reach later attempts, some only 10-20 ms later.
    client.set_faults(drop=0.05, corrupt=0.05, delay=0.35, delay_s=0.045)
    first = len(listener.states)
    spin_for(executor, 4.5)
    assert driver.bus.stats.stale_replies > 0 and len(listener.states) >= first + 20
    client.set_faults(drop=0.0, corrupt=0.0, delay=0.0)
    moving = [m for m in listener.states[first:] if m.position[0] < 2.5]  # before any soft stop slows it
    history = client.history()
    for joint, servo_id in ((0, 1), (1, 2)):
        ages = sample_ages_ms(moving, history, joint, servo_id)
        # Within the Realtime Tick check's tolerance (4.5 ms) plus a position tick (1.5 ms at 1 rad/s).
        assert ages.max() < 8.0, f"{np.sum(ages >= 8.0)} of {len(ages)} samples up to {ages.max():.1f} ms stale"
    counts = driver.counts
    assert counts["cycles"] == counts["published"] + counts["missed_cycles"]  # every cycle accounted for


def test_a_slow_usb_adapter_is_measured_and_its_replies_waited_for(start_emulator, executor, spin):
    """Replies held 20 ms (an FTDI latency timer): even a hand-set 10 ms timeout is lengthened to cover them."""
    port, client = start_emulator(HELD)
    client.set_faults(latency_s=0.02)
    listener = Listener(executor)
    driver = start_driver(executor, port, timeout_ms=10.0)
    assert driver.get_parameter("timeout_ms").value == 10.0
    assert spin(executor, lambda: driver.counts["cycles"] >= 60, timeout=20)
    stats = driver.bus.stats
    budget = 1000 / 30
    assert stats.round_trip_ms >= 20.0 and min(stats.round_trip_ms + 5.0, budget) <= stats.reply_timeout_ms <= budget
    # With 10 ms every first attempt times out (about half the cycles published, here); adapted, nearly all.
    assert driver.counts["published"] >= 0.8 * driver.counts["cycles"], driver.counts
    assert len(listener.states) > 0


def test_replies_too_slow_for_the_rate_are_refused_in_one_line(start_emulator):
    port, client = start_emulator(HELD)
    client.set_faults(latency_s=0.05)  # 50 ms: more than a 30 Hz cycle
    command = node_command("gamma_net_ros.dynamixel_driver.node", params_file=config_file("dynamixel"),
                           params={"port": port}, node="dynamixel_driver")  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=bound(30))
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "Traceback" not in output
    (line,) = [line for line in output.splitlines() if "refusing to start" in line]
    assert "latency_timer" in line and "timeout_ms" in line and "rate_hz 30" in line
    assert not servo_state(client, "torque").any()  # nothing was switched on


def test_diagnostics_name_the_current_cause_while_the_bus_is_down(emulator, executor, spin):
    from diagnostic_msgs.msg import DiagnosticStatus

    port, client = emulator
    listener = Listener(executor)
    start_driver(executor, port, reconnect_interval_s=0.2)
    assert spin(executor, lambda: len(listener.states) >= 3, timeout=15)
    client.disconnect()  # first cause: the device is gone
    assert spin(executor, lambda: "cannot open" in listener.status().get("message", ""), timeout=10)
    client.set_faults(drop=1.0)  # the device is back, but the servos are silent: a new cause
    client.reconnect()
    assert spin(executor, lambda: "no valid reply" in listener.status().get("message", ""), timeout=10)
    status = listener.status()
    assert status["level"] == DiagnosticStatus.ERROR and "cannot open" not in status["message"]
    client.set_faults(drop=0.0)  # recovered
    count = len(listener.states)
    assert spin(executor, lambda: len(listener.states) >= count + 5, timeout=10)
    assert spin(executor, lambda: listener.status().get("level") == DiagnosticStatus.OK, timeout=5)


def test_a_second_driver_on_the_same_port_is_refused_and_the_first_is_undisturbed(emulator, executor, spin):
    port, client = emulator
    listener = Listener(executor)
    first = start_driver(executor, port)
    assert spin(executor, lambda: len(listener.states) >= 5, timeout=15)
    command = node_command("gamma_net_ros.dynamixel_driver.node", params_file=config_file("dynamixel"),
                           params={"port": port}, node="dynamixel_driver")  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=bound(60))
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "Traceback" not in output
    (line,) = [line for line in output.splitlines() if "refusing to start" in line]
    assert f"{port} is in use by another program (process {os.getpid()})" in line, line
    count = len(listener.states)
    assert spin(executor, lambda: len(listener.states) >= count + 10, timeout=15)
    # The first driver never lost its bus (before the lock: 7 reconnects in 15 s), torque still on.
    assert first.counts["reconnects"] == 0 and first.bus.stats.port_losses == 0, first.counts
    assert first.bus.stats.opens == 1 and servo_state(client, "torque").all()


def test_cycles_that_start_late_are_counted_on_diagnostics(emulator, executor, spin):
    port, _client = emulator
    listener = Listener(executor)
    start_driver(executor, port, rate_hz=100.0)
    assert spin(executor, lambda: len(listener.states) >= 10 and listener.status(), timeout=15)
    before = int(listener.status()["late_cycles"])

    def hold_the_executor():  # another callback holds the driver's executor for 30 cycles (no CPU for it)
        stall.cancel()
        time.sleep(0.3)  # the stall under test, not a wait

    stall = listener.node.create_timer(0.01, hold_the_executor)
    assert spin(executor, lambda: int(listener.status().get("late_cycles", 0)) >= before + 20, timeout=15)
    status = listener.status()
    assert float(status["on_time_rate"]) < 1.0 and float(status["cycle_gap_max_ms_recent"]) >= 0.0
    assert int(status["cycles"]) > 0
