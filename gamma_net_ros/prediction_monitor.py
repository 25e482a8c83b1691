"""Node: prints a live line of the predictions on a topic: a predictor's Prediction or a Horde's PredictionArray.

    ros2 run gamma_net_ros prediction_monitor --ros-args -p topic:=/predictions
    ros2 run gamma_net_ros prediction_monitor --ros-args -p topic:=/horde/predictions

The topic's type is taken from its publishers (a line per question for a PredictionArray);
until one publishes, the monitor waits. With ``count`` > 0 it exits after that many messages
(for scripts and tests).
"""

from __future__ import annotations

import sys

from gamma_net_msgs.msg import Prediction, PredictionArray
from rclpy.node import Node

from gamma_net_core.timescales import tau_from_gamma
from gamma_net_ros.node_main import run_node
from gamma_net_ros.params import declare

#: The types it prints, by the name the graph gives them.
TYPES = {"gamma_net_msgs/msg/Prediction": Prediction, "gamma_net_msgs/msg/PredictionArray": PredictionArray}


def _line(stamp, name: str, update_count: int, gammas, values, scaled: bool, extra: str = "") -> str:
    parts = []
    for gamma, value in zip(gammas, values):
        shown = value * (1.0 - gamma) if scaled else value
        parts.append(f"tau={tau_from_gamma(gamma):.4g}:{shown:+.4f}")
    seconds = stamp.sec + stamp.nanosec * 1e-9
    return f"[{seconds:.3f}] {name} (updates {update_count}) " + " ".join(parts) + extra


def format_prediction(msg: Prediction, *, scaled: bool = False) -> str:
    """One line: the state's stamp, the update count, and the value at each tau.

    With ``scaled``, values are multiplied by (1 - gamma) so that all timescales
    share the cumulant's range, as in the paper's figures.
    """
    return _line(msg.header.stamp, msg.question, msg.update_count, msg.gammas, msg.values, scaled)


def format_prediction_array(msg: PredictionArray, *, scaled: bool = False) -> list[str]:
    """One line per question, as :func:`format_prediction`, then its readouts (never scaled: they are no gamma's)."""
    G, R = len(msg.gammas), len(msg.readouts)
    if len(msg.values) != len(msg.questions) * G or len(msg.readout_values) != len(msg.questions) * R:
        return [
            f"malformed PredictionArray: {len(msg.values)} values and {len(msg.readout_values)} readout values "
            f"for {len(msg.questions)} questions x {G} gammas and {R} readouts"
        ]
    lines = []
    for q, name in enumerate(msg.questions):
        readouts = "".join(f" {r}:{v:+.4f}" for r, v in zip(msg.readouts, msg.readout_values[q * R : (q + 1) * R]))
        values = msg.values[q * G : (q + 1) * G]
        lines.append(_line(msg.header.stamp, name, msg.update_count, msg.gammas, values, scaled, readouts))
    return lines


class PredictionMonitor(Node):
    def __init__(self, **kwargs) -> None:
        super().__init__("prediction_monitor", **kwargs)
        topic = declare(self, "topic", "predictions", "Prediction or PredictionArray topic to print", read_only=True)
        self.count = declare(self, "count", 0, "exit after this many messages (0: never)", low=0, high=1_000_000_000)
        self.scaled = declare(self, "scaled", False, "print values times (1 - gamma), the paper's display scale")
        self.received = 0
        self.topic = self.resolve_topic_name(topic)
        self.warned = ""
        # One subscription carries one type: it is made once a publisher names the topic's.
        self.finding = self.create_timer(0.1, self.subscribe)
        self.get_logger().info(f"printing predictions on {self.topic}")

    def subscribe(self) -> None:
        types = [t for name, ts in self.get_topic_names_and_types() if name == self.topic for t in ts]
        known = [t for t in types if t in TYPES]
        if known:
            self.finding.cancel()
            self.create_subscription(TYPES[known[0]], self.topic, self.on_message, 10)
        elif types and self.warned != types[0]:
            self.warned = types[0]
            self.get_logger().warning(f"{self.topic} carries {types[0]}, not one of {sorted(TYPES)}: waiting")

    def on_message(self, msg: Prediction | PredictionArray) -> None:
        self.received += 1
        if isinstance(msg, Prediction):
            print(format_prediction(msg, scaled=self.scaled), flush=True)
        else:
            print("\n".join(format_prediction_array(msg, scaled=self.scaled)), flush=True)

    @property
    def done(self) -> bool:
        return 0 < self.count <= self.received


def main(args=None) -> int:
    return run_node(PredictionMonitor, args, until=lambda node: 0 if node.done else None)


if __name__ == "__main__":
    sys.exit(main())
