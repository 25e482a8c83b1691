"""A planar two-link arm (shoulder rotation, elbow flexion) on small servos, and its joystick.

The paper's arm moved a rod around a wire maze with two joints driven by joystick. Here the
links move in the horizontal plane (no gravity load), the shoulder sits at the origin, and
the elbow stays on one branch (flexion positive), so inverse kinematics is unique. Each
joint is a :class:`~gamma_net_core.signals.servo.ServoModel` joint in velocity mode: goal
velocities from the joystick are capped, followed with a first-order lag, and stopped at the
position limits, as Dynamixel X-series servos do. What the servos report is quantized to
their control table's units (position ticks, velocity units).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gamma_net_core.config import setting, validate
from gamma_net_core.signals.obstacle import Obstacle, ObstacleContact
from gamma_net_core.signals.servo import ServoLimits, ServoModel

#: Dynamixel X-series Present Position unit: 4096 ticks per revolution.
POSITION_TICK = 2.0 * math.pi / 4096
#: Dynamixel X-series Present Velocity unit: 0.229 rev/min.
VELOCITY_UNIT = 0.229 * 2.0 * math.pi / 60.0


@dataclass(frozen=True)
class ArmConfig:
    """The arm's geometry, servo limits and what its servos report."""

    joint_names: tuple[str, ...] = setting(("shoulder", "elbow"), "names of the shoulder and elbow joints")
    upper_arm_length: float = setting(0.25, "shoulder-to-elbow length, m", low=0.01, high=2.0)
    forearm_length: float = setting(0.20, "elbow-to-tool length, m", low=0.01, high=2.0)
    position_min: tuple[float, ...] = setting(
        (-1.5708, 0.1),
        "Min Position Limit of shoulder and elbow, rad (elbow flexion stays positive)",
        low=-3.1416,
        high=3.1416,
    )
    position_max: tuple[float, ...] = setting(
        (1.5708, 2.9), "Max Position Limit of shoulder and elbow, rad", low=-3.1416, high=3.1416
    )
    velocity_max: tuple[float, ...] = setting(
        (2.0, 2.0),
        "Velocity Limit of shoulder and elbow, rad/s (an XM430-W350 reaches about 4.8 unloaded)",
        low=0.01,
        high=20.0,
    )
    time_constant: float = setting(
        0.05, "first-order lag of the servos' velocity loop under load, s", low=1e-3, high=1.0
    )
    inertia: tuple[float, ...] = setting(
        (0.004, 0.001), "effective inertia seen by shoulder and elbow, kg m^2 (effort model)", low=0.0, high=10.0
    )
    damping: tuple[float, ...] = setting(
        (0.05, 0.03), "viscous friction of shoulder and elbow, N m s/rad (effort model)", low=0.0, high=10.0
    )
    position_resolution: float = setting(
        POSITION_TICK, "reported position step, rad (Dynamixel X: 2 pi / 4096; 0 = exact)", low=0.0, high=0.1
    )
    velocity_resolution: float = setting(
        VELOCITY_UNIT, "reported velocity step, rad/s (Dynamixel X: 0.229 rev/min; 0 = exact)", low=0.0, high=1.0
    )

    def __post_init__(self) -> None:
        validate(self)
        for name in ("joint_names", "position_min", "position_max", "velocity_max", "inertia", "damping"):
            if len(getattr(self, name)) != 2:
                raise ValueError(f"ArmConfig.{name} must have 2 values (shoulder, elbow); got {getattr(self, name)!r}")
        if len(set(self.joint_names)) != 2 or not all(self.joint_names):
            raise ValueError(f"ArmConfig.joint_names must be two distinct non-empty names; got {self.joint_names!r}")
        for low, high in zip(self.position_min, self.position_max):
            if not low < high:
                raise ValueError(f"ArmConfig: position_min {low} must be below position_max {high}")

    def servo_limits(self) -> list[ServoLimits]:
        return [
            ServoLimits(position_min=low, position_max=high, velocity_max=vmax, time_constant=self.time_constant)
            for low, high, vmax in zip(self.position_min, self.position_max, self.velocity_max)
        ]


