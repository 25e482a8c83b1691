"""A recording of the simulated operator driving the arm around the maze, sampled like the paper's (30 Hz).

Each step the servos are read (quantized as the real ones report), the operator sees the
positions and moves the stick, the stick's goal velocities drive the servos for one period.
The recording stops at the sample where the tool completes the requested number of
counter-clockwise circuits (counted on the true tool position, not the operator's view).

Stamps start at :data:`RECORDING_EPOCH_NS` (2020-01-01 00:00:00 UTC), not at 0, so a bag of
the recording shows a real date in ``ros2 bag info``; everything simulated depends on the
time since the first sample only, so the recording is the same whatever its start.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from gamma_net_core.data.joints import NANOSECONDS, stamp_seconds
from gamma_net_core.signals.arm import (
    ArmConfig,
    ArmKinematics,
    JoystickConfig,
    SimulatedArm,
    joystick_to_joint_velocity,
)
from gamma_net_core.signals.maze import MazeConfig, MazePath, ProgressTracker
from gamma_net_core.signals.obstacle import Obstacle
from gamma_net_core.signals.operator import Operator, OperatorConfig

#: Stamp of a simulated recording's first sample: 2020-01-01T00:00:00Z, in ns since the Unix epoch.
RECORDING_EPOCH_NS = 1_577_836_800 * NANOSECONDS


@dataclass(frozen=True)
class ArmRecording:
    """What the servos reported at each step, and what happened.

    Attributes:
      stamp_ns: [T] int64 ns, the time stamp of each sample.
      joint_names: the joints, in column order.
      position: [T, J] rad, as reported (quantized).
      velocity: [T, J] rad/s, as reported (quantized).
      effort: [T, J] N m, the modelled torque.
      axes: [T, 2] the operator's stick after seeing sample t.
      tool: [T, 2] m, the true tool position.
      circuit_steps: [N] the sample at which each circuit was completed.
      rate_hz: sampling rate.
    """

    stamp_ns: np.ndarray
    joint_names: tuple[str, ...]
    position: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray
    axes: np.ndarray
    tool: np.ndarray
    circuit_steps: np.ndarray
    rate_hz: float

    @property
    def stamps(self) -> np.ndarray:
        """[T] s, the time stamps as float seconds."""
        sec, nanosec = np.divmod(self.stamp_ns, NANOSECONDS)
        return stamp_seconds(sec, nanosec)

    @property
    def steps(self) -> int:
        return len(self.stamp_ns)

    @property
    def duration(self) -> float:
        """s, from the first sample to the last."""
        return float(self.stamp_ns[-1] - self.stamp_ns[0]) / NANOSECONDS

    @property
    def circuit_times(self) -> np.ndarray:
        """[N] s, how long each circuit took."""
        ends = self.stamp_ns[self.circuit_steps]
        return np.diff(np.concatenate([[self.stamp_ns[0]], ends])) / NANOSECONDS


def simulate_arm(
    *,
    circuits: int,
    rng: np.random.Generator,
    arm: ArmConfig | None = None,
    maze: MazeConfig | None = None,
    joystick: JoystickConfig | None = None,
    operator: OperatorConfig | None = None,
    rate_hz: float = 30.0,
    start_time_ns: int = RECORDING_EPOCH_NS,
    max_seconds_per_circuit: float = 120.0,
    on_circuit: Callable[[int], None] | None = None,
    obstacles: dict[int, Obstacle] | None = None,
) -> ArmRecording:
    """Simulate the operator driving ``circuits`` circuits of the maze; sample at ``rate_hz``.

    Args:
      circuits: completed circuits after which the recording stops (>= 1).
      rng: the only source of randomness: the same seed gives the same recording.
      arm, maze, joystick, operator: settings (defaults: ``config/arm.yaml``'s).
      rate_hz: samples per second (the paper's 30 Hz).
      start_time_ns: stamp of the first sample, ns since the Unix epoch (default 2020-01-01 UTC).
      max_seconds_per_circuit: give up (RuntimeError) if the operator needs longer on average.
      on_circuit: called with the number of circuits completed so far (e.g. a progress bar).
      obstacles: joint index -> a region of its range it cannot enter (see
        :class:`~gamma_net_core.signals.arm.SimulatedArm`); none by default.
    """
    if not isinstance(circuits, int) or circuits < 1:
        raise ValueError(f"circuits must be a positive integer; got {circuits!r}")
    if not rate_hz > 0:
        raise ValueError(f"rate_hz must be positive; got {rate_hz!r}")
    arm = arm or ArmConfig()
    joystick = joystick or JoystickConfig()
    simulated, driver, tracker = _at_the_start(arm, maze or MazeConfig(), joystick, operator, rng, obstacles)
    period_ns = NANOSECONDS / rate_hz
    max_steps = int(np.ceil(circuits * max_seconds_per_circuit * rate_hz))
    stamps: list[int] = []
    rows: dict[str, list[np.ndarray]] = {k: [] for k in ("position", "velocity", "effort", "axes", "tool")}
    circuit_steps: list[int] = []
    for step in range(max_steps):
        since_start_ns = round(step * period_ns)
        stamp_ns = start_time_ns + since_start_ns
        position, velocity, effort = simulated.measure()
        # Time since the first sample: float seconds this small keep their precision, and the
        # operator's behaviour does not depend on the epoch.
        axes = driver.observe(stamp_seconds(*divmod(since_start_ns, NANOSECONDS)), position)
        tracker.update(simulated.tool)
        stamps.append(stamp_ns)
        for key, value in zip(rows, (position, velocity, effort, axes, simulated.tool)):
            rows[key].append(value)
        if tracker.circuits > len(circuit_steps):
            circuit_steps.append(step)
            if on_circuit is not None:
                on_circuit(len(circuit_steps))
            if len(circuit_steps) == circuits:
                break
        simulated.command_velocity(
            joystick_to_joint_velocity(axes, max_speed=joystick.max_speed, deadzone=joystick.deadzone)
        )
        simulated.step(1.0 / rate_hz)
    else:
        raise RuntimeError(
            f"the operator completed {len(circuit_steps)} of {circuits} circuits in {max_steps} steps; "
            "check the operator's speed and the maze"
        )
    return ArmRecording(
        stamp_ns=np.array(stamps, dtype=np.int64),
        joint_names=tuple(arm.joint_names),
        position=np.array(rows["position"]),
        velocity=np.array(rows["velocity"]),
        effort=np.array(rows["effort"]),
        axes=np.array(rows["axes"]),
        tool=np.array(rows["tool"]),
        circuit_steps=np.array(circuit_steps, dtype=np.int64),
        rate_hz=float(rate_hz),
    )


def _at_the_start(
    arm: ArmConfig,
    maze: MazeConfig,
    joystick: JoystickConfig,
    operator: OperatorConfig | None,
    rng: np.random.Generator,
    obstacles: dict[int, Obstacle] | None,
) -> tuple[SimulatedArm, Operator, ProgressTracker]:
    """The arm at the maze's start, its operator, and the tracker of its progress along the wire."""
    path = MazePath.from_config(maze)
    start = ArmKinematics.from_config(arm).inverse(path.point_at(0.0))
    simulated = SimulatedArm(arm, position=start, obstacles=obstacles)
    if np.any(np.abs(simulated.position - start) > 1e-9):
        raise ValueError(f"the maze's start needs joint positions {start.tolist()} outside the arm's limits")
    driver = Operator(
        maze=path, kinematics=simulated.kinematics, joystick=joystick, config=operator or OperatorConfig(), rng=rng
    )
    return simulated, driver, ProgressTracker(path, simulated.tool)
