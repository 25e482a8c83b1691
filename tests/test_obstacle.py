"""The obstacle: a region of a joint's range where the servo stalls as against a hard stop.

Core units on the contact model with hand-worked numbers; then the emulated servo through the
real dynamixel_sdk (stall, Present Current, contact count), its control socket and command line;
then the offline arm and the operator's overshoots.
"""

from __future__ import annotations

import math
import subprocess
import sys
import time

import numpy as np
import pytest
from waiting import bound

from gamma_net_core.signals.arm import ArmConfig, SimulatedArm
from gamma_net_core.signals.arm_recording import simulate_arm
from gamma_net_core.signals.obstacle import Obstacle, ObstacleContact
from gamma_net_core.signals.operator import OperatorConfig
from gamma_net_ros.hardware import control_table as ct
from gamma_net_ros.hardware.bus import DynamixelBus, ReadFailed
from gamma_net_ros.hardware.control_table import OperatingMode
from gamma_net_ros.hardware.emulator import EmulatorClient

# -- the contact model -----------------------------------------------------------------------


def test_a_joint_stops_dead_at_the_edge_it_arrives_at_and_its_torque_rises_toward_stall():
    contact = ObstacleContact(Obstacle(low=0.5, high=0.8, stall_torque=4.0, rise_s=0.1))
    # Free of the region: untouched.
    assert contact.step(0.3, 0.31, 1.0, push=1.0, dt=0.01) == (0.31, 1.0)
    assert not contact.in_contact and contact.contacts == 0
    # Crossing the lower edge: held there, stopped, pushing in: contact, torque 4 (1 - e^-0.1).
    assert contact.step(0.495, 0.505, 1.0, push=1.0, dt=0.01) == (0.5, 0.0)
    assert contact.in_contact and contact.contacts == 1
    assert contact.torque == pytest.approx(4.0 * (1 - math.exp(-0.1)))
    for _ in range(99):  # one more second pushing: the torque is at stall, and it stays one contact
        contact.step(0.5, 0.5 + 0.001, 0.1, push=1.0, dt=0.01)
    assert contact.torque == pytest.approx(4.0, rel=1e-4) and contact.peak_torque == pytest.approx(4.0, rel=1e-4)
    assert contact.contact_s == pytest.approx(1.0) and contact.contacts == 1
    # Backing away: the joint moves freely, contact over, torque back to the load model's.
    assert contact.step(0.5, 0.49, -0.5, push=-0.5, dt=0.01) == (0.49, -0.5)
    assert not contact.in_contact and contact.torque == 0.0
    # Resting at the edge with no push is not contact; pushing again is a second one.
    contact.step(0.49, 0.5 + 1e-4, 0.01, push=0.0, dt=0.01)
    assert not contact.in_contact and contact.contacts == 1
    contact.step(0.5, 0.5 + 1e-3, 0.1, push=0.2, dt=0.01)
    assert contact.contacts == 2


def test_the_upper_edge_stops_a_joint_coming_down_and_the_torque_is_negative():
    contact = ObstacleContact(Obstacle(low=-0.8, high=-0.5))
    assert contact.step(-0.49, -0.52, -1.0, push=-1.0, dt=0.01) == (-0.5, 0.0)
    assert contact.in_contact and contact.torque < 0


@pytest.mark.parametrize("low, high", [(0.5, 0.5), (0.6, 0.5), (math.nan, 1.0)])
def test_a_bad_region_is_refused(low, high):
    with pytest.raises(ValueError, match="obstacle"):
        Obstacle(low=low, high=high)


# -- the emulated servo, through the real dynamixel_sdk ----------------------------------------


@pytest.fixture
def emulator(start_emulator):
    """An emulator process (as users run it), the obstacle put in servo 1's range through its control socket."""
    port, client = start_emulator(positions=(0.0, 0.0))
    client.set_obstacle(1, 0.3, 0.6)
    return port, client


def read_until(bus, predicate, timeout=30.0):
    deadline = time.monotonic() + bound(timeout)
    while time.monotonic() < deadline:
        try:
            sample = bus.read()
        except ReadFailed:  # a reply the loaded machine delivered late: the next cycle reads again
            continue
        if predicate(sample):
            return sample
        time.sleep(0.02)
    return None


