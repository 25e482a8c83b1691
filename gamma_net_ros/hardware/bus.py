"""The servo bus: Dynamixel X-series servos on one serial port, through the real ``dynamixel_sdk``.

One :class:`DynamixelBus` per port. Each control cycle reads every servo's present current,
velocity and position in one group sync read (the contiguous block 120..135) and writes every
goal in one group sync write; values come and go in SI units (rad, rad/s, A) as numpy arrays.

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
  with the state and refuses a reply sampled before its request (:class:`TickCheck`). Every
  attempt after a failed one is sent at least ``quiet_s`` after it, so a reply to the earlier
  request looks at least that much too old; the check tolerates less than half of it. A
  sample's stamp is therefore the time of the request its data answers (to within that
  tolerance), or the sample is not returned and is counted (``stale_replies``). The check's
  reference is seeded (after opening, 2 s without an accepted reply, or three replies refused in
  a row: a seed served late makes prompt replies look late) only by a read after a drain whose
  replies are the last on the line for a while: a late reply is never a seed.
- Replies come late by design: a USB serial adapter holds received bytes for its latency
  timer (FTDI: 16 ms by default). :meth:`DynamixelBus.adapt_timeout` measures the round trip
  once connected and sets the reply timeout to cover it within the control cycle's budget,
  or raises :class:`LatencyTooHigh` naming the adapter's ``latency_timer`` and ``timeout_ms``.
- The device disappears (USB unplugged; the emulator's disconnect): the SDK raises
  ``termios.error``, ``serial.SerialException`` or ``OSError``; the bus closes the port and
  raises :class:`PortLost`. :meth:`DynamixelBus.open` then fails until the device is back.
- Another program opens the same port (a second driver): both would send requests and each
  would read the other's replies, taking them for its own (a servo's limits once read back as
  6.6e6 rad). The bus holds an exclusive lock on the port (``flock``, as pyserial's
  ``exclusive=True``), taken before the port is configured or flushed, so the holder is never
  disturbed; a second bus is refused with :class:`PortBusy`, naming the process that holds it.
- Limits read back that no servo can hold (a minimum above the maximum, outside one
  revolution, a speed beyond the register's range) are re-read, then refused
  (:class:`ServoError`): clamping goals to them would freeze or fling a joint.
- In a position mode a servo's own trajectory sets the speed of a move, as fast as it can unless
  its Profile Velocity caps it, and that register starts at 0 (no cap) after every power-up. A
  clamped goal is no speed limit: at connect the bus sets a velocity-based profile (Drive Mode)
  and writes Profile Velocity = ``velocity_max`` (rounded down to the register's units, never
  above the servo's Velocity Limit, never 0), reads it back, and refuses a servo that does not
  hold it (:class:`ServoError`, naming the values) before torque goes on.
"""

from __future__ import annotations

import errno
import os
import termios
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import serial
from dynamixel_sdk import COMM_RX_CORRUPT, COMM_SUCCESS, GroupSyncRead, GroupSyncWrite, PacketHandler, PortHandler
from dynamixel_sdk.port_handler import LATENCY_TIMER

from gamma_net_ros.hardware import control_table as ct

STALE_TOLERANCE_MIN_MS = 2.0  # Realtime Tick counts whole ms: fresh replies may look up to 1 ms old
SDK_TIMEOUT_MS = 2.0 * LATENCY_TIMER + 2.0  # what dynamixel_sdk waits for a short reply
READ_WAIT_S = 0.001  # s a read of the port waits for bytes (the SDK's own reads never wait: they spin)
LATENCY_WINDOW_S = 2.0  # s a round trip too slow for the cycle is measured again before it is refused
MIN_REPLY_MARGIN_MS = 2.0  # a reply timeout must exceed the fastest round trip by at least this
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


class LatencyTooHigh(BusError):
    """Replies take longer than a control cycle allows: a setting to change, not a fault to retry."""


class PortBusy(BusError):
    """Another process holds the port (its exclusive lock): sharing a bus would mix up the replies."""


