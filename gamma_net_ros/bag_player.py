"""Node: plays the JointState messages of a recording, for machines without `ros2 bag play`.

    ros2 run gamma_net_ros bag_player --ros-args -p bag:=runs/arm/joint_states -p rate:=1.0

Publishes each message of ``topic`` in recording order with its recorded header stamp, at the
recorded pace times ``rate`` (0: as fast as possible, which can outrun a subscriber: DDS
keeps only a queue's depth of unread messages, reliable or not), with the QoS the driver
uses (sensor data). ``loops`` > 1 plays it again from the start, as a bag restarted: the stamps jump
back, which the predictor treats as a new episode. Reads rosbag2 (mcap, sqlite3) and
rosbag1 through :mod:`gamma_net_core.data.bags`; on a robot with ROS 2 installed,
`ros2 bag play` does the same.
"""

from __future__ import annotations

import sys
import time

from rclpy.duration import Duration
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import JointState

from gamma_net_core.data.bags import DEFAULT_TOPIC, iter_joint_states
from gamma_net_ros.conversions import seconds_to_stamp
from gamma_net_ros.node_main import run_node
from gamma_net_ros.params import declare


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
        if not self.bag:
            raise ValueError("parameter 'bag' is required: the recording to play")
        iter_joint_states(self.bag, topic=self.topic).close()  # a bad path or topic fails here, before publishing
        qos = (
            QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE) if self.reliable else qos_profile_sensor_data
        )
        self.publisher = self.create_publisher(JointState, "joint_states", qos)
        self.published = 0
        self.loop = 0
        self.done = False
        self._start_loop()
        # A timer, not a loop in main: parameters and shutdown stay live while playing.
        self.create_timer(0.001, self._publish_due)

    def _start_loop(self) -> None:
        self.messages = iter_joint_states(self.bag, topic=self.topic)
        self.pending = next(self.messages, None)
        self.first = None if self.pending is None else self.pending.receive
        self.started = None  # set once the subscribers asked for are matched

    def _publish_due(self) -> None:
        if self.started is None:
            if self.publisher.get_subscription_count() < self.wait_for:
                return
            self.started = time.monotonic() + 0.2  # matched: give the subscriber's side a moment too
        budget = 200  # messages per tick when playing as fast as possible
        while self.pending is not None and budget > 0:
            due = self.started + (self.pending.receive - self.first) / self.rate if self.rate > 0 else self.started
            if time.monotonic() < due:
                return
            self._publish(self.pending)
            self.pending = next(self.messages, None)
            budget -= 1
        if self.pending is None and not self.done:
            self.loop += 1
            self.get_logger().info(f"played {self.bag} (loop {self.loop}/{self.loops}): {self.published} messages")
            if self.loop < self.loops:
                self._start_loop()
            else:
                self.done = True

    def destroy_node(self) -> None:
        if self.publisher is not None:
            # Let the last messages leave before the process goes (acknowledged, when reliable).
            self.publisher.wait_for_all_acked(Duration(seconds=2.0))
            time.sleep(0.2)
            self.publisher = None
        super().destroy_node()

    def _publish(self, message) -> None:
        msg = JointState()
        msg.header.stamp = seconds_to_stamp(message.stamp)
        msg.name = list(message.names)
        msg.position = [float(v) for v in message.position]
        msg.velocity = [float(v) for v in message.velocity]
        msg.effort = [float(v) for v in message.effort]
        self.publisher.publish(msg)
        self.published += 1


def main(args=None) -> int:
    return run_node(BagPlayer, args, until=lambda node: 0 if node.done else None)


if __name__ == "__main__":
    sys.exit(main())
