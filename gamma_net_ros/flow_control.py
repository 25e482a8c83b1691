"""Lossless delivery of a topic to slower consumers: they report what they have taken, the sender keeps a window.

Reliable QoS alone does not stop a fast publisher from losing messages at a slow subscriber.
Measured here (rclpy 9.1.2, Fast DDS 3.2.3, two nodes in one process, a subscriber taking
1 ms per message, 2,000 Transition messages published at once):

- reliable, KEEP_LAST depth 10 on both sides: 16 of 2,000 received. DDS acknowledges a sample
  once it is in the reader's history, and a full KEEP_LAST history drops its oldest sample
  for the newest; the writer is never slowed.
- reliable, KEEP_ALL on both sides: all 2,000 arrive, but with 20,000 messages the reader's
  history reaches its resource limit, the writer's ``publish`` blocks, then raises
  ``RCLError: cannot publish data``, and messages are lost unless the sender catches that
  and retries; the limits are not settable through rclpy.

So the flow control is explicit and independent of the DDS vendor. Each consumer publishes,
on ``<topic>/taken`` (``std_msgs/UInt64``), the number of messages of ``<topic>`` it has taken
(handled or skipped) since it started, after every ``every`` messages and as a heartbeat.
The sender tells consumers apart by the publisher GID of their reports, and never has more
than ``window`` messages published but not yet taken by any consumer. With the consumers'
subscription depth (KEEP_LAST) at least ``window``, and the sender's too, a reader's
history never overflows and the writer never overwrites a sample it may have to resend:
nothing is lost however slow the consumer is, and the sender runs at the consumer's pace.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from std_msgs.msg import UInt64

TAKEN_SUFFIX = "/taken"
#: Reports are small and the newest counts: reliable, a short queue.
TAKEN_QOS = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
#: Seconds between heartbeat reports (so a sender finds a consumer before any message flows).
HEARTBEAT = 0.2
#: Seconds after which a count that moved is reported even if by fewer than ``every``: a sender
#: waiting on a full window hears of the last messages taken within about this long.
FLUSH = 0.005


def taken_topic(node: Node, topic: str) -> str:
    """The report topic of ``topic`` as ``node`` resolves it (remappings and namespace applied)."""
    return node.resolve_topic_name(topic) + TAKEN_SUFFIX


class TakenReporter:
    """Consumer side: publishes how many messages of ``topic`` this node has taken.

    Args:
      node: the consuming node (its namespace and remappings resolve ``topic``).
      topic: the consumed topic, as the node's subscription names it.
      taken: returns the count to report (messages handled or skipped so far).
      every: report at once when this many more messages are taken; a smaller move is reported
        within ``FLUSH`` seconds. Keep it well below the sender's window, so the sender does
        not wait for reports.
      flush: s between checks for a smaller move (each a timer callback, also while idle).
    """

    def __init__(
        self, node: Node, topic: str, *, taken: Callable[[], int], every: int = 32, flush: float = FLUSH
    ) -> None:
        if every < 1:
            raise ValueError(f"report every >= 1 messages; got {every!r}")
        if not flush > 0:
            raise ValueError(f"flush must be a positive number of seconds; got {flush!r}")
        self.taken = taken
        self.every = int(every)
        self.flush = float(flush)
        self.publisher = node.create_publisher(UInt64, taken_topic(node, topic), TAKEN_QOS)
        self._reported = -1
        self._reported_at = 0.0
        self._lock = threading.Lock()
        node.create_timer(HEARTBEAT, lambda: self.report(force=True))
        node.create_timer(self.flush, self.report)

    def report(self, *, force: bool = False) -> None:
        """Publish the count if it moved by ``every``, or at all ``FLUSH`` s after the last report, or if forced."""
        count = int(self.taken())
        now = time.monotonic()
        with self._lock:  # the timers and a worker thread may both report
            moved = count - self._reported
            if not (force or moved >= self.every or (moved > 0 and now - self._reported_at >= self.flush)):
                return
            self._reported, self._reported_at = count, now
        self.publisher.publish(UInt64(data=count))


class _Consumer:
    __slots__ = ("baseline_published", "baseline_taken", "heard", "taken")

    def __init__(self, taken: int, published: int, now: float) -> None:
        self.baseline_taken = self.taken = taken
        self.baseline_published = published
        self.heard = now


class ConsumerWindow:
    """Sender side: tracks every consumer's reports and says how many messages are in flight.

    Args:
      node: the sending node.
      topic: the topic it publishes (reports come on ``<topic>/taken``).
      published: returns how many messages the sender has published so far.
      on_report: called after each report (e.g. to publish more at once).
      timeout: s without a report after which a consumer is taken to be gone.
    """

    def __init__(
        self,
        node: Node,
        topic: str,
        *,
        published: Callable[[], int],
        on_report: Callable[[], None] | None = None,
        timeout: float = 10.0,
    ) -> None:
        self.node = node
        self.published = published
        self.on_report = on_report
        self.timeout = float(timeout)
        self.consumers: dict[bytes, _Consumer] = {}
        #: Consumers not heard for ``timeout`` s: no longer waited for, but their counts are kept, and one
        #: that reports again (a long stall, not a stop) is waited for again from where it was.
        self.gone: dict[bytes, _Consumer] = {}
        #: Short ids of the consumers that ever went silent: messages may have been lost meanwhile.
        self.lapsed: set[str] = set()
        self.topic = taken_topic(node, topic)
        node.create_subscription(UInt64, self.topic, self._on_taken, TAKEN_QOS)

    def _on_taken(self, msg: UInt64, info) -> None:
        gid = bytes(info["publisher_gid"]["data"])
        consumer = self.consumers.get(gid)
        now = time.monotonic()
        if consumer is None and gid in self.gone:
            consumer = self.consumers[gid] = self.gone.pop(gid)
            self.node.get_logger().warning(f"consumer {gid.hex()[:8]} reports again on {self.topic}")
        if consumer is None:
            # Counts are relative to the first report heard: a consumer may have taken other streams before.
            self.consumers[gid] = _Consumer(int(msg.data), self.published(), now)
            self.node.get_logger().info(f"consumer {gid.hex()[:8]} reports on {self.topic}")
        else:
            consumer.taken = max(consumer.taken, int(msg.data))
            consumer.heard = now
        if self.on_report is not None:
            self.on_report()

    def forget_silent(self) -> list[str]:
        """Drop consumers not heard for ``timeout`` seconds; return their short ids."""
        now = time.monotonic()
        gone = [gid for gid, c in self.consumers.items() if now - c.heard > self.timeout]
        for gid in gone:
            self.gone[gid] = self.consumers.pop(gid)
            self.lapsed.add(gid.hex()[:8])
        return [gid.hex()[:8] for gid in gone]

    def confirmed(self) -> int | None:
        """Messages every consumer, present or gone, has confirmed taking; None with no consumer ever heard."""
        every = [*self.consumers.values(), *self.gone.values()]
        return min((c.baseline_published + c.taken - c.baseline_taken for c in every), default=None)

    def in_flight(self) -> int:
        """Messages published and not yet taken by the slowest consumer (0 with no consumer)."""
        published = self.published()
        return max(
            (
                max(0, (published - c.baseline_published) - (c.taken - c.baseline_taken))
                for c in self.consumers.values()
            ),
            default=0,
        )
