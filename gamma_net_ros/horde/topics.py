"""Topics of any message type, sampled on a clock: what the Horde node reads its signals from.

A question names a topic, its message type as a string (``sensor_msgs/msg/Imu`` or
``sensor_msgs/Imu``) and a field path (``linear_acceleration.z``, ``velocity[elbow]``,
``min(ranges[0:5])``). The
classes are resolved at run time from the type names, so any installed message type works, and
every path is checked against the type's rosidl introspection before the node starts: a type that
is not installed or a field that does not exist is refused in one line naming it.

On each tick (of the node's clock, or a message on its tick topic: :meth:`TopicSampler.listen`),
:meth:`TopicSampler.sample` hands back the latest message of every topic, or says which topics
have not published yet or are older than their stale limit (each topic's own).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data

from gamma_net_core.horde.fields import parse_field
from gamma_net_ros.conversions import clock_seconds

_NUMERIC = {
    "boolean",
    "octet",
    "byte",
    "char",
    "float",
    "double",
    "long double",
    "int8",
    "uint8",
    "int16",
    "uint16",
    "int32",
    "uint32",
    "int64",
    "uint64",
}
_SEQUENCE = re.compile(r"^(?:sequence<(?P<seq>[^,>]+)(?:,\s*(?P<bound>\d+))?>|(?P<arr>[^\[]+)\[(?P<size>\d+)\])$")


def message_class(type_name: str) -> type:
    """The message class named ``type_name`` (``pkg/msg/Type`` or ``pkg/Type``).

    Uses ``rosidl_runtime_py.utilities.get_message`` where it is installed, else imports ``pkg.msg``.

    Raises:
      ValueError: the name is malformed or the type is not installed, naming it.
    """
    parts = type_name.strip().split("/")
    if len(parts) == 2:
        parts = [parts[0], "msg", parts[1]]
    if len(parts) != 3 or parts[1] != "msg" or not all(parts):
        raise ValueError(f"message type {type_name!r} must look like 'pkg/msg/Type' (e.g. 'sensor_msgs/msg/Imu')")
    package, _, name = parts
    try:
        from rosidl_runtime_py.utilities import get_message
    except ImportError:
        get_message = None
    try:
        if get_message is not None:
            return get_message(f"{package}/msg/{name}")
        return getattr(importlib.import_module(f"{package}.msg"), name)
    except (ImportError, AttributeError, ValueError) as exc:
        wheel = "ros-" + package.replace("_", "-")  # Kilted's PyPI wheels: nav_msgs is ros-nav-msgs
        raise ValueError(
            f"message type {type_name!r} is not installed ({exc}); its wheel, if PyPI has one: pip install {wheel}"
        ) from None


def check_field(cls: type, path: str) -> None:
    """Check that ``path`` names a numeric field of message class ``cls``, by rosidl introspection.

    The path is parsed as every consumer parses it (:func:`gamma_net_core.horde.fields.parse_field`):
    ``a.b`` descends into nested messages; ``a[i]`` indexes a sequence by position (an integer)
    or by name (``velocity[elbow]``: the entry of JointState's ``name`` list called ``elbow``,
    so the message needs a ``name`` sequence of strings beside the indexed field); an aggregate
    (``min(ranges[0:5])``) needs a sequence of numbers.

    Raises:
      ValueError: a field that does not exist or is not a number, naming the path and the type.
    """
    where = f"field {path!r} of {_type_name(cls)}"
    if not path:
        raise ValueError(f"{where}: the path is empty")
    try:
        parsed = parse_field(path)
    except ValueError as exc:
        raise ValueError(f"{where}: cannot read {path!r}: {exc}") from None
    current, fields, name, kind = cls, {}, "", None
    for step, key in parsed.steps:
        if step == "attr":
            if kind is not None:
                if kind in _NUMERIC:
                    raise ValueError(f"{where}: {name!r} is a number, it has no fields")
                current = _nested_class(kind, where)
            fields = current.get_fields_and_field_types()
            if key not in fields:
                raise ValueError(f"{where}: {_type_name(current)} has no field {key!r} (it has {sorted(fields)})")
            name, kind = key, fields[key]
            continue
        sequence = _SEQUENCE.match(kind)
        if sequence is None:
            raise ValueError(f"{where}: {name!r} is a {kind}, not a sequence to index")
        if step == "slice":
            continue  # the sequence stays a sequence: its aggregate reads it
        if step == "index":
            # A fixed array (covariance[9]) or a bounded sequence can never hold this index:
            # refused now, not found unreadable on every message.
            length = sequence["size"] or sequence["bound"]
            if length is not None and not -int(length) <= key < int(length):
                holds = f"exactly {length}" if sequence["size"] else f"at most {length}"
                raise ValueError(f"{where}: index {key} is out of range: {name!r} holds {holds} elements")
        elif fields.get("name") != "sequence<string>":
            raise ValueError(f"{where}: {name!r} is indexed by name but {_type_name(current)} has no name list")
        kind = sequence["seq"] or sequence["arr"]
    if parsed.aggregate is not None:
        sequence = _SEQUENCE.match(kind)
        if sequence is None or (sequence["seq"] or sequence["arr"]) not in _NUMERIC:
            raise ValueError(f"{where}: {parsed.aggregate}() needs a sequence of numbers; {name!r} is a {kind}")
    elif kind not in _NUMERIC:
        raise ValueError(f"{where}: {name!r} is a {kind}, not a number")


def _nested_class(kind: str, where: str) -> type:
    if "/" not in kind:
        raise ValueError(f"{where}: a {kind} has no numeric fields")
    return message_class(kind)


def _type_name(cls: type) -> str:
    package = cls.__module__.split(".")[0]
    return f"{package}/msg/{cls.__name__}"


@dataclass
class Topic:
    """One subscribed topic: its latest message and when (node clock, s) it arrived."""

    name: str
    type_name: str
    latest: object | None = None
    arrived: float | None = None
    received: int = 0


@dataclass
class Sample:
    """The outcome of one tick: the latest message per topic, or why the tick is skipped."""

    messages: dict[str, object] = field(default_factory=dict)
    silent: list[str] = field(default_factory=list)  # never published yet
    stale: list[str] = field(default_factory=list)  # latest message older than the limit

    @property
    def ok(self) -> bool:
        return not self.silent and not self.stale


class TopicSampler:
    """Subscribes ``node`` to ``topics`` ({name: type}) and keeps the latest message of each.

    Best-effort sensor-data QoS by default (as drivers publish); ``reliable`` for bag playback.
    Only the latest message of a topic matters (queue depth 1), except on the ``queued`` topics
    (depth 10): one whose every message is a tick, where a burst is worked through, not dropped.
    """

    def __init__(
        self,
        node: Node,
        topics: dict[str, str],
        *,
        stale_after: float | Mapping[str, float],
        reliable: bool = False,
        queued: tuple[str, ...] = (),
    ) -> None:
        self.node = node
        limits = stale_after if isinstance(stale_after, Mapping) else dict.fromkeys(topics, stale_after)
        self.stale_after = {name: float(limits[name]) for name in topics}  # s, each topic's own
        self.topics: dict[str, Topic] = {}
        self.listeners: dict[str, Callable[[object], None]] = {}
        reliability = ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT

        def qos(name: str) -> QoSProfile:
            depth = 10 if name in queued else 1
            return QoSProfile(depth=depth, reliability=reliability, durability=qos_profile_sensor_data.durability)

        classes = {name: message_class(type_name) for name, type_name in topics.items()}
        for name, type_name in topics.items():
            topic = Topic(name=name, type_name=type_name)
            self.topics[name] = topic
            node.create_subscription(
                classes[name], name, lambda msg, topic=topic: self._on_message(topic, msg), qos(name)
            )

    def _on_message(self, topic: Topic, msg) -> None:
        topic.latest = msg
        topic.arrived = clock_seconds(self.node)
        topic.received += 1
        listener = self.listeners.get(topic.name)
        if listener is not None:
            listener(msg)

    def listen(self, name: str, callback: Callable[[object], None]) -> None:
        """Call ``callback(msg)`` after each message on topic ``name`` is stored (e.g. to tick on it)."""
        if name not in self.topics:
            raise ValueError(f"{name!r} is not one of the sampled topics {sorted(self.topics)}")
        self.listeners[name] = callback

    def sample(self) -> Sample:
        """The latest message of every topic that is fresh; the others named silent or stale (older than its limit)."""
        now = clock_seconds(self.node)
        sample = Sample()
        for name, topic in self.topics.items():
            if topic.latest is None:
                sample.silent.append(name)
            elif now - topic.arrived > self.stale_after[name]:
                sample.stale.append(name)
            else:
                sample.messages[name] = topic.latest
        return sample
