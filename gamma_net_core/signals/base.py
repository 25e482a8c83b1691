"""A differential-drive base in a room: the mobile-base stand-in's physics, and a wandering operator.

The base has what a TurtleBot-like base gives a user: a LaserScan whose beams read ``+inf`` past
``range_max`` (REP 117), a bumper (1 while the base touches a wall or an obstacle), odometry (the
pose and the measured velocity) and a velocity command (linear.x, angular.z) with the limits that
make a range rule's timing matter on a real base: a command reaches the wheels ``latency_s`` late,
speed changes no faster than its acceleration and deceleration limits, and a watchdog stops it
when no command came for ``watchdog_s``. Stopping from speed ``v`` therefore takes about
``v * latency_s + v**2 / (2 * deceleration)`` metres.

:class:`SimulatedBase` is stepped by its user (the base study in simulated time, the
``base_emulator`` node on a timer); :class:`WanderOperator` drives it as a person exploring the
room might: forward at a cruise speed, turning now and then, and sometimes heading for a wall at
speed, straight or obliquely. Both are seeded and deterministic; nothing here imports ROS.
"""

from __future__ import annotations

import collections
import math
from dataclasses import dataclass

import numpy as np

#: The room's obstacles by default: (kind, centre x, centre y, size...) in metres; a box is
#: axis-aligned with half-widths, a circle has a radius.
DEFAULT_OBSTACLES = (
    ("box", 1.5, 1.2, 0.3, 0.4),
    ("box", 4.2, 3.6, 0.5, 0.25),
    ("circle", 4.5, 1.3, 0.3),
    ("circle", 2.0, 3.8, 0.25),
)


@dataclass(frozen=True)
class BaseConfig:
    """The room, the base and its limits (defaults: a TurtleBot-sized base in a 6 x 5 m room)."""

    room_width: float = 6.0
    """m; the room spans x in [0, room_width]."""
    room_height: float = 5.0
    """m; the room spans y in [0, room_height]."""
    obstacles: tuple = DEFAULT_OBSTACLES
    """``("box", x, y, half_width, half_height)`` or ``("circle", x, y, radius)``, in metres."""
    radius: float = 0.18
    """m; the base's radius: the bumper (its front half) closes when a surface is this near its centre."""
    beams: int = 36
    """Beams of the scan, evenly spaced over the full circle, counter-clockwise."""
    angle_min: float = -math.radians(20.0)
    """rad from straight ahead; the first beam's angle. -20 degrees puts beams 0-4 across the front."""
    range_min: float = 0.12
    """m; a nearer surface reads ``-inf`` (REP 117: too close)."""
    range_max: float = 3.5
    """m; a beam that meets nothing within it reads ``+inf`` (REP 117: nothing in range)."""
    max_linear: float = 0.7
    """m/s; linear.x commands are clipped to +-this."""
    max_angular: float = 2.0
    """rad/s; angular.z commands are clipped to +-this."""
    acceleration: float = 0.8
    """m/s^2; how fast linear speed may grow."""
    deceleration: float = 1.0
    """m/s^2; how fast linear speed may shrink (braking)."""
    angular_acceleration: float = 6.0
    """rad/s^2; how fast the turn rate may change."""
    latency_s: float = 0.1
    """s; a command reaches the wheels this late (a queue of commands in flight)."""
    watchdog_s: float = 0.5
    """s; with no command arriving for this long the base brakes to a stop."""
    physics_dt: float = 0.01
    """s; the integration step; :meth:`SimulatedBase.step` takes as many as its ``dt`` holds."""
    velocity_noise: float = 0.005
    """m/s and rad/s; standard deviation of the odometry's measured velocity about the true one."""


@dataclass
class Odometry:
    """What the base's odometry reports at one moment."""

    x: float
    """m; position in the room."""
    y: float
    """m; position in the room."""
    theta: float
    """rad; heading, counter-clockwise from +x."""
    linear: float
    """m/s; measured forward speed."""
    angular: float
    """rad/s; measured turn rate."""


