"""The servo bus: Dynamixel X-series servos on one serial port, through the real ``dynamixel_sdk``.

One :class:`DynamixelBus` per port. Each control cycle reads every servo's present velocity
and position in one group sync read (the contiguous block 128..135) and writes every goal in
one group sync write; values come and go in SI units (rad, rad/s) as numpy arrays.

What goes wrong on a real bus, and what the bus does about it:

- A reply is lost or damaged (the SDK's CRC check fails): the read is retried within the
  same call, up to ``retries`` more times, then :class:`ReadFailed` is raised; nothing read
  from a failed attempt is ever returned.
- A reply arrives after the SDK stopped waiting: the SDK matches replies to requests by servo
  id only, so a late reply would be taken as the answer to the next request. After any failed
  attempt the line counts as poisoned: before the next request the bus reads and discards
  whatever still arrives until the line has been quiet for ``quiet_s``, then flushes it. A
  reply later still carries the right registers but from an earlier moment; Protocol 2.0 has
  no sequence numbers, so the bus reads each servo's Realtime Tick (a millisecond counter)
  with the state and refuses a reply sampled well before its request (:class:`TickCheck`).
- The device disappears (USB unplugged; the emulator's disconnect): the SDK raises
  ``termios.error``, ``serial.SerialException`` or ``OSError``; the bus closes the port and
  raises :class:`PortLost`. :meth:`DynamixelBus.open` then fails until the device is back.
"""

from __future__ import annotations

import termios
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import serial
from dynamixel_sdk import COMM_RX_CORRUPT, COMM_SUCCESS, GroupSyncRead, GroupSyncWrite, PacketHandler, PortHandler
from dynamixel_sdk.port_handler import LATENCY_TIMER

from gamma_net_ros.hardware import control_table as ct

# What a vanished device raises from inside the SDK (termios.error is not an OSError).
PORT_ERRORS = (OSError, serial.SerialException, termios.error)
SDK_BAUD_RATES = (
    9600,
    19200,
    38400,
    57600,
    115200,
    230400,
    460800,
    500000,
    576000,
    921600,
    1000000,
    1152000,
    2000000,
    2500000,
    3000000,
    3500000,
    4000000,
)


class BusError(RuntimeError):
    """Base of the bus's errors."""


class PortLost(BusError):
    """The serial device is gone or cannot be opened; the port is closed."""


class ReadFailed(BusError):
    """Every attempt of one read failed (timeouts or damaged replies); the port is still open."""


class ServoError(BusError):
    """A servo did not answer a configuration request, or answered it with an error."""


@dataclass(frozen=True)
class JointSample:
    """One successful read of every servo, in the order of the bus's ids."""

    stamp: float  # s, on the bus's clock, when the request that succeeded was sent
    position: np.ndarray  # rad
    velocity: np.ndarray  # rad/s
    attempts: int  # requests it took (1: no retry)


@dataclass(frozen=True)
class ServoInfo:
    """What the servos report about themselves when the bus connects."""

    model_numbers: tuple[int, ...]
    position_min: np.ndarray  # rad; Min Position Limit
    position_max: np.ndarray  # rad; Max Position Limit
    velocity_max: np.ndarray  # rad/s; Velocity Limit


@dataclass
class BusStats:
    """Counts since the bus was made (they survive reopening)."""

    reads: int = 0  # read() calls
    attempts: int = 0  # sync read requests sent
    failed_attempts: int = 0
    failed_reads: int = 0  # read() calls that raised ReadFailed
    writes: int = 0
    failed_writes: int = 0
    drained_bytes: int = 0  # late bytes discarded from a poisoned line
    stale_replies: int = 0  # well-formed replies refused as answers to an earlier request
    opens: int = 0
    port_losses: int = 0
    last_error: str = ""


