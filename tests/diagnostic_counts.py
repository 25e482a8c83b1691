"""The counts a node reports on /diagnostics, as a test's rig node receives them."""

from __future__ import annotations

import time
from collections.abc import Sequence

from diagnostic_msgs.msg import DiagnosticArray


class DiagnosticCounts:
    """The latest of ``keys`` (as ints) from statuses named ``prefix``..., and when each report came.

    A report counts once it holds ``ready_key`` (a node may publish a status before its counts).
    """

    def __init__(self, rig, prefix: str, keys: Sequence[str], ready_key: str = "received") -> None:
        self.prefix, self.keys, self.ready_key = prefix, tuple(keys), ready_key
        self.counts: dict[str, int] = {}
        self.reports: list[float] = []  # time.monotonic() of each report
        rig.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, 100)

    def _on_diagnostics(self, msg: DiagnosticArray) -> None:
        for status in msg.status:
            values = {kv.key: kv.value for kv in status.values}
            if status.name.startswith(self.prefix) and self.ready_key in values:
                self.counts.update({k: int(values[k]) for k in self.keys})
                self.reports.append(time.monotonic())
