"""A simulated person steering the arm around the maze with a joystick.

The paper's data came from a person driving the shoulder and elbow by joystick to keep a
rod on a wire loop, counter-clockwise. This operator does what such a person does:

- sees the arm late (``reaction_delay``) and aims at a point ``look_ahead`` metres further
  along the wire, which both advances and pulls the tool back onto the wire;
- turns that aim into joint speeds (a practised operator knows which stick moves the tool
  where: the arm's Jacobian) and pushes the sticks, with the hand's own lag and motor noise;
- slows down for the bends ahead, drives each circuit at its own pace, and now and then lets
  go of the stick for a moment;
- now and then overshoots a turn (``overshoot_probability``, off by default): where one joint's
  intended motion reverses, the hand keeps pushing the old way for a moment, as a person's hand
  runs on past a bend. With an obstacle just beyond the route's reach in that joint (the servo
  emulator's ``--obstacle``), that is when the arm runs into it.

It is called step by step with measured joint positions (:meth:`Operator.observe`), so the
offline simulator and a ROS node publishing ``sensor_msgs/Joy`` drive it the same way. All
randomness comes from the ``numpy.random.Generator`` it is given.
"""

from __future__ import annotations

import collections
import math
from dataclasses import dataclass

import numpy as np

from gamma_net_core.config import setting, validate
from gamma_net_core.signals.arm import ArmKinematics, JoystickConfig, joint_velocity_to_joystick
from gamma_net_core.signals.maze import MazePath, ProgressTracker


@dataclass(frozen=True)
class OperatorConfig:
    """How the simulated person drives (defaults tuned to the paper's 50 circuits in about 12 minutes)."""

    speed: float = setting(0.088, "median tool speed along the wire on straight runs, m/s", low=0.001, high=1.0)
    speed_spread: float = setting(
        0.15, "spread of the pace from circuit to circuit (std of its logarithm)", low=0.0, high=1.0
    )
    corner_slowdown: float = setting(
        0.01, "slowing for bends: speed / (1 + this x sharpest curvature ahead in 1/m), m", low=0.0, high=1.0
    )
    look_ahead: float = setting(0.02, "how far along the wire the operator aims, m", low=0.001, high=0.5)
    reaction_delay: float = setting(0.2, "visuomotor delay: the arm is seen this late, s", low=0.0, high=2.0)
    hand_time_constant: float = setting(0.1, "lag of the hand moving the stick, s", low=0.0, high=2.0)
    noise: float = setting(0.06, "motor noise on the stick, std of the deflection", low=0.0, high=1.0)
    noise_time_constant: float = setting(0.3, "correlation time of the motor noise, s", low=0.001, high=10.0)
    pause_rate: float = setting(1.0, "moments the stick is let go, per minute on average", low=0.0, high=60.0)
    pause_min: float = setting(0.5, "shortest pause, s", low=0.0, high=60.0)
    pause_max: float = setting(2.5, "longest pause, s", low=0.0, high=60.0)
    overshoot_probability: float = setting(
        0.0, "chance of overshooting each reversal of overshoot_joint's motion (0: never)", low=0.0, high=1.0
    )
    overshoot_joint: int = setting(0, "joint whose reversals are overshot: 0 shoulder, 1 elbow", low=0, high=1)
    overshoot_direction: int = setting(
        1, "overshoot reversals of motion this way: 1 increasing position, -1 decreasing, 0 both", low=-1, high=1
    )
    overshoot_min: float = setting(0.3, "shortest overshoot, s", low=0.0, high=10.0)
    overshoot_max: float = setting(0.8, "longest overshoot, s", low=0.0, high=10.0)

    def __post_init__(self) -> None:
        validate(self)
        if self.pause_min > self.pause_max:
            raise ValueError(f"OperatorConfig: pause_min {self.pause_min} exceeds pause_max {self.pause_max}")
        if self.overshoot_min > self.overshoot_max:
            raise ValueError(
                f"OperatorConfig: overshoot_min {self.overshoot_min} exceeds overshoot_max {self.overshoot_max}"
            )


