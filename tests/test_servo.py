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
