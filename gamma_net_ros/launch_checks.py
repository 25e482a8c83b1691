"""Checks a launch file runs before it starts any node.

`launch_ros` only warns about a parameter file that is not there (the node then runs on its
built-in defaults), and a node from a package that is not installed fails after the nodes
before it have started. The launch files put `refuse_bad_arguments(...)` first in their
description: a missing file or package stops `ros2 launch` with one line ("Caught exception
in launch ...: <reason>", exit code 1) before any process exists.
"""

import os

from ament_index_python.packages import PackageNotFoundError, get_package_prefix
from launch.actions import OpaqueFunction
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration


class LaunchRefused(RuntimeError):
    """A launch argument names a file or package that is not there."""


def refuse_bad_arguments(files=(), packages=()):
    """An action that refuses missing parameter files and packages, before any node starts.

    Args:
        files: names of launch arguments that hold file paths (parameter or questions files).
        packages: (package, argument) pairs: the package must be installed when the boolean
            launch argument is true; argument None: always.

    Returns:
        An OpaqueFunction to put before the launch description's nodes.
    """
    return OpaqueFunction(function=_check, args=[tuple(files), tuple(packages)])


def _check(context, files, packages):
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
