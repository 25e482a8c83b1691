"""The Dynamixel driver's health: its cycles' timing (late cycles), the bus's ``/diagnostics``, its log lines."""

from __future__ import annotations

from gamma_net_ros.diagnostics import ERROR, OK, WARN, Health
from gamma_net_ros.hardware.bus import DynamixelBus
from gamma_net_ros.hardware.control_table import OperatingMode

#: The driver's running counts, on /diagnostics.
COUNTS = ("cycles", "late_cycles", "published", "missed_cycles", "reconnects", "commands",
          "rejected_commands", "clamped_commands")  # fmt: skip


def _no_timing() -> dict:
    return {"late": 0, "cycles": 0, "gap": 0.0, "work": 0.0}


class CycleTiming:
    """On time: each cycle starts within half a period of when it was due.

    Counts ``cycles`` and ``late_cycles`` in the node's ``counts``; the rest (late cycles, longest
    gap and work) since the last :meth:`take_recent`, for ``/diagnostics``.
    """

    def __init__(self, rate_hz: float, counts: dict) -> None:
        self.period = 1.0 / rate_hz
        self.counts = counts
        self._cycle_start: float | None = None
        self._recent = _no_timing()  # since the last /diagnostics

    def count_late(self, start: float) -> None:
        """Count the slots this cycle missed: a start 1.5 periods or more after the last one is late.

        The timer keeps its phase (rcl skips to the next slot when behind), so a gap of k periods
        means k - 1 writes that did not go out when due: a changed command waited that much longer.
        """
        self.counts["cycles"] += 1
        self._recent["cycles"] += 1
        if self._cycle_start is not None:
            gap = start - self._cycle_start
            late = max(0, round(gap / self.period) - 1)
            self.counts["late_cycles"] += late
            self._recent["late"] += late
            self._recent["gap"] = max(self._recent["gap"], gap)
        self._cycle_start = start

    def worked(self, seconds: float) -> None:
        """A cycle's work took ``seconds``."""
        self._recent["work"] = max(self._recent["work"], seconds)

    def take_recent(self) -> dict:
        """The timing since the last call: ``late``, ``cycles``, the longest ``gap`` and ``work`` (s)."""
        timing, self._recent = self._recent, _no_timing()
        return timing

    def on_time_rate(self) -> str:
        due = self.counts["cycles"] + self.counts["late_cycles"]  # slots, the skipped ones included
        return f"{1.0 - self.counts['late_cycles'] / due:.4f}" if due else "n/a"


class BusHealth:
    """The servo bus's :class:`Health`: ERROR while it is down, WARN after failed reads, else OK."""

    def __init__(self, bus: DynamixelBus, timing: CycleTiming, counts: dict, rate_hz: float) -> None:
        self.bus, self.timing, self.counts, self.rate_hz = bus, timing, counts, rate_hz
        self._last_attempts = self._last_failed = 0  # the bus's counts at the last report

    def report(self, *, down_reason: str, models: tuple[int, ...], command_timeouts: int) -> Health:
        """The health now; the ``_recent`` values cover the time since the last report."""
        bus, timing, stats = self.bus, self.timing, self.bus.stats
        attempts, failed = stats.attempts - self._last_attempts, stats.failed_attempts - self._last_failed
        self._last_attempts, self._last_failed = stats.attempts, stats.failed_attempts
        success = f"{1.0 - stats.failed_attempts / stats.attempts:.4f}" if stats.attempts else "n/a"
        recent = f"{1.0 - failed / attempts:.4f}" if attempts else "n/a"
        if not bus.is_open:
            level, message = ERROR, f"servo bus down ({down_reason or stats.last_error}); reopening"
        elif failed:
            level, message = WARN, f"{failed} of {attempts} reads failed in the last period"
        else:
            level, message = OK, f"{self.rate_hz:g} Hz, reads fine"
        recent_timing = timing.take_recent()
        if level == OK and recent_timing["late"]:  # a busy machine's, not the bus's: said, not a warning
            message += f"; {recent_timing['late']} of {recent_timing['cycles'] + recent_timing['late']} cycles late"
        values = {
            "port_state": "open" if bus.is_open else "lost",
            "read_success_rate": success,
            "read_success_rate_recent": recent,
            "read_attempts": stats.attempts,
            "failed_attempts": stats.failed_attempts,
            "failed_reads": stats.failed_reads,
            "port_losses": stats.port_losses,
            "drained_bytes": stats.drained_bytes,
            "stale_replies": stats.stale_replies,
            "round_trip_ms": f"{stats.round_trip_ms:.1f}",
            "reply_timeout_ms": f"{stats.reply_timeout_ms:.1f}",
            "last_error": stats.last_error,
            "model_numbers": list(models),
            "command_timeouts": command_timeouts,
            "on_time_rate": timing.on_time_rate(),
            "late_cycles_recent": recent_timing["late"],
            "cycle_gap_max_ms_recent": f"{recent_timing['gap'] * 1e3:.1f}",
            "cycle_work_max_ms_recent": f"{recent_timing['work'] * 1e3:.2f}",
            **self.counts,
        }
        return Health(level, message, values)


def connected_line(bus: DynamixelBus, joint_names: list[str], info, mode: OperatingMode) -> str:
    """The line logged at each (re)connect: the servos, their models and mode, the measured round trip."""
    stats = bus.stats
    return (
        f"servos {bus.ids} ({joint_names}) on {bus.port_name}: models "
        f"{list(info.model_numbers)}, {mode.name.lower()} mode, torque on; round trip "
        f"{stats.round_trip_ms:.1f} ms, reply timeout {stats.reply_timeout_ms:.1f} ms"
    )
