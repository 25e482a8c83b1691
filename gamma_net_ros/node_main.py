"""The one ``main`` every node shares: start, spin, stop cleanly, refuse bad settings in one line.

    def main(args=None) -> int:
        return run_node(Predictor, args)

Refusals. A node whose settings cannot run exits with code 1 and a single fatal log line
naming the bad value, never a traceback: a missing or broken ``--params-file`` (checked
before rclpy reads it), a parameter of the wrong type or out of range, a key in the node's
own YAML section or ``-p`` that it does not declare (a typo such as ``learner.step_sze``),
a checkpoint of another configuration, a missing or corrupt file. A node refused after it was
built (an unknown key is found only then) is told so through its ``refused()`` method, if it
has one, before it is destroyed: it must then write nothing (no checkpoint).

Shutdown. SIGINT and SIGTERM (Ctrl-C, ``ros2 launch``) only set a flag; the spin loop sees
it within a tenth of a second and stops between callbacks. Only then is the node destroyed
(its ``destroy_node`` does its cleanup: torque off, a last checkpoint) and the context shut
down. rclpy's own signal handler would shut the context down under a running executor
(an exception from ``take_message`` or the wait set, and exit code 1); here nothing of ROS is
torn down while anything still uses it, and the exit code after a signal is always 0. The
process then ends at once (see :func:`run_node`), and further signals are ignored meanwhile.
"""

from __future__ import annotations

import ctypes
import difflib
import os
import pathlib
import re
import signal
import sys
import tempfile
import threading
from collections.abc import Callable, Sequence

import rclpy
import rclpy.logging
from rclpy.exceptions import ParameterException
from rclpy.executors import SingleThreadedExecutor
from rclpy.impl.implementation_singleton import rclpy_implementation
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from gamma_net_core.checkpoint import CheckpointError
from gamma_net_ros.params import read_params_file, ros_arguments, unknown_parameters

#: Errors that mean "these settings cannot run", reported as such: bad values, files that are
#: missing, unreadable or corrupt, an optional package the settings need but that is missing.
REFUSED = (ValueError, OSError, ImportError, CheckpointError, ParameterException)
#: What stops a node: Ctrl-C, and what `ros2 launch` sends after it.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
#: Seconds the spin loop waits for work before it looks at the stop flag again.
POLL_S = 0.1


class Refused(Exception):
    """A reason not to start, already worded for the user."""


def _node_name(make: Callable) -> str:
    module = getattr(make, "__module__", "") or ""
    if module and module != "__main__":
        return module.rsplit(".", 1)[-1]
    return pathlib.Path(sys.argv[0]).stem or "node"


def _check_params_files(argv: Sequence[str]) -> None:
    """A missing or unreadable parameter file, refused before rcl reports it in its own words."""
    files, _ = ros_arguments(argv)
    for path in files:
        read_params_file(path)


def _rcl_message(exc: Exception) -> str:
    # rcl appends source locations (", at /project/src/parser.c:271"): not for users.
    return re.sub(r",? at \S+:\d+", "", str(exc)).strip()


def run_node(
    make: Callable[[], Node],
    args: Sequence[str] | None = None,
    *,
    until: Callable[[Node], int | None] | None = None,
    exit_process: bool = True,
) -> int:
    """Create the node, spin it until a signal (or until ``until(node)`` gives an exit code), clean up.

    Args:
      make: builds the node (its class); it raises one of :data:`REFUSED` for bad settings.
      args: the process's arguments (``sys.argv`` when None), ROS arguments included.
      until: called after every callback; returns the exit code once the node is done, else None.
      exit_process: end the process here, once the node is destroyed and ROS is shut down (see
        below); False returns the code instead and restores the signal handlers.

    Returns:
      The exit code: 0 after a signal or a normal end, ``until``'s code, or 1 if the node
      refused to start. With ``exit_process`` (a node's ``main``) the process exits with it
      instead, skipping Python's finalization: its last garbage collection walks every object
      torch, numpy and rclpy made, seconds on a busy machine, which would put the exit past the
      5 s `ros2 launch` waits before SIGTERM. Nothing is left to finalize by then: the
      checkpoint is written, the node destroyed and rcl's logging flushed.
    """
    argv = list(sys.argv if args is None else args)
    name = _node_name(make)
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in STOP_SIGNALS}
    try:
        code = _run(make, argv, name, stop, until)
    finally:
        for sig, handler in previous.items():
            # A Ctrl-C pressed again while the process ends is ignored, not a KeyboardInterrupt.
            signal.signal(sig, signal.SIG_IGN if exit_process else handler)
    if exit_process:
        sys.stdout.flush()
        sys.stderr.flush()
        ctypes.CDLL(None).fflush(None)  # C stdio too (rcutils' console output)
        os._exit(code)
    return code


def _run(make, argv: list[str], name: str, stop: threading.Event, until) -> int:
    try:
        _check_params_files(argv)
        _init(argv)
    except ValueError as exc:
        _fatal(name, str(exc))
        return 1
    except rclpy_implementation.RCLError as exc:  # what rcl itself refuses in the arguments
        _fatal(name, _rcl_message(exc))
        return 1
    try:
        node = make()
        unknown = unknown_parameters(node, argv)
        if unknown:
            key, where = unknown[0]
            more = f" (and {len(unknown) - 1} more unknown: {[k for k, _ in unknown[1:]]})" if len(unknown) > 1 else ""
            close = difflib.get_close_matches(key, node.list_parameters([], 0).names, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            message = f"unknown parameter {key!r} for node {node.get_name()} ({where}){hint}{more}"
            if hasattr(node, "refused"):
                node.refused()  # built, but refused: its shutdown must leave its files as they were
            node.destroy_node()
            raise Refused(message)
    except (*REFUSED, Refused) as exc:
        _fatal(name, str(exc))
        rclpy.try_shutdown()  # also destroys a half-built node: its destroy_node must cope
        return 1
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    code = 0
    try:
        while not stop.is_set():
            executor.spin_once(timeout_sec=POLL_S)
            if until is not None and (done := until(node)) is not None:
                code = done
                break
    finally:
        executor.remove_node(node)
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()
    return code


def _init(argv: list[str]) -> None:
    """``rclpy.init`` without its signal handlers; rcl's own line about bad arguments is left out.

    On arguments it cannot parse rcl logs "Failed to parse global arguments" before raising;
    the fatal line that follows says which and why, so that line would only be a second one.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        failed = True
        try:
            rclpy.init(args=argv, signal_handler_options=SignalHandlerOptions.NO)
            failed = False
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            lines = captured.read().decode(errors="replace").splitlines(keepends=True)
            shown = [line for line in lines if not (failed and "Failed to parse global arguments" in line)]
            sys.stderr.write("".join(shown))
            sys.stderr.flush()


def _fatal(name: str, message: str) -> None:
    rclpy.logging.get_logger(name).fatal(f"refusing to start: {message}")
