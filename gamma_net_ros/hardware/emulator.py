"""A Dynamixel servo emulator on a pseudo-terminal, speaking Protocol 2.0, with fault injection.

It stands in for a chain of X-series servos behind a USB serial adapter, so the real
``dynamixel_sdk`` and the real driver node run in tests and in the demo. Two layers:

- :class:`ServoBank`: the servos' control tables and motion (``gamma_net_core``'s
  :class:`~gamma_net_core.signals.servo.ServoModel`); instruction packets in, status packets
  out; no I/O, so its answers can be checked byte for byte against the e-manual.
- :class:`ServoEmulator`: a pty whose slave end is the "serial port" (optionally behind a
  stable symlink, like ``/dev/serial/by-id/...``), framing, and faults: dropped replies,
  replies with a damaged byte (their CRC no longer matches), late replies, and disconnects
  (the pty is closed and the symlink removed, then a new pty appears at the same path).

Run it as its own process (recommended: the SDK and the emulator then never share a GIL)::

    python -m gamma_net_ros.hardware.emulator --link /tmp/dxl/ttyDXL --ids 1 2

and control a running one through its control socket (``--control``, default ``LINK.ctl``):
one JSON object per connection, one JSON reply line::

    {"cmd": "faults", "drop": 0.2, "corrupt": 0.1, "delay": 0.1, "delay_s": 0.08}
    {"cmd": "disconnect", "seconds": 1.5}      # seconds null: until {"cmd": "reconnect"}
    {"cmd": "reconnect"}
    {"cmd": "reboot"}                          # every servo restarts: torque off (as after a power loss)
    {"cmd": "state"}                           # positions, velocities, torque, goals, counters

:class:`EmulatorClient` wraps that protocol; in-process, :class:`ServoEmulator` has the
same methods. Emulated: PING, READ, WRITE, SYNC_READ, SYNC_WRITE, REBOOT; velocity (1) and
position (3) operating modes; torque enable; EEPROM locked while torque is on; goals outside
the limits refused with a Data Limit error. Not emulated: other instructions (answered with
an Instruction error), other modes, ID and baud changes, Return Delay Time.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import os
import pathlib
import select
import signal
import socket
import sys
import threading
import time
import tty
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace

import numpy as np

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
    next_frame,
    parse_sync_read,
    parse_sync_write,
)

_MAX_STEP = 0.005  # s; the servo model is integrated in steps no longer than this
_REGISTER_AT = {}  # byte address -> the register holding it
for _reg in ct.REGISTERS:
    for _offset in range(_reg.size):
        _REGISTER_AT[_reg.address + _offset] = _reg


class ServoBank:
    """Emulated X-series servos: control tables, motion, and the instructions that act on them.

    Args:
      ids: servo ids (0..252), distinct.
      positions: initial joint positions, rad (default 0 = tick 2048).
      model_number, firmware_version: what PING answers (1020 is an XM430-W350).
      time_constant, position_gain: the servo model's response (see ServoLimits).
      clock: seconds, monotonic; the motion advances by its differences (inject one in tests).
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
        self.clock = clock
        self._start = self._last = clock()
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
        self._refresh(dxl_id)

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
        now = self.clock()
        dt = now - self._last
        if dt <= 0:
            return
        self._last = now
        steps = max(1, math.ceil(dt / _MAX_STEP - 1e-9))
        for dxl_id, model in self.models.items():
            for _ in range(steps):
                model.step(dt / steps)
            self._refresh(dxl_id)

    def _refresh(self, dxl_id: int) -> None:
        model = self.models[dxl_id]
        velocity_units = ct.rad_s_to_velocity_units(model.velocity[0])
        self.set(dxl_id, ct.PRESENT_POSITION, ct.rad_to_ticks(model.position[0]))
        self.set(dxl_id, ct.PRESENT_VELOCITY, velocity_units)
        self.set(dxl_id, ct.MOVING, int(abs(velocity_units) > self.get(dxl_id, ct.MOVING_THRESHOLD)))
        self.set(dxl_id, ct.REALTIME_TICK, int((self._last - self._start) * 1000) % 32768)

    def _apply_goals(self, dxl_id: int) -> None:
        model = self.models[dxl_id]
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
                "torque": bool(self.get(dxl_id, ct.TORQUE_ENABLE)),
                "operating_mode": self.get(dxl_id, ct.OPERATING_MODE),
                "goal_velocity": float(ct.velocity_units_to_rad_s(self.get(dxl_id, ct.GOAL_VELOCITY))),
                "goal_position": float(ct.ticks_to_rad(self.get(dxl_id, ct.GOAL_POSITION))),
            }
        return out


