"""rosbag2 (and rosbag1) recordings of ``sensor_msgs/msg/JointState``, through the `rosbags` library.

Writing: :class:`JointStateBagWriter` writes any JointState messages (faulty ones too, for
tests) to a rosbag2 in mcap (default) or sqlite3 storage, or to a rosbag1 file; such a bag
plays with ``ros2 bag play``. :func:`write_recording` writes a simulated arm recording.

Reading: :func:`read_joint_states` reads a rosbag2 directory (mcap or sqlite3), a bare
``.mcap``/``.db3`` file or a rosbag1 ``.bag`` file, passes every message on the topic through
the same :class:`~gamma_net_core.data.joints.JointSelector` the predictor node uses (with
the same ``max_gap``, the same messages are skipped and the same episodes start), and
returns the usable samples as arrays with the skips counted by kind.
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gamma_net_core.data.joints import (
    DEFAULT_MAX_GAP,
    NANOSECONDS,
    JointSample,
    JointsConfig,
    JointSelector,
    stamp_seconds,
)

DEFAULT_TOPIC = "/joint_states"
JOINT_STATE = "sensor_msgs/msg/JointState"
#: Storage formats the writer offers: rosbag2 with mcap or sqlite3 storage, or a rosbag1 file.
STORAGES = ("mcap", "sqlite3", "rosbag1")
#: Where a sample's time comes from: the message's header stamp, or when the bag recorded it.
CLOCKS = ("header", "receive")


class BagError(ValueError):
    """A path that is not a readable bag, or a bag without the JointState topic asked for."""


def _typestore(ros1: bool):
    from rosbags.typesys import Stores, get_typestore

    return get_typestore(Stores.ROS1_NOETIC if ros1 else Stores.ROS2_KILTED)


def _sensor_data_qos():
    """The QoS a driver publishes joint states with (rclpy's qos_profile_sensor_data), for `ros2 bag play`."""
    from rosbags.interfaces import Qos, QosDurability, QosHistory, QosLiveliness, QosReliability, QosTime

    zero = QosTime(0, 0)
    return Qos(
        QosHistory.KEEP_LAST,
        5,
        QosReliability.BEST_EFFORT,
        QosDurability.VOLATILE,
        zero,
        zero,
        QosLiveliness.AUTOMATIC,
        zero,
        False,
    )


class JointStateBagWriter:
    """Writes JointState messages to a new bag, one call per message.

    Usage::

        with JointStateBagWriter(path, storage="mcap") as bag:
            bag.write(stamp_ns=t, names=["shoulder", "elbow"], position=[0.1, 1.2], velocity=[0.0, 0.3])

    Messages are written as given (any lengths, NaN included), so tests can write faulty ones.
    """

    def __init__(self, path: str | pathlib.Path, *, storage: str = "mcap", topic: str = DEFAULT_TOPIC) -> None:
        """Create the bag at ``path`` (a directory for rosbag2, a ``.bag`` file for rosbag1; must not exist).

        Raises:
          ValueError: an unknown storage, or a path that already exists.
        """
        if storage not in STORAGES:
            raise ValueError(f"storage must be one of {list(STORAGES)}; got {storage!r}")
        self.path = pathlib.Path(path)
        if self.path.exists():
            raise ValueError(f"{self.path} exists already; a bag is written to a new path")
        if storage == "rosbag1" and self.path.suffix != ".bag":
            raise ValueError(f"a rosbag1 file must end in .bag; got {self.path}")
        self.storage = storage
        self.topic = topic
        self.count = 0
        self._ros1 = storage == "rosbag1"
        self._typestore = _typestore(self._ros1)
        types = self._typestore.types
        self._JointState = types[JOINT_STATE]
        self._Header = types["std_msgs/msg/Header"]
        self._Time = types["builtin_interfaces/msg/Time"]
        self._writer: Any = None
        self._connection: Any = None

    def __enter__(self) -> JointStateBagWriter:
        if self._ros1:
            from rosbags.rosbag1 import Writer

            self._writer = Writer(self.path)
            self._writer.open()
            self._connection = self._writer.add_connection(self.topic, JOINT_STATE, typestore=self._typestore)
        else:
            from rosbags.rosbag2 import StoragePlugin, Writer

            plugin = StoragePlugin.MCAP if self.storage == "mcap" else StoragePlugin.SQLITE3
            self._writer = Writer(self.path, version=9, storage_plugin=plugin)
            self._writer.open()
            self._connection = self._writer.add_connection(
                self.topic, JOINT_STATE, typestore=self._typestore, offered_qos_profiles=[_sensor_data_qos()]
            )
        return self

    def __exit__(self, *exc_info) -> None:
        # Close even after an error: what was written stays a readable bag.
        self._writer.close()

    def write(
        self,
        *,
        stamp_ns: int,
        names: Sequence[str],
        position: Sequence[float] = (),
        velocity: Sequence[float] = (),
        effort: Sequence[float] = (),
        receive_ns: int | None = None,
    ) -> None:
        """Write one JointState stamped ``stamp_ns`` (ns), recorded at ``receive_ns`` (default: the stamp)."""
        if self._writer is None:
            raise RuntimeError("JointStateBagWriter.write outside its `with` block")
        sec, nanosec = divmod(int(stamp_ns), NANOSECONDS)
        stamp = self._Time(sec=sec, nanosec=nanosec)
        header = (
            self._Header(seq=self.count, stamp=stamp, frame_id="")
            if self._ros1
            else self._Header(stamp=stamp, frame_id="")
        )
        msg = self._JointState(
            header=header,
            name=[str(n) for n in names],
            position=np.asarray(position, dtype=np.float64),
            velocity=np.asarray(velocity, dtype=np.float64),
            effort=np.asarray(effort, dtype=np.float64),
        )
        if self._ros1:
            data = self._typestore.serialize_ros1(msg, JOINT_STATE)
        else:
            data = self._typestore.serialize_cdr(msg, JOINT_STATE)
        self._writer.write(self._connection, int(stamp_ns if receive_ns is None else receive_ns), data)
        self.count += 1


def write_joint_states(
    path: str | pathlib.Path,
    *,
    stamp_ns,
    joint_names: Sequence[str],
    position,
    velocity=None,
    effort=None,
    storage: str = "mcap",
    topic: str = DEFAULT_TOPIC,
) -> pathlib.Path:
    """Write a whole recording: one JointState per row.

    Args:
      stamp_ns: [T] int ns.
      joint_names: [J] names, in column order.
      position, velocity, effort: [T, J] (rad, rad/s, N m); velocity and effort may be None (empty arrays).
    """
    stamp_ns = np.asarray(stamp_ns, dtype=np.int64)
    columns = [None if a is None else np.asarray(a, dtype=np.float64) for a in (position, velocity, effort)]
    for name, values in zip(("position", "velocity", "effort"), columns):
        if values is not None and values.shape != (len(stamp_ns), len(joint_names)):
            raise ValueError(
                f"{name} has shape {values.shape}; expected ({len(stamp_ns)}, {len(joint_names)}) for "
                f"{len(stamp_ns)} stamps and joints {list(joint_names)}"
            )
    empty = np.zeros(0)
    with JointStateBagWriter(path, storage=storage, topic=topic) as bag:
        for t, stamp in enumerate(stamp_ns):
            row = [empty if values is None else values[t] for values in columns]
            bag.write(stamp_ns=int(stamp), names=joint_names, position=row[0], velocity=row[1], effort=row[2])
    return pathlib.Path(path)


def write_recording(path: str | pathlib.Path, recording, *, storage: str = "mcap", topic: str = DEFAULT_TOPIC):
    """Write an :class:`~gamma_net_core.signals.arm_recording.ArmRecording` as a JointState bag."""
    return write_joint_states(
        path,
        stamp_ns=recording.stamp_ns,
        joint_names=recording.joint_names,
        position=recording.position,
        velocity=recording.velocity,
        effort=recording.effort,
        storage=storage,
        topic=topic,
    )


@dataclass(frozen=True)
class JointStateMessage:
    """One JointState's plain fields as read from a bag."""

    stamp: float  # s, header stamp
    receive: float  # s, when the bag recorded it
    names: list[str]
    position: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray


def open_reader(path: pathlib.Path):
    """A rosbags reader of the bag at ``path`` (rosbag2 directory, .mcap, .db3, or rosbag1 .bag), opened.

    Raises:
      FileNotFoundError: no bag there.
      BagError: not a readable bag.
    """
    from rosbags.highlevel import AnyReader, AnyReaderError
    from rosbags.rosbag1 import ReaderError as Rosbag1Error
    from rosbags.rosbag2 import ReaderError as Rosbag2Error

    if not path.exists():
        raise FileNotFoundError(f"no bag at {path}")
    what = (
        f"{path} is not a readable bag (expected a rosbag2 directory with metadata.yaml, an .mcap or .db3 file, "
        "or a rosbag1 .bag file)"
    )
    try:
        reader = AnyReader([path], default_typestore=_typestore(path.suffix == ".bag"))
        reader.open()
    except (AnyReaderError, Rosbag1Error, Rosbag2Error, FileNotFoundError, KeyError, ValueError) as exc:
        raise BagError(f"{what}: {exc}") from None
    except Exception as exc:  # rosbags' storage backends raise their own (sqlite3, mcap, struct) errors
        raise BagError(f"{what}: {type(exc).__name__}: {exc}") from None
    return reader


def read_messages(reader, connections, path: pathlib.Path) -> Iterator[tuple[Any, int, Any]]:
    """(connection, receive time in ns, deserialized message) of ``connections``, in recording order.

    A bag damaged part-way (a chunk zeroed, a file cut short) makes rosbags' storage backends
    raise whatever their decoder meets (OverflowError, a CDR size mismatch, a decompressor's
    error), or end early without a word; either becomes one :class:`BagError` naming the bag and
    how many of the messages its index counts were read. The messages before the damage have been
    yielded already: a reader that must not act on a partial bag reads it whole first.

    Raises:
      BagError: the bag cannot be read to its end.
    """
    expected = sum(int(getattr(c, "msgcount", 0) or 0) for c in connections)
    read = 0
    messages = reader.messages(connections=connections)
    while True:
        try:
            item = next(messages, None)
            if item is None:
                break
            connection, receive_ns, raw = item
            message = reader.deserialize(raw, connection.msgtype)
        except BagError:
            raise
        except Exception as exc:  # the backends' decoders raise many types; all mean damage
            reason = " ".join(f"{type(exc).__name__}: {exc}".split())
            raise BagError(
                f"{path} is damaged: reading stopped after {read} of its {expected} messages ({reason})"
            ) from None
        read += 1
        yield connection, receive_ns, message
    if read < expected:
        raise BagError(f"{path} is damaged: only {read} of its {expected} messages could be read")


def _topic_connections(reader, path: pathlib.Path, topic: str) -> list:
    connections = [c for c in reader.connections if c.topic == topic]
    if not connections:
        found = {c.topic: c.msgtype for c in reader.connections}
        raise BagError(f"{path} has no topic {topic!r}; its topics: {found or 'none'}")
    other = sorted({c.msgtype for c in connections if c.msgtype != JOINT_STATE})
    if other:
        raise BagError(f"topic {topic!r} in {path} carries {', '.join(other)}, not {JOINT_STATE}")
    return connections


def iter_joint_states(path: str | pathlib.Path, *, topic: str = DEFAULT_TOPIC) -> Iterator[JointStateMessage]:
    """Every JointState on ``topic`` in the bag at ``path``, in recording order, as plain fields.

    The bag is opened and checked at the call, so a bad path or topic fails before iteration.

    Raises:
      FileNotFoundError: nothing at ``path``.
      BagError: ``path`` is not a bag, has no ``topic``, or ``topic`` carries another type; while
        iterating, a bag damaged part-way (see :func:`read_messages`).
    """
    path = pathlib.Path(path)
    reader = open_reader(path)
    try:
        connections = _topic_connections(reader, path, topic)
    except BaseException:
        reader.close()
        raise
    return _messages(reader, connections, path)


def _messages(reader, connections, path: pathlib.Path) -> Iterator[JointStateMessage]:
    try:
        for _, receive_ns, msg in read_messages(reader, connections, path):
            stamp = msg.header.stamp
            yield JointStateMessage(
                stamp=stamp_seconds(stamp.sec, stamp.nanosec),
                receive=stamp_seconds(*divmod(receive_ns, NANOSECONDS)),
                names=msg.name,
                position=msg.position,
                velocity=msg.velocity,
                effort=msg.effort,
            )
    finally:
        reader.close()


@dataclass(frozen=True)
class JointData:
    """The usable samples of a bag's JointState topic, and what was skipped.

    Attributes:
      stamps: [T] s.
      inputs: [T, n_inputs] normalized to [0, 1] (the selector's config says which joints).
      cumulants: [T] the cumulant signal in each sample's message, in its units. With returns.py's
        convention (``cumulants[t]`` is C_{t+1}), a learner pairs ``inputs[t]`` with ``cumulants[t + 1]``.
      messages: JointState messages read.
      skips: ``{kind: count}`` for every skip kind.
      config: the joint selection used.
      episode_starts: [T] bool, the samples that start an episode (the first; after a replay
        restart or a pause longer than ``max_gap``): no transition is made into them.
      max_gap: s, the episode gap the samples were judged with.
    """

    path: str
    topic: str
    stamps: np.ndarray
    inputs: np.ndarray
    cumulants: np.ndarray
    messages: int
    skips: dict[str, int]
    config: JointsConfig
    episode_starts: np.ndarray
    max_gap: float = DEFAULT_MAX_GAP

    @property
    def skipped(self) -> int:
        return sum(self.skips.values())

    @property
    def episodes(self) -> int:
        return int(self.episode_starts.sum())


def read_joint_states(
    path: str | pathlib.Path,
    *,
    joints: JointsConfig,
    topic: str = DEFAULT_TOPIC,
    clock: str = "header",
    max_gap: float = DEFAULT_MAX_GAP,
) -> JointData:
    """Read a bag's JointState topic through the joint selector; unusable messages are skipped and counted.

    Args:
      path: a rosbag2 directory (mcap or sqlite3), an ``.mcap``/``.db3`` file, or a rosbag1 ``.bag`` file.
      joints: which joints are inputs and which signal is the cumulant.
      topic: the JointState topic.
      clock: ``"header"`` (message stamps) or ``"receive"`` (when the bag recorded each message).
      max_gap: s; a stamp back by no more than this is skipped, one further back or forward starts
        an episode (the predictor node's ``max_gap``: give the same to learn from the same data).

    Raises:
      FileNotFoundError: nothing at ``path``.
      BagError: not a bag, no such topic, a topic of another type, or a bag damaged part-way (the
        message names it).
    """
    if clock not in CLOCKS:
        raise ValueError(f"clock must be one of {list(CLOCKS)}; got {clock!r}")
    selector = JointSelector(joints, max_gap=max_gap)
    stamps: list[float] = []
    starts: list[bool] = []
    inputs: list[np.ndarray] = []
    cumulants: list[float] = []
    messages = 0
    for msg in iter_joint_states(path, topic=topic):
        messages += 1
        result = selector.select(
            stamp=msg.stamp if clock == "header" else msg.receive,
            names=msg.names,
            position=msg.position,
            velocity=msg.velocity,
            effort=msg.effort,
        )
        if isinstance(result, JointSample):
            stamps.append(result.stamp)
            inputs.append(result.inputs)
            cumulants.append(result.cumulant)
            starts.append(result.episode_start)
    n_inputs = len(joints.input_joints)
    return JointData(
        path=str(path),
        topic=topic,
        stamps=np.array(stamps, dtype=np.float64),
        inputs=np.array(inputs, dtype=np.float64).reshape(len(stamps), n_inputs),
        cumulants=np.array(cumulants, dtype=np.float64),
        messages=messages,
        skips=selector.skips.as_dict(),
        config=joints,
        episode_starts=np.array(starts, dtype=bool),
        max_gap=selector.max_gap,
    )
