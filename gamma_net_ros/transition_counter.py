"""Node: a bare consumer of ``transitions`` that counts them and checks their order.

    ros2 run gamma_net_ros transition_counter --ros-args -p exit_after:=100000

What a learner-free subscriber receives from the bridge: every message is counted, its
(episode, step) checked against the previous one (the same episode's next step, or step 0
of the next episode after one that ended), and taken reports are sent for the bridge's
flow control. ``delay`` makes it slow on purpose (seconds per message). The reference
consumer of ``gamma-net bench bridge``; also a quick check that a stream arrives whole.
With ``exit_after`` N it exits after N messages: code 0 if they came in order, else 1.
"""

from __future__ import annotations

import sys
import time

from gamma_net_msgs.msg import Transition
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.task import Future

from gamma_net_ros.diagnostics import OK, WARN, Diagnostics, Health
from gamma_net_ros.flow_control import TakenReporter
from gamma_net_ros.node_main import run_node
from gamma_net_ros.params import declare


class TransitionCounter(Node):
    def __init__(self, **kwargs) -> None:
        super().__init__("transition_counter", **kwargs)
        depth = declare(
            self,
            "queue_depth",
            2000,
            "reliable KEEP_LAST depth; >= the bridge's window",
            low=1,
            high=10**6,
            read_only=True,
        )
        every = declare(self, "report_every", 32, "messages between taken reports", low=1, high=10**6, read_only=True)
        self.delay = declare(
            self, "delay", 0.0, "s spent per message (a slow consumer on purpose)", low=0.0, high=10.0, read_only=True
        )
        self.exit_after = declare(
            self, "exit_after", 0, "exit after this many messages (0: never)", low=0, high=2**62, read_only=True
        )
        self.received = 0
        self.out_of_order = 0
        self.last: tuple[int, int, bool] | None = None  # (episode, step, ended)
        self.first: float | None = None
        self.latest: float | None = None
        self.finished = Future()
        qos = QoSProfile(depth=depth, reliability=ReliabilityPolicy.RELIABLE)
        self.create_subscription(Transition, "transitions", self.on_transition, qos)
        self.reporter = TakenReporter(self, "transitions", taken=lambda: self.received, every=every)
        self.health = Diagnostics(self, "transitions", self.report_health)

    def on_transition(self, msg: Transition) -> None:
        now = time.monotonic()
        self.first = self.first or now
        self.latest = now
        if self.last is not None:
            episode, step, ended = self.last
            expected = (episode + 1, 0) if ended else (episode, step + 1)
            if (msg.episode, msg.step) != expected:
                self.out_of_order += 1
        self.last = (msg.episode, msg.step, msg.terminal or msg.truncated)
        if self.delay:
            time.sleep(self.delay)
        self.received += 1
        self.reporter.report()
        if self.exit_after and self.received >= self.exit_after and not self.finished.done():
            self.reporter.report(force=True)
            self.health.publish()
            self.get_logger().info(f"{self.received} received, {self.out_of_order} out of order, {self.rate:.0f}/s")
            self.finished.set_result(0 if self.out_of_order == 0 else 1)

    @property
    def rate(self) -> float:
        """Messages per second from the first to the latest received."""
        if self.first is None or self.latest == self.first:
            return 0.0
        return (self.received - 1) / (self.latest - self.first)

    def report_health(self) -> Health:
        values = {"received": self.received, "out_of_order": self.out_of_order, "rate": f"{self.rate:.1f}"}
        if self.last is not None:
            values.update(episode=self.last[0], step=self.last[1])
        message = f"{self.out_of_order} out of order" if self.out_of_order else "in order"
        return Health(WARN if self.out_of_order else OK, message, values)

    def exit_code(self) -> int | None:
        """0 once ``exit_after`` messages came in order, 1 if some did not; None until then."""
        return self.finished.result() if self.finished.done() else None


def main(args=None) -> int:
    return run_node(TransitionCounter, args, until=TransitionCounter.exit_code)


if __name__ == "__main__":
    sys.exit(main())
