"""Where every node process starts: stop handlers first, then the heavy imports, then the node.

    ros2 run gamma_net_ros predictor ...          # lib/gamma_net_ros/predictor -> entry.predictor()
    python -m gamma_net_ros.entry predictor ...    # what processes.py runs (demo, benchmarks, tests)
    python -m gamma_net_ros.predictor ...          # covered too: see :func:`guard_module_run`

A node's module imports rclpy, numpy and numba, and some import torch: 2 to 20 s on a busy
machine. A Ctrl-C or SIGTERM (what `ros2 launch` sends) in that window used to end the process
in a ``KeyboardInterrupt`` traceback and exit code -2. This module imports only the standard
library, so the handlers are in place within milliseconds of the interpreter starting; until
the node is built (see :func:`gamma_net_ros.node_main.run_node`, which takes the signals over
then), a signal ends the process at once, code 0, with one line on stderr::

    [predictor] stopped while starting

Nothing is lost by ending there: nothing has been learned or written yet (numba writes its
cache files atomically, a half-compiled kernel is compiled again next time).

Before this module runs, the interpreter's own start-up is Python's (a signal there gives
its default behaviour: a ``KeyboardInterrupt``, code -2); ``docs/robustness.md`` measures that
window. A node started by :class:`gamma_net_ros.processes.NodeProcess` (the demo, the benchmarks,
the tests) has no such window: it starts with the stop signals blocked (:func:`start_blocked`),
and a signal sent meanwhile is delivered once the handlers below are in place; so does one
started through ``env --block-signal=INT,TERM`` (the launch files, docs/supervisors.md's units).

A node started by ``ros2 launch`` or ``ros2 run`` stops when that process ends (:func:`stop_with_parent`):
``ros2 launch`` given SIGTERM exits at once without stopping its nodes, and ``ros2 run`` killed
leaves its node running; each would go on, orphaned, commanding an arm nobody supervises.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import itertools
import os
import pathlib
import signal
import sys
import time

#: Node executable name -> the module whose ``main(args)`` runs it. setup.py's entry points come from here.
NODES = {
    "bag_player": "gamma_net_ros.bag_player",
    "bag_recorder": "gamma_net_ros.bag_recorder",
    "dynamixel_driver": "gamma_net_ros.dynamixel_driver.node",
    "prediction_monitor": "gamma_net_ros.prediction_monitor",
    "servo_emulator": "gamma_net_ros.hardware.emulator",
    "teleop": "gamma_net_ros.teleop",
    "operator": "gamma_net_ros.operator",
    "predictor": "gamma_net_ros.predictor",
    "ale_bridge": "gamma_net_ros.ale_bridge",
    "neural_predictor": "gamma_net_ros.neural_predictor.node",
    "transition_counter": "gamma_net_ros.transition_counter",
    "horde": "gamma_net_ros.horde.node",
    "reflex": "gamma_net_ros.reflex.node",
    "live_view": "gamma_net_ros.live_view",
    "base_emulator": "gamma_net_ros.base_emulator",
    "base_operator": "gamma_net_ros.base_operator",
}
#: What stops a node: Ctrl-C, and what `ros2 launch` sends after it.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

_MODULE = "gamma_net_ros.entry"  # its name also when it runs as __main__
_starting = ""  # the node whose start the handlers guard; "" once run_node has taken over


def stop_while_starting(name: str) -> None:
    """Until :func:`started`, SIGINT and SIGTERM end the process at once: code 0, one line.

    A parent that starts the node with the stop signals blocked (:func:`start_blocked`) closes
    the window of the interpreter's own start-up: a signal sent then waits, pending, and is
    delivered here, once the handlers are in place.
    """
    global _starting
    _starting = name
    for sig in STOP_SIGNALS:
        signal.signal(sig, _stop_now)
    stop_with_parent()
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


#: The environment variable by which a launch file gives its nodes its own pid (launch_checks.node_env):
#: a node whose parent is no longer that process was orphaned before it could tie itself to it.
PARENT_ENV = "GAMMA_NET_LAUNCH_PID"
#: prctl(2): the signal the kernel sends this process when its parent ends.
_PR_SET_PDEATHSIG = 1
#: The ros2 verbs whose child a node is, that end without stopping it (SIGTERM to launch; ros2 run killed).
_ROS2_PARENTS = ("launch", "run")


def stop_with_parent() -> bool:
    """When this process's parent is ``ros2 launch`` or ``ros2 run``, its end sends this process SIGTERM.

    SIGTERM is a stop like any other (a checkpoint written, torque off). A parent that ended
    before the request took (the process is then another's child) stops it now, the same way.

    Returns:
      Whether the process is now tied to its parent.
    """
    parent = os.getppid()
    if not sys.platform.startswith("linux"):
        return False
    if expected := os.environ.pop(PARENT_ENV, ""):  # a launch file's node: that launch started it
        if not expected.isdigit() or int(expected) != parent:  # it ended before this process got here
            os.kill(os.getpid(), signal.SIGTERM)
            return False
    elif not _is_ros2_cli(parent):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) != 0:
        return False
    if os.getppid() != parent:  # it ended meanwhile: the kernel will not tell
        os.kill(os.getpid(), signal.SIGTERM)
    return True


def _is_ros2_cli(pid: int) -> bool:
    try:
        argv = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    words = [os.path.basename(a.decode(errors="replace")) for a in argv]
    return any(a == "ros2" and b in _ROS2_PARENTS for a, b in itertools.pairwise(words))


@contextlib.contextmanager
def start_blocked():
    """Within it, processes started from this thread begin with SIGINT and SIGTERM blocked.

    Only for a node started through this module: its :func:`stop_while_starting` unblocks
    them, so a signal sent before its handlers exist (the interpreter's own start-up: tens of
    milliseconds, more on a busy machine) is delivered then instead of ending it in a
    ``KeyboardInterrupt`` (code -2). Any other program would never see a Ctrl-C: see :func:`starts_here`.

    Yields:
      Nothing; the calling thread's signal mask is restored on leaving.
    """
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def starts_here(command: list[str]) -> bool:
    """True if ``command`` runs a node through this module (``python -m gamma_net_ros.entry NAME``)."""
    return any(a == "-m" and b == _MODULE for a, b in itertools.pairwise(command))


def started() -> None:
    """The node's own handlers are in place (run_node): the start-up guard is off."""
    global _starting
    _starting = ""


def starting() -> str:
    """The node being started under the guard, or "" if none."""
    return _starting


def _stop_now(signum, frame) -> None:
    # os.write, not print: sys.stderr may be half-way through another write when the signal lands.
    with contextlib.suppress(OSError):  # a stderr whose reader is gone (`ros2 launch` killed)
        os.write(2, f"[{_starting or 'node'}] stopped while starting\n".encode())
    wait_for_outlived(OUTLIVE_S)
    os._exit(0)


#: The environment variable naming the nodes (executables, comma-separated) of this process's
#: session that must end before it does: the reflex's launch gives it the operator and teleop, so
#: that nothing steers the arm once the reflex is gone.
OUTLIVE_ENV = "GAMMA_NET_OUTLIVE"
#: s at most that a stopping node waits for them (`ros2 launch` escalates to SIGTERM after 5 s).
OUTLIVE_S = 4.0


def outlived() -> tuple[str, ...]:
    """The nodes this one must outlive (:data:`OUTLIVE_ENV`), as executable names."""
    return tuple(n.strip() for n in os.environ.get(OUTLIVE_ENV, "").split(",") if n.strip())


def outlived_running(names: tuple[str, ...] | None = None) -> list[int]:
    """Pids of this session's processes running one of ``names`` (default :func:`outlived`); zombies are ended."""
    names = outlived() if names is None else names
    if not names:
        return []
    session, found = os.getsid(0), []
    for proc in pathlib.Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if fields[0] == "Z" or int(fields[3]) != session:
            continue
        words = [a.decode(errors="replace") for a in argv]
        runs = {os.path.basename(w) for w in words if "/gamma_net_ros/" in w}  # lib/gamma_net_ros/operator
        runs |= {b for a, b in itertools.pairwise(words) if a == _MODULE}  # python -m gamma_net_ros.entry operator
        if runs & set(names):
            found.append(int(proc.name))
    return found


def wait_for_outlived(limit_s: float) -> None:
    """Until the nodes this one must outlive have ended, or ``limit_s`` has passed."""
    deadline = time.monotonic() + limit_s
    while outlived_running() and time.monotonic() < deadline:
        time.sleep(0.005)


def run(name: str, args: list[str] | None = None) -> int:
    """Start node ``name`` (a key of :data:`NODES`) with ``args`` (``sys.argv`` when None).

    Returns:
      The node's exit code (its ``main`` normally ends the process itself).
    """
    stop_while_starting(name)
    module = importlib.import_module(NODES[name])
    return module.main(args)


def guard_module_run() -> None:
    """For ``python -m gamma_net_ros.<node>`` (a module, or a package's ``node``): the start-up guard first.

    Python imports the package (this ``__init__``'s caller) before it runs the module as
    ``__main__``, and sets ``sys.argv[0]`` to ``"-m"`` meanwhile; ``sys.orig_argv`` names the module.
    """
    argv = getattr(sys, "orig_argv", [])
    if "-m" not in argv[:-1]:
        return
    module = argv[argv.index("-m") + 1]
    names = {target: name for name, target in NODES.items()}
    # A node with helpers is a package: `python -m gamma_net_ros.horde` runs its __main__, the node.
    names.update({target.removesuffix(".node"): name for name, target in NODES.items()})
    if module in names:
        stop_while_starting(names[module])


def _entry_point(name: str):
    def main() -> int:
        return run(name)

    main.__name__ = main.__qualname__ = name
    main.__doc__ = f"The ``{name}`` executable (``ros2 run gamma_net_ros {name}``)."
    return main


# One function per node for the console scripts: ``predictor = gamma_net_ros.entry:predictor``.
globals().update({name: _entry_point(name) for name in NODES})


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in NODES:
        print(f"usage: python -m gamma_net_ros.entry NODE [--ros-args ...]; NODE is one of {sorted(NODES)}")
        sys.exit(2)
    # Through the imported module, not this __main__ copy: run_node turns off the guard there.
    from gamma_net_ros import entry

    sys.exit(entry.run(sys.argv.pop(1)))
