"""The simulated arm, maze and operator: kinematics, joystick, circuits counter-clockwise, reproducible recordings."""

from __future__ import annotations

import math
import pathlib

import numpy as np
import pytest

from gamma_net_core.config import load_config
from gamma_net_core.data.joints import JointsConfig
from gamma_net_core.signals.arm import (
    POSITION_TICK,
    VELOCITY_UNIT,
    ArmConfig,
    ArmKinematics,
    JoystickConfig,
    SimulatedArm,
    joint_velocity_to_joystick,
    joystick_to_joint_velocity,
)
from gamma_net_core.signals.arm_recording import RECORDING_EPOCH_NS, simulate_arm
from gamma_net_core.signals.maze import MazeConfig, MazePath, ProgressTracker
from gamma_net_core.signals.operator import Operator, OperatorConfig

ARM_YAML = pathlib.Path(__file__).resolve().parent.parent / "config" / "arm.yaml"


@pytest.fixture(scope="module")
def maze() -> MazePath:
    return MazePath.from_config(MazeConfig())


@pytest.fixture(scope="module")
def recording():
    return simulate_arm(circuits=3, rng=np.random.default_rng(7))


# --- maze ---------------------------------------------------------------------------------------


def test_square_maze_arc_length_and_queries():
    # A square without corner cutting: length and points are known exactly.
    square = MazePath([[0, 0], [1, 0], [1, 1], [0, 1]], corner_cuts=0, spacing=0.01)
    assert square.length == pytest.approx(4.0)
    assert square.signed_area == pytest.approx(1.0, rel=1e-3)
    np.testing.assert_allclose(square.point_at(0.5), [0.5, 0.0], atol=1e-9)
    np.testing.assert_allclose(square.point_at(1.5), [1.0, 0.5], atol=1e-9)
    np.testing.assert_allclose(square.point_at(4.0 + 2.25), [0.75, 1.0], atol=1e-9)  # wraps
    np.testing.assert_allclose(square.tangent_at(2.5), [-1.0, 0.0], atol=1e-9)  # counter-clockwise
    nearest = square.closest([0.3, -0.2])
    assert nearest.s == pytest.approx(0.3) and nearest.distance == pytest.approx(0.2)
    np.testing.assert_allclose(nearest.point, [0.3, 0.0], atol=1e-9)


def test_clockwise_maze_is_refused():
    with pytest.raises(ValueError, match="counter-clockwise"):
        MazePath([[0, 0], [0, 1], [1, 1], [1, 0]])


def test_default_maze_is_smooth_closed_and_reachable(maze):
    steps = np.linalg.norm(np.diff(np.vstack([maze.points, maze.points[:1]]), axis=0), axis=1)
    assert steps.max() < 2 * maze.length / len(maze.points)  # dense and closed: no jump at the seam
    assert maze.signed_area > 0
    ArmKinematics.from_config(ArmConfig()).inverse(maze.points)  # raises if any point is out of reach
    assert np.abs(maze.curvature).max() > 30  # it has bends tighter than 3 cm radius, not just an oval


def test_closest_near_a_hint_stays_on_the_local_stretch(maze):
    for s in np.linspace(0.0, maze.length, 37, endpoint=False):
        point = maze.point_at(s)
        local = maze.closest(point + 0.002, near=s, window=0.03)
        wrapped = (local.s - s + maze.length / 2) % maze.length - maze.length / 2
        assert abs(wrapped) < 0.01


def test_progress_tracker_counts_counter_clockwise_circuits(maze):
    s = np.linspace(0.0, 2.5 * maze.length, 2000)
    tracker = ProgressTracker(maze, maze.point_at(0.0))
    for point in maze.point_at(s):
        tracker.update(point)
    assert tracker.circuits == 2
    assert tracker.progress == pytest.approx(2.5 * maze.length, abs=0.003)
    backwards = ProgressTracker(maze, maze.point_at(0.0))
    for point in maze.point_at(-s[:500]):
        backwards.update(point)
    assert backwards.circuits == -1


# --- arm and joystick ---------------------------------------------------------------------------


