"""A command read into named joints (or a base's axes), whatever message carried it.

Every command form the reflex filters (a JointState, a forward controller's Float64MultiArray, a
JointTrajectory, a Twist) is read into one :class:`JointCommand`: per joint, position goals and
the signed quantities that drive motion (velocity, acceleration, effort), as [points, joints]
arrays (one point, except a trajectory's). :func:`joint_command` validates it before any use:
a malformed command (a list shorter or longer than the names, a name twice, points of unequal
fields) is refused with ValueError naming it, and the reflex then applies its fail-safe.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

#: Signed quantities whose sign is the direction of motion they drive (a position goal's is its
#: step from the present position).
MOTION = ("velocity", "acceleration", "effort")
FIELDS = ("position", *MOTION)
#: A mobile base's command axes (geometry_msgs/Twist), as a rule's ``joints`` name them.
TWIST_AXES = ("linear.x", "linear.y", "linear.z", "angular.x", "angular.y", "angular.z")


@dataclass(frozen=True)
class JointCommand:
    """A command by joint name.

    Attributes:
      names: the commanded joints (or axes), no name twice.
      position, velocity, acceleration, effort: [points, joints] float64, or None where the
        command does not give that field.
    """

    names: tuple[str, ...]
    position: np.ndarray | None = None
    velocity: np.ndarray | None = None
    acceleration: np.ndarray | None = None
    effort: np.ndarray | None = None

    @property
    def fields(self) -> tuple[str, ...]:
        """The fields the command gives."""
        return tuple(f for f in FIELDS if getattr(self, f) is not None)

    @property
    def points(self) -> int:
        """How many points (1, except a trajectory's; 0 for an empty trajectory)."""
        return next((getattr(self, f).shape[0] for f in self.fields), 0)

    def is_finite(self) -> bool:
        """Whether every value the command gives is finite."""
        return all(np.isfinite(getattr(self, f)).all() for f in self.fields)

    def non_finite(self) -> str | None:
        """The first value that is not finite, named (``"velocity of 'elbow' is nan"``), or None."""
        for field in self.fields:
            values = getattr(self, field)
            bad = np.argwhere(~np.isfinite(values))
            if len(bad):
                point, joint = (int(i) for i in bad[0])
                where = f" at point {point}" if self.points > 1 else ""
                return f"{field} of {self.names[joint]!r}{where} is {values[point, joint]}"
        return None

    def with_fields(self, **fields: np.ndarray | None) -> JointCommand:
        return replace(self, **fields)


def joint_command(names: Sequence[str], **fields: Sequence | None) -> JointCommand:
    """A validated :class:`JointCommand`.

    Args:
      names: the joint names.
      **fields: ``position``, ``velocity``, ``acceleration``, ``effort``: [points][joints]
        numbers, or None (the field not given).

    Raises:
      ValueError: one line naming what is malformed.
    """
    names = tuple(names)
    if not all(isinstance(n, str) and n for n in names):
        raise ValueError(f"malformed command: joint names must be non-empty strings; got {list(names)}")
    if len(set(names)) != len(names):
        raise ValueError(f"malformed command: a joint is named twice in {list(names)}")
    unknown = set(fields) - set(FIELDS)
    if unknown:
        raise ValueError(f"malformed command: unknown field {sorted(unknown)[0]!r}")
    arrays: dict[str, np.ndarray] = {}
    for field, rows in fields.items():
        if rows is None:
            continue
        try:
            array = np.asarray(rows, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"malformed command: {field} is not one list of numbers per point") from None
        if array.ndim != 2 or array.shape[1] != len(names):
            raise ValueError(
                f"malformed command: {field} has shape {array.shape} for {len(names)} joints {list(names)}"
            )
        arrays[field] = array
    if len({a.shape[0] for a in arrays.values()}) > 1:
        raise ValueError("malformed command: its fields have different numbers of points")
    return JointCommand(names, **arrays)


def toward(values: np.ndarray, direction: str) -> np.ndarray:
    """Where signed motion ``values`` move in ``direction`` (``positive``, ``negative``, ``both``)."""
    if direction == "positive":
        return values > 0
    if direction == "negative":
        return values < 0
    return np.ones(values.shape, dtype=bool)


def present_of(names: Sequence[str], present: Mapping[str, float] | None) -> np.ndarray | None:
    """The present positions of ``names``, or None where one is not known (or not finite)."""
    if present is None:
        return None
    out = np.array([present.get(n, np.nan) for n in names], dtype=np.float64)
    return out if np.isfinite(out).all() else None


class PresentPositions:
    """The joints' latest positions (finite ones only) and when they came, for holding position goals.

    Args:
      stale_s: positions older than this are not known (a hold needs the present, not the past).
    """

    def __init__(self, stale_s: float) -> None:
        self.stale_s = stale_s
        self.positions: dict[str, float] = {}
        self.at = -math.inf

    def update(self, names: Sequence[str], positions: Sequence[float], now: float) -> None:
        """A joint_states reading; one whose positions do not match its names is ignored."""
        if len(names) == len(positions):
            self.positions.update((n, float(x)) for n, x in zip(names, positions) if math.isfinite(x))
            self.at = now

    def known(self, now: float) -> dict[str, float] | None:
        """The positions, or None when the latest is older than ``stale_s`` (or in the future)."""
        return self.positions if 0.0 <= now - self.at <= self.stale_s else None
