"""Node: plays the JointState messages of a recording, for machines without `ros2 bag play`.

    ros2 run gamma_net_ros bag_player --ros-args -p bag:=runs/arm/joint_states -p rate:=1.0

Publishes each message of ``topic`` in recording order with its recorded header stamp, at the
recorded pace times ``rate`` (0: as fast as possible), with the QoS the driver uses (sensor
data) or reliable QoS. ``loops`` > 1 plays it again from the start, as a bag restarted: the
stamps jump back, which the predictor treats as a new episode. Reads rosbag2 (mcap, sqlite3)
and rosbag1 through :mod:`gamma_net_core.data.bags`; on a robot with ROS 2 installed,
`ros2 bag play` does the same, without the delivery guarantee below.

Nothing is lost at a subscriber that keeps up on average but stalls now and then: reliable
QoS alone does not do it (DDS acknowledges a sample once it is in the reader's KEEP_LAST
history, which drops its oldest unread sample for a new one; see
:mod:`gamma_net_ros.flow_control`). Consumers that report what they have taken on
``joint_states/taken`` (the predictor does) are never sent more than ``window`` messages
ahead, which their subscription depth (the predictor's ``input_queue_depth``) must hold; the
player falls behind the recorded pace rather than overflow them (``window`` 0: reliable QoS
alone, the reference `gamma-net bench playback` measures against). ``consumers`` > 0 waits for
that many to report before the first message. At the end it waits (at most
``drain_timeout`` s) until every message is taken by every reporting consumer and, with
reliable QoS, acknowledged by every reader, and says so in its last line:
``published N, acknowledged N``; if a consumer went silent or the drain timed out, the line
is an error with the count confirmed, and the exit code is 1. With best-effort QoS and no
consumer reporting there is nothing to confirm: it waits only ``LATE_REPORT_S`` for a consumer
that has yet to report, not all of ``drain_timeout``.
"""

from __future__ import annotations

import sys
import time

from rclpy.duration import Duration
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import JointState

from gamma_net_core.data.bags import DEFAULT_TOPIC, BagError, iter_joint_states
from gamma_net_ros.conversions import joint_state_msg
from gamma_net_ros.flow_control import ConsumerWindow
from gamma_net_ros.node_main import run_node
from gamma_net_ros.params import declare

#: Seconds the drain waits, with best-effort QoS, for a first report when no consumer has reported:
#: several of a consumer's heartbeats (flow_control.HEARTBEAT, 0.2 s), so one that is there is heard.
LATE_REPORT_S = 1.0


