"""Who publishes on a node's command path, and what its inputs lose on the way.

The PyPI route has no DDS-Security (docs/security.md), so the reflex and the driver check their
own graph: every :data:`POLL_S` (steady time) they ask rclpy who publishes on each topic they
watch, and :func:`unexpected` decides, purely, which of those publishers should not be there::

    self.graph = GraphWatch(self, ["commands"], acting="commands refused", on_change=..., on_stop=...)
    self.graph.subscribe(JointState, "joint_commands", self.on_command, 10, role="commands", refuse=True)
    if self.graph.stopping: ...               # a stranger is on: hold
    return self.graph.amend(health)           # counted and named on /diagnostics

A topic's publishers are unexpected when their node names are not on the role's allow list
(``graph.<role>.allowed``; unset: any name), or when more than ``graph.<role>.expected`` of the
allowed ones are on it: then every one of them is named, since which is the stray cannot be told.
Each appearance is one warning line, each departure one info line; ``graph.stop_on_unexpected``
(default on) makes the node act on it. This guards against mistakes (a second teleop, a script
left running, a launch started twice); node names are not authenticated, so a process that takes
an allowed name passes.

:class:`Arrivals` counts each input's messages from their publishers' sequence numbers: those
handed to the node, and those a publisher sent that never arrived (a keep-last queue that
overflowed under a burst), which the node could not otherwise see.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace

from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.parameter import Parameter

from gamma_net_ros.diagnostics import ERROR, WARN, Health
from gamma_net_ros.params import declare

#: Seconds between looks at the graph (steady time): a stranger is named well within 2 s of its discovery.
POLL_S = 0.2
#: Seconds a publisher may show without its node's name (rmw learns names after the endpoints) before an allow
#: list judges it by that, and the warning names it so: an allowed node is not refused for a moment as it starts.
UNNAMED_S = 1.0
UNNAMED = "_NODE_NAME_UNKNOWN_"


def allows(entry: str, publisher: str) -> bool:
    """Whether allow-list ``entry`` names ``publisher`` (a fully qualified node name, ``/ns/name``).

    An entry starting with ``/`` must be the fully qualified name; a bare one matches the name in any namespace.
    """
    return entry == publisher if entry.startswith("/") else entry == publisher.rsplit("/", 1)[-1]


def unexpected(publishers: Sequence[str], *, expected: int, allowed: Collection[str] = ()) -> tuple[str, ...]:
    """The publishers that should not be on a topic, in the order given.

    Args:
      publishers: the fully qualified node names of the topic's publishers (a node twice: two publishers).
      expected: how many publishers the topic may have.
      allowed: the node names allowed to publish (:func:`allows`); empty: any name.

    Returns:
      The publishers whose names are not allowed, then, when more than ``expected`` allowed ones
      remain, all of those (which is the stray cannot be told). Empty when all is as expected.
    """
    if allowed:
        strangers = [p for p in publishers if not any(allows(entry, p) for entry in allowed)]
        known = [p for p in publishers if any(allows(entry, p) for entry in allowed)]
    else:
        strangers, known = [], list(publishers)
    return (*strangers, *(known if len(known) > expected else ()))


def node_name(namespace: str, name: str) -> str:
    """A publisher's fully qualified node name; a participant whose node is not (yet) known keeps rmw's name."""
    return name if namespace.startswith("_") else f"{namespace.rstrip('/')}/{name}"


def topic_line(topic: str, publishers: Sequence[str], names: Sequence[str], expected: int) -> str:
    """The one line naming a topic's unexpected publishers ``names`` among ``publishers``."""
    if len(names) == len(publishers) and len(publishers) > expected:
        return f"{topic}: {len(publishers)} publishers ({', '.join(publishers)}), {expected} expected"
    return f"{topic}: {', '.join(names)} not allowed"


@dataclass(frozen=True)
class GraphSettings:
    """What a node expects on each role of topic it watches (every value fixed once the node is up)."""

    stop: bool
    """An unexpected publisher stops the node's output until it is gone (``graph.stop_on_unexpected``)."""
    expected: Mapping[str, int]
    """Role -> how many publishers each of its topics may have (``graph.<role>.expected``)."""
    allowed: Mapping[str, tuple[str, ...]]
    """Role -> the node names allowed to publish on its topics; empty: any (``graph.<role>.allowed``)."""


