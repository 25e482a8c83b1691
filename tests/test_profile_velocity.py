"""Profile Velocity: a position mode's speed cap, from velocity_max to the register and back (real SDK, emulator)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_dynamixel_bus import connected

from gamma_net_ros.hardware import control_table as ct
from gamma_net_ros.hardware.bus import DynamixelBus, ServoError
from gamma_net_ros.hardware.emulator import ServoBank, ServoEmulator
from gamma_net_ros.hardware.protocol import ErrorNumber

UNIT = ct.RAD_S_PER_VELOCITY_UNIT


@settings(max_examples=300, deadline=None)
@given(
    speed=st.floats(min_value=UNIT, max_value=1e6, allow_nan=False),
    limit=st.integers(min_value=ct.VELOCITY_LIMIT_UNITS[0], max_value=ct.VELOCITY_LIMIT_UNITS[1]),
)
def test_the_cap_is_the_fastest_register_value_within_velocity_max_and_the_servo_limit(speed, limit):
    (units,) = ct.profile_velocity_units([speed], [limit])
    assert 1 <= units <= limit  # never 0 (no cap), never above the servo's own Velocity Limit
    assert ct.velocity_units_to_rad_s(units) <= speed * (1 + 1e-9)  # never above velocity_max
    # the fastest such value: one unit more would break one of the two
    assert units == limit or ct.velocity_units_to_rad_s(units + 1) > speed


@given(speed=st.one_of(st.floats(max_value=UNIT * 0.999), st.just(math.nan), st.just(math.inf)))
def test_a_speed_no_register_value_can_cap_at_is_refused_naming_it(speed):
    with pytest.raises(ValueError, match=r"velocity_max \[.*\] rad/s cannot cap a position move"):
        ct.profile_velocity_units([2.0, speed], [350, 350])


def test_a_speed_of_whole_units_is_kept_exactly():
    units = np.arange(1, 1024)
    np.testing.assert_array_equal(ct.profile_velocity_units(ct.velocity_units_to_rad_s(units), 1023), units)


class ForgetfulBank(ServoBank):
    """Servos whose Profile Velocity write is answered as done but never kept (another program resets it)."""

    def _write(self, dxl_id, params):
        error = super()._write(dxl_id, params)
        if params[0] | params[1] << 8 == ct.PROFILE_VELOCITY.address and dxl_id == 2:
            self.set(dxl_id, ct.PROFILE_VELOCITY, 0)
        return error


class RefusingBank(ServoBank):
    """Servos whose second refuses a Profile Velocity above ``refuse_above`` units with an error."""

    refuse_above = 0

    def _check(self, dxl_id, register, value, *, torque_on):
        if register == ct.PROFILE_VELOCITY and dxl_id == 2 and value > self.refuse_above:
            return ErrorNumber.DATA_LIMIT
        return super()._check(dxl_id, register, value, torque_on=torque_on)


def emulated(tmp_path, bank_class=ServoBank, **bank):
    bank = bank_class([1, 2], positions=[0.5, -0.3], **bank)
    return ServoEmulator(bank, link=tmp_path / "ttyDXL", rng=np.random.default_rng(0))


def held(emu, key="profile_velocity"):
    servos = emu.state()["servos"]
    return np.array([servos[1][key], servos[2][key]])


def test_connect_in_position_mode_caps_every_servo_and_velocity_mode_leaves_it(tmp_path):
    with emulated(tmp_path) as emu:
        emu.bank.set(1, ct.VELOCITY_LIMIT, 50)  # 1.2 rad/s: the servo's own limit is the tighter
        emu.bank.set(2, ct.DRIVE_MODE, ct.DRIVE_MODE_TIME_BASED_PROFILE)  # Profile Velocity would be a time
        bus = DynamixelBus(emu.port, ids=[1, 2], velocity_max=[2.0, 2.0])
        try:
            connected(bus, ct.OperatingMode.VELOCITY)
            np.testing.assert_array_equal(held(emu), [0.0, 0.0])  # unused in velocity mode: not written
            connected(bus, ct.OperatingMode.POSITION)
            expected = ct.velocity_units_to_rad_s([50, 83])  # 2.0 rad/s is 83.4 units: rounded down
            np.testing.assert_array_equal(held(emu), expected)
            np.testing.assert_array_equal(bus.profile_velocity, expected)
            assert emu.bank.get(2, ct.DRIVE_MODE) == 0  # a velocity-based profile
            # a run-time change is written at once, with torque on
            bus.change_velocity_max([0.5, 0.5])
            np.testing.assert_array_equal(held(emu), ct.velocity_units_to_rad_s([20, 20]))
            with pytest.raises(ValueError, match=r"velocity_max \[0.01\] rad/s cannot cap"):
                bus.change_velocity_max([0.5, 0.01])
            np.testing.assert_array_equal(held(emu), ct.velocity_units_to_rad_s([20, 20]))  # nothing written
            # A rebooted servo forgets its cap (RAM): the reconnect after it writes it again.
            emu.bank.reboot(2)
            assert held(emu)[1] == 0.0
            connected(bus, ct.OperatingMode.POSITION)
            np.testing.assert_array_equal(held(emu), ct.velocity_units_to_rad_s([20, 20]))
        finally:
            bus.close()


@pytest.mark.parametrize(
    "bank_class, named",
    [
        (ForgetfulBank, "servo 2 on .*: Profile Velocity reads back 0 units after writing 83 \\(0 = no cap\\)"),
        (RefusingBank, "servo 2: set Profile Velocity 83 units \\(1.99 rad/s\\): .*"),
    ],
    ids=["reads-back-another-value", "refuses-the-write"],
)
def test_a_servo_that_does_not_hold_its_cap_is_refused_before_torque_goes_on(tmp_path, bank_class, named):
    with emulated(tmp_path, bank_class) as emu:
        bus = DynamixelBus(emu.port, ids=[1, 2], velocity_max=2.0)
        with pytest.raises(ServoError, match=named):
            connected(bus, ct.OperatingMode.POSITION)
        assert not bus.is_open
        assert not any(held(emu, "torque"))  # the servos were never switched on uncapped


def test_a_refused_run_time_change_keeps_the_old_caps(tmp_path):
    with emulated(tmp_path, RefusingBank) as emu:
        emu.bank.refuse_above = 100  # 2.4 rad/s
        bus = DynamixelBus(emu.port, ids=[1, 2], velocity_max=2.0)
        try:
            connected(bus, ct.OperatingMode.POSITION)
            with pytest.raises(ServoError, match=r"servo 2: set Profile Velocity 125 units \(2.998 rad/s\)"):
                bus.change_velocity_max(3.0)
            # servo 1 took the new cap before servo 2 refused it: both are back at the old one
            np.testing.assert_array_equal(held(emu), ct.velocity_units_to_rad_s([83, 83]))
            assert bus.is_open and np.array_equal(bus.velocity_max, [2.0, 2.0])
            emu.bank.refuse_above = 0  # and now servo 2 refuses even the old cap: the port closes,
            with pytest.raises(ServoError, match="servo 2"):
                bus.change_velocity_max(1.0)
            assert not bus.is_open  # so the next connect sets every cap afresh (or refuses to start)
            np.testing.assert_array_equal(held(emu), ct.velocity_units_to_rad_s([83, 83]))
        finally:
            bus.close()