class Operator:
    """Joystick deflections that steer the arm's tool counter-clockwise around the maze.

    Usage, offline or in a node's JointState callback::

        operator = Operator(maze=maze, kinematics=kinematics, joystick=joystick, config=config, rng=rng)
        axes = operator.observe(stamp, joint_positions)   # [2] in [-1, 1]: shoulder, elbow

    Attributes:
      circuits: circuits completed as the operator sees them.
      paused: whether the stick is let go right now.
      pace: this circuit's speed factor (median 1).
      overshoots: turns overshot so far.
    """

    def __init__(
        self,
        *,
        maze: MazePath,
        kinematics: ArmKinematics,
        joystick: JoystickConfig,
        config: OperatorConfig,
        rng: np.random.Generator,
    ) -> None:
        self.maze = maze
        self.kinematics = kinematics
        self.joystick = joystick
        self.config = config
        self.rng = rng
        self._seen: collections.deque[tuple[float, np.ndarray]] = collections.deque()
        self._tracker: ProgressTracker | None = None
        self._last_stamp: float | None = None
        self._stick = np.zeros(2)
        self._noise = np.zeros(2)
        self._pause_until = -math.inf
        self.circuits = 0
        self.overshoots = 0
        self._heading = 0  # the sign the overshoot joint was last intended to move
        self._overshoot_until = -math.inf
        self._overshoot_axis = 0.0
        self._approach = 0.0  # the last clear deflection of the overshoot joint
        self.paused = False
        self.pace = self._draw_pace()

    def _draw_pace(self) -> float:
        return float(np.exp(self.config.speed_spread * self.rng.standard_normal()))

    def _perceived(self, stamp: float) -> np.ndarray:
        """Joint positions as seen ``reaction_delay`` ago (the oldest seen, early on)."""
        seen_at = stamp - self.config.reaction_delay
        while len(self._seen) > 1 and self._seen[1][0] <= seen_at:
            self._seen.popleft()
        return self._seen[0][1]

    def observe(self, stamp: float, position) -> np.ndarray:
        """Take the arm's joint positions (rad) measured at ``stamp`` (s); return the stick's axes.

        Returns:
          [2] deflections in [-1, 1] for shoulder and elbow, for
          :func:`~gamma_net_core.signals.arm.joystick_to_joint_velocity`.

        Raises:
          ValueError: a stamp earlier than the last, or positions that are not 2 finite values.
        """
        position = np.asarray(position, dtype=np.float64)
        if position.shape != (2,) or not np.all(np.isfinite(position)):
            raise ValueError(f"operator needs 2 finite joint positions (shoulder, elbow); got {position!r}")
        if not math.isfinite(stamp):
            raise ValueError(f"operator stamp must be finite; got {stamp!r}")
        if self._last_stamp is not None and stamp < self._last_stamp:
            raise ValueError(f"operator stamp {stamp!r} is earlier than the last one {self._last_stamp!r}")
        dt = 0.0 if self._last_stamp is None else stamp - self._last_stamp
        self._last_stamp = stamp
        self._seen.append((stamp, position.copy()))
        seen = self._perceived(stamp)
        tool = self.kinematics.forward(seen)
        if self._tracker is None:
            self._tracker = ProgressTracker(self.maze, tool)
        self._tracker.update(tool)
        if self._tracker.circuits > self.circuits:
            self.circuits = self._tracker.circuits
            self.pace = self._draw_pace()
        if dt > 0.0:
            self._update_pause(stamp, dt)
            self._update_noise(dt)
        if self.paused:
            # A released stick springs back to the centre at once.
            self._stick = np.zeros(2)
            return self._stick.copy()
        target = self._overshoot(stamp, self._intended_axes(seen, tool))
        c = self.config
        follow = 1.0 if c.hand_time_constant == 0.0 else 1.0 - math.exp(-dt / c.hand_time_constant)
        self._stick = self._stick + (target - self._stick) * follow
        return np.clip(self._stick + self._noise, -1.0, 1.0)

    def _overshoot(self, stamp: float, target: np.ndarray) -> np.ndarray:
        """The intended axes, or with the overshoot joint still pushed the old way for a moment past a reversal."""
        c = self.config
        if c.overshoot_probability == 0.0:
            return target  # no draws: the operator's randomness is as it was without overshoots
        j = c.overshoot_joint
        if stamp < self._overshoot_until:
            target = target.copy()
            target[j] = self._overshoot_axis
            return target
        # The hand heads one way once it pushes clearly (a third of full deflection); small
        # corrections around zero are not turns. A turn is the intent crossing to the other side.
        axis = float(target[j])
        turned = self._heading != 0 and np.sign(axis) == -self._heading and abs(axis) > 0.05
        if turned:
            heading, self._heading = self._heading, 0
            if c.overshoot_direction in (0, heading) and self.rng.random() < c.overshoot_probability:
                # Runs on at the speed it came with, as a hand late to the bend.
                self.overshoots += 1
                self._overshoot_until = stamp + self.rng.uniform(c.overshoot_min, c.overshoot_max)
                self._overshoot_axis = self._approach
                target = target.copy()
                target[j] = self._overshoot_axis
                return target
        if abs(axis) > 1.0 / 3.0:
            self._heading, self._approach = int(np.sign(axis)), axis
        return target

    def _update_pause(self, stamp: float, dt: float) -> None:
        c = self.config
        if stamp < self._pause_until:
            return
        self.paused = False
        if c.pause_rate > 0.0 and self.rng.random() < -math.expm1(-c.pause_rate / 60.0 * dt):
            self.paused = True
            self._pause_until = stamp + self.rng.uniform(c.pause_min, c.pause_max)

    def _update_noise(self, dt: float) -> None:
        # Ornstein-Uhlenbeck: a hand's tremor and drift are correlated over a fraction of a second.
        c = self.config
        decay = math.exp(-dt / c.noise_time_constant)
        self._noise = self._noise * decay + c.noise * math.sqrt(1.0 - decay * decay) * self.rng.standard_normal(2)

    def _intended_axes(self, seen: np.ndarray, tool: np.ndarray) -> np.ndarray:
        c = self.config
        progress = self._tracker.progress
        aim = self.maze.point_at(progress + c.look_ahead)
        heading = aim - tool
        distance = float(np.hypot(*heading))
        if distance < 1e-9:
            return np.zeros(2)
        bend = self.maze.max_curvature_between(progress, progress + 2.0 * c.look_ahead)
        speed = c.speed * self.pace / (1.0 + c.corner_slowdown * bend)
        tool_velocity = speed * heading / distance
        jacobian = self.kinematics.jacobian(seen)
        # Damped least squares: near a stretched-out elbow a person does not demand huge joint speeds.
        damping = 1e-4
        joint_velocity = jacobian.T @ np.linalg.solve(jacobian @ jacobian.T + damping * np.eye(2), tool_velocity)
        max_speed = np.asarray(self.joystick.max_speed)
        excess = float(np.max(np.abs(joint_velocity) / max_speed))
        if excess > 1.0:
            joint_velocity = joint_velocity / excess  # keep the direction; slow down as a whole
        return joint_velocity_to_joystick(joint_velocity, max_speed=max_speed, deadzone=self.joystick.deadzone)
