"""gamma_net_ros: rclpy nodes, thin adapters between ROS 2 messages and gamma_net_core."""

import sys as _sys

if _sys.argv[:1] == ["-m"] and "gamma_net_ros.entry" not in getattr(_sys, "orig_argv", ()):
    # `python -m gamma_net_ros.<node>`: stop handlers before the node's module imports rclpy and numba.
    from gamma_net_ros import entry as _entry

    _entry.guard_module_run()
