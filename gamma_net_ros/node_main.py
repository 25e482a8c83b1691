"""The one ``main`` every node shares: start, spin, stop cleanly, refuse bad settings in one line.

    def main(args=None) -> int:
        return run_node(Predictor, args)

Refusals. A node whose settings cannot run exits with code 1 and a single fatal log line
naming the bad value, never a traceback: a missing or broken ``--params-file`` (checked
before rclpy reads it), a parameter of the wrong type or out of range, a key in the node's
own YAML section or ``-p`` that it does not declare (a typo such as ``learner.step_sze``),
a checkpoint of another configuration, a missing or corrupt file. A :class:`LearningNode` refused
after it was built (an unknown key is found only then) is told so through its ``refused()``
before it is destroyed: it must then write nothing (no checkpoint).

Shutdown. SIGINT and SIGTERM (Ctrl-C, ``ros2 launch``) only set a flag; the spin loop sees
it within a tenth of a second and stops between callbacks. Only then is the node destroyed
(its ``destroy_node`` does its cleanup: torque off, a last checkpoint) and the context shut
down. rclpy's own signal handler would shut the context down under a running executor
(an exception from ``take_message`` or the wait set, and exit code 1); here nothing of ROS is
torn down while anything still uses it, and the exit code after a signal is always 0. The
process then ends at once (see :func:`run_node`), and further signals are ignored meanwhile.
A process that the middleware holds inside rclpy's teardown after its own cleanup is done ends
anyway, with one line and its threads' stacks in a file (:mod:`gamma_net_ros.shutdown_watch`).
Every thread's stack goes to a file when the loop has not come round for 5 s, or 7 s after the
stop; where a thread holds the GIL inside C (nothing of Python can then run, not even a signal
handler), a C thread still writes them a second later: a process that is then killed leaves
where it was held.

Start. A node process starts in :mod:`gamma_net_ros.entry`, whose handlers end it at once
(code 0, one line "[name] stopped while starting") while the node's module imports and rclpy
starts. Once rclpy is up, the node's own handlers take over: a signal while the node is being
built stops it as soon as its constructor returns. A :class:`LearningNode` is built with
``take_input_now=False``; its ``warm_up()`` runs in a worker thread while the node already spins
(its publishers, services and parameters live), compiling its learner's numba kernels on a
throwaway learner without touching the node's state; its ``take_input()`` is called in the
executor's thread once warm, and subscribes to its input. It logs one line that it is compiling
where numba compiles (an empty or outdated cache; a warm one loads in well under a second and says
nothing) and then one that it is ready; a signal before it is ready stops it with "stopped while
starting".
"""

from __future__ import annotations

import contextlib
import ctypes
import difflib
import os
import pathlib
import re
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import rclpy
import rclpy.logging
from rclpy.exceptions import ParameterException
from rclpy.executors import SingleThreadedExecutor
from rclpy.impl.implementation_singleton import rclpy_implementation
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from gamma_net_core.checkpoint import CheckpointError
from gamma_net_ros import entry, shutdown_watch
from gamma_net_ros.params import (
    ROS_FLAGS,
    mistyped_overrides,
    read_params_file,
    ros_arguments,
    unapplied_sections,
    unknown_parameters,
)
from gamma_net_ros.shutdown_watch import LoopWatch, StallWatch

#: Errors that mean "these settings cannot run", reported as such: bad values, files that are
#: missing, unreadable or corrupt, an optional package the settings need but that is missing.
REFUSED = (ValueError, OSError, ImportError, CheckpointError, ParameterException)
#: What stops a node: Ctrl-C, and what `ros2 launch` sends after it.
STOP_SIGNALS = entry.STOP_SIGNALS
#: The line of a node stopped before it took any input.
STOPPED_WHILE_STARTING = "stopped while starting"
#: The exit code of a node whose last write at shutdown failed (a checkpoint, a bag's close): what it held is lost.
LOST_STATE = 3
#: Seconds the spin loop waits for work before it looks at the stop flag again.
POLL_S = 0.1


class Refused(Exception):
    """A reason not to start, already worded for the user."""


