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

import rclpy
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from gamma_net_msgs.msg import Transition
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.task import Future

from gamma_net_ros.flow_control import TakenReporter
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
        self.diagnostics = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self.create_timer(1.0, self.publish_diagnostics)

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
            self.publish_diagnostics()
            self.finished.set_result(0 if self.out_of_order == 0 else 1)

    @property
    def rate(self) -> float:
        """Messages per second from the first to the latest received."""
        if self.first is None or self.latest == self.first:
            return 0.0
        return (self.received - 1) / (self.latest - self.first)

    def publish_diagnostics(self) -> None:
        status = DiagnosticStatus(
            name=f"{self.get_name()}: transitions",
            hardware_id="gamma_net",
            level=DiagnosticStatus.WARN if self.out_of_order else DiagnosticStatus.OK,
            message=f"{self.out_of_order} out of order" if self.out_of_order else "in order",
        )
        values = {"received": self.received, "out_of_order": self.out_of_order, "rate": f"{self.rate:.1f}"}
        if self.last is not None:
            values.update(episode=self.last[0], step=self.last[1])
        status.values = [KeyValue(key=k, value=str(v)) for k, v in values.items()]
        array = DiagnosticArray(status=[status])
        array.header.stamp = self.get_clock().now().to_msg()
        self.diagnostics.publish(array)


def main(args=None) -> int:
    rclpy.init(args=args)
    try:
        node = TransitionCounter()
    except ValueError as exc:
        rclpy.logging.get_logger("transition_counter").fatal(f"refusing to start: {exc}")
        rclpy.try_shutdown()
        return 1
    code = 0
    try:
        rclpy.spin_until_future_complete(node, node.finished)
        code = node.finished.result() if node.finished.done() else 0
        node.get_logger().info(f"{node.received} received, {node.out_of_order} out of order, {node.rate:.0f}/s")
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
    return code


if __name__ == "__main__":
    sys.exit(main())