class TickCheck:
    """Tells a reply sampled for this request from a late reply to an earlier one.

    Each servo's Realtime Tick (ms, wrapping at 32768) minus the host's request time is a
    per-servo offset that stays put for fresh replies (up to the servo's processing jitter and
    clock drift), while a late reply to an earlier request shows an offset smaller by at least
    how long the failed attempt and the drain took (``timeout + quiet``). The reference offset
    follows fresh replies down at once and up by at most ``rise_ms_per_s`` (clock drift), so
    one slowly-served reply cannot raise it; it is re-seeded after ``max_age_s`` without an
    accepted reply, or by :meth:`reset` (a fresh port).

    Args:
      tolerance_ms: how much older than the reference a reply may look and still be fresh.
    """

    def __init__(self, tolerance_ms: float, *, rise_ms_per_s: float = 2.0, max_age_s: float = 2.0) -> None:
        self.tolerance_ms = tolerance_ms
        self.rise_ms_per_s = rise_ms_per_s
        self.max_age_s = max_age_s
        self.reset()

    def reset(self) -> None:
        self.reference: np.ndarray | None = None
        self.reference_time = -np.inf

    def accept(self, request_time: float, ticks) -> bool:
        """Whether replies carrying ``ticks`` (one per servo) answer a request sent at ``request_time`` (s)."""
        offset = (np.asarray(ticks, dtype=np.float64) - request_time * 1000.0) % ct.TICK_MODULUS
        age = request_time - self.reference_time
        if self.reference is None or age > self.max_age_s or offset.shape != self.reference.shape:
            self.reference, self.reference_time = offset, request_time
            return True
        half = ct.TICK_MODULUS / 2
        drift = (offset - self.reference + half) % ct.TICK_MODULUS - half  # ms, in [-16384, 16384)
        if np.any(drift < -self.tolerance_ms):
            return False
        step = np.minimum(drift, self.rise_ms_per_s * max(age, 0.0))
        self.reference = (self.reference + step) % ct.TICK_MODULUS
        self.reference_time = request_time
        return True