@runtime_checkable
class RosNode(Protocol):
    """What :func:`run_node` needs of every node (an rclpy ``Node``; its ``destroy_node`` does its cleanup)."""

    def get_name(self) -> str: ...

    def get_logger(self) -> Any: ...

    def list_parameters(self, prefixes: list[str], depth: int) -> Any: ...

    def destroy_node(self) -> None: ...


@runtime_checkable
class RefusableNode(RosNode, Protocol):
    """A node that writes files (a checkpoint, a bag) and must be told when it is refused once built."""

    def refused(self) -> None:
        """Refused after it was built: from now on nothing is written (no checkpoint, no bag at shutdown)."""


@runtime_checkable
class LearningNode(RefusableNode, Protocol):
    """A node with a learner: compiled before it takes input, checkpointed, told when it is refused.

    Its class takes ``take_input_now: bool = True``: a node built elsewhere (a test's, in-process)
    takes its input at the end of its constructor and compiles on its first message; :func:`run_node`
    builds it with False and calls ``warm_up()`` then ``take_input()``. The checkpoint hooks
    come from :class:`gamma_net_ros.learner_checkpoint.CheckpointHooks`.
    """

    def warm_up(self) -> None:
        """Compile the learner's kernels on a throwaway learner (a worker thread; the node's state untouched)."""

    def take_input(self) -> None:
        """Subscribe to the input (or start ticking); called once, in the executor's thread."""

    def save_checkpoint(self, *, last: bool = False) -> None:
        """Write the learner's checkpoint now, if it has one; a failure is logged, the previous file kept.

        ``last``: the save at shutdown, whose failure loses what was learned (see ``lost_on_exit``).
        """

    def lost_on_exit(self) -> str | None:
        """Why the learned state is lost (the last checkpoint failed), else None: the exit is then non-zero."""

    def refused(self) -> None:
        """Refused after it was built: from now on nothing is written (no checkpoint at shutdown)."""


def is_learning_node(make: Callable[..., Any]) -> bool:
    """Whether ``make`` is a :class:`LearningNode` class (built without input, warmed up, then given it)."""
    return isinstance(make, type) and issubclass(make, LearningNode)


def _node_name(make: Callable) -> str:
    module = getattr(make, "__module__", "") or ""
    if module and module != "__main__":
        return module.rsplit(".", 1)[-1]
    return pathlib.Path(sys.argv[0]).stem or "node"


def _check_params_files(argv: Sequence[str]) -> None:
    """A missing or unreadable parameter file, refused before rcl reports it in its own words."""
    for path in ros_arguments(argv).files:
        read_params_file(path)


def _unknown_ros_arguments(argv: Sequence[str]) -> str:
    """rcl's unknown ROS arguments in one line, with the flag probably meant."""
    unknown = ros_arguments(argv).unknown
    flag = next((a for a in unknown if a.startswith("-")), None)
    close = difflib.get_close_matches(flag, ROS_FLAGS, n=1, cutoff=0.6) if flag else []
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"unknown ROS argument(s) {unknown} after --ros-args{hint}"


#: What rmw_fastrtps compiles in only where Fast DDS was built without DDS-Security (as the PyPI wheels are).
_NO_SECURITY_MARK = b"doesn't have the security libraries"


def _library(name: str) -> pathlib.Path | None:
    """Where ROS loads shared library ``name`` from: the environment's lib, LD_LIBRARY_PATH, the ament prefixes."""
    folders = [pathlib.Path(sys.prefix) / "lib"]
    folders += [pathlib.Path(f) for f in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if f]
    folders += [pathlib.Path(f) / "lib" for f in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if f]
    return next((folder / name for folder in folders if (folder / name).is_file()), None)


