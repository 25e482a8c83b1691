"""Checks a launch file runs before it starts any node.

`launch_ros` only warns about a parameter file that is not there (the node then runs on its
built-in defaults), a node from a package that is not installed fails after the nodes before
it have started, and `ros2 launch` takes any `name:=value` a file does not declare without a
word (a misspelled `bag:=X` or `chekpoint_path:=X` is simply lost). The launch files put
`refuse_bad_arguments(...)` right after their declarations: an argument the file does not
declare, or a missing file or package, stops `ros2 launch` with one line ("Caught exception in
launch ...: <reason>", exit code 1) before any process exists.
"""

import difflib
import os
import signal
import sys

from ament_index_python.packages import PackageNotFoundError, get_package_prefix
from launch.actions import OpaqueFunction, Shutdown
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration

from gamma_net_ros.entry import PARENT_ENV

#: The prefix of every gamma_net_ros node the launch files start: it begins with SIGINT and SIGTERM
#: blocked (``env --block-signal``, GNU coreutils 8.31 or later), so a stop while the interpreter
#: itself starts waits for the node's own handlers (gamma_net_ros.entry unblocks them) instead of
#: ending in a KeyboardInterrupt traceback. ``--launch-prefix`` (gdb, valgrind) still comes first.
BLOCKED_START = [LaunchConfiguration("launch-prefix", default=""), " env --block-signal=INT,TERM"]


def take_stop_signals() -> None:
    """Unblock SIGINT and SIGTERM in `ros2 launch`, now that launch handles them: call it first in a launch file.

    A supervisor starts `ros2 launch` through ``env --block-signal=INT,TERM`` (docs/supervisors.md),
    so a stop during ros2cli's own start-up (about a second of imports, before launch installs its
    handlers) is not a KeyboardInterrupt traceback: it waits, pending, and is delivered here, and
    launch then stops before it has started anything. Elsewhere nothing was blocked.

    Launch hears SIGINT through the signal wakeup fd and leaves Python's own handler in place, which
    raises KeyboardInterrupt in whatever runs then. While launch starts its processes that is one of
    its tasks: the task dies, the process it had just started is no longer launch's, and it outlives
    the stop (under a supervisor, until the final SIGKILL). So SIGINT's Python handler does nothing
    here: the wakeup fd, written by the interpreter's C handler before any Python handler runs,
    still brings launch the signal.
    """
    try:
        signal.signal(signal.SIGINT, _heard_by_launch)
    except ValueError:  # not the main thread (a launch file loaded elsewhere): launch's own, as it was
        pass
    signal.pthread_sigmask(signal.SIG_UNBLOCK, (signal.SIGINT, signal.SIGTERM))


def _heard_by_launch(signum, frame) -> None:
    """SIGINT's Python handler in `ros2 launch`: nothing (launch acts on it through the wakeup fd)."""


def node_env(**extra: str) -> dict[str, str]:
    """The ``additional_env`` of every gamma_net_ros node the launch files start.

    It carries this process's pid (the `ros2 launch` that reads the file): the node stops with it
    (gamma_net_ros.entry.stop_with_parent), also where `ros2 launch` was stopped before the node
    could tie itself to it.
    """
    return {PARENT_ENV: str(os.getpid()), **extra}


class LaunchRefused(RuntimeError):
    """A launch argument names a file or package that is not there."""


#: What `ros2 launch` itself adds to a file's arguments (its --launch-prefix options).
_ROS2_LAUNCH_ARGUMENTS = ("launch-prefix", "launch-prefix-filter")


def refuse_bad_arguments(declared, files=(), packages=()):
    """An action that refuses undeclared arguments, missing parameter files and packages, before any node starts.

    Args:
        declared: the file's DeclareLaunchArgument actions: on the `ros2 launch` command line,
            any other `name:=value` is refused.
        files: names of launch arguments that hold file paths (parameter or questions files).
        packages: (package, argument) pairs: the package must be installed when the boolean
            launch argument is true; argument None: always.

    Returns:
        An OpaqueFunction to put after the declarations and before the launch description's nodes.
    """
    names = tuple(argument.name for argument in declared)
    return OpaqueFunction(function=_check, args=[names, tuple(files), tuple(packages)])


def _given_on_the_command_line(context):
    """Names of the `name:=value` arguments `ros2 launch` was given for this very file, else ().

    Only a file started by `ros2 launch` is checked: one included by another launch file sees
    that file's arguments too, which are not its to refuse.
    """
    path = getattr(context.locals, "current_launch_file_path", None)
    started = {os.path.basename(arg) for arg in sys.argv[1:] if arg.endswith(".py")}
    if not path or os.path.basename(path) not in started:
        return ()
    return tuple(arg.split(":=", 1)[0] for arg in context.argv if ":=" in arg)


def _check(context, declared, files, packages):
    unknown = [name for name in _given_on_the_command_line(context) if name not in (*declared, *_ROS2_LAUNCH_ARGUMENTS)]
    if unknown:
        name = unknown[0]
        value = context.launch_configurations.get(name, "")
        close = difflib.get_close_matches(name, declared, n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        launch_file = os.path.basename(context.locals.current_launch_file_path)
        raise LaunchRefused(
            f"{name}:={value}: {launch_file} has no such argument; {hint}it takes {', '.join(declared)}"
        )
    for name in files:
        path = context.launch_configurations.get(name, "")
        if not os.path.isfile(path):
            raise LaunchRefused(f"{name}:={path}: no such file")
    for package, argument in packages:
        if argument is not None and not IfCondition(LaunchConfiguration(argument)).evaluate(context):
            continue
        try:
            get_package_prefix(package)
        except PackageNotFoundError:
            needed = f" (needed by {argument}:=true)" if argument else ""
            raise LaunchRefused(f"package '{package}' is not installed{needed}") from None
    return []


def end_the_launch_with(name, *, on_clean_exit: bool = True):
    """An ``on_exit`` for a node the others cannot do without: when it ends, the launch ends.

    A node that failed (say, a driver refused because another holds its port) stops
    `ros2 launch` with one line and exit code 1, after every other process has been stopped;
    so does one killed by a signal, the line naming it. One that ended cleanly (Ctrl-C) just
    shuts the rest down.

    Args:
        name: the node, as the line names it.
        on_clean_exit: whether a clean end (exit code 0) ends the launch too; False for a node whose
            work may end before the others' (a bridge at the end of its recording).

    Returns:
        A callable for launch_ros ``Node(on_exit=...)``.
    """

    def on_exit(event, context):
        if context.is_shutdown:
            return None  # already stopping (Ctrl-C, or another's end): nothing to add
        code = event.returncode
        if code not in (0, None):
            if code < 0:  # killed: it had no chance to say why
                raise LaunchRefused(f"{name} was killed by {_signal_name(-code)}")
            raise LaunchRefused(f"{name} ended with exit code {code} (its line above says why)")
        return [Shutdown(reason=f"{name} ended")] if on_clean_exit else None

    return on_exit


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