class ExclusivePortHandler(PortHandler):
    """dynamixel_sdk's PortHandler, opening the port with pyserial's ``exclusive=True``.

    The lock is taken right after the device is opened, before its settings are changed or its
    input flushed: a refused second opener leaves the holder's line untouched. The SDK's own
    ``setupPort`` opens the port without it.

    A read waits for its bytes in the kernel for up to ``READ_WAIT_S`` instead of returning at
    once: the SDK polls the port in a loop until its reply timeout, and with reads that never
    wait that loop spins a whole core for every reply, starving the processes the reply depends
    on (the servo emulator, or the USB stack's) on a busy machine.
    """

    def setupPort(self, cflag_baud):  # the SDK calls it by this name
        if self.is_open:
            self.closePort()
        self.ser = serial.Serial(
            port=self.port_name,
            baudrate=self.baudrate,
            bytesize=serial.EIGHTBITS,
            timeout=READ_WAIT_S,
            exclusive=True,
        )
        self.is_open = True
        self.ser.reset_input_buffer()
        self.tx_time_per_byte = (1000.0 / self.baudrate) * 10.0
        return True


def lock_holders(path: str) -> list[int]:
    """Ids of the processes holding a ``flock`` on the file at ``path`` (from /proc/locks; [] if unknown)."""
    try:
        info = os.stat(path)
        lines = open("/proc/locks").read().splitlines()
    except OSError:
        return []
    # /proc/locks names the file by the filesystem it lives on (st_dev, in hex) and its inode.
    wanted = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
    holders = []
    for line in lines:
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 1234 00:1a:5 0 EOF"
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == wanted:
            holders.append(int(fields[4]))
    return holders


@dataclass(frozen=True)
class JointSample:
    """One successful read of every servo, in the order of the bus's ids."""

    stamp: float  # s, on the bus's clock, when the request that succeeded was sent
    position: np.ndarray  # rad
    velocity: np.ndarray  # rad/s
    attempts: int  # requests it took (1: no retry)
    current: np.ndarray  # A, Present Current (signed: its sign is the torque's)


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
    round_trip_ms: float = 0.0  # median sync-read round trip measured at the last adapt_timeout
    reply_timeout_ms: float = 0.0  # the sync-read reply timeout in use (0: the SDK's own)
    opens: int = 0
    port_losses: int = 0
    last_error: str = ""


