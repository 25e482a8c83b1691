"""The Dynamixel X-series control table (Protocol 2.0) and its units.

Addresses, sizes and factory values from the ROBOTIS e-manual (XM430-W350 page; the
X-series share this layout). Registers below address 64 live in EEPROM and can be written
only while Torque Enable is 0.

Units:
  position: 4096 ticks per revolution, tick 2048 is 0 rad (the horn's centre);
  velocity: 0.229 rpm per unit;
  current: 2.69 mA per unit (Present Current, signed; Current Limit).
"""

from __future__ import annotations

import math
from enum import IntEnum
from typing import NamedTuple

import numpy as np


class Register(NamedTuple):
    name: str
    address: int
    size: int  # bytes, little-endian
    signed: bool = False
    writable: bool = True

    @property
    def eeprom(self) -> bool:
        return self.address < TORQUE_ENABLE_ADDRESS

    def encode(self, value: int) -> bytes:
        """``value`` as this register's little-endian bytes (two's complement if signed)."""
        value = int(value)
        bits = 8 * self.size
        low, high = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if self.signed else (0, (1 << bits) - 1)
        if not low <= value <= high:
            raise ValueError(f"{self.name} ({self.size} bytes) cannot hold {value}; range {low}..{high}")
        return value.to_bytes(self.size, "little", signed=self.signed)

    def decode(self, data: bytes) -> int:
        if len(data) != self.size:
            raise ValueError(f"{self.name} is {self.size} bytes, got {len(data)}")
        return int.from_bytes(bytes(data), "little", signed=self.signed)


TORQUE_ENABLE_ADDRESS = 64

MODEL_NUMBER = Register("Model Number", 0, 2, writable=False)
MODEL_INFORMATION = Register("Model Information", 2, 4, writable=False)
FIRMWARE_VERSION = Register("Firmware Version", 6, 1, writable=False)
ID = Register("ID", 7, 1)
BAUD_RATE = Register("Baud Rate", 8, 1)
RETURN_DELAY_TIME = Register("Return Delay Time", 9, 1)
DRIVE_MODE = Register("Drive Mode", 10, 1)
OPERATING_MODE = Register("Operating Mode", 11, 1)
PROTOCOL_TYPE = Register("Protocol Type", 13, 1)
HOMING_OFFSET = Register("Homing Offset", 20, 4, signed=True)
MOVING_THRESHOLD = Register("Moving Threshold", 24, 4)
TEMPERATURE_LIMIT = Register("Temperature Limit", 31, 1)
MAX_VOLTAGE_LIMIT = Register("Max Voltage Limit", 32, 2)
MIN_VOLTAGE_LIMIT = Register("Min Voltage Limit", 34, 2)
PWM_LIMIT = Register("PWM Limit", 36, 2)
CURRENT_LIMIT = Register("Current Limit", 38, 2)
ACCELERATION_LIMIT = Register("Acceleration Limit", 40, 4)
VELOCITY_LIMIT = Register("Velocity Limit", 44, 4)
MAX_POSITION_LIMIT = Register("Max Position Limit", 48, 4)
MIN_POSITION_LIMIT = Register("Min Position Limit", 52, 4)
SHUTDOWN = Register("Shutdown", 63, 1)
TORQUE_ENABLE = Register("Torque Enable", TORQUE_ENABLE_ADDRESS, 1)
LED = Register("LED", 65, 1)
STATUS_RETURN_LEVEL = Register("Status Return Level", 68, 1)
REGISTERED_INSTRUCTION = Register("Registered Instruction", 69, 1, writable=False)
HARDWARE_ERROR_STATUS = Register("Hardware Error Status", 70, 1, writable=False)
VELOCITY_I_GAIN = Register("Velocity I Gain", 76, 2)
VELOCITY_P_GAIN = Register("Velocity P Gain", 78, 2)
POSITION_D_GAIN = Register("Position D Gain", 80, 2)
POSITION_I_GAIN = Register("Position I Gain", 82, 2)
POSITION_P_GAIN = Register("Position P Gain", 84, 2)
BUS_WATCHDOG = Register("Bus Watchdog", 98, 1)
GOAL_PWM = Register("Goal PWM", 100, 2, signed=True)
GOAL_CURRENT = Register("Goal Current", 102, 2, signed=True)
GOAL_VELOCITY = Register("Goal Velocity", 104, 4, signed=True)
PROFILE_ACCELERATION = Register("Profile Acceleration", 108, 4)
PROFILE_VELOCITY = Register("Profile Velocity", 112, 4)
GOAL_POSITION = Register("Goal Position", 116, 4, signed=True)
REALTIME_TICK = Register("Realtime Tick", 120, 2, writable=False)
MOVING = Register("Moving", 122, 1, writable=False)
MOVING_STATUS = Register("Moving Status", 123, 1, writable=False)
PRESENT_PWM = Register("Present PWM", 124, 2, signed=True, writable=False)
PRESENT_CURRENT = Register("Present Current", 126, 2, signed=True, writable=False)
PRESENT_VELOCITY = Register("Present Velocity", 128, 4, signed=True, writable=False)
PRESENT_POSITION = Register("Present Position", 132, 4, signed=True, writable=False)
VELOCITY_TRAJECTORY = Register("Velocity Trajectory", 136, 4, signed=True, writable=False)
POSITION_TRAJECTORY = Register("Position Trajectory", 140, 4, signed=True, writable=False)
PRESENT_INPUT_VOLTAGE = Register("Present Input Voltage", 144, 2, writable=False)
PRESENT_TEMPERATURE = Register("Present Temperature", 146, 1, writable=False)