@dataclass(frozen=True)
class JoystickConfig:
    """How joystick axes drive the joints (shared by the teleop node and the simulated operator)."""

    axes: tuple[int, ...] = setting((0, 1), "sensor_msgs/Joy axes driving the shoulder and the elbow", low=0, high=63)
    max_speed: tuple[float, ...] = setting(
        (0.6, 0.6), "goal velocity of shoulder and elbow at full deflection, rad/s", low=0.01, high=20.0
    )
    deadzone: float = setting(0.05, "deflection below which a joint is commanded to stand still", low=0.0, high=0.9)

    def __post_init__(self) -> None:
        validate(self)
        if len(self.axes) != 2 or len(self.max_speed) != 2:
            raise ValueError(f"JoystickConfig: axes and max_speed need 2 values; got {self.axes!r}, {self.max_speed!r}")


def joystick_to_joint_velocity(axes, *, max_speed: Sequence[float], deadzone: float) -> np.ndarray:
    """Goal velocities (rad/s) for shoulder and elbow from two joystick axes in [-1, 1].

    Deflections inside the deadzone command zero (a resting stick never creeps); beyond it
    the speed rises linearly to ``max_speed`` at full deflection. Axes beyond [-1, 1] are
    clipped; a non-finite axis commands zero for its joint, so a glitching joystick stops
    the arm rather than throwing it.

    Args:
      axes: [2] deflections, shoulder then elbow.
      max_speed: [2] rad/s at full deflection.
      deadzone: in [0, 1).
    """
    axes = np.asarray(axes, dtype=np.float64)
    if axes.shape != (2,):
        raise ValueError(f"joystick axes must be 2 values (shoulder, elbow); got shape {axes.shape}")
    if not 0.0 <= deadzone < 1.0:
        raise ValueError(f"deadzone must be in [0, 1); got {deadzone!r}")
    axes = np.clip(np.where(np.isfinite(axes), axes, 0.0), -1.0, 1.0)
    live = np.maximum(np.abs(axes) - deadzone, 0.0) / (1.0 - deadzone)
    return np.sign(axes) * live * np.asarray(max_speed, dtype=np.float64)


def joint_velocity_to_joystick(velocity, *, max_speed: Sequence[float], deadzone: float) -> np.ndarray:
    """The deflections that command ``velocity`` (rad/s): the inverse of :func:`joystick_to_joint_velocity`.

    A practised operator pushes past the deadzone; speeds beyond ``max_speed`` saturate at
    full deflection.
    """
    velocity = np.asarray(velocity, dtype=np.float64)
    fraction = np.minimum(np.abs(velocity) / np.asarray(max_speed, dtype=np.float64), 1.0)
    return np.where(fraction > 0.0, np.sign(velocity) * (deadzone + (1.0 - deadzone) * fraction), 0.0)


@dataclass(frozen=True)
class ArmKinematics:
    """Planar two-link kinematics; the shoulder at the origin, the elbow flexion positive."""

    upper_arm_length: float
    forearm_length: float

    @classmethod
    def from_config(cls, config: ArmConfig) -> ArmKinematics:
        return cls(config.upper_arm_length, config.forearm_length)

    def forward(self, position) -> np.ndarray:
        """Tool position [..., 2] (m) from joint positions [..., 2] (rad)."""
        q = np.asarray(position, dtype=np.float64)
        shoulder, elbow = q[..., 0], q[..., 0] + q[..., 1]
        return np.stack(
            [
                self.upper_arm_length * np.cos(shoulder) + self.forearm_length * np.cos(elbow),
                self.upper_arm_length * np.sin(shoulder) + self.forearm_length * np.sin(elbow),
            ],
            axis=-1,
        )

    def elbow_point(self, position) -> np.ndarray:
        """Elbow position [..., 2] (m), for drawing the arm."""
        q = np.asarray(position, dtype=np.float64)
        return self.upper_arm_length * np.stack([np.cos(q[..., 0]), np.sin(q[..., 0])], axis=-1)

    def inverse(self, xy) -> np.ndarray:
        """Joint positions [..., 2] (rad) placing the tool at ``xy`` [..., 2] (m), elbow flexion >= 0.

        Raises:
          ValueError: a point outside the annulus the arm reaches, naming it.
        """
        xy = np.asarray(xy, dtype=np.float64)
        a, b = self.upper_arm_length, self.forearm_length
        r2 = np.sum(xy**2, axis=-1)
        cos_elbow = (r2 - a * a - b * b) / (2.0 * a * b)
        if np.any(np.abs(cos_elbow) > 1.0) or not np.all(np.isfinite(cos_elbow)):
            bad = xy.reshape(-1, 2)[np.flatnonzero(~(np.abs(cos_elbow) <= 1.0))[0]]
            raise ValueError(
                f"point {bad.tolist()} is out of the arm's reach (distance from the shoulder must be in "
                f"[{abs(a - b):.4g}, {a + b:.4g}] m)"
            )
        elbow = np.arccos(cos_elbow)
        shoulder = np.arctan2(xy[..., 1], xy[..., 0]) - np.arctan2(b * np.sin(elbow), a + b * np.cos(elbow))
        return np.stack([shoulder, elbow], axis=-1)

    def jacobian(self, position) -> np.ndarray:
        """d(tool xy)/d(joint positions), [2, 2] (m/rad) at joint positions [2] (rad)."""
        q = np.asarray(position, dtype=np.float64)
        s1, c1 = math.sin(q[0]), math.cos(q[0])
        s12, c12 = math.sin(q[0] + q[1]), math.cos(q[0] + q[1])
        a, b = self.upper_arm_length, self.forearm_length
        return np.array([[-a * s1 - b * s12, -b * s12], [a * c1 + b * c12, b * c12]])


