"""Joint goals for the servo bus: commands checked by joint name, clamped to limits, stopped in time.

No ROS here: the driver node hands over each command's names and values, and asks once per
cycle for the goals to write. In velocity mode the servos themselves ignore position limits,
so a joint is slowed as it nears one (no faster than would cover the room left within
``soft_stop_s``) and each joint's goal falls back to zero when no command has named it for
``command_timeout_s``: a command naming the elbow does not keep the shoulder's old goal alive.
In position mode a joint holds where it is found, inside the limits or not, until a command
names it: only then is its goal clamped, so connecting never drives a joint on its own. A command
that only holds such a joint where it is (a reflex's hold of every joint) does not start that
clamping either.

Goals are written each cycle, and on a command's receipt too (a stop should not wait for the next
cycle): up to :data:`RECEIPT_WRITES` times between two cycles' writes, and only goals that differ
from the last written, so an operator's commands do not use up a stop's write and a burst of
commands cannot crowd out the bus's reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MODES = ("velocity", "position")
#: rad; a position goal this close to where an uncommanded joint holds asks for no motion (about three
#: position ticks of an X-series servo, 0.0015 rad each: a reading of a joint holding still).
HOLD_TOLERANCE_RAD = 0.005
#: goal changes written on a command's receipt between two cycles' writes (a stop among an operator's commands)
RECEIPT_WRITES = 3


@dataclass(frozen=True)
class JointLimits:
    """Per-joint limits: positions in rad, speeds in rad/s."""

    position_min: np.ndarray
    position_max: np.ndarray
    velocity_max: np.ndarray

    @classmethod
    def of(cls, n: int, *, position_min, position_max, velocity_max) -> JointLimits:
        """Checked limits for ``n`` joints; ValueError naming the offending values."""
        arrays = {}
        for name, values in (("position_min", position_min), ("position_max", position_max),
                             ("velocity_max", velocity_max)):  # fmt: skip
            array = np.asarray(values, dtype=np.float64)
            if array.shape != (n,) or not np.all(np.isfinite(array)):
                raise ValueError(f"{name} must be {n} finite numbers (one per joint); got {array.tolist()}")
            arrays[name] = array
        if not np.all(arrays["position_min"] < arrays["position_max"]):
            raise ValueError(f"position_min {arrays['position_min'].tolist()} must be below position_max "
                             f"{arrays['position_max'].tolist()} for every joint")  # fmt: skip
        if not np.all(arrays["velocity_max"] > 0):
            raise ValueError(f"velocity_max {arrays['velocity_max'].tolist()} must be positive for every joint")
        return cls(**arrays)

    def within(self, other: JointLimits) -> bool:
        """Whether every limit here is at least as tight as ``other``'s."""
        return bool(
            np.all(self.position_min >= other.position_min)
            and np.all(self.position_max <= other.position_max)
            and np.all(self.velocity_max <= other.velocity_max)
        )

    def tightened_by(self, other: JointLimits | None) -> JointLimits:
        if other is None:
            return self
        return JointLimits(
            np.maximum(self.position_min, other.position_min),
            np.minimum(self.position_max, other.position_max),
            np.minimum(self.velocity_max, other.velocity_max),
        )