class BagPlayer(Node):
    def __init__(self, **kwargs) -> None:
        super().__init__("bag_player", **kwargs)
        self.publisher = None  # a player refused at start (say, a bad bag) has nothing to flush
        self.bag = declare(
            self, "bag", "", "the recording to play (a rosbag2 folder, .mcap, .db3 or .bag)", read_only=True
        )
        self.topic = declare(self, "topic", DEFAULT_TOPIC, "the JointState topic in the recording", read_only=True)
        self.rate = declare(
            self, "rate", 1.0, "playback speed (1: as recorded; 0: as fast as possible)", low=0.0, high=1000.0
        )
        self.loops = declare(self, "loops", 1, "times to play the recording", low=1, high=1_000_000)
        self.reliable = declare(
            self, "reliable", False, "reliable QoS (default: sensor data, as recorded)", read_only=True
        )
        self.wait_for = declare(
            self, "wait_for_subscribers", 0, "start once this many subscribers are matched", low=0, high=1000
        )
        self.consumers = declare(
            self, "consumers", 0, "start once this many consumers report what they took", low=0, high=1000
        )
        self.window = declare(
            self,
            "window",
            100,
            "messages a reporting consumer may have untaken at most (<= its subscription depth; 0: no window)",
            low=0,
            high=100000,
            read_only=True,
        )
        self.drain_timeout = declare(
            self, "drain_timeout", 10.0, "s to wait at the end for every message to be taken", low=0.0, high=1e6
        )
        consumer_timeout = declare(
            self, "consumer_timeout", 10.0, "s without a report: consumer gone", low=0.1, high=1e6, read_only=True
        )
        if not self.bag:
            raise ValueError("parameter 'bag' is required: the recording to play")
        iter_joint_states(self.bag, topic=self.topic).close()  # a bad path or topic fails here, before publishing
        # The writer keeps every sample it may have to resend: at least the window.
        qos = (
            QoSProfile(depth=max(100, self.window), reliability=ReliabilityPolicy.RELIABLE)
            if self.reliable
            else qos_profile_sensor_data
        )
        self.publisher = self.create_publisher(JointState, "joint_states", qos)
        self.published = 0
        self.tracker = ConsumerWindow(self, "joint_states", published=lambda: self.published, timeout=consumer_timeout)
        self.loop = 0
        self.draining_since: float | None = None
        self.done = False
        self.undelivered = False  # set at the end if what was published is known not to have been taken
        self._start_loop()
        # A timer, not a loop in main: parameters and shutdown stay live while playing.
        self.create_timer(0.001, self._publish_due)

    def _start_loop(self) -> None:
        self.messages = iter_joint_states(self.bag, topic=self.topic)
        self.pending = next(self.messages, None)
        self.first = None if self.pending is None else self.pending.receive
        self.started = None  # set once the subscribers asked for are matched

    def _publish_due(self) -> None:
        if self.done:
            return
        if self.started is None:
            matched, reporting = self.publisher.get_subscription_count(), len(self.tracker.consumers)
            if matched < self.wait_for or reporting < self.consumers:
                self.get_logger().info(
                    f"waiting for {self.wait_for} subscriber(s) ({matched} matched) and {self.consumers} "
                    f"consumer(s) reporting on {self.tracker.topic} ({reporting})",
                    throttle_duration_sec=5.0,
                )
                return
            self.started = time.monotonic() + 0.2  # matched: give the subscriber's side a moment too
        self._forget_silent()
        if self.draining_since is not None:
            self._drain()
            return
        # Never more than the window ahead of the slowest reporting consumer, whatever the pace says.
        allowed = 200  # per tick: timers stay live
        if self.window:
            allowed = min(allowed, self.window - self.tracker.in_flight())
        while self.pending is not None and allowed > 0:
            due = self.started + (self.pending.receive - self.first) / self.rate if self.rate > 0 else self.started
            if time.monotonic() < due:
                return
            self._publish(self.pending)
            try:
                self.pending = next(self.messages, None)
            except BagError as exc:  # damaged part-way: what was published stays published; stop in one line
                self.get_logger().error(f"stopped after publishing {self.published}: {exc}")
                self.done = self.undelivered = True
                return
            allowed -= 1
        if self.pending is None:
            self.loop += 1
            self.get_logger().info(f"played {self.bag} (loop {self.loop}/{self.loops}): {self.published} messages")
            if self.loop < self.loops:
                self._start_loop()
                self.started = time.monotonic()  # the next loop is paced from now, not from the first start
            else:
                self.draining_since = time.monotonic()
                self._drain()

    def _forget_silent(self) -> None:
        gone = self.tracker.forget_silent()
        if gone:
            self.get_logger().warning(
                f"consumer(s) {gone} stopped reporting after taking {self.tracker.confirmed()} of "
                f"{self.published} messages: no longer waited for"
            )

    def acknowledged(self) -> int | None:
        """Messages every reporting consumer has taken, or every reliable reader acknowledged; None: unknown.

        A consumer that went silent counts with what it confirmed taking, also after it went silent
        (a consumer stalled, not stopped, reports again): never more than it took, never less.
        """
        if self.tracker.lapsed:
            return self.tracker.confirmed()
        if self.tracker.consumers:
            taken = self.published - self.tracker.in_flight()
            if self.reliable and taken == self.published:
                return taken if self.publisher.wait_for_all_acked(Duration(seconds=0)) else None
            return taken
        if self.reliable:
            return self.published if self.publisher.wait_for_all_acked(Duration(seconds=0)) else None
        return None

    def _drain(self) -> None:
        """After the last message: done once all is taken and acknowledged, or after ``drain_timeout``."""
        acknowledged = self.acknowledged()
        complete = acknowledged == self.published and (self.reliable or self.tracker.consumers)
        waited = time.monotonic() - self.draining_since
        # No consumer ever reported (one gone silent may come back: waited for as before).
        unconfirmable = not self.reliable and not self.tracker.consumers and not self.tracker.gone
        if not complete and waited < (min(self.drain_timeout, LATE_REPORT_S) if unconfirmable else self.drain_timeout):
            return
        self.done = True
        if complete:
            self.get_logger().info(f"published {self.published}, acknowledged {acknowledged}")
        elif not self.reliable and not self.tracker.consumers:
            self.get_logger().info(
                f"published {self.published}, acknowledged none (best-effort QoS and no reporting consumer: "
                "delivery unknown; reliable:=true or a consumer on joint_states/taken gives it)"
            )
        else:
            self.undelivered = True
            shown = "unknown" if acknowledged is None else acknowledged
            why = (
                f"a consumer stopped reporting ({sorted(self.tracker.lapsed)} silent for more than "
                f"consumer_timeout {self.tracker.timeout:g} s, not waited for meanwhile)"
                if self.tracker.lapsed
                else f"not all within drain_timeout {self.drain_timeout:g} s"
            )
            self.get_logger().error(f"published {self.published}, acknowledged {shown}: {why}")

    def destroy_node(self) -> None:
        if self.publisher is not None:
            if not self.done:
                # Stopped while playing: let what was published leave before the process goes.
                self.publisher.wait_for_all_acked(Duration(seconds=2.0))
            self.publisher = None
        super().destroy_node()

    def _publish(self, message) -> None:
        self.publisher.publish(joint_state_msg(message))
        self.published += 1


def main(args=None) -> int:
    """Exit code 0 after a complete delivery (or an unknown one: best effort), 1 if messages went untaken."""
    return run_node(BagPlayer, args, until=lambda node: int(node.undelivered) if node.done else None)


if __name__ == "__main__":
    sys.exit(main())
