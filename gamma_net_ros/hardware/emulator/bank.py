"""Emulated X-series servos: control tables, motion, and the instructions that act on them.

No I/O here: instruction packets in, status packets out, so the answers can be checked byte
for byte against the e-manual. The motion is ``gamma_net_core``'s
:class:`~gamma_net_core.signals.servo.ServoModel`; the load is the simulated arm's effort model
(inertia x acceleration + viscous friction, :class:`~gamma_net_core.signals.arm.SimulatedArm`),
answered as Present Current through the servo's torque constant.

A servo may meet an obstacle (:meth:`ServoBank.set_obstacle`): a region of its range it cannot
enter, where it stops dead and, while its goal pushes into it, its Present Current rises toward
the stall current (:mod:`gamma_net_core.signals.obstacle`); contact time and contacts are counted
in :meth:`ServoBank.state`.
"""

from __future__ import annotations

import collections
import math
import time
from collections.abc import Callable, Sequence

from gamma_net_core.signals.arm import ArmConfig
from gamma_net_core.signals.obstacle import Obstacle, ObstacleContact
from gamma_net_core.signals.servo import ServoLimits, ServoModel
from gamma_net_ros.hardware import control_table as ct
from gamma_net_ros.hardware.protocol import (
    ALERT_BIT,
    BROADCAST_ID,
    MAX_ID,
    ErrorNumber,
    Instruction,
    InstructionPacket,
    PacketError,
    StatusPacket,
    parse_sync_read,
    parse_sync_write,
)

# the simulated arm's shoulder: the emulated servos move the load a recording's effort comes from
ARM_INERTIA = ArmConfig().inertia[0]
ARM_DAMPING = ArmConfig().damping[0]
_MAX_STEP = 0.005  # s; the servo model is integrated in steps no longer than this
HISTORY_LENGTH = 20_000  # motion records kept: minutes of a driver's requests
_REGISTER_AT = {}  # byte address -> the register holding it
for _reg in ct.REGISTERS:
    for _offset in range(_reg.size):
        _REGISTER_AT[_reg.address + _offset] = _reg


def _per_servo(value, n: int, name: str) -> list[float]:
    values = [float(value)] * n if isinstance(value, (int, float)) else [float(v) for v in value]
    if len(values) != n or not all(v >= 0 for v in values):
        raise ValueError(f"{name} must be one value >= 0 or one per servo ({n}); got {value!r}")
    return values


