"""``python -m gamma_net_ros.dynamixel_driver``: the node, as ``ros2 run gamma_net_ros dynamixel_driver`` starts it."""

import sys

from gamma_net_ros.entry import run

sys.exit(run("dynamixel_driver"))
