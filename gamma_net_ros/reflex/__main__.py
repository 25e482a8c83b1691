"""``python -m gamma_net_ros.reflex``: the node, as ``ros2 run gamma_net_ros reflex`` starts it."""

import sys

from gamma_net_ros.entry import run

sys.exit(run("reflex"))
