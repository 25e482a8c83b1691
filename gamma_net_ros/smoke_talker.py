"""Node: publishes Predictions of a constant cumulant (value 1 / (1 - gamma)), for smoke tests.

A stand-in publisher until the predictor node exists; it exercises the message
package and discovery, not learning.
"""

from __future__ import annotations

import sys

import numpy as np
import rclpy
from gamma_net_msgs.msg import Prediction
from rclpy.node import Node

from gamma_net_core.timescales import to_gammas
from gamma_net_ros.conversions import prediction_msg
from gamma_net_ros.params import declare


class SmokeTalker(Node):
    def __init__(self, **kwargs) -> None:
        super().__init__("smoke_talker", **kwargs)
        rate = declare(self, "rate_hz", 10.0, "publishing rate", low=0.1, high=1000.0)
        taus = declare(self, "taus", [1.0, 10.0, 100.0], "timescales to publish, as tau (steps)")
        self.gammas = to_gammas(taus, "tau")
        self.publisher = self.create_publisher(Prediction, "predictions", 10)
        self.sent = 0
        self.create_timer(1.0 / rate, self.publish)

    def publish(self) -> None:
        self.sent += 1
        self.publisher.publish(
            prediction_msg(
                stamp=self.get_clock().now().to_msg(),
                cumulant="constant",
                gammas=self.gammas,
                values=1.0 / (1.0 - np.asarray(self.gammas)),
                update_count=self.sent,
            )
        )


def main(args=None) -> int:
    rclpy.init(args=args)
    node = SmokeTalker()
    try:
        rclpy.spin(node)
    except KeyboardInterrupt:
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