@dataclass
class BaseCounters:
    """What happened to the base so far: bumps and distance."""

    bumps: int = 0
    """Bumper onsets (each new contact counts once)."""
    contact_s: float = 0.0
    """s the bumper was closed."""
    distance_m: float = 0.0
    """m travelled (forward and back)."""
    elapsed_s: float = 0.0
    """s simulated."""
    watchdog_stops: int = 0
    """Times the watchdog found no command and braked."""


def _ray_box(ox, oy, dx, dy, x0, y0, x1, y1, inside: bool) -> np.ndarray:
    """Distances along rays (ox, oy) + t (dx, dy) to an axis-aligned box's boundary (inf: none).

    ``inside``: the rays start inside the box (the room's walls): the exit distance.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        tx0, tx1 = (x0 - ox) / dx, (x1 - ox) / dx
        ty0, ty1 = (y0 - oy) / dy, (y1 - oy) / dy
    tmin = np.maximum(np.minimum(tx0, tx1), np.minimum(ty0, ty1))
    tmax = np.minimum(np.maximum(tx0, tx1), np.maximum(ty0, ty1))
    if inside:
        return np.where(np.isfinite(tmax) & (tmax >= 0), tmax, np.inf)
    hit = (tmax >= np.maximum(tmin, 0.0)) & np.isfinite(tmin)
    return np.where(hit & (tmin >= 0), tmin, np.inf)


def _ray_circle(ox, oy, dx, dy, cx, cy, r) -> np.ndarray:
    fx, fy = ox - cx, oy - cy
    b = fx * dx + fy * dy
    c = fx * fx + fy * fy - r * r
    disc = b * b - c
    with np.errstate(invalid="ignore"):
        t = -b - np.sqrt(disc)
    return np.where((disc >= 0) & (t >= 0), t, np.inf)


class Room:
    """The walls and obstacles: distances to them, for the scan and the bumper."""

    def __init__(self, config: BaseConfig) -> None:
        self.width, self.height = config.room_width, config.room_height
        self.boxes, self.circles = [], []
        for obstacle in config.obstacles:
            kind, *size = obstacle
            if kind == "box" and len(size) == 4:
                self.boxes.append(tuple(float(v) for v in size))
            elif kind == "circle" and len(size) == 3:
                self.circles.append(tuple(float(v) for v in size))
            else:
                raise ValueError(f"an obstacle is ('box', x, y, half_w, half_h) or ('circle', x, y, r); got {obstacle}")

    def clearance(self, x: float, y: float) -> float:
        """m from (x, y) to the nearest surface (negative inside an obstacle or outside the room)."""
        nearest = min(x, y, self.width - x, self.height - y)
        for cx, cy, hw, hh in self.boxes:
            qx, qy = abs(x - cx) - hw, abs(y - cy) - hh
            outside = math.hypot(max(qx, 0.0), max(qy, 0.0))
            nearest = min(nearest, outside + min(max(qx, qy), 0.0))
        for cx, cy, r in self.circles:
            nearest = min(nearest, math.hypot(x - cx, y - cy) - r)
        return nearest

    def cast(self, x: float, y: float, angles: np.ndarray) -> np.ndarray:
        """m along each ray from (x, y) at ``angles`` (rad) to the first surface."""
        dx, dy = np.cos(angles), np.sin(angles)
        distance = _ray_box(x, y, dx, dy, 0.0, 0.0, self.width, self.height, inside=True)
        for cx, cy, hw, hh in self.boxes:
            distance = np.minimum(distance, _ray_box(x, y, dx, dy, cx - hw, cy - hh, cx + hw, cy + hh, inside=False))
        for cx, cy, r in self.circles:
            distance = np.minimum(distance, _ray_circle(x, y, dx, dy, cx, cy, r))
        return distance


def _towards(value: float, target: float, rate_up: float, rate_down: float, dt: float) -> float:
    """``value`` moved toward ``target``: at most ``rate_up * dt`` away from zero, ``rate_down * dt`` toward it."""
    speeding_up = abs(target) > abs(value) and target * value >= 0.0
    step = (rate_up if speeding_up else rate_down) * dt
    return value + max(-step, min(step, target - value))


class SimulatedBase:
    """A differential-drive base: commands in, a scan, a bumper and odometry out.

    Args:
      config: the room, the base and its limits.
      rng: for the odometry's noise.
      pose: (x, y, theta) to start at (default: the room's free centre, facing +x).
    """

    def __init__(self, config: BaseConfig, *, rng: np.random.Generator, pose=None) -> None:
        if not (config.beams >= 1 and config.range_max > config.range_min > 0 and config.radius > 0):
            raise ValueError(f"a base needs beams >= 1, 0 < range_min < range_max and radius > 0; got {config}")
        for name in ("deceleration", "acceleration", "angular_acceleration", "physics_dt"):
            if not getattr(config, name) > 0:
                raise ValueError(f"{name} must be positive; got {getattr(config, name)}")
        if config.latency_s < 0 or config.watchdog_s <= 0:
            raise ValueError(f"latency_s must be >= 0 and watchdog_s > 0; got {config.latency_s}, {config.watchdog_s}")
        self.config, self.rng, self.room = config, rng, Room(config)
        self.x, self.y, self.theta = pose if pose is not None else (config.room_width / 2, config.room_height / 2, 0.0)
        if self.room.clearance(self.x, self.y) < config.radius:
            raise ValueError(f"the base cannot start at {(self.x, self.y)}: it overlaps a wall or an obstacle")
        self.linear = self.angular = 0.0
        self.now = 0.0
        self.in_flight: collections.deque = collections.deque()  # (arrives at, linear, angular)
        self.target = (0.0, 0.0)
        self.last_command = -math.inf  # when the wheels last received one (the watchdog's clock)
        self.watchdog_on = True  # nothing received yet: stopped
        self.counters = BaseCounters()
        self.bumper = self._touching()
        self.beam_angles = config.angle_min + np.arange(config.beams) * (2 * math.pi / config.beams)

    @property
    def angle_increment(self) -> float:
        """rad between beams."""
        return 2 * math.pi / self.config.beams

    def command(self, linear: float, angular: float) -> None:
        """A velocity command (m/s forward, rad/s counter-clockwise), reaching the wheels ``latency_s`` later.

        Raises:
          ValueError: a value that is not finite (the caller's to refuse; the base never moves on it).
        """
        if not (math.isfinite(linear) and math.isfinite(angular)):
            raise ValueError(f"a command must be finite; got linear {linear}, angular {angular}")
        c = self.config
        self.in_flight.append((self.now + c.latency_s, max(-c.max_linear, min(c.max_linear, linear)),
                               max(-c.max_angular, min(c.max_angular, angular))))  # fmt: skip

    def step(self, dt: float) -> None:
        """Advance ``dt`` seconds (in ``physics_dt`` steps)."""
        if not dt > 0:
            raise ValueError(f"dt must be positive; got {dt}")
        c = self.config
        n = max(1, round(dt / c.physics_dt))
        h = dt / n
        for _ in range(n):
            self._substep(h, c)

    def _substep(self, h: float, c: BaseConfig) -> None:
        while self.in_flight and self.in_flight[0][0] <= self.now + 1e-9:
            _, linear, angular = self.in_flight.popleft()
            self.target, self.last_command = (linear, angular), self.now
        self.now += h
        stale = self.now - self.last_command > c.watchdog_s
        if stale and not self.watchdog_on and self.last_command > -math.inf:
            self.counters.watchdog_stops += 1
        self.watchdog_on = stale
        linear_target, angular_target = (0.0, 0.0) if stale else self.target
        linear_before, angular_before = self.linear, self.angular
        self.linear = _towards(self.linear, linear_target, c.acceleration, c.deceleration, h)
        self.angular = _towards(self.angular, angular_target, c.angular_acceleration, c.angular_acceleration, h)
        # The mean speed over the step (trapezoid): braking covers v**2 / (2 a) exactly.
        linear, angular = (linear_before + self.linear) / 2, (angular_before + self.angular) / 2
        self.theta = (self.theta + angular * h + math.pi) % (2 * math.pi) - math.pi
        nx = self.x + linear * math.cos(self.theta) * h
        ny = self.y + linear * math.sin(self.theta) * h
        if self.room.clearance(nx, ny) >= c.radius:
            self.counters.distance_m += abs(linear) * h
            self.x, self.y = nx, ny
        else:
            # It meets the surface within this step: move it up to contact, where the bumper closes.
            low, high = 0.0, 1.0
            for _ in range(20):
                middle = (low + high) / 2
                mx, my = self.x + (nx - self.x) * middle, self.y + (ny - self.y) * middle
                low, high = (middle, high) if self.room.clearance(mx, my) >= c.radius else (low, middle)
            self.counters.distance_m += abs(linear) * h * low
            self.x, self.y = self.x + (nx - self.x) * low, self.y + (ny - self.y) * low
            self.linear = 0.0  # pressed against the surface: the wheels slip, the base stays
        touching = self._touching()
        if touching and not self.bumper:
            self.counters.bumps += 1
        self.bumper = touching
        self.counters.contact_s += h if touching else 0.0
        self.counters.elapsed_s = self.now

    def _touching(self) -> bool:
        # A millimetre of slack: a collision leaves the base at contact to within the bisection's precision.
        clearance = self.room.clearance(self.x, self.y)
        if clearance >= self.config.radius + 1e-3:
            return False
        # The bumper covers the front half, as a TurtleBot's: the surface is ahead when a step forward nears it.
        ahead = self.room.clearance(self.x + 0.01 * math.cos(self.theta), self.y + 0.01 * math.sin(self.theta))
        return ahead < clearance

    def scan(self) -> np.ndarray:
        """The ranges (m), beam 0 at ``angle_min`` from straight ahead: ``+inf`` past range_max, ``-inf`` too close."""
        distance = self.room.cast(self.x, self.y, self.theta + self.beam_angles)
        distance = np.where(distance > self.config.range_max, np.inf, distance)
        return np.where(distance < self.config.range_min, -np.inf, distance)

    def odometry(self) -> Odometry:
        """The pose and the measured velocity (with the odometry's noise)."""
        noise = self.config.velocity_noise
        linear, angular = self.linear, self.angular
        if noise > 0:
            linear += float(self.rng.normal(0.0, noise))
            angular += float(self.rng.normal(0.0, noise))
        return Odometry(self.x, self.y, self.theta, linear, angular)


@dataclass(frozen=True)
class WanderConfig:
    """How the scripted operator drives the base."""

    cruise_speed: float = 0.3
    """m/s; forward speed while wandering."""
    dash_speed: float = 0.7
    """m/s; speed when heading for a wall on purpose."""
    dash_probability: float = 0.04
    """Per second of wandering: the chance of picking a wall to head for at dash speed."""
    oblique_max_deg: float = 50.0
    """degrees; a dash aims at the wall's normal plus up to this much either way."""
    turn_probability: float = 0.15
    """Per second: the chance of a random turn while wandering."""
    turn_speed: float = 1.2
    """rad/s; the turn rate of a turn."""
    avoid_range: float = 0.6
    """m; while wandering (not dashing), something nearer than this ahead makes the operator turn away."""
    stuck_s: float = 0.6
    """s; driving forward but not moving for this long (blocked, or held by a reflex): back off and turn."""
    back_off_s: float = 0.6
    """s; how long it backs away after a bump or being stuck."""
    back_speed: float = 0.15
    """m/s; backing speed."""


@dataclass
class _Mode:
    """What the operator is doing (wander, turn, back, aim, dash), until when, toward which heading or side."""

    name: str = "wander"
    until: float = 0.0
    heading: float = 0.0
    turn: float = 0.0


class WanderOperator:
    """A person exploring the room with a joystick: commands (linear.x, angular.z) from what the base senses.

    Args:
      config: speeds and how often it turns and dashes.
      rng: for its choices.
      front_beams: the scan's beams ahead (indices), for avoiding while wandering and aiming.
    """

    def __init__(
        self,
        config: WanderConfig,
        *,
        rng: np.random.Generator,
        front_beams=range(0, 5),
        left_beams=range(5, 14),
        right_beams=range(-9, 0),
    ) -> None:
        self.config, self.rng = config, rng
        self.front, self.left, self.right = list(front_beams), list(left_beams), list(right_beams)
        self.mode = _Mode()
        self.stuck_since: float | None = None
        self.dashes = 0

    def observe(
        self, now: float, ranges: np.ndarray, odometry: Odometry, bumper: bool, dt: float
    ) -> tuple[float, float]:
        """The command (m/s, rad/s) for this tick.

        Args:
          now: s; the operator's clock.
          ranges: the scan (REP 117 values: ``+inf`` is open space).
          odometry: the base's pose and measured speed.
          bumper: whether the bumper is closed.
          dt: s since the last call (the chance of a turn or a dash is per second).
        """
        c, mode = self.config, self.mode
        ranges = np.asarray(ranges, dtype=float)
        ranges = np.where(np.isneginf(ranges), 0.0, ranges)  # -inf (too close) is as near as can be
        front = float(np.min(ranges[self.front]))
        # Turning away: toward the more open side.
        open_side = 1.0 if np.min(ranges[self.left]) >= np.min(ranges[self.right]) else -1.0
        pushing = mode.name in ("wander", "dash") and odometry.linear < 0.03
        self.stuck_since = (self.stuck_since if self.stuck_since is not None else now) if pushing else None
        if bumper or (self.stuck_since is not None and now - self.stuck_since >= c.stuck_s):
            if mode.name not in ("back", "turn"):
                self.mode = _Mode("back", now + c.back_off_s, turn=open_side)
                self.stuck_since = None
        mode = self.mode
        if mode.name == "back":
            if now < mode.until:
                return -c.back_speed, 0.0
            angle = self.rng.uniform(math.pi / 3, math.pi)
            self.mode = _Mode("turn", now + angle / c.turn_speed, turn=mode.turn)
            return 0.0, mode.turn * c.turn_speed
        if mode.name == "turn":
            if now < mode.until:
                return 0.0, mode.turn * c.turn_speed
            self.mode = mode = _Mode()
        if mode.name == "aim":
            error = (mode.heading - odometry.theta + math.pi) % (2 * math.pi) - math.pi
            if abs(error) > 0.05:
                return 0.0, math.copysign(min(c.turn_speed, 3.0 * abs(error)), error)
            self.mode = mode = _Mode("dash", now + 15.0, heading=mode.heading)
            self.dashes += 1
        if mode.name == "dash":
            if now >= mode.until:
                self.mode = _Mode()
            error = (mode.heading - odometry.theta + math.pi) % (2 * math.pi) - math.pi
            return c.dash_speed, 2.0 * error
        # wandering
        if front < c.avoid_range:
            angle = self.rng.uniform(math.pi / 4, math.pi / 2)
            self.mode = _Mode("turn", now + angle / c.turn_speed, turn=open_side)
            return 0.0, open_side * c.turn_speed
        if self.rng.random() < c.dash_probability * dt:
            self.mode = _Mode("aim", heading=self._wall_heading(odometry))
            return 0.0, 0.0
        if self.rng.random() < c.turn_probability * dt:
            side = 1.0 if self.rng.random() < 0.5 else -1.0
            angle = self.rng.uniform(math.pi / 6, math.pi / 2)
            self.mode = _Mode("turn", now + angle / c.turn_speed, turn=side)
        return c.cruise_speed, 0.0

    def _wall_heading(self, odometry: Odometry) -> float:
        """A heading at one of the walls: along its inward normal, turned by up to ``oblique_max_deg``."""
        normals = (0.0, math.pi / 2, math.pi, -math.pi / 2)  # toward the +x, +y, -x, -y walls
        wall = normals[int(self.rng.integers(len(normals)))]
        oblique = math.radians(self.config.oblique_max_deg) * self.rng.uniform(-1.0, 1.0)
        return (wall + oblique + math.pi) % (2 * math.pi) - math.pi


def stopping_distance(config: BaseConfig, speed: float) -> float:
    """m a base at ``speed`` travels after a stop command: ``speed * latency_s + speed**2 / (2 * deceleration)``."""
    return speed * config.latency_s + speed * speed / (2.0 * config.deceleration)
