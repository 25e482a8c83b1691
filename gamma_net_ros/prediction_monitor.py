"""Node: prints a live line of the Prediction messages on a topic.

    ros2 run gamma_net_ros prediction_monitor --ros-args -p topic:=/predictions

With ``count`` > 0 it exits after that many messages (for scripts and tests).
"""

from __future__ import annotations

import sys

from gamma_net_msgs.msg import Prediction
from rclpy.node import Node

from gamma_net_core.timescales import tau_from_gamma
from gamma_net_ros.node_main import run_node
from gamma_net_ros.params import declare


def format_prediction(msg: Prediction, *, scaled: bool = False) -> str:
    """One line: the state's stamp, the update count, and the value at each tau.

    With ``scaled``, values are multiplied by (1 - gamma) so that all timescales
    share the cumulant's range, as in the paper's figures.
    """
    parts = []
    for gamma, value in zip(msg.gammas, msg.values):
        shown = value * (1.0 - gamma) if scaled else value
        parts.append(f"tau={tau_from_gamma(gamma):.4g}:{shown:+.4f}")
    stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
    return f"[{stamp:.3f}] {msg.question} (updates {msg.update_count}) " + " ".join(parts)


class PredictionMonitor(Node):
    def __init__(self, **kwargs) -> None:
        super().__init__("prediction_monitor", **kwargs)
        topic = declare(self, "topic", "predictions", "Prediction topic to print", read_only=True)
        self.count = declare(self, "count", 0, "exit after this many messages (0: never)", low=0, high=1_000_000_000)
        self.scaled = declare(self, "scaled", False, "print values times (1 - gamma), the paper's display scale")
        self.received = 0
        self.create_subscription(Prediction, topic, self.on_prediction, 10)
        self.get_logger().info(f"printing predictions on {self.resolve_topic_name(topic)}")

    def on_prediction(self, msg: Prediction) -> None:
        self.received += 1
        print(format_prediction(msg, scaled=self.scaled), flush=True)

    @property
    def done(self) -> bool:
        return 0 < self.count <= self.received


def main(args=None) -> int:
    return run_node(PredictionMonitor, args, until=lambda node: 0 if node.done else None)


if __name__ == "__main__":
    sys.exit(main())
