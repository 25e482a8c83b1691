"""Node: records named topics to a rosbag2, for machines without `ros2 bag record`.

    ros2 run gamma_net_ros bag_recorder --ros-args -p topics:=[/joint_states,/battery] -p output:=runs/my_robot/bag

Writes a rosbag2 folder (``metadata.yaml`` and one ``.mcap``, or ``.db3`` with
``storage:=sqlite3``) through the `rosbags` library, as `ros2 bag record` would: each message
as the CDR bytes it arrived in (a raw subscription: nothing is deserialized), stamped with the
time it was received, and each topic with its type, its message definition (from the installed
``.msg`` files, see :mod:`gamma_net_ros.msg_definitions`) and its publishers' QoS. What it
writes plays with `bag_player` and `ros2 bag play`, and trains with `gamma-net horde train` and
`gamma-net arm train`.

A topic is subscribed once it has a publisher (the graph names its type); until then the node
waits, and says so once after ``WAIT_NOTICE_S``. Its QoS matches the publishers': reliable if
all of them are reliable, else best effort (a reliable reader matches no best-effort writer);
transient local if all of them are, so what they hold for late joiners is recorded too.
Publishers that disagree on a topic's type are refused in one line naming both types: the
recording stops there, exit code 1.

Ctrl-C or SIGTERM (or ``max_messages`` reached) closes the bag: its index
and ``metadata.yaml`` are written, so what was recorded is a complete, readable bag.

Nothing is lost silently. ``/diagnostics`` counts, in all and per topic (``.<topic>``):
``received`` (handed to the node) = ``processed`` (written to the bag) + ``skipped`` (not
written, by reason: ``skipped.max_messages`` after the limit, ``skipped.write_failed`` and
``skipped.stopped`` after a write failed, ``skipped.topic_refused`` after a topic was refused),
and ``lost`` (sent, never handed: gaps in each publisher's sequence numbers, a keep-last queue
of ``DEPTH`` that overflowed). The last line at exit says the same. A write that fails (a full
disk) stops the recording in one error line, exit code 1 (and a bag that cannot be closed is
said incomplete); a bag that cannot be closed at Ctrl-C or SIGTERM exits 3, as a failed final
checkpoint does.
"""

from __future__ import annotations

import re
import shutil
import sys
import time

from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rosbags.rosbag2 import StoragePlugin, Writer

from gamma_net_ros.diagnostics import ERROR, OK, WARN, Diagnostics, Health
from gamma_net_ros.msg_definitions import MessageDefinitions
from gamma_net_ros.node_main import run_node
from gamma_net_ros.params import declare
from gamma_net_ros.recording import (
    WRITE_ERRORS,
    RecordingCounts,
    bag_qos,
    close_bag,
    new_bag_path,
    take_what_arrived,
)  # fmt: skip

#: Storage plugins offered, as ``ros2 bag record --storage`` names them; the first is the default.
STORAGES = {"mcap": StoragePlugin.MCAP, "sqlite3": StoragePlugin.SQLITE3}
#: s without a publisher on a topic before the node says it is waiting for one.
WAIT_NOTICE_S = 3.0
#: s at most that a stopping recorder takes the messages its readers already hold.
DRAIN_S = 2.0
#: Subscription depth: messages a busy recorder may fall behind by before its reader drops any.
DEPTH = 1000


