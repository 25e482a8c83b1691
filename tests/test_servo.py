"""The shared servo model: first-order lag to the goal, velocity cap, position limits."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gamma_net_core.signals.servo import ServoLimits, ServoModel


def test_velocity_follows_goal_with_first_order_lag():
    servo = ServoModel([ServoLimits(time_constant=0.1, velocity_max=3.0)])
    servo.command_velocity([1.0])
    servo.step(0.1)
    assert servo.velocity[0] == pytest.approx(1.0 - math.exp(-1.0))
    for _ in range(50):
        servo.step(0.01)
    assert servo.velocity[0] == pytest.approx(1.0, abs=1e-2)


def test_goal_velocity_is_capped_and_position_stops_at_limit():
    servo = ServoModel([ServoLimits(position_max=0.5, velocity_max=1.0)])
    servo.command_velocity([10.0])
    assert servo.goal_velocity[0] == 1.0
    for _ in range(200):
        servo.step(0.01)
    assert servo.position[0] == 0.5 and servo.velocity[0] == 0.0


def test_position_mode_converges():
    servo = ServoModel([ServoLimits(), ServoLimits()], position=[0.0, 0.0])
    servo.command_position([0.3, -0.2])
    for _ in range(300):
        servo.step(0.01)
    np.testing.assert_allclose(servo.position, [0.3, -0.2], atol=1e-3)


def test_bad_limits_are_refused():
    with pytest.raises(ValueError, match="position_min"):
        ServoLimits(position_min=1.0, position_max=0.0)


def test_profile_velocity_caps_a_position_move_only():
    servo = ServoModel([ServoLimits(position_min=-3.0, position_max=3.0, velocity_max=8.0)] * 2)
    servo.set_profile_velocity([1.5, 0.0])  # 0: no cap (the register's meaning), as inf
    servo.command_position([2.5, 2.5])
    speeds = []
    for _ in range(200):
        servo.step(0.005)
        speeds.append(np.abs(servo.velocity))
    speeds = np.array(speeds)
    assert speeds[:, 0].max() <= 1.5 and speeds[:, 0].max() > 1.45  # capped, and at the cap
    assert speeds[:, 1].max() > 7.0  # uncapped: as fast as the gain and velocity_max allow
    servo.command_velocity([4.0, 4.0])  # a velocity mode ignores the profile
    servo.step(1.0)
    np.testing.assert_allclose(servo.velocity, [0.0, 0.0])  # both ran into position_max
    with pytest.raises(ValueError, match=r"profile velocity must be >= 0 rad/s .* got \[-1.0, -1.0\]"):
        servo.set_profile_velocity(-1.0)


def test_a_move_under_the_profile_velocity_is_unchanged():
    # The emulated arm moved with no cap before Profile Velocity was modelled: a move slower than the
    # cap must be the same, step for step.
    limits = [ServoLimits()] * 2
    free, capped = ServoModel(limits, position=[0.1, -0.2]), ServoModel(limits, position=[0.1, -0.2])
    capped.set_profile_velocity(2.0)
    for model in (free, capped):
        model.command_position([0.3, -0.1])  # gain 8 x 0.2 rad: 1.6 rad/s at most, under 2.0
    for _ in range(300):
        free.step(0.004)
        capped.step(0.004)
        np.testing.assert_array_equal(free.position, capped.position)
        np.testing.assert_array_equal(free.velocity, capped.velocity)