class JointGoals:
    """The goal of each joint, in ``mode`` "velocity" (rad/s) or "position" (rad).

    Args:
      joint_names: the joints, in the bus's servo order.
      limits: the configured limits; :attr:`servo_limits` (the servos' own) tighten them.
      command_timeout_s: velocity mode: a joint's goal returns to zero this long after the last
        command that named it (0: never). Times are steady seconds (``now``), never a clock
        another process drives.
      soft_stop_s: velocity mode: braking horizon near a position limit.
    """

    def __init__(
        self,
        joint_names: Sequence[str],
        *,
        mode: str,
        limits: JointLimits,
        command_timeout_s: float = 0.0,
        soft_stop_s: float = 0.3,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"command mode must be one of {list(MODES)}; got {mode!r}")
        if command_timeout_s < 0 or soft_stop_s <= 0:
            raise ValueError(f"command_timeout_s ({command_timeout_s}) >= 0 and soft_stop_s ({soft_stop_s}) > 0")
        self.joint_names = list(joint_names)
        self.mode = mode
        self.limits = limits
        self.servo_limits: JointLimits | None = None
        self.command_timeout_s = command_timeout_s
        self.soft_stop_s = soft_stop_s
        self.timeouts = 0
        self._last_command = np.full(len(self.joint_names), -np.inf)  # per joint: when a command last named it
        self.hold()

    @property
    def effective_limits(self) -> JointLimits:
        return self.limits.tightened_by(self.servo_limits)

    def hold(self) -> None:
        """Hold still (after a (re)connect): zero velocity, or the position the next read reports."""
        self.goal = np.zeros(len(self.joint_names)) if self.mode == "velocity" else None
        self.commanded = np.zeros(len(self.joint_names), dtype=bool)  # position mode: clamped from now on
        self.written: np.ndarray | None = None  # the goals last handed out to write (None: not known)
        self.receipt_writes = 0  # writes on receipt left until the next cycle's (none before the first)

    def command(self, names: Sequence[str], values: Sequence[float], *, now: float) -> bool:
        """Set the goals of the named joints (any subset, any order); return whether any was clamped.

        Raises:
          ValueError: unknown or repeated names, a length mismatch, or a value that is not
            finite; the goals are left as they were.
        """
        names = list(names)
        values = np.asarray(values, dtype=np.float64)
        if not names or len(set(names)) != len(names):
            raise ValueError(f"joint names must be distinct and not empty; got {names}")
        unknown = [name for name in names if name not in self.joint_names]
        if unknown:
            raise ValueError(f"unknown joints {unknown}; this driver has {self.joint_names}")
        if values.shape != (len(names),):
            raise ValueError(f"{len(names)} names but {values.size} {self.mode} values ({self.mode} mode)")
        if not np.all(np.isfinite(values)):
            raise ValueError(f"{self.mode} values must be finite; got {values.tolist()}")
        if self.goal is None and len(names) < len(self.joint_names):
            raise ValueError("a position command naming only some joints before the first read; name every joint")
        index = np.array([self.joint_names.index(name) for name in names])
        goal = np.zeros(len(self.joint_names)) if self.goal is None else self.goal.copy()
        moves = np.ones(len(index), dtype=bool)
        if self.mode == "position" and self.goal is not None:  # holding an uncommanded joint where it is
            moves = self.commanded[index] | (np.abs(values - goal[index]) > HOLD_TOLERANCE_RAD)
        goal[index] = values
        self.goal = goal
        self.commanded[index[moves]] = True
        self._last_command[index] = now
        return bool(np.any((self._clamp(goal) != goal)[index[moves]]))

    def _clamp(self, goal: np.ndarray) -> np.ndarray:
        limits = self.effective_limits
        if self.mode == "velocity":
            return np.clip(goal, -limits.velocity_max, limits.velocity_max)
        return np.clip(goal, limits.position_min, limits.position_max)

    def to_write(self, position: np.ndarray | None, *, now: float, receipt: bool = False) -> np.ndarray | None:
        """The goals to write this cycle, given the last read ``position`` (rad; None if unknown).

        None: nothing to write yet (position mode, holding the position set at connect). On a
        command's ``receipt``, also None without a ``position`` read, for goals equal to the last
        written, or once :data:`RECEIPT_WRITES` went out since the last cycle's write.
        """
        if receipt and (position is None or self.receipt_writes <= 0):
            return None
        goal = self._due(position, now)
        if receipt:
            if goal is None or (self.written is not None and np.array_equal(goal, self.written)):
                return None
            self.receipt_writes -= 1
        else:
            self.receipt_writes = RECEIPT_WRITES
        self.written = goal if goal is not None else self.written
        return goal

    def _due(self, position: np.ndarray | None, now: float) -> np.ndarray | None:
        if self.mode == "position":
            if self.goal is None:
                if position is None:
                    return None
                self.goal = np.asarray(position, dtype=np.float64).copy()
            # A joint no command named holds where it was found, even outside the limits.
            return np.where(self.commanded, self._clamp(self.goal), self.goal)
        timeout = self.command_timeout_s
        # A clock stepped back (now before a command) counts as timed out too: the age is unknown.
        expired = (self.goal != 0) & ~((now - self._last_command >= 0) & (now - self._last_command <= timeout))
        if timeout > 0 and np.any(expired):
            self.goal = np.where(expired, 0.0, self.goal)
            self.timeouts += 1
        goal = self._clamp(self.goal)
        if position is not None:
            limits = self.effective_limits
            room_up = np.maximum(limits.position_max - position, 0.0) / self.soft_stop_s
            room_down = np.maximum(position - limits.position_min, 0.0) / self.soft_stop_s
            goal = np.clip(goal, -room_down, room_up)
        return goal
