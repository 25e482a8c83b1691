"""Starting nodes as subprocesses, the way `ros2 run` / `ros2 launch` would.

ROS 2's launch tool is not installable everywhere this package runs (it is not on
PyPI), so the demo, the benchmarks and the tests start the very same node entry
points with the very same YAML files through this module. It imports no rclpy.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from typing import IO, Any

from gamma_net_ros.entry import NODES, start_blocked, starts_here

_EXECUTABLES = {module: name for name, module in NODES.items()}


def _param_literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_param_literal(v) for v in value) + "]"
    if isinstance(value, str):
        return value if value else "''"
    return repr(value)


def node_command(
    module: str,
    *,
    params_file: str | os.PathLike | None = None,
    params: dict[str, Any] | None = None,
    remaps: dict[str, str] | None = None,
    name: str | None = None,
    node: str | None = None,
) -> list[str]:
    """The command line that runs node module ``module`` with ROS arguments.

    A node's module (``gamma_net_ros.predictor``) runs through :mod:`gamma_net_ros.entry`
    (``python -m gamma_net_ros.entry predictor``), as its installed executable does.

    Args:
      params: parameter overrides. They apply to every node of the process unless ``node``
        is given; a params file's node-specific section outranks them, so to override a
        value a YAML section sets for node ``predictor``, pass ``node="predictor"``.
    """
    start = ["gamma_net_ros.entry", _EXECUTABLES[module]] if module in _EXECUTABLES else [module]
    cmd = [sys.executable, "-u", "-m", *start, "--ros-args"]
    if name:
        cmd += ["-r", f"__node:={name}"]
    if params_file:
        cmd += ["--params-file", str(params_file)]
    target = f"{node}:" if node else ""
    for key, value in (params or {}).items():
        cmd += ["-p", f"{target}{key}:={_param_literal(value)}"]
    for src, dst in (remaps or {}).items():
        cmd += ["-r", f"{src}:={dst}"]
    return cmd


@dataclass
class NodeProcess:
    """A node running in its own process; stopped with SIGINT like Ctrl-C in a terminal."""

    command: list[str]
    log_path: pathlib.Path | None = None
    env: dict[str, str] | None = None
    process: subprocess.Popen | None = field(default=None, init=False)
    _log: IO | None = field(default=None, init=False)

    def start(self, *, stdout: int | IO | None = None) -> NodeProcess:
        if stdout is None and self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log = open(self.log_path, "w")
            stdout = self._log
        env = dict(os.environ, **(self.env or {}))
        env.setdefault("PYTHONUNBUFFERED", "1")
        # A node's stop signals wait until its handlers are in place: stop() right after start() is a clean stop.
        with start_blocked() if starts_here(self.command) else contextlib.nullcontext():
            self.process = subprocess.Popen(
                self.command, stdout=stdout, stderr=subprocess.STDOUT, env=env, start_new_session=True, text=True
            )
        return self

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def wait(self, timeout: float | None = None) -> int:
        assert self.process is not None
        return self.process.wait(timeout=timeout)

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGINT (a node's clean shutdown path), then SIGTERM, then SIGKILL."""
        if self.process is None:
            return None
        for sig, wait in ((signal.SIGINT, timeout), (signal.SIGTERM, 3.0), (signal.SIGKILL, 3.0)):
            if self.process.poll() is not None:
                break
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.process.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                continue
        if self._log is not None:
            self._log.close()
            self._log = None
        return self.process.poll()

    def kill(self) -> None:
        """SIGKILL: a crash, with no chance to clean up (for crash-safety tests)."""
        if self.running:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def __enter__(self) -> NodeProcess:
        return self.start() if self.process is None else self

    def __exit__(self, *exc) -> None:
        self.stop()