REGISTERS: tuple[Register, ...] = tuple(v for v in list(globals().values()) if isinstance(v, Register))
CONTROL_TABLE_SIZE = 147  # through Present Temperature; indirect addressing is not modelled

# The block the driver reads every cycle, 120..135: Realtime Tick (tells a fresh reply from a
# late one), Moving, Moving Status, Present PWM, Present Current, Present Velocity, Present Position.
STATE_BLOCK_ADDRESS = REALTIME_TICK.address
STATE_BLOCK_LENGTH = PRESENT_POSITION.address + PRESENT_POSITION.size - REALTIME_TICK.address
TICK_MODULUS = 32768  # Realtime Tick counts milliseconds and wraps to 0 after 32767


class OperatingMode(IntEnum):
    CURRENT = 0
    VELOCITY = 1
    POSITION = 3
    EXTENDED_POSITION = 4
    CURRENT_BASED_POSITION = 5
    PWM = 16


# What the limit registers can hold on an X-series servo (e-manual, "Range"): a value outside,
# or a minimum above the maximum, was not read from a servo's EEPROM (a damaged reply, another
# program on the bus) and would clamp every goal to nonsense.
POSITION_LIMIT_TICKS = (0, 4095)  # Min/Max Position Limit, position ticks (one revolution)
VELOCITY_LIMIT_UNITS = (1, 1023)  # Velocity Limit, 0.229 rpm units (0 would hold the joint still)
# Profile Velocity, 0.229 rpm units: the top speed of a position mode's trajectory. 0 means no cap at
# all (as fast as the servo can), so the driver never writes it.
PROFILE_VELOCITY_UNITS = (1, 32767)
# Drive Mode bit 2: set, Profile Velocity is a move's duration in ms (time-based profile), not a speed.
DRIVE_MODE_TIME_BASED_PROFILE = 0x04

# Baud Rate register value -> bits per second.
BAUD_RATES = {0: 9600, 1: 57600, 2: 115200, 3: 1_000_000, 4: 2_000_000, 5: 3_000_000, 6: 4_000_000, 7: 4_500_000}

MODEL_NAMES = {1020: "XM430-W350", 1030: "XM430-W210"}

# Factory values the emulator starts from (XM430-W350 e-manual, "Initial Value").
FACTORY_VALUES = {
    MODEL_NUMBER: 1020,
    FIRMWARE_VERSION: 45,
    ID: 1,
    BAUD_RATE: 1,
    RETURN_DELAY_TIME: 250,
    OPERATING_MODE: OperatingMode.POSITION,
    PROTOCOL_TYPE: 2,
    MOVING_THRESHOLD: 10,
    TEMPERATURE_LIMIT: 80,
    MAX_VOLTAGE_LIMIT: 160,
    MIN_VOLTAGE_LIMIT: 95,
    PWM_LIMIT: 885,
    CURRENT_LIMIT: 1193,
    ACCELERATION_LIMIT: 32767,
    VELOCITY_LIMIT: 350,
    MAX_POSITION_LIMIT: 4095,
    MIN_POSITION_LIMIT: 0,
    SHUTDOWN: 52,
    STATUS_RETURN_LEVEL: 2,
    VELOCITY_I_GAIN: 1920,
    VELOCITY_P_GAIN: 100,
    POSITION_P_GAIN: 800,
    GOAL_POSITION: 2048,
    PRESENT_POSITION: 2048,
    PRESENT_INPUT_VOLTAGE: 120,
    PRESENT_TEMPERATURE: 30,
}