def security_refusal(environ: dict[str, str] | None = None) -> str | None:
    """Why a node asked for DDS-Security (``ROS_SECURITY_ENABLE=true``) cannot have it, else None.

    Fast DDS as the PyPI wheels build it has no security plugins: with a keystore, creating the node
    fails deep in rcl (a 27-line RCLError traceback); without one, rcl's default ``Permissive``
    strategy runs it unsecured without a word. Either way a node that was asked to be secure is not.

    Args:
      environ: the environment (``os.environ`` when None).
    """
    env = os.environ if environ is None else environ
    if env.get("ROS_SECURITY_ENABLE", "").strip().lower() != "true":
        return None
    rmw = env.get("RMW_IMPLEMENTATION") or "rmw_fastrtps_cpp"  # Kilted's default
    if not rmw.startswith("rmw_fastrtps"):
        return None  # another middleware: rcl says what it lacks (see _run)
    library = _library("librmw_fastrtps_shared_cpp.so")
    if library is None or _NO_SECURITY_MARK not in library.read_bytes():
        return None
    return (
        f"ROS_SECURITY_ENABLE=true, but this middleware ({rmw}, with the Fast DDS of the PyPI wheels, "
        f"{library.parent}) has no DDS-Security, so the node could not be secure; unset ROS_SECURITY_ENABLE, "
        "or run on a ROS 2 install whose Fast DDS has it (the distribution's apt packages): docs/security.md"
    )


def _rcl_message(exc: Exception) -> str:
    # rcl appends source locations (", at /project/src/parser.c:271"): not for users.
    return re.sub(r",? at \S+:\d+", "", str(exc)).strip()


def run_node(
    make: Callable[..., Node],
    args: Sequence[str] | None = None,
    *,
    until: Callable[[Node], int | None] | None = None,
    exit_process: bool = True,
) -> int:
    """Create the node, spin it until a signal (or until ``until(node)`` gives an exit code), clean up.

    Args:
      make: builds the node (its class); it raises one of :data:`REFUSED` for bad settings. A
        :class:`LearningNode` class is built with ``take_input_now=False`` and warmed up.
      args: the process's arguments (``sys.argv`` when None), ROS arguments included.
      until: called after every callback; returns the exit code once the node is done, else None.
      exit_process: end the process here, once the node is destroyed and ROS is shut down (see
        below); False returns the code instead and restores the signal handlers.

    Returns:
      The exit code: 0 after a signal or a normal end, ``until``'s code, 1 if the node refused to start, or
      :data:`LOST_STATE` (3) if its last checkpoint could not be written (a full disk, a read-only folder: one
      line says so and what is lost). With ``exit_process`` (a node's ``main``) the process exits with it instead,
      skipping Python's finalization: its last garbage collection walks every object torch, numpy and rclpy made,
      seconds on a busy machine, which would put the exit past the 5 s `ros2 launch` waits before SIGTERM. Nothing
      is left to finalize by then: the checkpoint is written, the node destroyed and rcl's logging flushed.
    """
    argv = list(sys.argv if args is None else args)
    name = entry.starting() or _node_name(make)  # the executable's name (reflex), not its module's (node)
    stop = threading.Event()
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    if not exit_process:  # in a process that goes on: a signal only ever sets the flag
        for sig in STOP_SIGNALS:
            signal.signal(sig, _setter(stop))
    elif not entry.starting():
        entry.stop_while_starting(name)  # main() called without entry: rclpy's start is guarded too
    try:
        code = _run(make, argv, name, stop, until, watch=exit_process)
    finally:
        for sig, handler in previous.items():
            # A Ctrl-C pressed again while the process ends is ignored, not a KeyboardInterrupt.
            signal.signal(sig, signal.SIG_IGN if exit_process else handler)
    if exit_process:
        with contextlib.suppress(OSError):  # a reader gone (`ros2 launch` killed) must not change the exit
            sys.stdout.flush()
        with contextlib.suppress(OSError):
            sys.stderr.flush()
        ctypes.CDLL(None).fflush(None)  # C stdio too (rcutils' console output)
        os._exit(code)
    return code


def _run(make, argv: list[str], name: str, stop: threading.Event, until, *, watch: bool) -> int:
    if (code := _start_ros(argv, name)) is not None:
        return code
    # From here on ROS holds what a clean stop releases (a driver's torque, a checkpoint): a signal sets a flag.
    for sig in STOP_SIGNALS:
        signal.signal(sig, _setter(stop))
    stall = StallWatch(name, stop) if watch else None  # a process of its own: the middleware cannot hold it
    entry.started()
    learning = is_learning_node(make)
    node = _build(make, argv, name, learning=learning)
    if isinstance(node, int):
        return node
    held = _loop_watch(name) if watch else None
    code = 0
    try:
        code = _spin(node, name, stop, until, held, learning=learning)
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
        if code == 0 and callable(lost := getattr(node, "lost_on_exit", None)) and lost() is not None:
            code = LOST_STATE  # its one line is logged by the failed save (a checkpoint, a bag's close)
        if stall is not None:
            stall.finished()
        if held is not None and (where := held.close()) is not None:
            sys.stderr.write(
                f"[{name}] held at least once ({shutdown_watch.HELD_S:g} s without a turn of its loop, or "
                f"{shutdown_watch.STOPPING_HELD_S:g} s stopping): every thread's stack then is in {where}\n"
            )
    return code


