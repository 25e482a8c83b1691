"""A robot stand-in that publishes a known number of messages, for recording tests (run as a process).

    python tests/robot_standin.py --count 100

Publishes, with reliable QoS, ``/joint_states`` (JointState of shoulder and elbow at 50 Hz,
position i-th message: shoulder -0.75 + 0.5 cos, elbow 1.7 + 0.4 sin of a 2 s swing; stamps of
the wall clock), ``/battery`` (BatteryState at 5 Hz, voltage 12 - i/100) and
``/horde/predictions`` (a gamma_net_msgs PredictionArray at 5 Hz, update_count i). It starts
once every topic (or every one of ``--topics``) has a subscriber (a recorder that subscribed), publishes ``--count``
JointStates with the others at their rates, waits until every reader acknowledged every
message, prints ``published J joint_states, B battery, P predictions`` and exits 0.
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import rclpy
from rclpy.duration import Duration
from rclpy.qos import QoSProfile, ReliabilityPolicy

RATE_HZ = 50
EVERY = 10  # the slow topics publish every 10th tick: 5 Hz


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, required=True, help="JointState messages to publish")
    parser.add_argument("--topics", nargs="+", default=None, help="topics that must have a subscriber (default: all)")
    parser.add_argument("--wait", type=float, default=120.0, help="s to wait for subscribers at most")
    args = parser.parse_args()
    from gamma_net_msgs.msg import PredictionArray
    from sensor_msgs.msg import BatteryState, JointState

    rclpy.init()
    node = rclpy.create_node("robot_standin")
    qos = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
    joints = node.create_publisher(JointState, "/joint_states", qos)
    battery = node.create_publisher(BatteryState, "/battery", qos)
    predictions = node.create_publisher(PredictionArray, "/horde/predictions", qos)
    publishers = (joints, battery, predictions)
    deadline = time.monotonic() + args.wait
    awaited = [p for p in publishers if args.topics is None or p.topic_name in args.topics]
    while not all(p.get_subscription_count() for p in awaited):
        if time.monotonic() > deadline:
            print("no subscriber on every topic", flush=True)
            return 1
        time.sleep(0.05)
    print("subscribed: publishing", flush=True)
    counts = [0, 0, 0]
    start = time.monotonic()
    for i in range(args.count):
        time.sleep(max(0.0, start + i / RATE_HZ - time.monotonic()))
        now = node.get_clock().now().to_msg()
        phase = 2 * math.pi * i / (2 * RATE_HZ)
        msg = JointState(name=["shoulder", "elbow"])
        msg.header.stamp = now
        msg.position = [-0.75 + 0.5 * math.cos(phase), 1.7 + 0.4 * math.sin(phase)]
        msg.velocity = [-0.5 * math.pi * math.sin(phase), 0.4 * math.pi * math.cos(phase)]
        msg.effort = [0.0, 0.0]
        joints.publish(msg)
        counts[0] += 1
        if i % EVERY == 0:
            state = BatteryState(voltage=12.0 - counts[1] / 100, present=True)
            state.header.stamp = now
            battery.publish(state)
            counts[1] += 1
            array = PredictionArray(questions=["q"], gammas=[0.9], values=[float(i)], update_count=counts[2])
            array.header.stamp = now
            predictions.publish(array)
            counts[2] += 1
    acked = all(p.wait_for_all_acked(Duration(seconds=args.wait)) for p in publishers)
    print(f"published {counts[0]} joint_states, {counts[1]} battery, {counts[2]} predictions", flush=True)
    node.destroy_node()
    rclpy.try_shutdown()
    return 0 if acked else 1


if __name__ == "__main__":
    sys.exit(main())
