"""The wire maze: a closed path in the arm's workspace that the tool follows counter-clockwise.

The paper's operator kept a rod held by the arm in contact with a wire loop while driving
it around counter-clockwise. Here the wire is a closed curve through a few waypoints whose
corners are rounded by corner cutting, so it has straight runs, bends and a notch, and is
smooth enough for the arm to follow. The curve is resampled densely and parametrized by
arc length ``s`` (m), increasing counter-clockwise; all queries wrap ``s`` modulo the
length.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from gamma_net_core.config import setting, validate


@dataclass(frozen=True)
class MazeConfig:
    """The maze's shape, in the arm's base frame (m)."""

    waypoints_x: tuple[float, ...] = setting(
        (-0.08, 0.06, 0.07, 0.03, 0.07, 0.06, 0.02, 0.0, -0.03, -0.05, -0.08, -0.08, -0.05, -0.08),
        "x of the wire's corners relative to the center, m, counter-clockwise (a stand-in for the paper's maze)",
        low=-1.0,
        high=1.0,
    )
    waypoints_y: tuple[float, ...] = setting(
        (-0.11, -0.11, -0.04, 0.0, 0.04, 0.11, 0.11, 0.05, 0.05, 0.11, 0.11, 0.03, 0.0, -0.03),
        "y of the wire's corners relative to the center, m, counter-clockwise",
        low=-1.0,
        high=1.0,
    )
    center_x: float = setting(0.29, "x of the maze's center in the arm's base frame, m", low=-1.0, high=1.0)
    center_y: float = setting(0.0, "y of the maze's center in the arm's base frame, m", low=-1.0, high=1.0)
    corner_cuts: int = setting(5, "corner-cutting passes rounding the corners (more: rounder bends)", low=0, high=8)
    spacing: float = setting(0.001, "resampling step along the wire, m", low=1e-4, high=0.05)

    def __post_init__(self) -> None:
        validate(self)
        if len(self.waypoints_x) != len(self.waypoints_y):
            raise ValueError(
                f"MazeConfig: waypoints_x has {len(self.waypoints_x)} values, waypoints_y {len(self.waypoints_y)}"
            )
        if len(self.waypoints_x) < 3:
            raise ValueError(f"MazeConfig: a closed maze needs at least 3 waypoints; got {len(self.waypoints_x)}")


@dataclass(frozen=True)
class ClosestPoint:
    """Where the wire is nearest to a query point."""

    s: float  # m, arc length in [0, length)
    point: np.ndarray  # [2] m, the nearest point on the wire
    distance: float  # m


def _cut_corners(points: np.ndarray, passes: int) -> np.ndarray:
    """Chaikin corner cutting of a closed polygon: each pass replaces a corner by two points."""
    for _ in range(passes):
        following = np.roll(points, -1, axis=0)
        cut = np.empty((2 * len(points), 2))
        cut[0::2] = 0.75 * points + 0.25 * following
        cut[1::2] = 0.25 * points + 0.75 * following
        points = cut
    return points


class MazePath:
    """A closed curve parametrized by arc length, counter-clockwise.

    Attributes:
      points: [n, 2] m, the dense resampled curve (first point at s = 0; not repeated at the end).
      s: [n] m, arc length of each point.
      length: m, the length of one circuit.
    """

    def __init__(self, polygon, *, corner_cuts: int = 5, spacing: float = 0.001) -> None:
        """Build the path through a closed polygon (corners rounded by ``corner_cuts`` passes).

        Args:
          polygon: [k, 2] m, the corners, counter-clockwise (a clockwise polygon is refused).
          corner_cuts: corner-cutting passes.
          spacing: m, step of the dense resampling.
        """
        polygon = np.asarray(polygon, dtype=np.float64)
        if polygon.ndim != 2 or polygon.shape[1] != 2 or len(polygon) < 3:
            raise ValueError(f"polygon must be [k >= 3, 2]; got shape {polygon.shape}")
        if not np.all(np.isfinite(polygon)):
            raise ValueError("polygon has non-finite coordinates")
        if spacing <= 0:
            raise ValueError(f"spacing must be positive; got {spacing!r}")
        smooth = _cut_corners(polygon, corner_cuts)
        closed = np.vstack([smooth, smooth[:1]])
        chord = np.linalg.norm(np.diff(closed, axis=0), axis=1)
        if np.any(chord <= 0):
            raise ValueError("polygon has repeated consecutive corners")
        s_closed = np.concatenate([[0.0], np.cumsum(chord)])
        self.length = float(s_closed[-1])
        n = max(math.ceil(self.length / spacing), 16)
        self.s = np.linspace(0.0, self.length, n, endpoint=False)
        self.points = np.column_stack(
            [np.interp(self.s, s_closed, closed[:, 0]), np.interp(self.s, s_closed, closed[:, 1])]
        )
        x, y = self.points[:, 0], self.points[:, 1]
        self.signed_area = 0.5 * float(np.sum(x * np.roll(y, -1) - np.roll(x, -1) * y))
        if self.signed_area <= 0:
            raise ValueError(f"the maze must run counter-clockwise; its signed area is {self.signed_area:.4g} m^2")
        self._step = self.length / n
        # Curvature from the heading change over a window of about 1 cm, so the
        # resampling's tiny kinks do not read as sharp turns.
        half = max(1, round(0.005 / self._step))
        heading_ahead = self._heading(np.roll(self.points, -half, axis=0) - self.points)
        heading_behind = self._heading(self.points - np.roll(self.points, half, axis=0))
        turn = np.angle(np.exp(1j * (heading_ahead - heading_behind)))
        self.curvature = turn / (half * self._step)

    @staticmethod
    def _heading(vectors: np.ndarray) -> np.ndarray:
        return np.arctan2(vectors[:, 1], vectors[:, 0])

    @classmethod
    def from_config(cls, config: MazeConfig) -> MazePath:
        center = np.array([config.center_x, config.center_y])
        polygon = np.column_stack([config.waypoints_x, config.waypoints_y]) + center
        return cls(polygon, corner_cuts=config.corner_cuts, spacing=config.spacing)

    @property
    def centroid(self) -> np.ndarray:
        """[2] m, the area centroid (the tool winds around it once per circuit)."""
        x, y = self.points[:, 0], self.points[:, 1]
        cross = x * np.roll(y, -1) - np.roll(x, -1) * y
        return np.array([np.sum((x + np.roll(x, -1)) * cross), np.sum((y + np.roll(y, -1)) * cross)]) / (
            6.0 * self.signed_area
        )

    def wrap(self, s):
        """Arc length modulo one circuit, in [0, length)."""
        return np.mod(s, self.length)

    def _index_and_fraction(self, s):
        position = self.wrap(np.asarray(s, dtype=np.float64)) / self._step
        index = np.floor(position).astype(np.int64) % len(self.points)
        return index, position - np.floor(position)

    def point_at(self, s) -> np.ndarray:
        """[..., 2] m, the wire's point at arc length ``s`` (any real; wrapped)."""
        index, fraction = self._index_and_fraction(s)
        following = (index + 1) % len(self.points)
        fraction = np.asarray(fraction)[..., None]
        return self.points[index] * (1.0 - fraction) + self.points[following] * fraction

    def tangent_at(self, s) -> np.ndarray:
        """[..., 2] unit direction of travel (counter-clockwise) at ``s``."""
        index, _ = self._index_and_fraction(s)
        delta = self.points[(index + 1) % len(self.points)] - self.points[index]
        return delta / np.linalg.norm(delta, axis=-1, keepdims=True)

    def curvature_at(self, s):
        """1/m, signed (positive turns left) at ``s``."""
        index, _ = self._index_and_fraction(s)
        return self.curvature[index]

    def max_curvature_between(self, s_from: float, s_to: float) -> float:
        """1/m, the largest unsigned curvature on the stretch from ``s_from`` to ``s_to`` (s_to >= s_from)."""
        start = int(self.wrap(s_from) // self._step)
        count = max(1, int((s_to - s_from) // self._step) + 1)
        index = (start + np.arange(count)) % len(self.points)
        return float(np.max(np.abs(self.curvature[index])))

    def closest(self, xy, *, near: float | None = None, window: float | None = None) -> ClosestPoint:
        """The point of the wire nearest to ``xy``.

        Args:
          xy: [2] m, the query point.
          near: m, search only the stretch within ``window`` of this arc length (a tracker's
            last estimate), so a point near where the wire passes close to itself is not
            attributed to the other pass.
          window: m, half-length of that stretch (default: a tenth of the circuit).
        """
        xy = np.asarray(xy, dtype=np.float64)
        n = len(self.points)
        if near is None:
            index = np.arange(n)
        else:
            half = int((self.length / 10 if window is None else window) // self._step) + 1
            start = int(self.wrap(near) // self._step)
            index = (start + np.arange(-half, half + 1)) % n
        a = self.points[index]
        b = self.points[(index + 1) % n]
        ab = b - a
        t = np.clip(np.einsum("ij,ij->i", xy - a, ab) / np.einsum("ij,ij->i", ab, ab), 0.0, 1.0)
        foot = a + t[:, None] * ab
        distance = np.linalg.norm(foot - xy, axis=1)
        best = int(np.argmin(distance))
        s = float(self.wrap(self.s[index[best]] + t[best] * self._step))
        return ClosestPoint(s=s, point=foot[best], distance=float(distance[best]))


class ProgressTracker:
    """Unwrapped progress along the maze (m): grows by one length per counter-clockwise circuit.

    Fed the tool position step by step; each update searches the wire only near the last
    estimate, so progress is continuous and a circuit is counted once.
    """

    def __init__(self, maze: MazePath, xy, *, window: float = 0.05) -> None:
        """Start at the wire's point nearest ``xy`` (m); ``window`` (m) bounds the travel per update."""
        self.maze = maze
        self.window = float(window)
        self.start = maze.closest(xy).s
        self.progress = self.start
        self.distance = 0.0

    def update(self, xy) -> float:
        """Move to the wire's point nearest ``xy`` (m); returns the unwrapped progress (m)."""
        nearest = self.maze.closest(xy, near=self.progress, window=self.window)
        length = self.maze.length
        step = (nearest.s - self.progress + 0.5 * length) % length - 0.5 * length
        self.progress += step
        self.distance = nearest.distance
        return self.progress

    @property
    def s(self) -> float:
        """m, wrapped arc length of the current estimate."""
        return float(self.maze.wrap(self.progress))

    @property
    def circuits(self) -> int:
        """Completed counter-clockwise circuits since the start (negative if going backwards)."""
        return math.floor((self.progress - self.start) / self.maze.length)