def _start_ros(argv: list[str], name: str) -> int | None:
    """Start rclpy with the process's arguments; the exit code of a one-line refusal, or None once started."""
    if (insecure := security_refusal()) is not None:
        _fatal(name, insecure)
        return 1
    try:
        _check_params_files(argv)
        _init(argv, name=name)
    except ValueError as exc:
        _fatal(name, str(exc))
        return 1
    except rclpy_implementation.UnknownROSArgsError:  # a mistyped flag (--params_file)
        _fatal(name, _unknown_ros_arguments(argv))
        return 1
    except rclpy_implementation.RCLError as exc:  # what rcl itself refuses in the arguments
        _fatal(name, _rcl_message(exc))
        return 1
    return None


def _build(make, argv: list[str], name: str, *, learning: bool) -> Node | int:
    """The node, built and its parameters checked against the arguments; or the exit code of its refusal."""
    try:
        node = make(take_input_now=False) if learning else make()
        if (message := _parameter_refusal(node, argv)) is not None:
            if isinstance(node, RefusableNode):
                node.refused()  # built, but refused: its shutdown must leave its files as they were
            node.destroy_node()
            raise Refused(message)
        for line in unapplied_sections(node, argv):
            node.get_logger().warning(line)
    except (*REFUSED, Refused) as exc:
        _fatal(name, str(exc))
        rclpy.try_shutdown()  # also destroys a half-built node: its destroy_node must cope
        return 1
    except rclpy_implementation.RCLError as exc:
        if os.environ.get("ROS_SECURITY_ENABLE", "").strip().lower() != "true":
            raise  # not a setting of the user's: a bug keeps its traceback
        # Another middleware's or keystore's refusal of the security settings, in rcl's words.
        _fatal(name, f"ROS_SECURITY_ENABLE=true, and the middleware refused: {' '.join(_rcl_message(exc).split())}")
        rclpy.try_shutdown()
        return 1
    return node


