"""A node's health on ``/diagnostics``: one ``DiagnosticStatus`` a period, the same way in every node.

    self.health = Diagnostics(self, "transitions", self.report_health)

    def report_health(self) -> Health:
        return Health(OK, "in order", {"received": self.received})

The status is named ``"<node>: <what>"`` (what `rqt_runtime_monitor` and `ros2 topic echo
/diagnostics` show), its values are the report's key/value pairs as strings, and the array is
stamped with the node's clock.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.node import Node

OK, WARN, ERROR, STALE = DiagnosticStatus.OK, DiagnosticStatus.WARN, DiagnosticStatus.ERROR, DiagnosticStatus.STALE


@dataclass
class Health:
    """What a node reports: a level (OK, WARN, ERROR, STALE), a one-line message and named values."""

    level: bytes
    message: str
    values: Mapping[str, Any] = field(default_factory=dict)


class Diagnostics:
    """Publishes ``report()`` on ``/diagnostics`` every ``period`` seconds (and on :meth:`publish`).

    Args:
      node: the publishing node.
      what: the part of the node the status is about (e.g. the cumulant, "servo bus").
      report: returns the node's current :class:`Health`.
      period: seconds between statuses; 0: only when :meth:`publish` is called.
      hardware_id: the status's hardware_id (e.g. the serial port).
    """

    def __init__(
        self,
        node: Node,
        what: str,
        report: Callable[[], Health],
        *,
        period: float = 1.0,
        hardware_id: str = "gamma_net",
    ) -> None:
        self.node = node
        self.what = what
        self.report = report
        self.hardware_id = hardware_id
        self.publisher = node.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self.timer = node.create_timer(period, self.publish) if period > 0 else None

    def status(self) -> DiagnosticStatus:
        """The node's current health as a ``DiagnosticStatus``."""
        health = self.report()
        return DiagnosticStatus(
            name=f"{self.node.get_name()}: {self.what}",
            hardware_id=self.hardware_id,
            level=health.level,
            message=health.message,
            values=[KeyValue(key=str(k), value=str(v)) for k, v in health.values.items()],
        )

    def publish(self, extra: Sequence[DiagnosticStatus] = ()) -> None:
        """Publish the node's status, then ``extra`` statuses (e.g. one per question) in the same array."""
        array = DiagnosticArray(status=[self.status(), *extra])
        array.header.stamp = self.node.get_clock().now().to_msg()
        self.publisher.publish(array)
