"""What the bag recorder writes beside the messages: the publishers' QoS as rosbag2 stores it, and a new bag's path."""

from __future__ import annotations

import pathlib

from rosbags.interfaces import Qos, QosDurability, QosHistory, QosLiveliness, QosReliability, QosTime


def _qos_time(duration) -> QosTime:
    sec, nsec = divmod(int(duration.nanoseconds), 1_000_000_000)
    return QosTime(sec, nsec)


def bag_qos(profile) -> Qos:
    """A publisher's rclpy QoS as rosbag2 writes it in ``offered_qos_profiles``."""
    return Qos(
        QosHistory(int(profile.history)),
        int(profile.depth),
        QosReliability(int(profile.reliability)),
        QosDurability(int(profile.durability)),
        _qos_time(profile.deadline),
        _qos_time(profile.lifespan),
        QosLiveliness(int(profile.liveliness)),
        _qos_time(profile.liveliness_lease_duration),
        bool(profile.avoid_ros_namespace_conventions),
    )


def new_bag_path(output: str) -> pathlib.Path:
    """The output folder: absent or empty (then removed: rosbags creates it itself)."""
    if not output:
        raise ValueError("parameter 'output' is required: the bag folder to write, e.g. -p output:=runs/my_robot/bag")
    path = pathlib.Path(output)
    if path.is_dir() and not any(path.iterdir()):
        path.rmdir()
    elif path.exists():
        what = "folder" if path.is_dir() else "file"
        raise ValueError(f"output {output!r} exists already (a non-empty {what}); a bag is written to a new path")
    return path