def _parameter_refusal(node: Node, argv: list[str]) -> str | None:
    """One line for the first unknown or mistyped parameter the arguments set, or None."""
    unknown = unknown_parameters(node, argv)
    if unknown:
        key, where = unknown[0]
        more = f" (and {len(unknown) - 1} more unknown: {[k for k, _ in unknown[1:]]})" if len(unknown) > 1 else ""
        close = difflib.get_close_matches(key, node.list_parameters([], 0).names, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return f"unknown parameter {key!r} for node {node.get_name()} ({where}){hint}{more}"
    mistyped = mistyped_overrides(node, argv)
    if mistyped:
        return mistyped[0] + (f" (and {len(mistyped) - 1} more mistyped)" if len(mistyped) > 1 else "")
    return None


def _spin(node: Node, name: str, stop: threading.Event, until, held: LoopWatch | None, *, learning: bool) -> int:
    """Spin ``node`` until a signal (and the nodes it outlives end) or ``until``'s code; the exit code."""
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    code = 0
    ready = not stop.is_set()  # a signal while the node was built: it stops before taking anything
    warming = _WarmUp(node) if learning and ready else None
    outlive = entry.outlived()
    stopped_at = None
    try:
        while not stop.is_set() or _still_outliving(outlive, stopped_at):
            if stop.is_set() and stopped_at is None:
                stopped_at = time.monotonic()  # it keeps its callbacks (a filter: filtering) meanwhile
            if held is not None:
                held.beat()
            executor.spin_once(timeout_sec=POLL_S if stopped_at is None else 0.005)
            try:
                if warming is not None and warming.finished():
                    warming = None
            except REFUSED as exc:  # settings the node took but its learner cannot run
                _fatal(name, f"the learner cannot run these settings: {exc}")
                node.refused()
                code = 1
                break
            if until is not None and (done := until(node)) is not None:
                code = done
                break
        if stop.is_set() and (warming is not None or not ready):
            node.get_logger().info(STOPPED_WHILE_STARTING)
    finally:
        if held is not None:
            held.stopping()
        executor.remove_node(node)
        executor.shutdown()
    return code


def _still_outliving(outlive: tuple[str, ...], stopped_at: float | None) -> bool:
    """Whether a stopping node still waits for the nodes it must outlive (entry.OUTLIVE_ENV), within entry.OUTLIVE_S."""
    if not outlive:
        return False
    if stopped_at is not None and time.monotonic() - stopped_at > entry.OUTLIVE_S:
        return False
    return bool(entry.outlived_running(outlive))


def _setter(stop: threading.Event) -> Callable[..., None]:
    """A signal handler that sets ``stop`` once, and returns at once on every later signal.

    ``Event.set`` takes a lock: a second signal landing inside the first handler's ``set`` (SIGTERM
    from a parent's end, then launch's SIGINT, within microseconds) would wait for that lock in the
    same thread forever. A later one only needs to see that the stop is under way.
    """
    started = []

    def handler(*_) -> None:
        if started:
            return
        started.append(True)
        stop.set()

    return handler


def _loop_watch(name: str) -> LoopWatch | None:
    """The node's :class:`LoopWatch`, or None where its file cannot be made (a diagnosis, never a reason to stop)."""
    try:
        return LoopWatch(name)
    except OSError as exc:
        rclpy.logging.get_logger(name).warning(f"no record of a held loop: {exc}")
        return None


class _WarmUp:
    """A node's ``warm_up()`` in a worker thread; its ``take_input()`` once that is done.

    The "compiling" line is logged when numba starts compiling a kernel, which it does only
    where its cache has none for it: a warm start (kernels loaded from the cache in well under a
    second) says only that it is ready.
    """

    def __init__(self, node: LearningNode) -> None:
        self.node = node
        self.began = time.monotonic()
        self.error: BaseException | None = None
        self.compiled = False
        self.thread = threading.Thread(target=self._work, name=f"{node.get_name()}.warm_up", daemon=True)
        self.thread.start()

    def _work(self) -> None:
        from numba.core import event  # a learning node imports numba anyway; the others need not

        warm_up = self

        class Compiling(event.Listener):
            def on_start(self, _event) -> None:
                if not warm_up.compiled:
                    warm_up.compiled = True
                    warm_up.node.get_logger().info(
                        "compiling learner kernels (first start on this machine, or after an update; cached afterwards)"
                    )

            def on_end(self, _event) -> None:
                pass

        try:
            with event.install_listener("numba:compile", Compiling()):
                self.node.warm_up()
        except BaseException as exc:  # raised again in the executor's thread: a bug keeps its traceback
            self.error = exc

    def finished(self) -> bool:
        """True once warm and taking input; the warm-up's exception is raised here."""
        if self.thread.is_alive():
            return False
        if self.error is not None:
            raise self.error
        self.node.take_input()
        self.node.get_logger().info(f"ready: learner kernels warm after {time.monotonic() - self.began:.1f} s")
        return True


#: Seconds ``rclpy.init`` may take before the node says it is still waiting for the middleware
#: (it takes well under a second, several on a busy machine; minutes mean it is stuck).
INIT_WARNING_S = 60.0


#: A Fast DDS profile that leaves out the XTypes TypeLookup service (see :func:`without_type_lookup`).
NO_TYPE_LOOKUP_PROFILE = """<?xml version="1.0" encoding="UTF-8"?>
<dds xmlns="http://www.eprosima.com">
  <profiles>
    <participant profile_name="gamma_net_no_type_lookup" is_default_profile="true">
      <rtps>
        <propertiesPolicy>
          <properties>
            <property><name>fastdds.type_propagation</name><value>disabled</value></property>
          </properties>
        </propertiesPolicy>
      </rtps>
    </participant>
  </profiles>
</dds>
"""
#: What tells Fast DDS of a user's own profiles: with any of them, the user's settings are left alone.
FASTDDS_PROFILE_SETTINGS = (
    "FASTDDS_DEFAULT_PROFILES_FILE",
    "FASTRTPS_DEFAULT_PROFILES_FILE",
    "RMW_FASTRTPS_USE_QOS_FROM_XML",
)


def without_type_lookup(environ: dict[str, str] | None = None, *, folder: pathlib.Path | None = None) -> str | None:
    """Point Fast DDS at :data:`NO_TYPE_LOOKUP_PROFILE`, before ``rclpy.init``.

    Fast DDS 3.2 (the Kilted wheels') deletes a participant's TypeLookup reply writer before it stops
    the thread that answers other participants' type requests. Those come in a node's first second,
    while the others discover it: a node refused at start, whose participant goes at once, now and then
    crashed in that thread (SIGSEGV in ``WriterHistory::create_change``, issue #39). ROS 2 describes its
    types itself (``~/get_type_description``) and needs none of it; with type propagation disabled the
    participant has no TypeLookup service to race. Left alone: another middleware, a user's own Fast DDS
    profile (:data:`FASTDDS_PROFILE_SETTINGS`, or DEFAULT_FASTDDS_PROFILES.xml in the working directory),
    and a folder that cannot be written or that others could write (Fast DDS then starts as it always did).

    Args:
      environ: the environment to set (``os.environ`` when None).
      folder: where the profile is written (a folder of the temporary directory's when None).

    Returns:
      The profile's path, now in ``FASTDDS_DEFAULT_PROFILES_FILE``; None where it was left alone.
    """
    env = os.environ if environ is None else environ
    if not (env.get("RMW_IMPLEMENTATION") or "rmw_fastrtps_cpp").startswith("rmw_fastrtps"):
        return None
    if any(env.get(key) for key in FASTDDS_PROFILE_SETTINGS) or pathlib.Path("DEFAULT_FASTDDS_PROFILES.xml").exists():
        return None
    folder = folder or pathlib.Path(tempfile.gettempdir()) / f"gamma_net_ros-{os.getuid()}"
    path = folder / "fastdds_no_type_lookup.xml"
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        own = folder.lstat()
        if folder.is_symlink() or own.st_uid != os.getuid() or own.st_mode & 0o022:
            return None  # a folder someone else could write: its profile would configure our middleware
        if not path.is_file() or path.read_text() != NO_TYPE_LOOKUP_PROFILE:
            partial = folder / f".{path.name}.{os.getpid()}"
            partial.write_text(NO_TYPE_LOOKUP_PROFILE)
            os.replace(partial, path)  # whole for every process that starts meanwhile
    except OSError:
        return None
    env["FASTDDS_DEFAULT_PROFILES_FILE"] = str(path)
    return str(path)


def _init(argv: list[str], *, name: str = "node", warn_after: float | None = None) -> None:
    """``rclpy.init`` without its signal handlers; rcl's own line about bad arguments is left out.

    On arguments it cannot parse rcl logs "Failed to parse global arguments" before raising;
    the fatal line that follows says which and why, so that line would only be a second one.
    rclpy.init also starts the middleware (Fast DDS creates its participant here); should that
    not return, one line says so after ``warn_after`` seconds (default :data:`INIT_WARNING_S`)
    on the real stderr, since the middleware's own messages are held back meanwhile.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    delay = INIT_WARNING_S if warn_after is None else warn_after
    line = (
        f"[{name}] still starting the ROS 2 middleware after {delay:g} s (rclpy.init has not returned); "
        "with Fast DDS, stale shared-memory files of killed processes in /dev/shm are a known cause\n"
    )
    watchdog = threading.Timer(delay, lambda: os.write(saved, line.encode()))
    watchdog.daemon = True
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        failed = True
        watchdog.start()
        try:
            without_type_lookup()
            rclpy.init(args=argv, signal_handler_options=SignalHandlerOptions.NO)
            failed = False
        finally:
            watchdog.cancel()
            watchdog.join()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            lines = captured.read().decode(errors="replace").splitlines(keepends=True)
            shown = [line for line in lines if not (failed and "Failed to parse global arguments" in line)]
            sys.stderr.write("".join(shown))
            sys.stderr.flush()


def _fatal(name: str, message: str) -> None:
    rclpy.logging.get_logger(name).fatal(f"refusing to start: {message}")
