"""The one ``main`` every node shares: start, spin, stop cleanly, refuse bad settings in one line.

    def main(args=None) -> int:
        return run_node(Predictor, args)

A node whose settings are refused (a parameter out of range, a checkpoint of another
configuration, a missing file) exits with code 1 and a single fatal log line naming the
problem, not a traceback. Ctrl-C and ``ros2 launch``'s SIGINT/SIGTERM end the spin; the
node's ``destroy_node`` does its own cleanup (torque off, a last checkpoint).
"""

from __future__ import annotations

from collections.abc import Callable

import rclpy
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node

from gamma_net_core.checkpoint import CheckpointError

#: Errors that mean "these settings cannot run", reported as such.
REFUSED = (ValueError, FileNotFoundError, CheckpointError)


def run_node(make: Callable[[], Node], args=None, *, until: Callable[[Node], bool] | None = None) -> int:
    """Create the node, spin it until shutdown (or until ``until(node)`` holds), and clean up.

    Returns:
      0 after a normal run or Ctrl-C; 1 if the node refused to start.
    """
    rclpy.init(args=args)
    try:
        node = make()
    except REFUSED as exc:
        name = getattr(make, "__name__", "node")
        rclpy.logging.get_logger(name).fatal(f"refusing to start: {exc}")
        rclpy.try_shutdown()
        return 1
    try:
        if until is None:
            rclpy.spin(node)
        else:
            while rclpy.ok() and not until(node):
                rclpy.spin_once(node, timeout_sec=0.1)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
    return 0
