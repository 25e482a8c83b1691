"""Messages <-> arrays: the only place that knows both message layouts and core types."""

from __future__ import annotations

import array
from collections.abc import Sequence

import numpy as np
from builtin_interfaces.msg import Time
from gamma_net_msgs.msg import Prediction, Transition
from rclpy.node import Node
from sensor_msgs.msg import JointState


def clock_seconds(node: Node) -> float:
    """The node's clock now, in seconds (simulated time under ``use_sim_time``)."""
    return node.get_clock().now().nanoseconds * 1e-9


def stamp_to_seconds(stamp: Time) -> float:
    return stamp.sec + stamp.nanosec * 1e-9


def seconds_to_stamp(seconds: float) -> Time:
    sec, nanosec = divmod(round(seconds * 1e9), 1_000_000_000)
    return Time(sec=sec, nanosec=nanosec)


def prediction_msg(
    *,
    stamp: Time,
    question: str,
    gammas: Sequence[float],
    values: Sequence[float],
    update_count: int,
    frame_id: str = "",
) -> Prediction:
    """A Prediction of ``question``'s discounted return at each gamma (values in the cumulant's units)."""
    gammas = np.asarray(gammas, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    if gammas.shape != values.shape:
        raise ValueError(f"gammas {gammas.shape} and values {values.shape} must have the same shape")
    msg = Prediction()
    msg.header.stamp = stamp
    msg.header.frame_id = frame_id
    msg.question = question
    # array.array is taken as is; a list would be checked element by element.
    msg.gammas = array.array("d", gammas.tobytes())
    msg.values = array.array("d", values.tobytes())
    msg.update_count = int(update_count)
    return msg


def transition_msg(row, stamp: Time) -> Transition:
    """A Transition of one recorded step ``row``: (features [F], cumulant, terminal, truncated, episode, step)."""
    features, cumulant, terminal, truncated, episode, step = row
    msg = Transition()
    msg.header.stamp = stamp
    msg.features = array.array("f", np.ascontiguousarray(features, dtype=np.float32).tobytes())
    msg.cumulant = cumulant
    msg.terminal = terminal
    msg.truncated = truncated
    msg.episode = episode
    msg.step = step
    return msg


def transition_fields(msg: Transition) -> dict:
    """A Transition's fields as :meth:`gamma_net_core.neural.online.TransitionStream.receive` takes them.

    The features are a read-only view of the message's buffer, not a copy.
    """
    return {
        "features": np.frombuffer(msg.features, dtype=np.float32),
        "cumulant": msg.cumulant,
        "terminal": msg.terminal,
        "truncated": msg.truncated,
        "episode": msg.episode,
        "step": msg.step,
        "stamp": stamp_to_seconds(msg.header.stamp),
    }


def joint_state_msg(message) -> JointState:
    """A JointState of a recorded one (:class:`~gamma_net_core.data.bags.JointStateMessage`), its stamp kept."""
    msg = JointState()
    msg.header.stamp = seconds_to_stamp(message.stamp)
    msg.name = list(message.names)
    msg.position = [float(v) for v in message.position]
    msg.velocity = [float(v) for v in message.velocity]
    msg.effort = [float(v) for v in message.effort]
    return msg


def servo_state_msg(joint_names: list[str], sample, torque_constant: float) -> JointState:
    """A JointState of one bus read (a :class:`~gamma_net_ros.hardware.bus.JointSample`), stamped at its request.

    Its effort is an estimate of the torque, N m: the Present Current times ``torque_constant`` (N m per A).
    """
    msg = JointState(
        name=joint_names,
        position=sample.position.tolist(),
        velocity=sample.velocity.tolist(),
        effort=(sample.current * torque_constant).tolist(),
    )
    msg.header.stamp = seconds_to_stamp(sample.stamp)
    return msg
