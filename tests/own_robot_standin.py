"""A robot that is not the project's arm, for docs/own-robot.md (run as a process, as the guide shows).

    python tests/own_robot_standin.py            # until Ctrl-C (or --seconds, 900 by default)

A six-joint pick-and-place arm: ``/my_robot/joint_states`` (JointState of ``base``, ``lift``,
``reach``, ``wrist_pitch``, ``wrist_roll`` and ``gripper``, with position, velocity and effort)
at 50 Hz, and ``/my_robot/battery`` (BatteryState) at 1 Hz. It repeats one 3 s cycle
(:func:`pose`): swing the base to the pick pose, lower the lift, close the gripper (its effort
spikes to about 5 N for 0.3 s, then holds the part at about 1 N), raise, carry it to the place
pose, lower, open. The efforts carry a little noise (seeded). At each grip it prints
``grip at <wall-clock s>``, the spike's first message, so a test can line alerts up with the
spikes; Ctrl-C (or SIGTERM) ends it with exit 0 after ``published N joint_states, B battery``.
"""

from __future__ import annotations

import argparse
import math
import random
import signal
import sys
import time

import rclpy
from rclpy.signals import SignalHandlerOptions

RATE_HZ = 50
CYCLE_S = 3.0
GRIP_S = 1.0  # the spike's start within the cycle
SPIKE_S = 0.3
RELEASE_S = 2.5
JOINTS = ["base", "lift", "reach", "wrist_pitch", "wrist_roll", "gripper"]


def _ease(x: float) -> float:
    """0 to 1 as x goes 0 to 1, smoothly (a move that starts and stops at rest)."""
    x = min(1.0, max(0.0, x))
    return 0.5 * (1 - math.cos(math.pi * x))


def pose(t: float) -> tuple[list[float], float]:
    """Positions at ``t`` s into a cycle, and the gripper's effort without noise.

    Swing the base to the pick pose (+0.8 to -0.8 rad, 0-0.6 s), lower the lift (0.3 to 0.1 m,
    0.6-1.0 s), grip (1.0 s: the gripper closes, its effort spikes for 0.3 s), raise (1.3-1.6 s),
    swing back carrying the part (1.6-2.2 s), lower (2.2-2.5 s), open and raise (2.5-3.0 s).
    """
    if t < 1.6:
        base = 0.8 - 1.6 * _ease(t / 0.6)
    else:
        base = -0.8 + 1.6 * _ease((t - 1.6) / 0.6)
    if t < 1.3:
        lift = 0.3 - 0.2 * _ease((t - 0.6) / 0.4)
    elif t < 2.2:
        lift = 0.1 + 0.2 * _ease((t - 1.3) / 0.3)
    else:
        lift = 0.3 - 0.2 * _ease((t - 2.2) / 0.3) + 0.2 * _ease((t - 2.5) / 0.5)
    reach = 0.4 + 0.1 * math.sin(2 * math.pi * t / CYCLE_S)
    closed = GRIP_S <= t < RELEASE_S
    gripper = 0.04 - 0.04 * _ease((t - GRIP_S) / 0.1) if closed else 0.04  # finger opening, m
    if GRIP_S <= t < GRIP_S + SPIKE_S:
        grip = 5.0
    elif closed:
        grip = 1.0  # holding the part
    else:
        grip = 0.2
    return [base, lift, reach, -0.5 * base, 0.3 * base, gripper], grip


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=900.0, help="stop after this long at most")
    parser.add_argument("--seed", type=int, default=0, help="the efforts' noise")
    args = parser.parse_args()
    from sensor_msgs.msg import BatteryState, JointState

    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)  # Ctrl-C is a KeyboardInterrupt here

    def stop(*_):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)  # as Ctrl-C: a clean exit
    node = rclpy.create_node("my_robot")
    joints = node.create_publisher(JointState, "/my_robot/joint_states", 10)
    battery = node.create_publisher(BatteryState, "/my_robot/battery", 10)
    noise = random.Random(args.seed)
    counts = [0, 0]
    start = time.monotonic()
    previous = pose(0.0)[0]
    try:
        i = 0
        while time.monotonic() - start < args.seconds:
            time.sleep(max(0.0, start + i / RATE_HZ - time.monotonic()))
            t = (i / RATE_HZ) % CYCLE_S
            positions, grip = pose(t)
            msg = JointState(name=JOINTS, position=positions)
            msg.header.stamp = node.get_clock().now().to_msg()
            msg.velocity = [(p - q) * RATE_HZ for p, q in zip(positions, previous)]
            msg.effort = [2.0 * math.sin(p) + noise.gauss(0.0, 0.05) for p in positions[:5]]
            msg.effort.append(grip + noise.gauss(0.0, 0.05))
            previous = positions
            if i % round(CYCLE_S * RATE_HZ) == round(GRIP_S * RATE_HZ):
                print(f"grip at {time.time():.3f}", flush=True)
            joints.publish(msg)
            counts[0] += 1
            if i % RATE_HZ == 0:  # 1 Hz, a slow topic beside the fast one
                state = BatteryState(voltage=24.0 - 0.001 * counts[1], present=True)
                state.current = -2.0 - 3.0 * abs(msg.velocity[0])
                state.header.stamp = msg.header.stamp
                battery.publish(state)
                counts[1] += 1
            i += 1
    except KeyboardInterrupt:
        pass  # Ctrl-C
    print(f"published {counts[0]} joint_states, {counts[1]} battery", flush=True)
    node.destroy_node()
    rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
