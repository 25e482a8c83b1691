"""``python -m gamma_net_ros.neural_predictor``: the node, as ``ros2 run gamma_net_ros neural_predictor`` starts it."""

import sys

from gamma_net_ros.entry import run

sys.exit(run("neural_predictor"))