class ServoBank:
    """Emulated X-series servos: control tables, motion, and the instructions that act on them.

    Args:
      ids: servo ids (0..252), distinct.
      positions: initial joint positions, rad (default 0 = tick 2048).
      model_number, firmware_version: what PING answers (1020 is an XM430-W350).
      time_constant, position_gain: the servo model's response (see ServoLimits).
      inertia, damping: the load each servo moves (kg m^2, N m s/rad; one value, or one per
        servo), as the simulated arm's shoulder by default; with the torque constant they set
        Present Current, clipped to the Current Limit (0 with torque off).
      torque_constant: N m per A.
      clock: seconds, monotonic; the motion advances by its differences (inject one in tests).

    Attributes:
      history: ``(wall time s, {id: position rad})`` after each advance, the last
        :data:`HISTORY_LENGTH`: where the servos truly were when, to check a driver's stamps.
    """

    def __init__(
        self,
        ids: Sequence[int],
        *,
        positions: Sequence[float] | None = None,
        model_number: int = ct.FACTORY_VALUES[ct.MODEL_NUMBER],
        firmware_version: int = ct.FACTORY_VALUES[ct.FIRMWARE_VERSION],
        time_constant: float = ServoLimits.time_constant,
        position_gain: float = ServoLimits.position_gain,
        inertia: float | Sequence[float] = ARM_INERTIA,
        damping: float | Sequence[float] = ARM_DAMPING,
        torque_constant: float = ct.TORQUE_CONSTANT_NM_PER_A,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ids = [int(i) for i in ids]
        if not self.ids or len(set(self.ids)) != len(self.ids) or not all(0 <= i <= MAX_ID for i in self.ids):
            raise ValueError(f"servo ids must be distinct integers in 0..{MAX_ID}; got {list(ids)}")
        positions = [0.0] * len(self.ids) if positions is None else [float(p) for p in positions]
        if len(positions) != len(self.ids):
            raise ValueError(f"{len(positions)} initial positions for {len(self.ids)} servos")
        self.time_constant = time_constant
        self.position_gain = position_gain
        self.inertia = dict(zip(self.ids, _per_servo(inertia, len(self.ids), "inertia")))
        self.damping = dict(zip(self.ids, _per_servo(damping, len(self.ids), "damping")))
        if not torque_constant > 0:
            raise ValueError(f"torque_constant must be positive; got {torque_constant!r}")
        self.torque_constant = float(torque_constant)
        self.current = dict.fromkeys(self.ids, 0.0)  # A, of the last advance
        self.obstacles: dict[int, ObstacleContact] = {}
        self.clock = clock
        self._start = self._last = clock()
        self.history: collections.deque[tuple[float, dict[int, float]]] = collections.deque(maxlen=HISTORY_LENGTH)
        self.tables: dict[int, bytearray] = {}
        self.models: dict[int, ServoModel] = {}
        for dxl_id, position in zip(self.ids, positions):
            table = bytearray(ct.CONTROL_TABLE_SIZE)
            for register, value in ct.FACTORY_VALUES.items():
                table[register.address : register.address + register.size] = register.encode(value)
            self.tables[dxl_id] = table
            self.set(dxl_id, ct.ID, dxl_id)
            self.set(dxl_id, ct.MODEL_NUMBER, model_number)
            self.set(dxl_id, ct.FIRMWARE_VERSION, firmware_version)
            self.models[dxl_id] = ServoModel([self._limits(dxl_id)], position=[position])
            self.set(dxl_id, ct.GOAL_POSITION, ct.rad_to_ticks(self.models[dxl_id].position[0]))
            self._refresh(dxl_id)

    # -- registers ---------------------------------------------------------------------------
    def get(self, dxl_id: int, register: ct.Register) -> int:
        table = self.tables[dxl_id]
        return register.decode(table[register.address : register.address + register.size])

    def set(self, dxl_id: int, register: ct.Register, value: int) -> None:
        """Store a register value directly (no protocol checks): for setting up scenarios."""
        self.tables[dxl_id][register.address : register.address + register.size] = register.encode(value)

    def place(self, dxl_id: int, *, position: float, velocity: float = 0.0) -> None:
        """Put a servo at ``position`` (rad) moving at ``velocity`` (rad/s): for setting up scenarios."""
        model = self.models[dxl_id]
        model.position[:] = position
        model.velocity[:] = velocity
        self.current[dxl_id] = 0.0
        self._refresh(dxl_id)

    def set_obstacle(
        self,
        dxl_id: int,
        low: float | None = None,
        high: float | None = None,
        *,
        stall_current: float = 2.3,
        rise_s: float = 0.1,
    ) -> dict | None:
        """Put an obstacle in a servo's range (``low``..``high`` rad), or remove it (both None).

        Args:
          stall_current: A the Present Current rises toward while the servo pushes into it
            (XM430-W350: 2.3 A at 12 V, ROBOTIS e-manual); clipped to the Current Limit.
          rise_s: s, time constant of that rise.

        Returns:
          The obstacle's counters (see :meth:`ObstacleContact.counters`), None when removed.

        Raises:
          ValueError: an unknown id or a bad region, naming it; nothing changed.
        """
        if dxl_id not in self.tables:
            raise ValueError(f"no servo with id {dxl_id!r}; ids are {self.ids}")
        if low is None and high is None:
            self.obstacles.pop(dxl_id, None)
            return None
        if low is None or high is None:
            raise ValueError(f"an obstacle needs both low and high, rad; got low {low!r}, high {high!r}")
        if not (isinstance(stall_current, (int, float)) and stall_current > 0):
            raise ValueError(f"stall_current must be a positive number of A; got {stall_current!r}")
        obstacle = Obstacle(float(low), float(high), float(stall_current) * self.torque_constant, float(rise_s))
        self.advance()  # the time so far was spent without it
        self.obstacles[dxl_id] = ObstacleContact(obstacle)
        return self._obstacle_state(dxl_id)

    def _obstacle_state(self, dxl_id: int) -> dict | None:
        contact = self.obstacles.get(dxl_id)
        if contact is None:
            return None
        counters = contact.counters()
        peak = counters.pop("peak_torque")
        return {**counters, "peak_current": peak / self.torque_constant}

    def _limits(self, dxl_id: int) -> ServoLimits:
        return ServoLimits(
            position_min=float(ct.ticks_to_rad(self.get(dxl_id, ct.MIN_POSITION_LIMIT))),
            position_max=float(ct.ticks_to_rad(self.get(dxl_id, ct.MAX_POSITION_LIMIT))),
            velocity_max=float(ct.velocity_units_to_rad_s(self.get(dxl_id, ct.VELOCITY_LIMIT))),
            time_constant=self.time_constant,
            position_gain=self.position_gain,
        )

    # -- motion ------------------------------------------------------------------------------
    def advance(self) -> None:
        """Move every servo to the clock's present time."""
        # The stamp is read with the time the servos move to, not after moving them: a thread starved in
        # between would stamp a position late, and a speed measured from the history would read high.
        now, stamp = self.clock(), time.time()
        dt = now - self._last
        if dt <= 0:
            return
        self._last = now
        steps = max(1, math.ceil(dt / _MAX_STEP - 1e-9))
        for dxl_id, model in self.models.items():
            contact = self.obstacles.get(dxl_id)
            for _ in range(steps):
                before = float(model.velocity[0])
                position = float(model.position[0])
                model.step(dt / steps)
                if contact is not None:
                    model.position[0], model.velocity[0] = contact.step(
                        position,
                        float(model.position[0]),
                        float(model.velocity[0]),
                        push=self._push(model),
                        dt=dt / steps,
                    )
            # the acceleration of the last step (<= 5 ms): the load now, however long since the last request
            self._load(dxl_id, (float(model.velocity[0]) - before) / (dt / steps))
            self._refresh(dxl_id)
        self.history.append((stamp, {i: float(m.position[0]) for i, m in self.models.items()}))

    @staticmethod
    def _push(model: ServoModel) -> float:
        """The servo's goal velocity, rad/s (position mode: its gain times the position error): which way it pushes."""
        if model.goal_position is None:
            return float(model.goal_velocity[0])
        return float(model.position_gain[0] * (model.goal_position[0] - model.position[0]))

    def _load(self, dxl_id: int, acceleration: float) -> None:
        """Present Current of the torque that moved the load this advance (none with torque off)."""
        if not self.get(dxl_id, ct.TORQUE_ENABLE):
            self.current[dxl_id] = 0.0
            return
        contact = self.obstacles.get(dxl_id)
        if contact is not None and contact.in_contact:
            torque = contact.torque  # stalled against the stop: the load model's acceleration means nothing here
        else:
            torque = self.inertia[dxl_id] * acceleration + self.damping[dxl_id] * float(self.models[dxl_id].velocity[0])
        limit = float(ct.current_units_to_a(self.get(dxl_id, ct.CURRENT_LIMIT)))
        self.current[dxl_id] = min(max(torque / self.torque_constant, -limit), limit)

    def _refresh(self, dxl_id: int) -> None:
        model = self.models[dxl_id]
        self.set(dxl_id, ct.PRESENT_CURRENT, ct.a_to_current_units(self.current[dxl_id]))
        velocity_units = ct.rad_s_to_velocity_units(model.velocity[0])
        self.set(dxl_id, ct.PRESENT_POSITION, ct.rad_to_ticks(model.position[0]))
        self.set(dxl_id, ct.PRESENT_VELOCITY, velocity_units)
        self.set(dxl_id, ct.MOVING, int(abs(velocity_units) > self.get(dxl_id, ct.MOVING_THRESHOLD)))
        self.set(dxl_id, ct.REALTIME_TICK, int((self._last - self._start) * 1000) % 32768)

    def _apply_goals(self, dxl_id: int) -> None:
        model = self.models[dxl_id]
        # Profile Velocity caps a position move's speed (0: no cap). A time-based profile (Drive Mode
        # bit 2) makes it a duration instead, which is not emulated: such a servo moves uncapped.
        time_based = self.get(dxl_id, ct.DRIVE_MODE) & ct.DRIVE_MODE_TIME_BASED_PROFILE
        profile = 0 if time_based else self.get(dxl_id, ct.PROFILE_VELOCITY)
        model.set_profile_velocity(ct.velocity_units_to_rad_s(profile))
        if not self.get(dxl_id, ct.TORQUE_ENABLE):
            model.command_velocity([0.0])  # limp: coasts to a stop
        elif self.get(dxl_id, ct.OPERATING_MODE) == ct.OperatingMode.VELOCITY:
            model.command_velocity([ct.velocity_units_to_rad_s(self.get(dxl_id, ct.GOAL_VELOCITY))])
        else:
            model.command_position([ct.ticks_to_rad(self.get(dxl_id, ct.GOAL_POSITION))])

    # -- instructions ------------------------------------------------------------------------
    def handle(self, packet: InstructionPacket) -> list[StatusPacket]:
        """Carry out one instruction; return the status packets the servos send back, in order."""
        self.advance()
        targets = self.ids if packet.id == BROADCAST_ID else [packet.id] if packet.id in self.tables else []
        inst = packet.instruction
        if inst == Instruction.PING:
            return [self._status(i, 0, self._ping_params(i), always=True) for i in targets]
        if inst == Instruction.SYNC_READ:
            return self._sync_read(packet) if packet.id == BROADCAST_ID else []
        if inst == Instruction.SYNC_WRITE:
            if packet.id == BROADCAST_ID:
                self._sync_write(packet)
            return []
        replies = []
        for dxl_id in targets:
            if inst == Instruction.READ:
                error, data = self._read(dxl_id, packet.params)
            elif inst == Instruction.WRITE:
                error, data = self._write(dxl_id, packet.params), b""
            elif inst == Instruction.REBOOT:
                error, data = self.reboot(dxl_id), b""
            else:
                error, data = ErrorNumber.INSTRUCTION, b""
            # Broadcast READ/WRITE/REBOOT are carried out but never answered.
            if packet.id != BROADCAST_ID:
                replies.append(self._status(dxl_id, error, data, read=inst == Instruction.READ))
        return [r for r in replies if r is not None]

    def _status(self, dxl_id, error, params, *, always=False, read=False) -> StatusPacket | None:
        level = self.get(dxl_id, ct.STATUS_RETURN_LEVEL)
        if always or level >= 2 or (level == 1 and read):
            alert = ALERT_BIT if self.get(dxl_id, ct.HARDWARE_ERROR_STATUS) else 0
            return StatusPacket(dxl_id, int(error) | alert, bytes(params))
        return None

    def _ping_params(self, dxl_id: int) -> bytes:
        return ct.MODEL_NUMBER.encode(self.get(dxl_id, ct.MODEL_NUMBER)) + bytes(
            [self.get(dxl_id, ct.FIRMWARE_VERSION)]
        )

    def _read(self, dxl_id: int, params: bytes) -> tuple[int, bytes]:
        if len(params) != 4:
            return ErrorNumber.DATA_LENGTH, b""
        address, length = params[0] | params[1] << 8, params[2] | params[3] << 8
        if length == 0 or address + length > ct.CONTROL_TABLE_SIZE:
            return ErrorNumber.ACCESS, b""
        return 0, bytes(self.tables[dxl_id][address : address + length])

    def _sync_read(self, packet: InstructionPacket) -> list[StatusPacket]:
        try:
            _, _, ids = parse_sync_read(packet.params)
        except PacketError:
            return []
        replies = []
        for dxl_id in ids:
            if dxl_id in self.tables:
                error, data = self._read(dxl_id, packet.params[:4])
                replies.append(self._status(dxl_id, error, data, read=True))
        return [r for r in replies if r is not None]

    def _sync_write(self, packet: InstructionPacket) -> None:
        try:
            _, _, chunks = parse_sync_write(packet.params)
        except PacketError:
            return
        for dxl_id, data in chunks.items():
            if dxl_id in self.tables:
                self._write(dxl_id, bytes(packet.params[:2]) + data)

    def _write(self, dxl_id: int, params: bytes) -> int:
        """Validate and apply a WRITE's parameters (address + data); return the error number."""
        if len(params) < 3:
            return ErrorNumber.DATA_LENGTH
        address, data = params[0] | params[1] << 8, params[2:]
        end = address + len(data)
        registers = []
        for byte_address in range(address, end):
            register = _REGISTER_AT.get(byte_address)
            if register is None:
                return ErrorNumber.ACCESS
            if register not in registers:
                registers.append(register)
        if registers[0].address < address or registers[-1].address + registers[-1].size > end:
            return ErrorNumber.DATA_LENGTH
        torque_on = self.get(dxl_id, ct.TORQUE_ENABLE)
        values = {}
        for register in registers:
            offset = register.address - address
            value = register.decode(data[offset : offset + register.size])
            error = self._check(dxl_id, register, value, torque_on=torque_on)
            if error:
                return error
            values[register] = value
        for register, value in values.items():
            if register == ct.TORQUE_ENABLE and value and not torque_on:
                # Torque on holds the present position instead of jumping to a stale goal.
                self.set(dxl_id, ct.GOAL_POSITION, self.get(dxl_id, ct.PRESENT_POSITION))
            self.set(dxl_id, register, value)
        if any(r in (ct.MIN_POSITION_LIMIT, ct.MAX_POSITION_LIMIT, ct.VELOCITY_LIMIT) for r in values):
            old = self.models[dxl_id]
            model = ServoModel([self._limits(dxl_id)], position=old.position)
            model.velocity = old.velocity.copy()
            self.models[dxl_id] = model
        self._apply_goals(dxl_id)
        return 0

    def _check(self, dxl_id: int, register: ct.Register, value: int, *, torque_on: bool) -> int:
        if not register.writable or (register.eeprom and torque_on):
            return ErrorNumber.ACCESS
        if register in (ct.ID, ct.BAUD_RATE) and value != self.get(dxl_id, register):
            return ErrorNumber.RESULT_FAIL  # not emulated: the emulator's wiring is fixed
        if register == ct.TORQUE_ENABLE and value not in (0, 1):
            return ErrorNumber.DATA_RANGE
        if register == ct.OPERATING_MODE and value not in (ct.OperatingMode.VELOCITY, ct.OperatingMode.POSITION):
            return ErrorNumber.DATA_RANGE
        if register == ct.GOAL_VELOCITY and abs(value) > self.get(dxl_id, ct.VELOCITY_LIMIT):
            return ErrorNumber.DATA_LIMIT
        if register == ct.PROFILE_VELOCITY and value > ct.PROFILE_VELOCITY_UNITS[1]:
            return ErrorNumber.DATA_RANGE
        if register == ct.GOAL_POSITION and not (
            self.get(dxl_id, ct.MIN_POSITION_LIMIT) <= value <= self.get(dxl_id, ct.MAX_POSITION_LIMIT)
        ):
            return ErrorNumber.DATA_LIMIT
        return 0

    def reboot(self, dxl_id: int) -> int:
        """Restart one servo: torque off, goals reset to holding still; returns the status error (0)."""
        self.set(dxl_id, ct.TORQUE_ENABLE, 0)
        self.set(dxl_id, ct.HARDWARE_ERROR_STATUS, 0)
        self.set(dxl_id, ct.GOAL_VELOCITY, 0)
        self.set(dxl_id, ct.PROFILE_VELOCITY, 0)  # RAM: back to its initial value, no cap
        self.set(dxl_id, ct.GOAL_POSITION, self.get(dxl_id, ct.PRESENT_POSITION))
        self._apply_goals(dxl_id)
        return 0

    # -- inspection --------------------------------------------------------------------------
    def state(self) -> dict[int, dict]:
        """Each servo's motion (rad, rad/s), registers as the driver would read them, and goals."""
        self.advance()
        out = {}
        for dxl_id, model in self.models.items():
            out[dxl_id] = {
                "position": float(model.position[0]),
                "velocity": float(model.velocity[0]),
                "present_position": self.get(dxl_id, ct.PRESENT_POSITION),
                "present_velocity": self.get(dxl_id, ct.PRESENT_VELOCITY),
                "present_current": self.get(dxl_id, ct.PRESENT_CURRENT),
                "current": self.current[dxl_id],
                "torque": bool(self.get(dxl_id, ct.TORQUE_ENABLE)),
                "operating_mode": self.get(dxl_id, ct.OPERATING_MODE),
                "goal_velocity": float(ct.velocity_units_to_rad_s(self.get(dxl_id, ct.GOAL_VELOCITY))),
                "goal_position": float(ct.ticks_to_rad(self.get(dxl_id, ct.GOAL_POSITION))),
                "profile_velocity": float(ct.velocity_units_to_rad_s(self.get(dxl_id, ct.PROFILE_VELOCITY))),
                "obstacle": self._obstacle_state(dxl_id),
            }
        return out