class DynamixelBus:
    """Servos ``ids`` on serial ``port``, Protocol 2.0.

    Args:
      port: device path, e.g. /dev/ttyUSB0 (or the emulator's link).
      ids: servo ids, in the order of the arrays this bus takes and returns.
      baud_rate: bits per second; must match the servos' Baud Rate register.
      retries: extra attempts of a failed read (or configuration write) within one call.
      timeout_ms: how long to wait for a sync read's replies; 0 keeps the SDK's own
        (about 34 ms: it assumes an FTDI latency timer of 16 ms).
      quiet_s: how long the line must stay silent before a retry, after a failed attempt.
      clock: seconds, for the stamps of samples (the driver passes its ROS clock).
    """

    def __init__(
        self,
        port: str,
        *,
        ids: Sequence[int],
        baud_rate: int = 1_000_000,
        retries: int = 2,
        timeout_ms: float = 0.0,
        quiet_s: float = 0.01,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.ids = [int(i) for i in ids]
        if not self.ids or len(set(self.ids)) != len(self.ids) or not all(0 <= i <= 252 for i in self.ids):
            raise ValueError(f"servo ids must be distinct integers in 0..252; got {list(ids)}")
        if baud_rate not in SDK_BAUD_RATES:
            raise ValueError(f"baud rate {baud_rate} is not one dynamixel_sdk can set; use one of {SDK_BAUD_RATES}")
        if retries < 0 or timeout_ms < 0 or quiet_s < 0:
            raise ValueError(f"retries ({retries}), timeout_ms ({timeout_ms}) and quiet_s ({quiet_s}) must be >= 0")
        self.port_name = str(port)
        self.baud_rate = baud_rate
        self.retries = retries
        self.timeout_ms = timeout_ms
        self.quiet_s = quiet_s
        self.clock = clock
        self.stats = BusStats()
        self.packet_handler = PacketHandler(2.0)
        self._port: PortHandler | None = None
        self._reader: GroupSyncRead | None = None
        self._poisoned = False
        # A late reply is older than its retry by at least the SDK's wait plus the drain.
        wait_ms = timeout_ms or 2.0 * LATENCY_TIMER + 2.0
        self.tick_check = TickCheck(0.45 * (wait_ms + 1000.0 * quiet_s))

    # -- the port ----------------------------------------------------------------------------
    @property
    def is_open(self) -> bool:
        return self._port is not None

    def open(self) -> None:
        """Open the port at the baud rate.

        Raises:
          PortLost: the device does not exist or cannot be configured.
        """
        self.close(torque_off=False)
        port = PortHandler(self.port_name)
        try:
            opened = port.setBaudRate(self.baud_rate)  # setBaudRate opens the port
        except PORT_ERRORS as exc:
            self.stats.last_error = f"cannot open {self.port_name}: {exc}"
            raise PortLost(self.stats.last_error) from exc
        if not opened:
            self.stats.last_error = f"cannot set {self.port_name} to {self.baud_rate} baud"
            raise PortLost(self.stats.last_error)
        self._port = port
        self._reader = GroupSyncRead(port, self.packet_handler, ct.STATE_BLOCK_ADDRESS, ct.STATE_BLOCK_LENGTH)
        for dxl_id in self.ids:
            self._reader.addParam(dxl_id)
        self._poisoned = True  # whatever sat in the buffers before we opened is not ours
        self.tick_check.reset()
        self.stats.opens += 1

    def close(self, *, torque_off: bool = True) -> None:
        """Turn torque off (best effort) and close the port; safe to call at any time."""
        if self._port is None:
            return
        if torque_off:
            try:
                self.set_torque(False)
            except BusError:
                pass  # the servos may be gone already; closing must still happen
        port, self._port, self._reader = self._port, None, None
        try:
            port.closePort()
        except PORT_ERRORS:
            pass

    def _lost(self, exc: BaseException) -> PortLost:
        self.stats.port_losses += 1
        self.stats.last_error = f"port lost: {exc}"
        self.close(torque_off=False)
        return PortLost(f"{self.port_name}: {exc}")

    def _guard(self, fn, *args):
        """Call into the SDK; a vanished device becomes PortLost with the port closed."""
        if self._port is None:
            raise PortLost(f"{self.port_name} is not open")
        try:
            return fn(*args)
        except PORT_ERRORS as exc:
            raise self._lost(exc) from exc
        except BaseException:
            # Interrupted mid-transaction (Ctrl-C lands in the SDK's busy wait): the SDK would
            # refuse every later request, torque off included, as "port in use", and part of a
            # reply may still arrive.
            if self._port is not None:
                self._port.is_using = False
            self._poisoned = True
            raise

    def _drain(self) -> None:
        """Discard late bytes until the line has been quiet for quiet_s (at most 10 quiet_s), then flush."""
        port = self._port
        start = quiet_since = time.monotonic()
        while True:
            waiting = port.getBytesAvailable()
            now = time.monotonic()
            if waiting:
                port.readPort(waiting)
                self.stats.drained_bytes += waiting
                quiet_since = now
            elif now - quiet_since >= self.quiet_s or now - start >= 10 * self.quiet_s:
                break
            else:
                time.sleep(0.0005)
        port.clearPort()
        self._poisoned = False

    # -- configuration (each request answered; retried on a lost or damaged reply) -----------
    def _txrx(self, what: str, dxl_id: int, fn, *args):
        """Run an SDK request that gets a status reply; return its value (if any)."""
        last = ""
        for _ in range(self.retries + 1):
            if self._poisoned:
                self._guard(self._drain)
            out = self._guard(fn, self._port, dxl_id, *args)
            value, result, error = (None, *out) if len(out) == 2 else out
            if result == COMM_SUCCESS:
                if error:
                    raise ServoError(f"servo {dxl_id}: {what}: {self.packet_handler.getRxPacketError(error)}")
                return value
            self._poisoned = True
            last = self.packet_handler.getTxRxResult(result)
        self.stats.last_error = f"servo {dxl_id}: {what}: {last}"
        raise ServoError(f"servo {dxl_id} on {self.port_name}: {what} got no valid reply: {last}")

    def ping(self) -> tuple[int, ...]:
        """Model number of each servo.

        Raises:
          ServoError: a servo does not answer (wrong id, baud rate or power), naming it.
        """
        return tuple(self._txrx("ping", i, self.packet_handler.ping) for i in self.ids)

    def set_torque(self, enable: bool) -> None:
        for dxl_id in self.ids:
            self._txrx(
                f"torque {'on' if enable else 'off'}",
                dxl_id,
                self.packet_handler.write1ByteTxRx,
                ct.TORQUE_ENABLE.address,
                int(enable),
            )

    def set_operating_mode(self, mode: ct.OperatingMode) -> None:
        """Set each servo's Operating Mode (in EEPROM: torque must be off); an unchanged one is not rewritten."""
        for dxl_id in self.ids:
            current = self._txrx(
                "read operating mode", dxl_id, self.packet_handler.read1ByteTxRx, ct.OPERATING_MODE.address
            )
            if current != mode:
                self._txrx(
                    f"set operating mode {mode.name}",
                    dxl_id,
                    self.packet_handler.write1ByteTxRx,
                    ct.OPERATING_MODE.address,
                    int(mode),
                )

    def read_limits(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(position_min rad, position_max rad, velocity_max rad/s) from the servos' EEPROM."""
        first = ct.VELOCITY_LIMIT.address
        length = ct.MIN_POSITION_LIMIT.address + 4 - first
        rows = []
        for dxl_id in self.ids:
            data = bytes(self._txrx("read limits", dxl_id, self.packet_handler.readTxRx, first, length))
            if len(data) != length:
                raise ServoError(f"servo {dxl_id}: limits reply of {len(data)} bytes, expected {length}")
            rows.append(
                tuple(_field(data, r, first) for r in (ct.MIN_POSITION_LIMIT, ct.MAX_POSITION_LIMIT, ct.VELOCITY_LIMIT))
            )
        low, high, velocity = np.array(rows, dtype=np.int64).T
        return ct.ticks_to_rad(low), ct.ticks_to_rad(high), ct.velocity_units_to_rad_s(velocity)

    def connect(self, mode: ct.OperatingMode) -> ServoInfo:
        """Open the port and make the servos ready to follow goals in ``mode``, holding still.

        Torque off, operating mode, goals set to hold (zero velocity, or the present
        position), torque on. Used at start and again after the port comes back.

        Raises:
          PortLost: the port cannot be opened. ServoError: a servo is missing or refuses.
        """
        self.open()
        try:
            models = self.ping()
            self.set_torque(False)
            self.set_operating_mode(mode)
            position_min, position_max, velocity_max = self.read_limits()
            if mode == ct.OperatingMode.VELOCITY:
                self.write_velocity(np.zeros(len(self.ids)))
            else:
                self.write_position(self.read().position)
            self.set_torque(True)
        except BusError:
            self.close(torque_off=False)
            raise
        return ServoInfo(models, position_min, position_max, velocity_max)

    # -- the control cycle -------------------------------------------------------------------
    def read(self) -> JointSample:
        """Present position and velocity of every servo, by one group sync read (retried).

        Raises:
          ReadFailed: every attempt failed; the port stays open. PortLost: the device vanished.
        """
        self.stats.reads += 1
        for attempt in range(1, self.retries + 2):
            if self._poisoned:
                self._guard(self._drain)
            stamp, sent = self.clock(), time.monotonic()
            self.stats.attempts += 1
            result = self._guard(self._sync_read_once)
            if result == COMM_SUCCESS:
                ticks, position, velocity = self._decode_block()
                if self.tick_check.accept(sent, ticks):
                    return JointSample(stamp, position, velocity, attempts=attempt)
                self.stats.stale_replies += 1
                error = "a late reply to an earlier request (its Realtime Tick is too old)"
            else:
                error = self.packet_handler.getTxRxResult(result)
            self.stats.failed_attempts += 1
            self.stats.last_error = f"sync read: {error}"
            self._poisoned = True
        self.stats.failed_reads += 1
        raise ReadFailed(
            f"sync read of servos {self.ids} on {self.port_name} failed "
            f"{self.retries + 1} times; last: {self.stats.last_error}"
        )

    def _sync_read_once(self) -> int:
        reader = self._reader
        if self.timeout_ms > 0:
            result = reader.txPacket()
            if result != COMM_SUCCESS:
                return result
            self._port.setPacketTimeoutMillis(self.timeout_ms)
            result = reader.rxPacket()
        else:
            result = reader.txRxPacket()
        if result == COMM_SUCCESS and not all(
            reader.isAvailable(i, ct.STATE_BLOCK_ADDRESS, ct.STATE_BLOCK_LENGTH) for i in self.ids
        ):
            return COMM_RX_CORRUPT  # a reply too short for the block
        return result

    def _decode_block(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(Realtime Tick, position rad, velocity rad/s) of every servo from the last sync read."""
        ticks, velocity_units, position_ticks = [], [], []
        for dxl_id in self.ids:
            block = bytes(self._reader.data_dict[dxl_id])
            if len(block) != ct.STATE_BLOCK_LENGTH:
                raise ReadFailed(f"servo {dxl_id}: {len(block)} bytes for a {ct.STATE_BLOCK_LENGTH}-byte block")
            ticks.append(_field(block, ct.REALTIME_TICK))
            velocity_units.append(_field(block, ct.PRESENT_VELOCITY))
            position_ticks.append(_field(block, ct.PRESENT_POSITION))
        return np.array(ticks), ct.ticks_to_rad(position_ticks), ct.velocity_units_to_rad_s(velocity_units)

    def write_velocity(self, rad_s: Sequence[float]) -> None:
        """Goal Velocity of every servo (rad/s), one group sync write (no reply to check)."""
        self._sync_write(ct.GOAL_VELOCITY, ct.rad_s_to_velocity_units(self._goals(rad_s, "velocity")))

    def write_position(self, rad: Sequence[float]) -> None:
        """Goal Position of every servo (rad), one group sync write (no reply to check)."""
        self._sync_write(ct.GOAL_POSITION, ct.rad_to_ticks(self._goals(rad, "position")))

    def _goals(self, values, what: str) -> np.ndarray:
        values = np.asarray(values, dtype=np.float64)
        if values.shape != (len(self.ids),) or not np.all(np.isfinite(values)):
            raise ValueError(f"{what} goals must be {len(self.ids)} finite numbers; got {values.tolist()}")
        return values

    def _sync_write(self, register: ct.Register, raw: np.ndarray) -> None:
        encoded = [register.encode(int(v)) for v in raw]  # range errors before anything is sent
        writer = GroupSyncWrite(self._port, self.packet_handler, register.address, register.size)
        for dxl_id, data in zip(self.ids, encoded):
            writer.addParam(dxl_id, list(data))
        self.stats.writes += 1
        result = self._guard(writer.txPacket)
        if result != COMM_SUCCESS:
            self.stats.failed_writes += 1
            self.stats.last_error = f"sync write {register.name}: {self.packet_handler.getTxRxResult(result)}"


def _field(block: bytes, register: ct.Register, start: int = ct.STATE_BLOCK_ADDRESS) -> int:
    """``register``'s value inside ``block``, a read that began at address ``start``."""
    offset = register.address - start
    return register.decode(block[offset : offset + register.size])