class TickCheck:
    """Tells a reply sampled for this request from a late reply to an earlier one.

    Each servo's Realtime Tick (ms, wrapping at 32768) minus the host's request time is a
    per-servo offset that stays put for fresh replies (up to the servo's processing jitter and
    clock drift; never below it by more than the tick's 1 ms resolution), while a late reply to
    an earlier request shows an offset smaller by how long before this request that one went
    out (at least the bus's ``quiet_s``). The reference offset follows fresh replies down at
    once and up by at most ``rise_ms_per_s`` (clock drift), so one slowly-served reply cannot
    raise it. It is seeded after :meth:`reset` (a fresh port), ``max_age_s`` without an
    accepted reply, or ``reseed_after`` refusals in a row; the bus seeds it only from a read it
    knows answered its own request. A seed whose request was served late (the host or the servo
    busy between the stamp and the sampling) sits above every prompt reply's offset, and they
    all look late: the refusals in a row replace it within a read or two, where waiting out
    ``max_age_s`` would leave the driver a second without a valid reply (its bus lost).

    Args:
      tolerance_ms: how much older than the reference a reply may look and still be fresh.
      reseed_after: refusals in a row after which the next reply seeds the reference again.
    """

    def __init__(
        self, tolerance_ms: float, *, rise_ms_per_s: float = 2.0, max_age_s: float = 2.0, reseed_after: int = 3
    ) -> None:
        self.tolerance_ms = tolerance_ms
        self.rise_ms_per_s = rise_ms_per_s
        self.max_age_s = max_age_s
        self.reseed_after = reseed_after
        self.reset()

    def reset(self) -> None:
        self.reference: np.ndarray | None = None
        self.reference_time = -np.inf
        self.refused_in_row = 0

    def needs_seed(self, request_time: float) -> bool:
        """Whether the next reply would (re-)seed the reference instead of being checked against it."""
        return (
            self.reference is None
            or request_time - self.reference_time > self.max_age_s
            or self.refused_in_row >= self.reseed_after
        )

    def accept(self, request_time: float, ticks, *, may_seed: bool = True) -> bool:
        """Whether replies carrying ``ticks`` (one per servo) answer a request sent at ``request_time`` (s).

        With no reference (or an expired one) they seed it if ``may_seed``, and are refused if not.
        """
        offset = (np.asarray(ticks, dtype=np.float64) - request_time * 1000.0) % ct.TICK_MODULUS
        age = request_time - self.reference_time
        if self.needs_seed(request_time) or offset.shape != self.reference.shape:
            if not may_seed:
                self.refused_in_row += 1
                return False
            self.reference, self.reference_time, self.refused_in_row = offset, request_time, 0
            return True
        half = ct.TICK_MODULUS / 2
        drift = (offset - self.reference + half) % ct.TICK_MODULUS - half  # ms, in [-16384, 16384)
        if np.any(drift < -self.tolerance_ms):
            self.refused_in_row += 1
            return False
        self.refused_in_row = 0
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
        (about 34 ms: it assumes an FTDI latency timer of 16 ms). :meth:`adapt_timeout`
        lengthens it to cover the measured round trip.
      quiet_s: how long the line must stay silent before a retry, after a failed attempt;
        a reply sampled more than 0.45 ``quiet_s`` before its request is refused as stale.
      clock: seconds, for the stamps of samples (the driver passes its ROS clock).
      velocity_max: rad/s, one per servo or one for all: in a position mode, each servo's
        Profile Velocity (see :meth:`set_profile_velocity`); None: the servo's own Velocity Limit.
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
        velocity_max: float | Sequence[float] | None = None,
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
        self.velocity_max = None if velocity_max is None else self._per_servo(velocity_max)
        self.mode: ct.OperatingMode | None = None  # of the last connect
        self.velocity_limit_units: np.ndarray | None = None  # each servo's Velocity Limit, read at connect
        self.profile_velocity: np.ndarray | None = None  # rad/s; the Profile Velocity each servo holds now
        self.stats = BusStats()
        self.packet_handler = PacketHandler(2.0)
        self._port: PortHandler | None = None
        self._reader: GroupSyncRead | None = None
        self._poisoned = False
        self.reply_timeout_ms = timeout_ms
        # A retry goes out at least quiet_s after the failed attempt (the drain waits that long),
        # so a late reply to the earlier request is at least that much older than the retry.
        self.tick_check = TickCheck(max(STALE_TOLERANCE_MIN_MS, 0.45 * 1000.0 * quiet_s))

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
        port = ExclusivePortHandler(self.port_name)
        try:
            opened = port.setBaudRate(self.baud_rate)  # setBaudRate opens the port
        except PORT_ERRORS as exc:
            if getattr(exc, "errno", None) in (errno.EAGAIN, errno.EWOULDBLOCK):
                holders = lock_holders(self.port_name)
                by = f" (process {', '.join(map(str, holders))})" if holders else ""
                self.stats.last_error = (
                    f"{self.port_name} is in use by another program{by}, e.g. a second driver: one bus, one driver"
                )
                raise PortBusy(self.stats.last_error) from exc
            self.stats.last_error = f"cannot open {self.port_name}: {exc}"
            raise PortLost(self.stats.last_error) from exc
        if not opened:
            self.stats.last_error = f"cannot set {self.port_name} to {self.baud_rate} baud"
            raise PortLost(self.stats.last_error)
        self._wait_at_least_reply_timeout(port)
        self._port = port
        self._reader = GroupSyncRead(port, self.packet_handler, ct.STATE_BLOCK_ADDRESS, ct.STATE_BLOCK_LENGTH)
        for dxl_id in self.ids:
            self._reader.addParam(dxl_id)
        self._poisoned = True  # whatever sat in the buffers before we opened is not ours
        self.tick_check.reset()
        self.stats.opens += 1

    def _wait_at_least_reply_timeout(self, port: PortHandler) -> None:
        """Make the SDK's own waits (ping, configuration) at least the adapted reply timeout.

        The SDK sizes them for a 16 ms latency timer; a slower adapter needs longer.
        """
        set_packet_timeout = port.setPacketTimeout

        def patient(packet_length):
            set_packet_timeout(packet_length)
            port.packet_timeout = max(port.packet_timeout, self.reply_timeout_ms)

        port.setPacketTimeout = patient

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
        if port is None:
            return  # turning torque off found the port gone (its loss already closed it)
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

    def _velocity_based_profile(self) -> None:
        """Clear Drive Mode's time-based profile bit (EEPROM: torque off), so Profile Velocity is a speed."""
        bit = ct.DRIVE_MODE_TIME_BASED_PROFILE
        for dxl_id in self.ids:
            drive_mode = self._txrx("read drive mode", dxl_id, self.packet_handler.read1ByteTxRx, ct.DRIVE_MODE.address)
            if drive_mode & bit:
                what = "set a velocity-based profile (Drive Mode)"
                self._txrx(what, dxl_id, self.packet_handler.write1ByteTxRx, ct.DRIVE_MODE.address, drive_mode & ~bit)
                again = self._txrx(what, dxl_id, self.packet_handler.read1ByteTxRx, ct.DRIVE_MODE.address)
                if again & bit:
                    raise ServoError(
                        f"servo {dxl_id} on {self.port_name}: Drive Mode {again} keeps a time-based profile after "
                        f"writing {drive_mode & ~bit}: Profile Velocity would not be a speed cap"
                    )

    def set_profile_velocity(self, velocity_max) -> np.ndarray:
        """Cap each servo's position-mode speed: Profile Velocity from ``velocity_max`` (rad/s), read back.

        Rounded down to the register's units and clamped to the servo's Velocity Limit (read at
        connect); never 0, which would lift the cap. Profile Velocity is in RAM: it may change with
        torque on, and it is lost when a servo reboots (the next :meth:`connect` writes it again).

        Returns:
          The cap each servo now holds, rad/s.

        Raises:
          ValueError: a ``velocity_max`` not finite or below one unit (0.024 rad/s), naming it;
            nothing written. ServoError: a servo refuses, or reads back another value, naming it.
            PortLost: the device vanished.
        """
        if self.velocity_limit_units is None:
            raise ServoError(f"servos on {self.port_name}: Velocity Limit not read yet (connect first)")
        wanted = ct.profile_velocity_units(velocity_max, self.velocity_limit_units)
        self.profile_velocity = None  # unknown until every servo is checked
        address = ct.PROFILE_VELOCITY.address
        for dxl_id, units in zip(self.ids, wanted.tolist()):
            what = f"set Profile Velocity {units} units ({float(ct.velocity_units_to_rad_s(units)):.4g} rad/s)"
            self._txrx(what, dxl_id, self.packet_handler.write4ByteTxRx, address, units)
            held = self._txrx("read Profile Velocity", dxl_id, self.packet_handler.read4ByteTxRx, address)
            if held != units:
                self.stats.last_error = f"servo {dxl_id}: Profile Velocity reads back {held}, not {units}"
                raise ServoError(
                    f"servo {dxl_id} on {self.port_name}: Profile Velocity reads back {held} units after writing "
                    f"{units} (0 = no cap): its position moves would not be capped at velocity_max"
                )
        self.profile_velocity = ct.velocity_units_to_rad_s(wanted)
        return self.profile_velocity

    def _per_servo(self, velocity_max) -> np.ndarray:
        values = np.asarray(velocity_max, dtype=np.float64)
        if values.shape not in ((), (len(self.ids),)):
            raise ValueError(
                f"velocity_max must be one value or one per servo ({len(self.ids)}); got {values.tolist()}"
            )
        return np.broadcast_to(values, (len(self.ids),)).copy()

    def change_velocity_max(self, velocity_max) -> None:
        """Take a new ``velocity_max`` (rad/s): kept for the next connect, and in a position mode written now.

        Raises:
          ValueError: position mode and a speed no Profile Velocity can cap at; nothing changed.
          ServoError, PortLost: a servo refused it. The old caps are written back; if that fails
            too the port is closed (torque left on), so the next connect sets every cap afresh.
        """
        new = self._per_servo(velocity_max)
        if self.mode == ct.OperatingMode.VELOCITY:
            self.velocity_max = new  # Profile Velocity does not cap a velocity mode; its goals are clamped
            return
        ct.profile_velocity_units(new, ct.VELOCITY_LIMIT_UNITS[1])  # refused here, before anything is written
        if self.is_open and self.profile_velocity is not None:
            old = self.profile_velocity
            try:
                self.set_profile_velocity(new)
            except BusError:
                try:
                    self.set_profile_velocity(old)
                except BusError:
                    self.close(torque_off=False)
                raise
        self.velocity_max = new

    def read_limits(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(position_min rad, position_max rad, velocity_max rad/s) from the servos' EEPROM.

        Raises:
          ServoError: a servo does not answer, or its limits read back impossible ``retries + 1``
            times (see :func:`impossible_limits`), naming the servo and the values.
        """
        first = ct.VELOCITY_LIMIT.address
        length = ct.MIN_POSITION_LIMIT.address + 4 - first
        rows = []
        for dxl_id in self.ids:
            for _ in range(self.retries + 1):
                data = bytes(self._txrx("read limits", dxl_id, self.packet_handler.readTxRx, first, length))
                if len(data) != length:
                    raise ServoError(f"servo {dxl_id}: limits reply of {len(data)} bytes, expected {length}")
                row = tuple(
                    _field(data, r, first) for r in (ct.MIN_POSITION_LIMIT, ct.MAX_POSITION_LIMIT, ct.VELOCITY_LIMIT)
                )
                problem = impossible_limits(*row)
                if not problem:
                    break
                self._poisoned = True  # a reply of another request, maybe: drain before the next
            else:
                self.stats.last_error = f"servo {dxl_id} on {self.port_name}: limits refused: {problem}"
                raise ServoError(
                    f"{self.stats.last_error} (read {self.retries + 1} times; another program on the bus, or the "
                    "servo's EEPROM needs resetting)"
                )
            rows.append(row)
        low, high, velocity = np.array(rows, dtype=np.int64).T
        self.velocity_limit_units = velocity
        return ct.ticks_to_rad(low), ct.ticks_to_rad(high), ct.velocity_units_to_rad_s(velocity)

    def connect(self, mode: ct.OperatingMode, *, budget_ms: float | None = None) -> ServoInfo:
        """Open the port and make the servos ready to follow goals in ``mode``, holding still.

        The reply timeout adapted to the round trip (if ``budget_ms``, see :meth:`adapt_timeout`),
        torque off, operating mode, in a position mode the speed cap (:meth:`set_profile_velocity`
        of ``velocity_max``), goals set to hold (zero velocity, or the present position), torque
        on. Used at start and again after the port comes back.

        Raises:
          PortLost: the port cannot be opened. ServoError: a servo is missing or refuses.
          LatencyTooHigh: replies take longer than ``budget_ms``. ValueError: a ``velocity_max``
            no Profile Velocity can cap at (below 0.024 rad/s), naming it.
        """
        if mode != ct.OperatingMode.VELOCITY and self.velocity_max is not None:
            # refused before the port is touched: at start, not in a reconnect (change_velocity_max checks too)
            ct.profile_velocity_units(self.velocity_max, ct.VELOCITY_LIMIT_UNITS[1])
        self.mode = mode
        self.open()
        try:
            if budget_ms is not None:
                try:
                    self.adapt_timeout(budget_ms)
                except ReadFailed:
                    pass  # a servo is missing or silent: the ping names it
            models = self.ping()
            self.set_torque(False)
            self.set_operating_mode(mode)
            position_min, position_max, velocity_max = self.read_limits()
            self.profile_velocity = None
            if mode == ct.OperatingMode.VELOCITY:
                self.write_velocity(np.zeros(len(self.ids)))
            else:
                self._velocity_based_profile()
                self.set_profile_velocity(velocity_max if self.velocity_max is None else self.velocity_max)
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
            seeding = self.tick_check.needs_seed(time.monotonic())
            if self._poisoned or seeding:
                self._guard(self._drain)
            stamp, sent = self.clock(), time.monotonic()
            self.stats.attempts += 1
            result = self._guard(self._sync_read_once, self._seed_timeout_ms() if seeding else None)
            if result == COMM_SUCCESS:
                ticks, position, velocity, current = self._decode_block()
                # A seed is checked against nothing: it must be the last reply on the line, or what
                # was read may answer an earlier request whose own reply came late.
                if seeding and not self._guard(self._stays_quiet, self._seed_timeout_ms() / 1000.0):
                    error = "replies kept coming after the read that was to seed the Realtime Tick check"
                    self.stats.stale_replies += 1
                elif self.tick_check.accept(sent, ticks, may_seed=seeding):
                    return JointSample(stamp, position, velocity, attempts=attempt, current=current)
                else:
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

    def _seed_timeout_ms(self) -> float:
        """How long a seeding read waits for its replies, and then for silence."""
        return max(4.0 * (self.reply_timeout_ms or SDK_TIMEOUT_MS), 100.0)

    def _stays_quiet(self, seconds: float) -> bool:
        """Whether nothing arrives for ``seconds``; if something does, the line is poisoned."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self._port.getBytesAvailable():
                self._poisoned = True
                return False
            time.sleep(0.0005)
        return True

    def adapt_timeout(self, budget_ms: float, *, samples: int = 5) -> float:
        """Measure the sync-read round trip and set the reply timeout to cover it within ``budget_ms``.

        The timeout becomes the longer of the requested one (``timeout_ms``, or the SDK's own)
        and the median round trip plus a margin (a quarter of it, at least 5 ms), capped at
        ``budget_ms`` (a control cycle). Refused only if even the fastest trip cannot fit, and
        only once that has lasted ``LATENCY_WINDOW_S``: a host busy starting other processes (a
        launch) delays some replies for a moment; an adapter's latency timer delays every one.

        Returns:
          The median round trip, ms.

        Raises:
          LatencyTooHigh: the fastest round trip (plus 2 ms) exceeds ``budget_ms``. PortLost,
            ReadFailed: no read succeeded.
        """
        # Long enough to see a round trip too slow for the budget, short enough not to stall a
        # node whose servos are silent (then the ping that follows names the cause).
        limit_ms = max(4.0 * budget_ms, 100.0)
        trips, failures, last = [], 0, ""
        until = time.monotonic() + LATENCY_WINDOW_S
        while failures <= self.retries:
            if len(trips) >= samples:
                if min(trips) + MIN_REPLY_MARGIN_MS <= budget_ms or time.monotonic() >= until:
                    break
                time.sleep(0.01)  # spread the next samples out: a burst of load passes
            if self._poisoned:
                self._guard(self._drain)
            start = time.monotonic()
            result = self._guard(self._sync_read_once, limit_ms)
            if result == COMM_SUCCESS:
                trips.append(1000.0 * (time.monotonic() - start))
            else:
                failures += 1
                self._poisoned = True
                last = self.packet_handler.getTxRxResult(result)
        if not trips:
            where = f"sync read of servos {self.ids} on {self.port_name}"
            raise ReadFailed(f"{where}: no reply within {limit_ms:g} ms: {last}")
        # The fastest trip is the adapter's and servos' own delay; slower ones add host scheduling.
        fastest, round_trip = min(trips), float(np.median(trips[-samples:]))
        if fastest + MIN_REPLY_MARGIN_MS > budget_ms:
            raise LatencyTooHigh(
                f"servo replies on {self.port_name} take {fastest:.1f} ms (round trip), too long for a "
                f"{budget_ms:.1f} ms cycle: lower the USB adapter's latency_timer (FTDI default 16 ms; "
                f"/sys/bus/usb-serial/devices/<tty>/latency_timer) or the rate; timeout_ms cannot cover it"
            )
        needed = round_trip + max(5.0, 0.25 * round_trip)
        self.reply_timeout_ms = min(max(self.timeout_ms or SDK_TIMEOUT_MS, needed), budget_ms)
        self.stats.round_trip_ms, self.stats.reply_timeout_ms = round_trip, self.reply_timeout_ms
        return round_trip

    def _sync_read_once(self, timeout_ms: float | None = None) -> int:
        reader = self._reader
        timeout_ms = self.reply_timeout_ms if timeout_ms is None else timeout_ms
        if timeout_ms > 0:
            result = reader.txPacket()
            if result != COMM_SUCCESS:
                return result
            self._port.setPacketTimeoutMillis(timeout_ms)
            result = reader.rxPacket()
        else:
            result = reader.txRxPacket()
        if result == COMM_SUCCESS and not all(
            reader.isAvailable(i, ct.STATE_BLOCK_ADDRESS, ct.STATE_BLOCK_LENGTH) for i in self.ids
        ):
            return COMM_RX_CORRUPT  # a reply too short for the block
        return result

    def _decode_block(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(Realtime Tick, position rad, velocity rad/s, current A) of every servo from the last sync read."""
        ticks, velocity_units, position_ticks, current_units = [], [], [], []
        for dxl_id in self.ids:
            block = bytes(self._reader.data_dict[dxl_id])
            if len(block) != ct.STATE_BLOCK_LENGTH:
                raise ReadFailed(f"servo {dxl_id}: {len(block)} bytes for a {ct.STATE_BLOCK_LENGTH}-byte block")
            ticks.append(_field(block, ct.REALTIME_TICK))
            velocity_units.append(_field(block, ct.PRESENT_VELOCITY))
            position_ticks.append(_field(block, ct.PRESENT_POSITION))
            current_units.append(_field(block, ct.PRESENT_CURRENT))
        return (
            np.array(ticks),
            ct.ticks_to_rad(position_ticks),
            ct.velocity_units_to_rad_s(velocity_units),
            ct.current_units_to_a(current_units),
        )

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


def impossible_limits(position_min: int, position_max: int, velocity_max: int) -> str:
    """Why limit registers (position ticks, velocity units) cannot be a servo's own; "" if they can be."""
    low, high = ct.POSITION_LIMIT_TICKS
    slowest, fastest = ct.VELOCITY_LIMIT_UNITS
    as_rad = f"position {float(ct.ticks_to_rad(position_min)):.6g}..{float(ct.ticks_to_rad(position_max)):.6g} rad"
    if not (low <= position_min <= high and low <= position_max <= high):
        return f"{as_rad} (ticks {position_min}..{position_max}) is beyond one revolution (ticks {low}..{high})"
    if position_min >= position_max:
        return f"{as_rad}: the minimum is not below the maximum (ticks {position_min}..{position_max})"
    if not slowest <= velocity_max <= fastest:
        speed = float(ct.velocity_units_to_rad_s(velocity_max))
        top = float(ct.velocity_units_to_rad_s(fastest))
        return (
            f"velocity limit {speed:.6g} rad/s ({velocity_max} units) is outside {slowest}..{fastest} units "
            f"(up to {top:.3g} rad/s)"
        )
    return ""


def _field(block: bytes, register: ct.Register, start: int = ct.STATE_BLOCK_ADDRESS) -> int:
    """``register``'s value inside ``block``, a read that began at address ``start``."""
    offset = register.address - start
    return register.decode(block[offset : offset + register.size])