class BagRecorder(Node):
    def __init__(self, **kwargs) -> None:
        super().__init__("bag_recorder", **kwargs)
        self.writer = None  # a recorder refused at start has no bag to close
        self.close_failure: str | None = None
        topics = declare(
            self, "topics", Parameter.Type.STRING_ARRAY, "the topics to record, e.g. [/joint_states]", read_only=True
        )
        output = declare(self, "output", "", "the bag folder to write (new, or an empty folder)", read_only=True)
        storage = declare(
            self, "storage", "mcap", "the bag's storage", read_only=True, constraints=f"one of {list(STORAGES)}"
        )
        self.max_messages = declare(
            self, "max_messages", 0, "stop once this many messages are recorded (0: until stopped)", low=0, high=2**62
        )
        if not topics:
            raise ValueError("parameter 'topics' is required: the topics to record, e.g. -p topics:=[/joint_states]")
        if storage not in STORAGES:
            raise ValueError(f"parameter storage must be one of {list(STORAGES)}; got {storage!r}")
        self.topics = list(dict.fromkeys(self._resolved(t) for t in topics))
        self.types: dict[str, str] = {}  # topic -> its type, once subscribed
        self.path = new_bag_path(output)
        self.storage = storage
        self.definitions = MessageDefinitions()
        self.writer = Writer(self.path, version=9, storage_plugin=STORAGES[storage])
        self.writer.open()
        self.counts = RecordingCounts()
        self.failed = False  # a topic refused, or a write failed: the recording stops, exit code 1
        self.done = False
        self.why_done = "max_messages"  # the reason a message that comes once done is skipped
        self.began = time.monotonic()
        self.noticed = False
        self.stopping = False
        self.announced = False
        self.create_timer(0.2, self._subscribe_published)
        self.health = Diagnostics(self, "recording", self.report_health)

    def _resolved(self, topic: str) -> str:
        try:
            return self.resolve_topic_name(topic)
        except RuntimeError as exc:  # rcl's RCLError, with a source location
            reason = re.sub(r",? at \S+:\d+", "", str(exc)).removeprefix("failed to resolve name: ")
            raise ValueError(f"parameter topics: {topic!r} is not a topic name ({reason})") from None

    def _subscribe_published(self) -> None:
        """Subscribe each awaited topic that has publishers now; refuse a topic offered in two types."""
        if self.stopping or self.done:
            return
        if not self.announced:  # here, not in __init__: a node refused once built (an unknown key) says nothing
            self.announced = True
            self.get_logger().info(f"recording {self.topics} to {self.path} ({self.storage})")
        for topic in self.topics:
            publishers = self.get_publishers_info_by_topic(topic)
            # A publisher of another type may come after the topic is recorded: checked every time.
            recorded = {self.types[topic]} if topic in self.types else set()
            types = sorted({p.topic_type for p in publishers} | recorded)
            if len(types) > 1:
                disagree = f"its publishers disagree on its type ({' and '.join(types)})"
                return self._stop("topic_refused", f"refusing to record {topic}: {disagree}")
            if topic in self.types or not publishers:
                continue
            try:
                self._subscribe(topic, types[0], [p.qos_profile for p in publishers])
            except (ValueError, ImportError, AttributeError) as exc:  # a type not installed or not defined here
                return self._stop("topic_refused", f"cannot record {topic} ({types[0]}): {exc}")
            self.types[topic] = types[0]
        waiting = [t for t in self.topics if t not in self.types]
        if waiting and not self.noticed and time.monotonic() - self.began > WAIT_NOTICE_S:
            self.noticed = True
            self.get_logger().warning(
                f"no publisher yet on {waiting} after {WAIT_NOTICE_S:g} s: waiting for one (recording the others)"
            )

    def _subscribe(self, topic: str, type_name: str, profiles: list) -> None:
        from rosidl_runtime_py.utilities import get_message

        msg_type = get_message(type_name)
        msgdef, rihs01 = self.definitions.of(type_name)
        connection = self.writer.add_connection(
            topic, type_name, msgdef=msgdef, rihs01=rihs01, offered_qos_profiles=[bag_qos(p) for p in profiles]
        )
        reliable = all(p.reliability == ReliabilityPolicy.RELIABLE for p in profiles)
        transient = all(p.durability == DurabilityPolicy.TRANSIENT_LOCAL for p in profiles)
        qos = QoSProfile(
            depth=DEPTH,
            reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT,
            durability=DurabilityPolicy.TRANSIENT_LOCAL if transient else DurabilityPolicy.VOLATILE,
        )
        self.counts.add_topic(topic)
        self.create_subscription(msg_type, topic, lambda data, info: self._record(topic, connection, data, info),
                                 qos, raw=True)  # fmt: skip
        self.get_logger().info(
            f"recording {topic} ({type_name}, {'reliable' if reliable else 'best effort'}"
            f"{', transient local' if transient else ''})"
        )

    def _record(self, topic: str, connection, data: bytes, info) -> None:
        self.counts.arrivals[topic].arrived(info)
        if self.done:
            self.counts.skip(self.why_done)
            return
        try:
            self.writer.write(connection, self.get_clock().now().nanoseconds, data)
        except WRITE_ERRORS as exc:  # a full disk, a file limit: what follows cannot be written either
            self.counts.skip("write_failed")
            return self._stop("stopped", f"cannot write {topic} to {self.path} ({exc}): recording stopped")
        self.counts.written[topic] += 1
        if self.max_messages and self.counts.recorded >= self.max_messages:
            self.done = True

    def _stop(self, why: str, line: str) -> None:
        """Stop recording, as a failure (exit code 1) said in one ``line``; what comes after is skipped as ``why``."""
        self.get_logger().error(line)
        self.failed = self.done = True
        self.why_done = why

    def report_health(self) -> Health:
        """What reached the node and what of it is in the bag, per topic too."""
        waiting = [t for t in self.topics if t not in self.types]
        values = self.counts.values()
        if self.failed:
            what = "a write failed" if self.why_done == "stopped" else "a topic was refused"
            return Health(ERROR, f"{what}: recording stopped", values)
        if waiting:
            return Health(WARN, f"no publisher yet on {waiting}", values)
        return Health(OK, f"recording to {self.path}", values)

    def refused(self) -> None:
        """Refused after it was built (an unknown parameter): the folder it created goes again."""
        if self.writer is not None:
            self.writer.abort()
            self.writer = None
            shutil.rmtree(self.path, ignore_errors=True)

    def lost_on_exit(self) -> str | None:
        """Why the bag could not be closed at shutdown (the exit is then non-zero), else None."""
        return self.close_failure

    def destroy_node(self) -> None:
        if self.writer is not None:
            self.stopping = True  # a publisher counts a message delivered once a reader holds it: record those
            take_what_arrived(self, lambda: self.counts.received, DRAIN_S)
            writer, self.writer = self.writer, None
            if (failure := close_bag(writer, self.path)) is not None:
                self.failed = True
                self.close_failure = failure
                self.get_logger().error(failure)
            log = self.get_logger().info if failure is None else self.get_logger().warning
            log(self.counts.last_line(self.path, closed=failure is None))
        super().destroy_node()


def main(args=None) -> int:
    """Exit code 0 once stopped (a signal, or a limit reached), 1 if a topic was refused or a write failed."""
    return run_node(BagRecorder, args, until=lambda node: int(node.failed) if node.done else None)


if __name__ == "__main__":
    sys.exit(main())