def declare_graph(node: Node, roles: Sequence[str]) -> GraphSettings:
    """Declare the graph check's parameters on ``node``, read-only, for each of ``roles``.

    Raises:
      ValueError: an allow-list entry that is not a node name, named with its parameter.
    """
    stop = declare(node, "graph.stop_on_unexpected", True, "an unexpected publisher stops the output until it goes",
                   read_only=True)  # fmt: skip
    expected, allowed = {}, {}
    for role in roles:
        expected[role] = declare(
            node, f"graph.{role}.expected", 1, f"publishers expected on each topic of {role}", low=1, high=100,
            read_only=True,
        )  # fmt: skip
        names = declare(
            node, f"graph.{role}.allowed", Parameter.Type.STRING_ARRAY,
            f"node names allowed to publish {role} (/ns/name or name; unset: any)", read_only=True,
        )  # fmt: skip
        names = tuple(names or ())
        if bad := [n for n in names if not n.strip("/") or any(c.isspace() for c in n)]:
            raise ValueError(f"parameter graph.{role}.allowed: {bad[0]!r} is not a node name; got {list(names)}")
        allowed[role] = names
    return GraphSettings(stop, expected, allowed)


class GraphWatch:
    """The subscriptions of ``node`` whose publishers it watches, each counted (:class:`Arrivals`).

    Args:
      node: the watching node; its parameters ``graph.*`` are declared here (:func:`declare_graph`).
      roles: the roles of the topics it will watch (``commands``, ``predictions``...), the first the main one
        (its counts on /diagnostics unprefixed).
      acting: what the node does about an unexpected publisher, for its warning line.
      on_change: called after the verdict of any topic changed (e.g. to publish ``/diagnostics`` at once).
      on_stop: called when the node must stop (an unexpected publisher came, and the switch is on).
    """

    def __init__(
        self, node: Node, roles: Sequence[str], *, acting: str, on_change: Callable[[], None],
        on_stop: Callable[[], None] = lambda: None,
    ) -> None:  # fmt: skip
        self.node, self.acting, self.on_change, self.on_stop = node, acting, on_change, on_stop
        self.settings = declare_graph(node, roles)
        self.topics: dict[str, str] = {}  # resolved topic -> role
        self.inputs: dict[str, Arrivals] = {}  # input name -> its counts
        self.main = f"{roles[0]}:"
        self.lines: dict[str, str] = {}  # topic -> the line naming its unexpected publishers
        self.said: dict[str, int] = {}  # topic -> how many unexpected publishers its last warning named
        self.unnamed: dict[str, dict[bytes, float]] = {}  # topic -> gid -> since when its node's name is unknown
        self.appearances = self.refused = 0
        self.polls = 0  # looks at the graph so far (a verdict exists once there was one)
        steady = Clock(clock_type=ClockType.STEADY_TIME)  # a stopped /clock must not stop the watch
        self.timer = node.create_timer(POLL_S, self.poll, clock=steady)

    def subscribe(self, msg_type, topic: str, callback: Callable, qos, *, role: str, refuse: bool = False):
        """``node.create_subscription``, its publishers watched as ``role``'s and its messages counted.

        Args:
          refuse: while the node must stop, messages are dropped (counted ``refused``), not handed to ``callback``.
        """
        arrivals = self.inputs.setdefault(f"{role}:{topic}", Arrivals())

        def take(msg, info) -> None:
            arrivals.arrived(info)
            if refuse and self.stopping:
                self.refused += 1
                return
            callback(msg)
            arrivals.processed += 1

        subscription = self.node.create_subscription(msg_type, topic, take, qos)
        self.topics[subscription.topic_name] = role
        return subscription

    @property
    def stopping(self) -> bool:
        """Whether the node must stop its output now: an unexpected publisher is on, and the switch is on."""
        return self.settings.stop and bool(self.lines)

    def poll(self) -> None:
        """Look at each topic's publishers; say each change in one line, then ``on_change()``."""
        self.polls += 1
        try:
            was = self.stopping
            if [topic for topic, role in self.topics.items() if self._check(topic, role)]:
                if self.stopping and not was:
                    self.on_stop()
                self.on_change()
        except Exception as exc:  # e.g. the graph query of a node shutting down: the check outlives it
            self.node.get_logger().error(f"graph check failed: {exc}", throttle_duration_sec=5.0)

    def _check(self, topic: str, role: str) -> bool:
        infos = self.node.get_publishers_info_by_topic(topic)
        named = self._named(topic, infos)
        pending = len(named) < len(infos)  # a node's name rmw has not learned yet: said once it has
        if self.settings.allowed[role]:
            infos = named
        publishers = [node_name(i.node_namespace, i.node_name) for i in infos]
        expected = self.settings.expected[role]
        names = unexpected(publishers, expected=expected, allowed=self.settings.allowed[role])
        line = topic_line(topic, publishers, names, expected) if names else ""
        if line and len(names) > self.said.get(topic, 0) and not pending:  # a new one, by name
            self.appearances += 1
            self.said[topic] = len(names)
            act = f"{self.acting} until it is gone" if self.settings.stop else "graph.stop_on_unexpected is off"
            self.node.get_logger().warning(f"unexpected publisher on {line}: {act}")
        if line == self.lines.get(topic, ""):
            return False
        if line:
            self.lines[topic] = line
        else:
            del self.lines[topic]
            self.said.pop(topic, None)
            self.node.get_logger().info(f"the unexpected publishers on {topic} are gone")
        return True

    def _named(self, topic: str, infos: list) -> list:
        """The publishers an allow list judges now: those whose node's name is known, or unknown for UNNAMED_S."""
        now, before = time.monotonic(), self.unnamed.get(topic, {})
        since = {bytes(i.endpoint_gid): before.get(bytes(i.endpoint_gid), now) for i in infos if i.node_name == UNNAMED}
        self.unnamed[topic] = since
        return [i for i in infos if i.node_name != UNNAMED or now - since[bytes(i.endpoint_gid)] >= UNNAMED_S]

    def counts(self) -> dict[str, int]:
        """``received``, ``processed`` and ``lost`` of the main input, the others' by ``.<topic>``; ``refused``."""
        out = {}
        for name, a in self.inputs.items():
            suffix = "" if name.startswith(self.main) else "." + name.split(":", 1)[1]
            out.update({f"received{suffix}": a.received, f"processed{suffix}": a.processed, f"lost{suffix}": a.lost})
        return {**out, "refused": self.refused}

    def amend(self, health: Health) -> Health:
        """``health`` with the counts, and the unexpected publishers named first (ERROR while they stop the node)."""
        values = {**self.counts(), **health.values, "unexpected_publishers": "; ".join(self.lines.values()) or "none",
                  "unexpected_publisher_appearances": self.appearances}  # fmt: skip
        if not self.lines:
            return replace(health, values=values)
        level = max(health.level, ERROR if self.settings.stop else WARN, key=ord)
        said = "; ".join(self.lines.values())
        return Health(level, f"unexpected publisher on {said}; {health.message}", values)


class Arrivals:
    """Counts one input's messages: ``received`` (handed to the node), ``processed`` (its callback came to its
    end: a command answered, applied or refused as malformed) and ``lost`` (sent, never handed).

    Lost messages are the gaps in each publisher's sequence numbers (rmw's ``publication_sequence_number``)
    after its first message seen: a keep-last queue that overflowed. What a publisher sent before the node
    first heard it is not counted.
    """

    def __init__(self) -> None:
        self.received = self.processed = self.lost = 0
        self._last: dict[bytes, int] = {}  # publisher gid -> its last sequence number seen

    def arrived(self, info: Mapping | None) -> None:
        """One message, with its rclpy ``MessageInfo`` (None or without sequence numbers: received only)."""
        self.received += 1
        sequence = (info or {}).get("publication_sequence_number") or 0
        gid = ((info or {}).get("publisher_gid") or {}).get("data")
        if not sequence or gid is None:
            return
        last = self._last.get(gid)
        if last is not None and sequence > last:
            self.lost += sequence - last - 1
        if len(self._last) >= 256 and gid not in self._last:  # publishers come and go: keep the memory bounded
            self._last.pop(next(iter(self._last)))
        self._last[gid] = max(sequence, last or 0)
