"""What the bag recorder writes beside the messages (the publishers' QoS as rosbag2 stores it, a new bag's path),
what it counts, and how it closes a bag on a disk that refuses writes."""

from __future__ import annotations

import contextlib
import pathlib
import sqlite3
import time
from collections.abc import Callable

from rclpy.executors import SingleThreadedExecutor
from rosbags.interfaces import Qos, QosDurability, QosHistory, QosLiveliness, QosReliability, QosTime
from rosbags.rosbag2 import Writer, WriterError

from gamma_net_ros.graph_watch import Arrivals

#: What a write to a bag raises when the disk refuses it (full, a file-size limit, gone).
WRITE_ERRORS = (OSError, sqlite3.Error, WriterError)


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


class RecordingCounts:
    """Where each message handed to the recorder went: ``received`` = ``processed`` (written) + ``skipped``
    (by reason), and ``lost`` (sent, never handed: :class:`Arrivals`); in all and per topic."""

    def __init__(self) -> None:
        self.arrivals: dict[str, Arrivals] = {}  # topic -> messages handed to the node, and lost on the way
        self.written: dict[str, int] = {}  # topic -> messages handed to the bag's writer
        self.skipped: dict[str, int] = {}  # reason -> messages handed to the node and not written

    def add_topic(self, topic: str) -> None:
        """A topic now recorded: its messages counted from here on (``arrivals[topic].arrived(info)``)."""
        self.written[topic] = 0
        self.arrivals.setdefault(topic, Arrivals())

    def skip(self, why: str) -> None:
        self.skipped[why] = self.skipped.get(why, 0) + 1

    @property
    def recorded(self) -> int:
        return sum(self.written.values())

    @property
    def received(self) -> int:
        return sum(a.received for a in self.arrivals.values())

    def values(self) -> dict[str, int]:
        """``received``, ``processed``, ``skipped``, ``lost``, ``skipped.<reason>``, and per topic
        ``received.<topic>``, ``recorded.<topic>``, ``lost.<topic>``."""
        values = {
            "received": self.received,
            "processed": self.recorded,
            "skipped": sum(self.skipped.values()),
            "lost": sum(a.lost for a in self.arrivals.values()),
            **{f"skipped.{why}": count for why, count in self.skipped.items()},
        }
        for topic, a in self.arrivals.items():
            values.update({f"received.{topic}": a.received, f"recorded.{topic}": self.written[topic]})
            values[f"lost.{topic}"] = a.lost
        return values

    def last_line(self, path: pathlib.Path, *, closed: bool) -> str:
        """The line at exit: what was written (or, ``closed`` False, handed to the writer), then the counts."""
        topics = ", ".join(f"{t} {n}" for t, n in self.written.items()) or "no topic had a publisher"
        head = f"wrote {path}: {self.recorded} messages" if closed else (
            f"{path} is incomplete: {self.recorded} messages handed to its writer"
        )  # fmt: skip
        c, why = self.values(), ", ".join(f"{why} {n}" for why, n in self.skipped.items())
        return (
            f"{head} ({topics}); received {c['received']}, skipped {c['skipped']}{f' ({why})' if why else ''}, "
            f"lost on the way {c['lost']}"
        )


def close_bag(writer: Writer, path: pathlib.Path) -> str | None:
    """Close ``writer`` (the bag's index and metadata.yaml); None, or why it could not (the file closed anyway)."""
    try:
        writer.close()
        return None
    except WRITE_ERRORS as exc:  # the disk that refused a write refuses these too
        with contextlib.suppress(*WRITE_ERRORS):
            writer.abort()
        return (
            f"cannot close {path} ({exc}): the bag has no index or metadata.yaml, and the messages handed to "
            "its writer since its last complete chunk are not in it"
        )


def take_what_arrived(node, received: Callable[[], int], seconds: float) -> None:
    """Spin ``node`` alone until ``received()`` stops growing (three quiet turns) or ``seconds`` pass."""
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    deadline = time.monotonic() + seconds
    try:
        idle = 0
        while idle < 3 and time.monotonic() < deadline:
            before = received()
            executor.spin_once(timeout_sec=0.02)
            idle = idle + 1 if received() == before else 0
    finally:
        executor.remove_node(node)
        executor.shutdown()