def test_inverse_kinematics_inverts_forward_on_the_elbow_branch():
    kinematics = ArmKinematics(0.25, 0.2)
    rng = np.random.default_rng(0)
    q = np.column_stack([rng.uniform(-1.5, 1.5, 50), rng.uniform(0.1, 3.0, 50)])
    np.testing.assert_allclose(kinematics.inverse(kinematics.forward(q)), q, atol=1e-9)
    np.testing.assert_allclose(kinematics.forward([0.0, 0.0]), [0.45, 0.0])
    np.testing.assert_allclose(kinematics.forward([math.pi / 2, math.pi / 2]), [-0.2, 0.25], atol=1e-12)


def test_jacobian_matches_finite_differences():
    kinematics = ArmKinematics(0.25, 0.2)
    q = np.array([-0.7, 1.6])
    eps = 1e-6
    numeric = np.column_stack(
        [(kinematics.forward(q + d) - kinematics.forward(q - d)) / (2 * eps) for d in np.eye(2) * eps]
    )
    np.testing.assert_allclose(kinematics.jacobian(q), numeric, atol=1e-8)


def test_unreachable_point_is_a_clear_error():
    with pytest.raises(ValueError, match=r"\[0.5, 0.0\] is out of the arm's reach"):
        ArmKinematics(0.25, 0.2).inverse([0.5, 0.0])


def test_joystick_deadzone_scale_and_bad_values():
    speed = (0.6, 0.4)
    np.testing.assert_allclose(joystick_to_joint_velocity([0.04, -0.05], max_speed=speed, deadzone=0.05), [0, 0])
    np.testing.assert_allclose(joystick_to_joint_velocity([1.0, -1.0], max_speed=speed, deadzone=0.05), [0.6, -0.4])
    np.testing.assert_allclose(joystick_to_joint_velocity([0.525, 3.0], max_speed=speed, deadzone=0.05), [0.3, 0.4])
    np.testing.assert_allclose(joystick_to_joint_velocity([math.nan, 0.5], max_speed=speed, deadzone=0.0), [0, 0.2])
    with pytest.raises(ValueError, match="2 values"):
        joystick_to_joint_velocity([0.1, 0.2, 0.3], max_speed=speed, deadzone=0.05)


def test_operator_stick_inverts_the_joystick_mapping():
    speed, deadzone = (0.6, 0.4), 0.1
    velocity = np.array([0.25, -0.1])
    axes = joint_velocity_to_joystick(velocity, max_speed=speed, deadzone=deadzone)
    np.testing.assert_allclose(joystick_to_joint_velocity(axes, max_speed=speed, deadzone=deadzone), velocity)


def test_servos_report_in_dynamixel_units():
    arm = SimulatedArm(ArmConfig(), position=[-0.5, 1.5])
    arm.command_velocity([0.3, -0.2])
    for _ in range(10):
        arm.step(1 / 30)
    position, velocity, effort = arm.measure()
    ticks, units = position / POSITION_TICK, velocity / VELOCITY_UNIT
    np.testing.assert_allclose(ticks, np.round(ticks), atol=1e-9)
    np.testing.assert_allclose(units, np.round(units), atol=1e-9)
    np.testing.assert_allclose(velocity, [0.3, -0.2], atol=VELOCITY_UNIT)
    # Steady velocity: the effort is viscous friction only.
    np.testing.assert_allclose(effort, np.array(ArmConfig().damping) * arm.velocity, rtol=0.05)


# --- operator -----------------------------------------------------------------------------------


def _operator(seed: int, **changes) -> Operator:
    return Operator(
        maze=MazePath.from_config(MazeConfig()),
        kinematics=ArmKinematics.from_config(ArmConfig()),
        joystick=JoystickConfig(),
        config=OperatorConfig(**changes),
        rng=np.random.default_rng(seed),
    )


