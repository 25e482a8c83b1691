"""``python -m gamma_net_ros.horde``: the node, as ``ros2 run gamma_net_ros horde`` starts it."""

import sys

from gamma_net_ros.entry import run

sys.exit(run("horde"))
