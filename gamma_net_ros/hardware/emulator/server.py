"""ServoEmulator: a ServoBank behind a pty, with faults, and optionally a control socket."""

from __future__ import annotations

import collections
import os
import select
import sys
import threading
import time
from dataclasses import asdict, replace

import numpy as np

from gamma_net_ros.hardware.emulator.bank import ServoBank
from gamma_net_ros.hardware.emulator.control import ControlServer
from gamma_net_ros.hardware.emulator.faults import Faults, ReplyQueue
from gamma_net_ros.hardware.emulator.pty_port import PtyPort
from gamma_net_ros.hardware.protocol import ErrorNumber, InstructionPacket, PacketError, StatusPacket, next_frame


class ServoEmulator:
    """A :class:`ServoBank` behind a pseudo-terminal, with fault injection.

    Args:
      bank: the servos.
      link: path of a symlink to the pty's slave end, kept stable across disconnects
        (needed for :meth:`disconnect`); without it, :attr:`port` is the slave's /dev/pts name.
        An existing path that is not an emulator's is refused (FileExistsError), never replaced.
      faults: the initial :class:`Faults` (default: none).
      rng: draws the faults.
      control: a folder to make (mode 0700) for a Unix socket taking JSON commands (for an
        emulator in another process); refused like ``link`` if it exists.
    """

    def __init__(
        self,
        bank: ServoBank,
        *,
        link: str | os.PathLike | None = None,
        faults: Faults | None = None,
        rng: np.random.Generator,
        control: str | os.PathLike | None = None,
    ) -> None:
        self.bank = bank
        self.faults = faults or Faults()
        self.rng = rng
        self.counters = collections.Counter()
        self._port = PtyPort(link)
        self._replies = ReplyQueue(rng, self.counters)
        self._control = ControlServer(control, self._command) if control else None
        self._lock = threading.RLock()
        self._rx = bytearray()
        self._reconnect_at: float | None = None
        self._calls: collections.deque = collections.deque()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._serving: threading.Thread | None = None
        self._switch_interval: float | None = None

    # -- the port ----------------------------------------------------------------------------
    @property
    def link(self):
        return self._port.link

    @property
    def port(self) -> str:
        """The path the driver opens."""
        return self._port.path

    @property
    def device(self) -> str:
        """The pty slave the link points at (a new one after each reconnect)."""
        return self._port.slave_name

    @property
    def connected(self) -> bool:
        return self._port.is_open

    def open_port(self) -> None:
        """Make the pty (and the link). Raises FileExistsError if the link path is not ours."""
        self._port.open()
        self._reconnect_at = None
        self.counters["connects"] += 1

    def _close_port(self) -> None:
        self._port.close()
        self._rx.clear()
        self._replies.clear()

    # -- control, the same in-process and through the socket ---------------------------------
    def set_faults(self, **changes) -> dict:
        """Change some :class:`Faults` settings (any of its fields); return them all."""
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
        self._in_loop(lambda: None if self.connected else self.open_port())

    def reboot(self) -> None:
        """Every servo restarts, as after a power loss: torque off, goals reset; the port stays."""
        with self._lock:
            for dxl_id in self.bank.ids:
                self.bank.reboot(dxl_id)
            self.counters["reboots"] += 1

    def set_obstacle(self, dxl_id: int, low: float | None = None, high: float | None = None, **settings) -> dict | None:
        """Put an obstacle in a servo's range, or remove it (see :meth:`ServoBank.set_obstacle`)."""
        with self._lock:
            return self.bank.set_obstacle(dxl_id, low, high, **settings)

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

    def history(self) -> list[tuple[float, dict[int, float]]]:
        """Where the servos were when (see :attr:`ServoBank.history`), oldest first."""
        with self._lock:
            return list(self.bank.history)

    def _command(self, request: dict) -> dict:
        """One control-socket request, on the control thread."""
        request = dict(request)
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
        if cmd == "obstacle":
            dxl_id = request.pop("id", None)
            if not isinstance(dxl_id, int):
                raise ValueError(f"obstacle needs a servo id, an integer; got {dxl_id!r}")
            unknown = set(request) - {"low", "high", "stall_current", "rise_s"}
            if unknown:
                raise ValueError(f"obstacle: unknown keys {sorted(unknown)}; expected low, high, stall_current, rise_s")
            return {"obstacle": self.set_obstacle(dxl_id, **request)}
        if cmd == "state":
            return {"state": self.state()}
        if cmd == "history":
            return {"history": self.history()}
        raise ValueError(
            f"unknown command {cmd!r}; expected faults, disconnect, reconnect, reboot, obstacle, state or history"
        )

    def _in_loop(self, fn, *args):
        """Run ``fn`` on the serving thread (it owns the file descriptors), or here if none runs."""
        serving = self._serving
        if serving is None or threading.current_thread() is serving:
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
    def serve(
        self, stop: threading.Event | None = None, wind_down: threading.Event | None = None, grace_s: float = 3.0
    ) -> None:
        """Answer packets until ``stop`` is set (the calling thread owns the pty from now on).

        Once ``wind_down`` is set the servos go on answering until the host has closed the port
        (or ``grace_s`` has passed): a driver stopped at the same moment (one Ctrl-C reaches a
        whole launch) still reads, and turns the torque off, instead of finding its port gone.

        Raises:
          FileExistsError: the link or control path exists and is not an emulator's.
        """
        stop = stop or self._stop
        if not self.connected:
            self.open_port()
        self._serving = threading.current_thread()
        until = None  # while winding down: the latest end
        try:
            if self._control is not None and not self._control.running:
                self._control.start()
            while not stop.is_set():
                self._run_calls()
                now = time.monotonic()
                if wind_down is not None and wind_down.is_set():
                    if until is None:
                        until = now + grace_s
                        self._port.let_go()
                    if not self.connected or self._port.hung_up or now >= until:
                        break
                elif not self.connected and self._reconnect_at is not None and now >= self._reconnect_at:
                    try:
                        with self._lock:
                            self.open_port()
                    except FileExistsError:  # something else took the path meanwhile: wait for it to go
                        self.counters["link_blocked"] += 1
                        self._reconnect_at = now + 0.5
                timeout = 0.005
                due = self._replies.next_due()
                if due is not None:
                    timeout = min(timeout, max(0.0, due - now))
                master = self._port.master
                ready, _, _ = select.select([master] if master is not None else [], [], [], timeout)
                if master is not None and master in ready:
                    self._receive()
                self._send_due()
        finally:
            self._serving = None
            if self._control is not None:
                self._control.stop()
            with self._lock:
                self._close_port()

    def _receive(self) -> None:
        self._rx.extend(self._port.read())
        while (frame := next_frame(self._rx)) is not None:
            self.counters["requests"] += 1
            try:
                packet = InstructionPacket.decode(frame)
            except PacketError:
                self.counters["bad_requests"] += 1
                if frame[4] in self.bank.tables:  # a servo answers a damaged packet with a CRC error
                    self._replies.put(StatusPacket(frame[4], ErrorNumber.CRC).encode(), self.faults)
                continue
            with self._lock:
                replies = self.bank.handle(packet)
                faults = self.faults
            for reply in replies:
                self._replies.put(reply.encode(), faults)

    def _send_due(self) -> None:
        while self._port.is_open and (frame := self._replies.pop_due()) is not None:
            if self._port.write(frame):
                self.counters["replies"] += 1
            else:  # the other end is not reading and the pty buffer is full
                self.counters["overflows"] += 1

    # -- in-process use ----------------------------------------------------------------------
    def start(self) -> ServoEmulator:
        """Serve on a background thread (for tests); the port exists when this returns.

        Python threads share the GIL: with the default 5 ms switch interval the SDK's reads
        can time out waiting for this thread, so the interval is lowered to 1 ms until stop().
        """
        self.open_port()
        if self._control is not None:
            try:  # here, so that a taken path is refused to the caller, not inside the thread
                self._control.start()
            except BaseException:
                self._close_port()
                raise
        self._switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(min(self._switch_interval, 0.001))
        self._stop.clear()
        self._thread = threading.Thread(target=self.serve, args=(self._stop,), name="servo-emulator", daemon=True)
        self._serving = self._thread
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