TICKS_PER_REVOLUTION = 4096
CENTER_TICK = 2048
RAD_PER_TICK = 2.0 * math.pi / TICKS_PER_REVOLUTION
RPM_PER_VELOCITY_UNIT = 0.229
RAD_S_PER_VELOCITY_UNIT = RPM_PER_VELOCITY_UNIT * 2.0 * math.pi / 60.0
AMPERE_PER_CURRENT_UNIT = 0.00269
# XM430-W350 at 12 V: 4.1 N m stall torque at 2.3 A. Torque is only roughly linear in current
# (the e-manual's performance graph), so the driver's effort from it is an estimate.
TORQUE_CONSTANT_NM_PER_A = 4.1 / 2.3


def ticks_to_rad(ticks):
    """Position ticks -> rad (tick 2048 is 0 rad). Works on ints and arrays."""
    return (np.asarray(ticks, dtype=np.float64) - CENTER_TICK) * RAD_PER_TICK


def rad_to_ticks(rad):
    """rad -> nearest position tick (int, or an int64 array)."""
    ticks = np.rint(np.asarray(rad, dtype=np.float64) / RAD_PER_TICK + CENTER_TICK).astype(np.int64)
    return int(ticks) if ticks.ndim == 0 else ticks


def velocity_units_to_rad_s(units):
    """Velocity register units (0.229 rpm) -> rad/s."""
    return np.asarray(units, dtype=np.float64) * RAD_S_PER_VELOCITY_UNIT


def current_units_to_a(units):
    """Present Current register units (2.69 mA) -> A."""
    return np.asarray(units, dtype=np.float64) * AMPERE_PER_CURRENT_UNIT


def a_to_current_units(ampere):
    """A -> nearest current register unit (int, or an int64 array)."""
    units = np.rint(np.asarray(ampere, dtype=np.float64) / AMPERE_PER_CURRENT_UNIT).astype(np.int64)
    return int(units) if units.ndim == 0 else units


def rad_s_to_velocity_units(rad_s):
    """rad/s -> nearest velocity register unit (int, or an int64 array)."""
    units = np.rint(np.asarray(rad_s, dtype=np.float64) / RAD_S_PER_VELOCITY_UNIT).astype(np.int64)
    return int(units) if units.ndim == 0 else units


def profile_velocity_units(velocity_max, velocity_limit_units):
    """Profile Velocity register values that cap a position-mode move at ``velocity_max``.

    Rounded down (a cap never above ``velocity_max``) and clamped to each servo's own Velocity
    Limit; never 0, which would lift the cap.

    Args:
      velocity_max: rad/s, one per servo (or one for all).
      velocity_limit_units: each servo's Velocity Limit register (0.229 rpm units).

    Returns:
      int64 array of register values, one per servo.

    Raises:
      ValueError: a ``velocity_max`` not finite or below one unit (0.024 rad/s), naming it.
    """
    speed = np.asarray(velocity_max, dtype=np.float64)
    limit = np.asarray(velocity_limit_units, dtype=np.int64)
    speed, limit = np.broadcast_arrays(speed, limit)
    # A speed that is a whole number of units in decimal may fall a hair short of it in binary.
    with np.errstate(over="ignore", invalid="ignore"):  # inf and nan are refused below, naming them
        units = np.floor(speed / RAD_S_PER_VELOCITY_UNIT * (1.0 + 1e-12))
    bad = ~np.isfinite(speed) | (units < PROFILE_VELOCITY_UNITS[0])
    if np.any(bad):
        raise ValueError(
            f"velocity_max {speed[bad].tolist()} rad/s cannot cap a position move: a servo's Profile Velocity "
            f"needs at least {RAD_S_PER_VELOCITY_UNIT:.4g} rad/s (one unit; 0 would mean no cap)"
        )
    return np.minimum(np.minimum(units, PROFILE_VELOCITY_UNITS[1]).astype(np.int64), np.maximum(limit, 1))