@dataclass(frozen=True)
class Faults:
    """What goes wrong with each reply, drawn independently per reply (probabilities sum to at most 1)."""

    drop: float = 0.0  # the reply is never sent
    corrupt: float = 0.0  # one byte of the reply's error/parameter field is flipped: its CRC fails
    delay: float = 0.0  # the reply (and those queued behind it) goes out delay_s late
    delay_s: float = 0.1  # s

    def __post_init__(self) -> None:
        for name in ("drop", "corrupt", "delay"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"fault probability {name}={value!r} must be within [0, 1]")
        if self.drop + self.corrupt + self.delay > 1.0 + 1e-12:
            raise ValueError(f"fault probabilities drop+corrupt+delay={self.drop + self.corrupt + self.delay} exceed 1")
        if not 0.0 <= self.delay_s <= 10.0:
            raise ValueError(f"delay_s={self.delay_s!r} must be within [0, 10] s")


class ServoEmulator:
    """A :class:`ServoBank` behind a pseudo-terminal, with fault injection.

    Args:
      bank: the servos.
      link: path of a symlink to the pty's slave end, kept stable across disconnects
        (needed for :meth:`disconnect`); without it, :attr:`port` is the slave's /dev/pts name.
      faults: the initial :class:`Faults`.
      rng: draws the faults.
      control: path of a Unix socket taking JSON commands (for an emulator in another process).
    """

    def __init__(
        self,
        bank: ServoBank,
        *,
        link: str | os.PathLike | None = None,
        faults: Faults = Faults(),
        rng: np.random.Generator,
        control: str | os.PathLike | None = None,
    ) -> None:
        self.bank = bank
        self.link = pathlib.Path(link) if link else None
        self.faults = faults
        self.rng = rng
        self.control = pathlib.Path(control) if control else None
        self.counters = collections.Counter()
        self._lock = threading.RLock()
        self._master: int | None = None
        self._slave: int | None = None
        self._slave_name = ""
        self._rx = bytearray()
        self._outgoing: collections.deque[tuple[float, bytes]] = collections.deque()
        self._reconnect_at: float | None = None
        self._calls: collections.deque = collections.deque()
        self._server: socket.socket | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._switch_interval: float | None = None

    # -- the port ----------------------------------------------------------------------------
    @property
    def port(self) -> str:
        """The path the driver opens."""
        return str(self.link) if self.link else self._slave_name

    @property
    def device(self) -> str:
        """The pty slave the link points at (a new one after each reconnect)."""
        return self._slave_name

    @property
    def connected(self) -> bool:
        return self._master is not None

    def _open_port(self) -> None:
        master, slave = os.openpty()
        tty.setraw(slave)  # no echo or line editing before the SDK configures the port
        os.set_blocking(master, False)
        self._master, self._slave, self._slave_name = master, slave, os.ttyname(slave)
        if self.link:
            self.link.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.link.with_name(self.link.name + ".tmp")
            tmp.unlink(missing_ok=True)
            os.symlink(self._slave_name, tmp)
            os.replace(tmp, self.link)
        self._reconnect_at = None
        self.counters["connects"] += 1

    def _close_port(self) -> None:
        if self.link:
            self.link.unlink(missing_ok=True)
        for fd in (self._master, self._slave):
            if fd is not None:
                os.close(fd)
        self._master = self._slave = None
        self._rx.clear()
        self._outgoing.clear()

    # -- control, the same in-process and through the socket ---------------------------------
    def set_faults(self, **changes) -> dict:
        """Change some fault settings (``drop``, ``corrupt``, ``delay``, ``delay_s``); return them all."""
        with self._lock:
            self.faults = replace(self.faults, **changes)
            return asdict(self.faults)

    def disconnect(self, seconds: float | None = None) -> None:
        """Remove the port (pty closed, symlink gone); it comes back after ``seconds`` (None: on :meth:`reconnect`)."""
        if not self.link:
            raise ValueError("disconnect needs a link path: without it the port could not come back at the same path")
        self._in_loop(self._disconnect, seconds)

    def _disconnect(self, seconds):
        if self.connected:
            self._close_port()
            self.counters["disconnects"] += 1
        self._reconnect_at = None if seconds is None else time.monotonic() + float(seconds)

    def reconnect(self) -> None:
        self._in_loop(lambda: None if self.connected else self._open_port())

    def reboot(self) -> None:
        """Every servo restarts, as after a power loss: torque off, goals reset; the port stays."""
        with self._lock:
            for dxl_id in self.bank.ids:
                self.bank.reboot(dxl_id)
            self.counters["reboots"] += 1

    def state(self) -> dict:
        """Servos, connection, faults and counters, as plain JSON-able data (servo ids as ints)."""
        with self._lock:
            return {
                "connected": self.connected,
                "port": self.port,
                "device": self.device,
                "servos": self.bank.state(),
                "faults": asdict(self.faults),
                "counters": dict(self.counters),
            }

    def _in_loop(self, fn, *args):
        """Run ``fn`` on the serving thread (it owns the file descriptors), or here if none runs."""
        if self._thread is None or threading.current_thread() is self._thread:
            with self._lock:
                return fn(*args)
        done = threading.Event()
        box = []
        self._calls.append((fn, args, done, box))
        if not done.wait(5.0):
            raise TimeoutError("the emulator thread did not answer within 5 s")
        if box and isinstance(box[0], BaseException):
            raise box[0]
        return box[0] if box else None

    def _run_calls(self) -> None:
        while self._calls:
            fn, args, done, box = self._calls.popleft()
            try:
                with self._lock:
                    box.append(fn(*args))
            except Exception as exc:  # handed to the caller
                box.append(exc)
            done.set()

    # -- serving -----------------------------------------------------------------------------
    def serve(self, stop: threading.Event | None = None) -> None:
        """Answer packets until ``stop`` is set (the calling thread owns the pty from now on)."""
        stop = stop or self._stop
        if not self.connected:
            self._open_port()
        if self.control:
            self._server = _listen(self.control)
        try:
            while not stop.is_set():
                self._run_calls()
                now = time.monotonic()
                if not self.connected and self._reconnect_at is not None and now >= self._reconnect_at:
                    with self._lock:
                        self._open_port()
                readable = [fd for fd in (self._master, self._server) if fd is not None]
                timeout = 0.005
                if self._outgoing:
                    timeout = min(timeout, max(0.0, self._outgoing[0][0] - now))
                ready, _, _ = select.select(readable, [], [], timeout)
                if self._master is not None and self._master in ready:
                    self._receive()
                if self._server is not None and self._server in ready:
                    self._serve_control()
                self._send_due()
        finally:
            if self._server is not None:
                self._server.close()
                self._server = None
                self.control.unlink(missing_ok=True)
            with self._lock:
                self._close_port()

    def _receive(self) -> None:
        try:
            data = os.read(self._master, 4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:  # EIO: nothing holds the slave end (cannot happen while we keep it open)
            return
        self._rx.extend(data)
        while (frame := next_frame(self._rx)) is not None:
            self.counters["requests"] += 1
            try:
                packet = InstructionPacket.decode(frame)
            except PacketError:
                self.counters["bad_requests"] += 1
                if frame[4] in self.bank.tables:  # a servo answers a damaged packet with a CRC error
                    self._queue(StatusPacket(frame[4], ErrorNumber.CRC).encode())
                continue
            with self._lock:
                replies = self.bank.handle(packet)
            for reply in replies:
                self._queue(reply.encode())

    def _queue(self, frame: bytes) -> None:
        faults = self.faults
        draw = self.rng.random()
        not_before = time.monotonic()
        if draw < faults.drop:
            self.counters["dropped"] += 1
            return
        if draw < faults.drop + faults.corrupt:
            frame = bytearray(frame)
            # Flip bits of one byte from the error byte on (framing intact, CRC now wrong).
            index = int(self.rng.integers(8, len(frame) - 2)) if len(frame) > 10 else len(frame) - 1
            frame[index] ^= int(self.rng.integers(1, 256))
            frame = bytes(frame)
            self.counters["corrupted"] += 1
        elif draw < faults.drop + faults.corrupt + faults.delay:
            not_before += faults.delay_s
            self.counters["delayed"] += 1
        if self._outgoing:  # one wire: a late reply holds back the ones behind it
            not_before = max(not_before, self._outgoing[-1][0])
        self._outgoing.append((not_before, frame))

    def _send_due(self) -> None:
        now = time.monotonic()
        while self._outgoing and self._outgoing[0][0] <= now and self._master is not None:
            _, frame = self._outgoing.popleft()
            try:
                os.write(self._master, frame)
                self.counters["replies"] += 1
            except OSError:  # the other end is not reading and the pty buffer is full
                self.counters["overflows"] += 1

    def _serve_control(self) -> None:
        conn, _ = self._server.accept()
        with conn:
            conn.settimeout(2.0)
            try:
                request = json.loads(_read_line(conn))
                reply = {"ok": True, **self._command(request)}
            except Exception as exc:  # a bad command is answered, never fatal
                reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
            conn.sendall((json.dumps(reply) + "\n").encode())

    def _command(self, request: dict) -> dict:
        cmd = request.pop("cmd", None)
        if cmd == "faults":
            return {"faults": self.set_faults(**request)}
        if cmd == "disconnect":
            self.disconnect(request.get("seconds"))
            return {}
        if cmd == "reconnect":
            self.reconnect()
            return {}
        if cmd == "reboot":
            self.reboot()
            return {}
        if cmd == "state":
            return {"state": self.state()}
        raise ValueError(f"unknown command {cmd!r}; expected faults, disconnect, reconnect, reboot or state")

    # -- in-process use ----------------------------------------------------------------------
    def start(self) -> ServoEmulator:
        """Serve on a background thread (for tests); the port exists when this returns.

        Python threads share the GIL: with the default 5 ms switch interval the SDK's reads
        can time out waiting for this thread, so the interval is lowered to 1 ms until stop().
        """
        self._open_port()
        self._switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(min(self._switch_interval, 0.001))
        self._stop.clear()
        self._thread = threading.Thread(target=self.serve, args=(self._stop,), name="servo-emulator", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
            self._thread = None
        if self._switch_interval is not None:
            sys.setswitchinterval(self._switch_interval)
            self._switch_interval = None

    def __enter__(self) -> ServoEmulator:
        return self.start() if self._thread is None else self

    def __exit__(self, *exc) -> None:
        self.stop()


def _listen(path: pathlib.Path) -> socket.socket:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(4)
    return server


def _read_line(conn: socket.socket) -> str:
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    return data.decode()


class EmulatorClient:
    """Talks to an emulator process through its control socket; same methods as ServoEmulator."""

    def __init__(self, control: str | os.PathLike, *, timeout: float = 5.0) -> None:
        self.control = str(control)
        self.timeout = timeout

    def request(self, cmd: str, **fields) -> dict:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(self.timeout)
            conn.connect(self.control)
            conn.sendall((json.dumps({"cmd": cmd, **fields}) + "\n").encode())
            reply = json.loads(_read_line(conn))
        if not reply.pop("ok", False):
            raise RuntimeError(f"emulator refused {cmd!r}: {reply.get('error')}")
        return reply

    def set_faults(self, **changes) -> dict:
        return self.request("faults", **changes)["faults"]

    def disconnect(self, seconds: float | None = None) -> None:
        self.request("disconnect", seconds=seconds)

    def reconnect(self) -> None:
        self.request("reconnect")

    def reboot(self) -> None:
        self.request("reboot")

    def state(self) -> dict:
        state = self.request("state")["state"]
        state["servos"] = {int(k): v for k, v in state["servos"].items()}
        return state

    def wait_ready(self, timeout: float = 10.0) -> dict:
        """Poll until the emulator answers and its port exists; return its state."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                state = self.state()
                if state["connected"] and os.path.exists(state["port"]):
                    return state
            except (OSError, json.JSONDecodeError):
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"no servo emulator answered on {self.control} within {timeout} s")
            time.sleep(0.05)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--link", required=True, help="symlink path the driver opens (its `port` parameter)")
    parser.add_argument("--ids", type=int, nargs="+", default=[1, 2], help="servo ids")
    parser.add_argument("--positions", type=float, nargs="+", help="initial positions, rad (default 0)")
    parser.add_argument("--control", help="control socket path (default: LINK.ctl)")
    parser.add_argument("--model-number", type=int, default=ct.FACTORY_VALUES[ct.MODEL_NUMBER])
    parser.add_argument("--drop", type=float, default=0.0, help="probability a reply is dropped")
    parser.add_argument("--corrupt", type=float, default=0.0, help="probability a reply is damaged (bad CRC)")
    parser.add_argument("--delay", type=float, default=0.0, help="probability a reply is late")
    parser.add_argument("--delay-s", type=float, default=0.1, help="how late, s")
    parser.add_argument("--seed", type=int, default=0, help="seed of the fault draws")
    args = parser.parse_args(argv)

    bank = ServoBank(args.ids, positions=args.positions, model_number=args.model_number)
    faults = Faults(drop=args.drop, corrupt=args.corrupt, delay=args.delay, delay_s=args.delay_s)
    control = args.control or f"{args.link}.ctl"
    emulator = ServoEmulator(bank, link=args.link, faults=faults, rng=np.random.default_rng(args.seed), control=control)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    emulator._open_port()
    print(f"servo emulator: ids {args.ids} on {emulator.port} -> {emulator.device}; control {control}", flush=True)
    emulator.serve(stop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