def quantize(values, resolution: float) -> np.ndarray:
    """Round to multiples of ``resolution`` (0 leaves values as they are)."""
    values = np.asarray(values, dtype=np.float64)
    return values if resolution <= 0 else np.round(values / resolution) * resolution


class SimulatedArm:
    """The arm's two servos in velocity mode, with what they report.

    Attributes:
      kinematics: the arm's geometry.
      servo: the joints' state (``servo.position`` rad, ``servo.velocity`` rad/s).
      effort: [2] N m, the torque of the last step (inertia x acceleration + viscous friction;
        against an obstacle, the stalled servo's torque).
      contacts: joint index -> :class:`ObstacleContact`, for each joint given an obstacle.
    """

    def __init__(
        self, config: ArmConfig, *, position=None, substeps: int = 4, obstacles: dict[int, Obstacle] | None = None
    ) -> None:
        """Start at rest at ``position`` [2] (rad; clipped to the limits; default: mid-range).

        ``obstacles`` maps a joint index (0 shoulder, 1 elbow) to a region it cannot enter.
        """
        if substeps < 1:
            raise ValueError(f"substeps must be >= 1; got {substeps!r}")
        self.config = config
        self.kinematics = ArmKinematics.from_config(config)
        if position is None:
            position = 0.5 * (np.asarray(config.position_min) + np.asarray(config.position_max))
        self.servo = ServoModel(config.servo_limits(), position=position)
        self.substeps = substeps
        self.effort = np.zeros(2)
        self._inertia = np.asarray(config.inertia)
        self._damping = np.asarray(config.damping)
        self.contacts = {int(j): ObstacleContact(o) for j, o in (obstacles or {}).items()}
        if not set(self.contacts) <= {0, 1}:
            raise ValueError(f"obstacles are keyed by joint index 0 or 1; got {sorted(self.contacts)}")

    @property
    def position(self) -> np.ndarray:
        return self.servo.position

    @property
    def velocity(self) -> np.ndarray:
        return self.servo.velocity

    @property
    def tool(self) -> np.ndarray:
        """[2] m, where the tool is."""
        return self.kinematics.forward(self.servo.position)

    def command_velocity(self, goal) -> None:
        """Goal velocities [2] (rad/s), capped by the servos' velocity limits."""
        self.servo.command_velocity(goal)

    def step(self, dt: float) -> None:
        """Advance ``dt`` seconds (in ``substeps`` servo steps)."""
        before = self.servo.velocity.copy()
        for _ in range(self.substeps):
            position = self.servo.position.copy()
            self.servo.step(dt / self.substeps)
            for j, contact in self.contacts.items():
                self.servo.position[j], self.servo.velocity[j] = contact.step(
                    float(position[j]),
                    float(self.servo.position[j]),
                    float(self.servo.velocity[j]),
                    push=float(self.servo.goal_velocity[j]),
                    dt=dt / self.substeps,
                )
        acceleration = (self.servo.velocity - before) / dt
        self.effort = self._inertia * acceleration + self._damping * self.servo.velocity
        for j, contact in self.contacts.items():
            if contact.in_contact:
                self.effort[j] = contact.torque

    def measure(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(position rad, velocity rad/s, effort N m) as the servos report them: quantized to their units."""
        return (
            quantize(self.servo.position, self.config.position_resolution),
            quantize(self.servo.velocity, self.config.velocity_resolution),
            self.effort.copy(),
        )