def test_operator_steps_from_measured_positions_and_refuses_time_going_back(maze):
    operator = _operator(1)
    start = ArmKinematics.from_config(ArmConfig()).inverse(maze.point_at(0.0))
    axes = [operator.observe(k / 30, start) for k in range(20)]
    assert all(a.shape == (2,) and np.all(np.abs(a) <= 1) for a in axes)
    assert np.abs(axes[-1]).max() > 0.1  # it pushes the stick to move the tool along the wire
    with pytest.raises(ValueError, match="earlier than the last"):
        operator.observe(0.1, start)
    with pytest.raises(ValueError, match="2 finite joint positions"):
        operator.observe(1.0, [math.nan, 1.0])


def test_operator_pauses_let_go_of_the_stick():
    recording = simulate_arm(
        circuits=1, rng=np.random.default_rng(3), operator=OperatorConfig(pause_rate=60.0, pause_min=1.0, pause_max=1.0)
    )
    released = np.all(recording.axes == 0.0, axis=1)
    starts = np.flatnonzero(released[1:] & ~released[:-1])
    assert len(starts) >= 3
    assert 0.2 < released.mean() < 0.8  # about one second of driving, then one second let go
    # Half a second into a pause the arm stands still (the servos' lag is 0.05 s).
    settled = np.convolve(released, np.ones(15), mode="full")[: len(released)] == 15  # released for 15 samples
    assert settled.any() and np.all(recording.velocity[settled] == 0.0)


# --- recordings ---------------------------------------------------------------------------------


def test_recording_is_reproducible_per_seed(recording):
    again = simulate_arm(circuits=3, rng=np.random.default_rng(7))
    for name in ("stamp_ns", "position", "velocity", "effort", "axes", "circuit_steps"):
        np.testing.assert_array_equal(getattr(again, name), getattr(recording, name))
    other = simulate_arm(circuits=3, rng=np.random.default_rng(8))
    assert other.steps != recording.steps or not np.array_equal(other.position, recording.position)


def test_recording_stays_inside_joint_limits_and_on_the_wire(recording, maze):
    config = ArmConfig()
    assert recording.joint_names == config.joint_names
    assert np.all(recording.position >= np.array(config.position_min))
    assert np.all(recording.position <= np.array(config.position_max))
    assert np.all(np.abs(recording.velocity) <= np.array(config.velocity_max) + 1e-9)
    assert np.all(np.isfinite(recording.effort))
    off_wire = np.array([maze.closest(p).distance for p in recording.tool[::10]])
    assert off_wire.max() < 0.03
    joints = JointsConfig()  # the default normalization covers what the maze asks of the joints
    assert np.all(recording.position >= np.array(joints.input_low))
    assert np.all(recording.position <= np.array(joints.input_high))


def test_recording_goes_around_counter_clockwise(recording, maze):
    assert len(recording.circuit_steps) == 3
    relative = recording.tool - maze.centroid
    angle = np.unwrap(np.arctan2(relative[:, 1], relative[:, 0]))
    turned = (angle[recording.circuit_steps] - angle[0]) / (2 * math.pi)
    np.testing.assert_allclose(turned, [1, 2, 3], atol=0.05)  # positive: counter-clockwise


def test_recording_is_sampled_at_30_hz_and_paced_like_the_paper(recording):
    np.testing.assert_array_equal(np.diff(recording.stamp_ns) // 1000, np.full(recording.steps - 1, 33333))
    assert recording.stamp_ns[0] == RECORDING_EPOCH_NS  # a real date in `ros2 bag info`, not 1970
    assert recording.steps == recording.circuit_steps[-1] + 1
    # Paper: 50 circuits in about 12 minutes, 14.4 s each; the operator is tuned to that.
    assert 10.0 < recording.circuit_times.mean() < 20.0


def test_bad_circuit_count_is_refused():
    with pytest.raises(ValueError, match="circuits must be a positive integer"):
        simulate_arm(circuits=0, rng=np.random.default_rng(0))


def test_arm_yaml_matches_the_built_in_defaults():
    for cls, node, group in [
        (ArmConfig, "operator", "arm"),
        (MazeConfig, "operator", "maze"),
        (JoystickConfig, "operator", "joystick"),
        (OperatorConfig, "operator", "operator"),
        (JointsConfig, "predictor", "joints"),
    ]:
        assert load_config(cls, ARM_YAML, node, group) == cls(), f"{node}.{group} differs from {cls.__name__}()"
