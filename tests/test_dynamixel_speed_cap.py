"""A position mode's speed at the actuators: the real driver node, the real dynamixel_sdk, the emulator's servos."""

from __future__ import annotations

import subprocess
import time

import numpy as np
import pytest
from rclpy.parameter import Parameter
from test_dynamixel_driver import Listener, servo_state, start_driver
from waiting import bound

from gamma_net_ros.hardware import control_table as ct
from gamma_net_ros.paths import config_file
from gamma_net_ros.processes import node_command

pytestmark = pytest.mark.ros

HELD = [0.5, 0.5]  # rad, where the emulated shoulder and elbow start (inside config/dynamixel.yaml's limits)
FAR = [-1.5, 2.8]  # rad, 2.0 and 2.3 rad away: the servo's own trajectory would reach ~8 rad/s uncapped
WINDOW_S = 0.25  # s; speeds over shorter spans would measure the emulator's timestamps' jitter
TOLERANCE = 1.05  # the emulator stamps its history after it moves: a few ms of a starved thread per window


def top_speeds(history, since: float) -> np.ndarray:
    """Each servo's fastest speed over any WINDOW_S of ``history`` (wall time, positions) after ``since``."""
    times = np.array([t for t, _ in history if t >= since])
    positions = np.array([[p[1], p[2]] for t, p in history if t >= since])
    ends = np.searchsorted(times, times + WINDOW_S)
    starts = np.flatnonzero(ends < len(times))
    moved = np.abs(positions[ends[starts]] - positions[starts])
    return (moved / (times[ends[starts]] - times[starts])[:, None]).max(axis=0)


def move_and_measure(listener, client, executor, spin, goal, velocity, driver) -> np.ndarray:
    """Command ``goal`` (with ``velocity`` entries, if any), wait until the servos are there, return top speeds."""
    since = client.history()[-1][0]
    fields = {"name": ["shoulder", "elbow"], "position": goal}
    if velocity is not None:
        fields["velocity"] = velocity
    there = lambda: np.allclose(servo_state(client, "position"), goal, atol=0.01)  # noqa: E731
    # Repeated, as an operator repeats a goal: on a loaded machine the driver may reopen the port (the servos
    # then hold until the next command), or refuse commands while a process that just ended (another test's)
    # is still listed on joint_commands.
    deadline = time.monotonic() + bound(60)
    while not there() and time.monotonic() < deadline:
        listener.command(spin, executor, **fields)
        spin(executor, there, timeout=0.5)
    assert there(), (servo_state(client, "position"), dict(driver.counts), driver.graph.refused)
    return top_speeds(client.history(), since)


@pytest.mark.parametrize("velocity", [None, [6.0, 6.0]], ids=["position", "position-with-velocity"])
def test_position_moves_never_outrun_velocity_max(start_emulator, executor, spin, velocity):
    port, client = start_emulator(HELD)
    listener = Listener(executor)
    driver = start_driver(executor, port, command_mode="position", velocity_max="[2.0, 1.5]")
    caps = ct.velocity_units_to_rad_s([83, 62])  # rounded down to the register's units: 1.990, 1.487 rad/s
    np.testing.assert_array_equal(servo_state(client, "profile_velocity"), caps)
    speeds = move_and_measure(listener, client, executor, spin, FAR, velocity, driver)
    assert np.all(speeds <= np.array([2.0, 1.5]) * TOLERANCE), speeds
    assert np.all(speeds > 0.9 * caps), speeds  # it ran at the cap: the measure would see a faster servo
    # A tighter velocity_max set at run time caps the servos at once.
    assert driver.set_parameters([Parameter("velocity_max", value=[1.0, 0.5])])[0].successful
    np.testing.assert_array_equal(servo_state(client, "profile_velocity"), ct.velocity_units_to_rad_s([41, 20]))
    speeds = move_and_measure(listener, client, executor, spin, HELD, velocity, driver)
    assert np.all(speeds <= np.array([1.0, 0.5]) * TOLERANCE), speeds
    # One no servo can be capped at is refused, and the caps stay.
    result = driver.set_parameters([Parameter("velocity_max", value=[1.0, 0.01])])[0]
    assert not result.successful and "velocity_max [0.01] rad/s cannot cap a position move" in result.reason
    np.testing.assert_array_equal(servo_state(client, "profile_velocity"), ct.velocity_units_to_rad_s([41, 20]))


def test_a_velocity_max_no_servo_can_be_capped_at_is_refused_at_start_in_one_line(start_emulator):
    port, client = start_emulator(HELD)
    params = {"port": port, "command_mode": "position", "velocity_max": "[2.0, 0.01]"}
    command = node_command("gamma_net_ros.dynamixel_driver.node", params_file=config_file("dynamixel"),
                           params=params, node="dynamixel_driver")  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=bound(30))
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "Traceback" not in output
    (line,) = [line for line in output.splitlines() if "refusing to start" in line]
    assert "velocity_max [0.01] rad/s cannot cap a position move" in line, line
    assert not servo_state(client, "torque").any()  # nothing was switched on
