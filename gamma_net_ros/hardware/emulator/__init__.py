"""A Dynamixel servo emulator on a pseudo-terminal, speaking Protocol 2.0, with fault injection.

It stands in for a chain of X-series servos behind a USB serial adapter, so the real
``dynamixel_sdk`` and the real driver node run in tests and in the demo. Its parts:

- ``bank``: :class:`ServoBank`, the servos' control tables and motion; instruction packets
  in, status packets out; no I/O, so its answers can be checked byte for byte.
- ``faults``: :class:`Faults` (dropped replies, replies with a damaged byte, late replies,
  an adapter's latency timer) and the queue that applies them on the way out.
- ``pty_port``: the pty whose slave end is the "serial port", optionally behind a stable
  symlink (like ``/dev/serial/by-id/...``); disconnects close it and remove the symlink.
- ``control``: the control socket, in a private folder, served off the serial thread.
- ``client``: :class:`EmulatorClient`, that socket's protocol for another process.
- ``server``: :class:`ServoEmulator`, the serial loop tying these together.
- ``cli``: ``servo_emulator`` / ``python -m gamma_net_ros.hardware.emulator``.

Run it as its own process (recommended: the SDK and the emulator then never share a GIL)::

    python -m gamma_net_ros.hardware.emulator --link /tmp/dxl/ttyDXL --ids 1 2

It refuses a ``--link`` or ``--control`` path that exists and is not a stopped emulator's.
Control a running one through its control folder (``--control``, default ``LINK.ctl``, mode
0700): one JSON object per connection, one JSON reply line::

    {"cmd": "faults", "drop": 0.2, "corrupt": 0.1, "delay": 0.1, "delay_s": 0.08, "latency_s": 0.016}
    {"cmd": "disconnect", "seconds": 1.5}      # seconds null: until {"cmd": "reconnect"}
    {"cmd": "reconnect"}
    {"cmd": "reboot"}                          # every servo restarts: torque off (as after a power loss)
    {"cmd": "obstacle", "id": 1, "low": 0.3, "high": 0.6}   # servo 1 stalls there; low, high null: removed
    {"cmd": "state"}                           # positions, velocities, torque, goals, counters
    {"cmd": "history"}                         # [wall time, {id: position}] at each request served

:class:`EmulatorClient` wraps that protocol; in-process, :class:`ServoEmulator` has the
same methods. Emulated: PING, READ, WRITE, SYNC_READ, SYNC_WRITE, REBOOT; velocity (1) and
position (3) operating modes; torque enable; EEPROM locked while torque is on; goals outside
the limits refused with a Data Limit error; obstacles (``--obstacle ID LOW HIGH`` or the socket):
regions a servo cannot enter, where it stalls, its current rising toward the stall current, its
contact time counted in ``state``. Not emulated: other instructions (answered with
an Instruction error), other modes, ID and baud changes, Return Delay Time.
"""

from gamma_net_ros.hardware.emulator.bank import ServoBank
from gamma_net_ros.hardware.emulator.cli import main
from gamma_net_ros.hardware.emulator.client import EmulatorClient
from gamma_net_ros.hardware.emulator.faults import Faults
from gamma_net_ros.hardware.emulator.server import ServoEmulator

__all__ = ["EmulatorClient", "Faults", "ServoBank", "ServoEmulator", "main"]
