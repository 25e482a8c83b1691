"""A running emulator's remote control, through its control socket (same methods as ServoEmulator)."""

from __future__ import annotations

import json
import os
import socket
import time

from gamma_net_ros.hardware.emulator.control import read_line, socket_path


class EmulatorClient:
    """Talks to an emulator process through its control folder (``--control``, default ``LINK.ctl``).

    Args:
      control: the control folder (or the socket inside it).
      timeout: seconds to wait for each reply.
    """

    def __init__(self, control: str | os.PathLike, *, timeout: float = 5.0) -> None:
        self.control = str(control)
        self.timeout = timeout

    def request(self, cmd: str, **fields) -> dict:
        """Send one command; return the reply's fields.

        Raises:
          RuntimeError: the emulator refused the command. OSError: no emulator answers.
        """
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(self.timeout)
            conn.connect(str(socket_path(self.control)))
            conn.sendall((json.dumps({"cmd": cmd, **fields}) + "\n").encode())
            reply = json.loads(read_line(conn))
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

    def set_obstacle(self, dxl_id: int, low: float | None = None, high: float | None = None, **settings) -> dict | None:
        """Put an obstacle in servo ``dxl_id``'s range (``low``..``high`` rad), or remove it (both None)."""
        return self.request("obstacle", id=dxl_id, low=low, high=high, **settings)["obstacle"]

    def state(self) -> dict:
        state = self.request("state")["state"]
        state["servos"] = {int(k): v for k, v in state["servos"].items()}
        return state

    def history(self) -> list[tuple[float, dict[int, float]]]:
        """Where the servos were when: ``(wall time s, {id: position rad})``, oldest first."""
        return [(t, {int(k): v for k, v in positions.items()}) for t, positions in self.request("history")["history"]]

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