def test_a_servo_driven_into_an_obstacle_stalls_its_current_rising_toward_the_stall_current(emulator):
    port, emulator = emulator
    bus = DynamixelBus(port, ids=[1, 2])
    try:
        bus.connect(OperatingMode.VELOCITY)
        bus.write_velocity([1.0, 0.0])
        # Stalled at the edge: position held at 0.3 rad, velocity 0, current near the stall current.
        stalled = read_until(bus, lambda s: s.current[0] > 2.0)
        assert stalled is not None, emulator.state()["servos"][1]
        assert stalled.position[0] == pytest.approx(0.3, abs=ct.RAD_PER_TICK)
        assert stalled.velocity[0] == 0.0
        assert stalled.current[0] <= 2.3 + 0.01  # the XM430-W350's stall current, never beyond
        assert stalled.current[1] == 0.0  # the other servo, holding still, carries no load
        obstacle = emulator.state()["servos"][1]["obstacle"]
        assert obstacle["in_contact"] and obstacle["contacts"] == 1 and obstacle["contact_s"] > 0
        assert 2.0 < obstacle["peak_current"] <= 2.3 + 1e-9
        # Backing off ends the contact: moving, little current, the contact time no longer grows.
        bus.write_velocity([-0.5, 0.0])
        free = read_until(bus, lambda s: s.position[0] < 0.25)
        assert free is not None and abs(free.current[0]) < 0.5
        after = emulator.state()["servos"][1]["obstacle"]
        assert not after["in_contact"]
        time.sleep(0.1)
        assert emulator.state()["servos"][1]["obstacle"]["contact_s"] == after["contact_s"]
        # Driving in again is a second contact.
        bus.write_velocity([1.0, 0.0])
        assert read_until(bus, lambda s: s.current[0] > 1.0) is not None
        assert emulator.state()["servos"][1]["obstacle"]["contacts"] == 2
    finally:
        bus.close()


def test_position_mode_stalls_too_when_the_goal_lies_beyond_the_edge(emulator):
    port, _ = emulator
    bus = DynamixelBus(port, ids=[1, 2])
    try:
        bus.connect(OperatingMode.POSITION)
        bus.write_position([1.0, 0.0])
        stalled = read_until(bus, lambda s: s.current[0] > 2.0)
        assert stalled is not None and stalled.position[0] == pytest.approx(0.3, abs=ct.RAD_PER_TICK)
    finally:
        bus.close()


def test_obstacles_are_set_read_and_removed_through_the_control_socket_and_refused_in_one_line(tmp_path):
    link = tmp_path / "ttyDXL"
    command = [sys.executable, "-u", "-m", "gamma_net_ros.hardware.emulator", "--link", str(link)]
    process = subprocess.Popen([*command, "--obstacle", "2", "0.5", "0.9"], stdout=subprocess.PIPE, text=True)
    try:
        client = EmulatorClient(f"{link}.ctl")
        state = client.wait_ready(timeout=bound(30))
        assert state["servos"][2]["obstacle"]["low"] == 0.5 and state["servos"][1]["obstacle"] is None
        set_ = client.set_obstacle(1, -0.4, -0.2, stall_current=1.5)
        assert set_ == {
            "in_contact": False,
            "contact_s": 0.0,
            "contacts": 0,
            "low": -0.4,
            "high": -0.2,
            "peak_current": 0.0,
        }
        assert client.set_obstacle(2) is None and client.state()["servos"][2]["obstacle"] is None
        with pytest.raises(RuntimeError, match=r"low 0\.9 must be below high 0\.1"):
            client.set_obstacle(1, 0.9, 0.1)
        assert client.state()["servos"][1]["obstacle"]["low"] == -0.4  # nothing changed
        with pytest.raises(RuntimeError, match="no servo with id 7"):
            client.set_obstacle(7, 0.1, 0.2)
    finally:
        process.terminate()
        process.wait(timeout=bound(10))
    bad = subprocess.run([*command, "--obstacle", "1", "0.5", "x"], capture_output=True, text=True, timeout=bound(60))
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == ["servo_emulator: error: --obstacle HIGH must be a number; got 'x'"]


# -- the offline arm and the operator ----------------------------------------------------------


def test_the_simulated_arm_meets_the_same_stop_and_reports_the_stall_torque_as_effort():
    arm = SimulatedArm(ArmConfig(), position=[0.0, 1.0], obstacles={0: Obstacle(0.2, 0.5)})
    arm.command_velocity([0.6, 0.0])
    for _ in range(60):  # 2 s at 30 Hz: 0.2 rad takes about 1/3 s
        arm.step(1 / 30)
    assert arm.position[0] == pytest.approx(0.2) and arm.velocity[0] == 0.0
    assert arm.effort[0] == pytest.approx(4.1, rel=1e-3) and arm.contacts[0].contacts == 1


def test_the_operator_now_and_then_overshoots_into_an_obstacle_beyond_its_route_and_seeds_repeat():
    free = simulate_arm(circuits=2, rng=np.random.default_rng(3))
    reach = float(free.position[:, 0].max())
    obstacle = {0: Obstacle(reach + 0.03, reach + 1.0)}
    # Without overshoots the route never reaches the obstacle...
    careful = simulate_arm(circuits=2, rng=np.random.default_rng(3), obstacles=obstacle)
    np.testing.assert_array_equal(careful.position, free.position)
    # ...with them, the hand runs on into it now and then: the shoulder stalls there.
    overshooting = OperatorConfig(overshoot_probability=0.5)
    runs = [
        simulate_arm(circuits=3, rng=np.random.default_rng(3), obstacles=obstacle, operator=overshooting)
        for _ in range(2)
    ]
    np.testing.assert_array_equal(runs[0].position, runs[1].position)
    stalled = np.abs(runs[0].effort[:, 0]) > 1.0
    assert stalled.any() and float(runs[0].position[:, 0].max()) == pytest.approx(reach + 0.03, abs=0.002)
