"""Who publishes on a node's command path, and what its inputs lose on the way.

The PyPI route has no DDS-Security (docs/security.md), so the reflex and the driver check their
own graph: every :data:`POLL_S` (steady time) they ask rclpy who publishes on each topic they
watch, and :func:`unexpected` decides, purely, which of those publishers should not be there::

    self.graph = GraphWatch(self, {"joint_commands": "commands"}, ROLES, acting="...", on_change=...)
    ...
    if self.graph.stopping:                   # a stranger is on: refuse, hold
    return self.graph.amend(health)           # named on /diagnostics

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

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace

from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.parameter import Parameter

from gamma_net_ros.diagnostics import ERROR, WARN, Health
from gamma_net_ros.params import declare

#: Seconds between looks at the graph (steady time): a stranger is named well within 2 s of its discovery.
POLL_S = 0.2


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


def declare_graph(node: Node, roles: Mapping[str, str]) -> GraphSettings:
    """Declare the graph check's parameters on ``node``, read-only, for ``roles`` (role -> what its topics carry).

    Raises:
      ValueError: an allow-list entry that is not a node name, named with its parameter.
    """
    stop = declare(node, "graph.stop_on_unexpected", True, "an unexpected publisher stops the output until it goes",
                   read_only=True)  # fmt: skip
    expected, allowed = {}, {}
    for role, carried in roles.items():
        expected[role] = declare(
            node, f"graph.{role}.expected", 1, f"publishers expected on each topic of {carried}", low=1, high=100,
            read_only=True,
        )  # fmt: skip
        names = declare(
            node, f"graph.{role}.allowed", Parameter.Type.STRING_ARRAY,
            f"node names allowed to publish {carried} (/ns/name or name; unset: any)", read_only=True,
        )  # fmt: skip
        names = tuple(names or ())
        if bad := [n for n in names if not n.strip("/") or any(c.isspace() for c in n)]:
            raise ValueError(f"parameter graph.{role}.allowed: {bad[0]!r} is not a node name; got {list(names)}")
        allowed[role] = names
    return GraphSettings(stop, expected, allowed)


class GraphWatch:
    """Watches the publishers on ``topics`` (name as the node uses it -> role) of ``node``.

    Args:
      node: the watching node; its parameters ``graph.*`` are declared here (:func:`declare_graph`).
      topics: the topics, each with its role (``commands``, ``predictions``...); remappings apply.
      roles: role -> what its topics carry, for the parameters' descriptions.
      acting: what the node does about an unexpected publisher, for its warning line.
      on_change: called after the verdict of any topic changed (e.g. to publish ``/diagnostics`` at once).
    """

    def __init__(
        self, node: Node, topics: Mapping[str, str], roles: Mapping[str, str], *, acting: str,
        on_change: Callable[[], None],
    ) -> None:  # fmt: skip
        self.node, self.acting, self.on_change = node, acting, on_change
        self.settings = declare_graph(node, roles)
        self.topics = {node.resolve_topic_name(name): role for name, role in topics.items()}
        self.lines: dict[str, str] = {}  # topic -> the line naming its unexpected publishers
        self.appearances = 0
        steady = Clock(clock_type=ClockType.STEADY_TIME)  # a stopped /clock must not stop the watch
        self.timer = node.create_timer(POLL_S, self.poll, clock=steady)

    @property
    def stopping(self) -> bool:
        """Whether the node must stop its output now: an unexpected publisher is on, and the switch is on."""
        return self.settings.stop and bool(self.lines)

    def poll(self) -> None:
        """Look at each topic's publishers; say each change in one line, then ``on_change()``."""
        try:
            if [topic for topic, role in self.topics.items() if self._check(topic, role)]:
                self.on_change()
        except Exception as exc:  # e.g. the graph query of a node shutting down: the check outlives it
            self.node.get_logger().error(f"graph check failed: {exc}", throttle_duration_sec=5.0)

    def _check(self, topic: str, role: str) -> bool:
        infos = self.node.get_publishers_info_by_topic(topic)
        publishers = [f"{i.node_namespace.rstrip('/')}/{i.node_name}" for i in infos]
        expected = self.settings.expected[role]
        names = unexpected(publishers, expected=expected, allowed=self.settings.allowed[role])
        line = topic_line(topic, publishers, names, expected) if names else ""
        if line == self.lines.get(topic, ""):
            return False
        if line:
            self.appearances += 1
            self.lines[topic] = line
            act = f"{self.acting} until it is gone" if self.settings.stop else "graph.stop_on_unexpected is off"
            self.node.get_logger().warning(f"unexpected publisher on {line}: {act}")
        else:
            del self.lines[topic]
            self.node.get_logger().info(f"the unexpected publishers on {topic} are gone")
        return True

    def amend(self, health: Health) -> Health:
        """``health`` with the unexpected publishers named first (ERROR while they stop the node, else WARN)."""
        values = {**health.values, "unexpected_publishers": "; ".join(self.lines.values()) or "none",
                  "unexpected_publisher_appearances": self.appearances}  # fmt: skip
        if not self.lines:
            return replace(health, values=values)
        level = max(health.level, ERROR if self.settings.stop else WARN, key=ord)
        said = "; ".join(self.lines.values())
        return Health(level, f"unexpected publisher on {said}; {health.message}", values)


class Arrivals:
    """Counts one input's messages: ``received`` (handed to the node) and ``lost`` (sent, never handed).

    Lost messages are the gaps in each publisher's sequence numbers (rmw's ``publication_sequence_number``)
    after its first message seen: a keep-last queue that overflowed. What a publisher sent before the node
    first heard it is not counted.
    """

    def __init__(self) -> None:
        self.received = self.lost = 0
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


class InputCounts:
    """:class:`Arrivals` of each input of a node, by name; the first named is the main one (its counts unprefixed)."""

    def __init__(self, main: str) -> None:
        self.main = main
        self.inputs: dict[str, Arrivals] = {}

    def counting(self, name: str, callback: Callable) -> Callable:
        """``callback(msg)`` as a subscription callback that also counts input ``name`` (rclpy passes the info)."""
        arrivals = self.inputs.setdefault(name, Arrivals())

        def take(msg, info) -> None:
            arrivals.arrived(info)
            callback(msg)

        return take

    def values(self) -> dict[str, int]:
        """``received`` and ``lost`` of the main input, ``received.<name>`` and ``lost.<name>`` of the others."""
        out = {}
        for name, a in self.inputs.items():
            suffix = "" if name == self.main else f".{name}"
            out.update({f"received{suffix}": a.received, f"lost{suffix}": a.lost})
        return out
