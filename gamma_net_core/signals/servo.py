"""A small position/velocity servo model shared by the arm simulator and the servo emulator.

Both the offline arm simulation and the Dynamixel emulator (which stands in for the
real servos in tests and the demo) move joints with the same dynamics, so a recording
made either way looks alike. The model follows what small Dynamixel X-series servos do
under their built-in controllers: the velocity tracks its goal with a first-order lag,
is capped by the configured velocity limit, and the position stops at the configured
position limits. In position mode the speed is also capped by the profile velocity (a Dynamixel's
Profile Velocity: the top speed of the trajectory its position controller follows; none by
default, as the register's 0). Vectorized over joints.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ServoLimits:
    """Per-joint limits and response, as configured in a Dynamixel's control table."""

    position_min: float = -math.pi / 2  # rad; Min Position Limit
    position_max: float = math.pi / 2  # rad; Max Position Limit
    velocity_max: float = 2.0  # rad/s; Velocity Limit (an XM430-W350 reaches about 4.8 unloaded)
    time_constant: float = 0.05  # s; first-order lag of the velocity loop under load
    position_gain: float = 8.0  # 1/s; position mode: goal velocity = gain * position error

    def __post_init__(self) -> None:
        if not self.position_min < self.position_max:
            raise ValueError(f"position_min {self.position_min} must be below position_max {self.position_max}")
        if self.velocity_max <= 0 or self.time_constant <= 0 or self.position_gain <= 0:
            raise ValueError("velocity_max, time_constant and position_gain must be positive")


class ServoModel:
    """Joints driven toward goal velocities (velocity mode) or goal positions (position mode).

    Attributes:
      position, velocity: float64 [n] state, rad and rad/s.
    """

    def __init__(self, limits: list[ServoLimits], position=None) -> None:
        self.limits = list(limits)
        n = len(self.limits)
        self.position_min = np.array([lim.position_min for lim in self.limits])
        self.position_max = np.array([lim.position_max for lim in self.limits])
        self.velocity_max = np.array([lim.velocity_max for lim in self.limits])
        self.time_constant = np.array([lim.time_constant for lim in self.limits])
        self.position_gain = np.array([lim.position_gain for lim in self.limits])
        self.position = np.zeros(n) if position is None else np.array(position, dtype=np.float64)
        self.position = np.clip(self.position, self.position_min, self.position_max)
        self.velocity = np.zeros(n)
        self.goal_velocity = np.zeros(n)
        self.goal_position: np.ndarray | None = None
        self.profile_velocity = np.full(n, np.inf)  # rad/s; position mode's speed cap (inf: none)

    def command_velocity(self, goal) -> None:
        """Velocity mode: clamp each goal to +-velocity_max."""
        self.goal_position = None
        self.goal_velocity = np.clip(np.asarray(goal, dtype=np.float64), -self.velocity_max, self.velocity_max)

    def command_position(self, goal) -> None:
        """Position mode: clamp each goal to the position limits."""
        self.goal_position = np.clip(np.asarray(goal, dtype=np.float64), self.position_min, self.position_max)

    def set_profile_velocity(self, cap) -> None:
        """Position mode: cap each joint's speed at ``cap`` rad/s (0 or inf: no cap but velocity_max)."""
        cap = np.broadcast_to(np.asarray(cap, dtype=np.float64), self.velocity_max.shape)
        if np.any(np.isnan(cap) | (cap < 0)):
            raise ValueError(f"profile velocity must be >= 0 rad/s (0: no cap); got {cap.tolist()}")
        self.profile_velocity = np.where(cap == 0, np.inf, cap)

    def step(self, dt: float) -> None:
        """Advance ``dt`` seconds (exact first-order lag; a stop at a position limit zeroes the velocity)."""
        if dt <= 0:
            raise ValueError(f"dt must be positive; got {dt!r}")
        goal = self.goal_velocity
        if self.goal_position is not None:
            cap = np.minimum(self.velocity_max, self.profile_velocity)
            goal = np.clip(self.position_gain * (self.goal_position - self.position), -cap, cap)
        blend = 1.0 - np.exp(-dt / self.time_constant)
        self.velocity = np.clip(self.velocity + (goal - self.velocity) * blend, -self.velocity_max, self.velocity_max)
        position = self.position + self.velocity * dt
        at_limit = (position <= self.position_min) | (position >= self.position_max)
        self.position = np.clip(position, self.position_min, self.position_max)
        self.velocity = np.where(at_limit, 0.0, self.velocity)
