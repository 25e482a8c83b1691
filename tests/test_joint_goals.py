"""Joint goals: commands by name, clamping, the soft stop at position limits, the command timeout."""

from __future__ import annotations

import numpy as np
import pytest

from gamma_net_ros.hardware.goals import RECEIPT_WRITES, JointGoals, JointLimits

NAMES = ["shoulder", "elbow"]


def limits(vmax=(2.0, 1.0)):
    return JointLimits.of(2, position_min=[-1.5, -1.5], position_max=[1.5, 1.5], velocity_max=vmax)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"position_min": [0.0]}, r"position_min must be 2 finite numbers"),
        ({"velocity_max": [1.0, float("nan")]}, r"velocity_max must be 2 finite numbers"),
        ({"position_min": [2.0, 0.0]}, r"must be below position_max"),
        ({"velocity_max": [1.0, 0.0]}, r"must be positive"),
    ],
)
def test_bad_limits_are_refused_by_name(kwargs, message):
    values = {"position_min": [-1.0, -1.0], "position_max": [1.0, 1.0], "velocity_max": [1.0, 1.0], **kwargs}
    with pytest.raises(ValueError, match=message):
        JointLimits.of(2, **values)


def test_velocity_commands_by_name_are_clamped():
    goals = JointGoals(NAMES, mode="velocity", limits=limits())
    assert goals.command(["elbow", "shoulder"], [5.0, -0.5], now=0.0)  # elbow above its 1.0 rad/s
    np.testing.assert_allclose(goals.to_write(np.zeros(2), now=0.1), [-0.5, 1.0])
    assert not goals.command(["shoulder"], [0.25], now=0.2)  # a subset keeps the others' goals
    np.testing.assert_allclose(goals.to_write(np.zeros(2), now=0.3), [0.25, 1.0])
    goals.servo_limits = JointLimits.of(2, position_min=[-3, -3], position_max=[3, 3], velocity_max=[0.1, 0.1])
    np.testing.assert_allclose(goals.to_write(np.zeros(2), now=0.4), [0.1, 0.1])  # the servos' own are tighter


def test_soft_stop_near_position_limits():
    goals = JointGoals(NAMES, mode="velocity", limits=limits(vmax=(2.0, 2.0)), soft_stop_s=0.3)
    goals.command(NAMES, [2.0, -1.0], now=0.0)
    # 0.1 rad of room above the shoulder: at most 0.1 / 0.3 rad/s; 0.05 rad below the elbow: 0.05 / 0.3.
    np.testing.assert_allclose(goals.to_write(np.array([1.4, -1.45]), now=0.0), [1 / 3, -1 / 6])
    # Past a limit: nothing further out, but back in at full speed.
    np.testing.assert_allclose(goals.to_write(np.array([1.6, -1.6]), now=0.0), [0.0, 0.0])
    goals.command(NAMES, [-2.0, 2.0], now=0.0)
    np.testing.assert_allclose(goals.to_write(np.array([1.6, -1.6]), now=0.0), [-2.0, 2.0])


def test_velocity_goals_time_out():
    goals = JointGoals(NAMES, mode="velocity", limits=limits(), command_timeout_s=0.5)
    goals.command(NAMES, [0.5, 0.5], now=10.0)
    np.testing.assert_allclose(goals.to_write(None, now=10.4), [0.5, 0.5])
    np.testing.assert_allclose(goals.to_write(None, now=10.6), [0.0, 0.0])
    goals.to_write(None, now=11.0)
    assert goals.timeouts == 1


def test_each_joints_goal_times_out_on_its_own_while_others_are_commanded():
    goals = JointGoals(NAMES, mode="velocity", limits=limits(), command_timeout_s=0.5)
    goals.command(["shoulder"], [0.2], now=10.0)
    for now in (10.2, 10.4, 10.6):  # the elbow commanded on and on: the shoulder's goal is not kept alive
        goals.command(["elbow"], [0.1], now=now)
    np.testing.assert_allclose(goals.to_write(None, now=10.6), [0.0, 0.1])
    assert goals.timeouts == 1
    np.testing.assert_allclose(goals.to_write(None, now=10.9), [0.0, 0.1])
    np.testing.assert_allclose(goals.to_write(None, now=9.0), [0.0, 0.0])  # a clock stepped back: no age known


@pytest.mark.parametrize(
    ("names", "values", "message"),
    [
        (["wrist"], [1.0], r"unknown joints \['wrist'\]"),
        (["elbow", "elbow"], [1.0, 1.0], "distinct"),
        ([], [], "distinct and not empty"),
        (NAMES, [1.0], "2 names but 1 velocity values"),
        (NAMES, [1.0, float("inf")], "finite"),
    ],
)
def test_bad_commands_change_nothing(names, values, message):
    goals = JointGoals(NAMES, mode="velocity", limits=limits())
    goals.command(NAMES, [0.3, 0.4], now=0.0)
    with pytest.raises(ValueError, match=message):
        goals.command(names, values, now=1.0)
    np.testing.assert_allclose(goals.to_write(None, now=1.0), [0.3, 0.4])


def test_position_goals_hold_until_commanded_and_are_clamped():
    goals = JointGoals(NAMES, mode="position", limits=limits())
    assert goals.to_write(None, now=0.0) is None  # where the servos are is not known yet
    with pytest.raises(ValueError, match="name every joint"):
        goals.command(["elbow"], [0.2], now=0.0)
    np.testing.assert_allclose(goals.to_write(np.array([0.1, 0.2]), now=0.0), [0.1, 0.2])  # hold
    assert goals.command(["elbow"], [3.0], now=0.0)
    np.testing.assert_allclose(goals.to_write(np.array([0.1, 0.2]), now=0.0), [0.1, 1.5])
    goals.hold()  # a reconnect: hold wherever the next read says
    np.testing.assert_allclose(goals.to_write(np.array([0.7, 0.8]), now=0.0), [0.7, 0.8])
    with pytest.raises(ValueError, match="command mode"):
        JointGoals(NAMES, mode="torque", limits=limits())


def test_position_goals_hold_a_joint_found_outside_the_limits_until_a_command_names_it():
    goals = JointGoals(NAMES, mode="position", limits=limits())  # limits -1.5..1.5
    outside = np.array([2.5, -2.0])
    for _ in range(3):  # cycles with no command: the goal is where the joints are, not the limit
        np.testing.assert_array_equal(goals.to_write(outside, now=0.0), outside)
    assert goals.command(["elbow"], [-3.0], now=0.0)  # only now is the elbow clamped, and moved
    np.testing.assert_array_equal(goals.to_write(outside, now=0.0), [2.5, -1.5])
    goals.limits = JointLimits.of(2, position_min=[-1, -1], position_max=[1, 1], velocity_max=[2, 1])  # tightened
    np.testing.assert_array_equal(goals.to_write(outside, now=0.0), [2.5, -1.0])
    goals.hold()  # a reconnect: nothing commanded any more
    np.testing.assert_array_equal(goals.to_write(outside, now=0.0), outside)
    # A hold of every joint where it is (a reflex's stop) asks for no motion: nothing is clamped, nothing moves.
    assert not goals.command(NAMES, outside + [0.003, -0.003], now=0.0)
    np.testing.assert_allclose(goals.to_write(outside, now=0.0), outside + [0.003, -0.003])
    assert goals.command(["shoulder"], [2.0], now=0.0)  # a goal elsewhere: now the shoulder is clamped
    np.testing.assert_allclose(goals.to_write(outside, now=0.0), [1.0, -2.003])


def test_goals_on_a_commands_receipt_only_after_a_cycle_only_changes_and_at_most_receipt_writes():
    goals = JointGoals(NAMES, mode="velocity", limits=limits())
    here = np.zeros(2)
    goals.command(["shoulder"], [0.5], now=0.0)
    assert goals.to_write(here, now=0.0, receipt=True) is None  # before the first cycle's write
    np.testing.assert_allclose(goals.to_write(here, now=0.0), [0.5, 0.0])  # the cycle
    goals.command(["elbow"], [0.0], now=0.1)
    assert goals.to_write(here, now=0.1, receipt=True) is None  # the goals as written: nothing to write
    assert goals.to_write(None, now=0.1, receipt=True) is None  # no position for the soft stop: the cycle's
    for n in range(RECEIPT_WRITES):  # a stop among an operator's commands: each change written as it comes
        goals.command(["shoulder"], [0.1 * n], now=0.2)
        np.testing.assert_allclose(goals.to_write(here, now=0.2, receipt=True), [0.1 * n, 0.0])
    goals.command(["shoulder"], [0.4], now=0.3)
    assert goals.to_write(here, now=0.3, receipt=True) is None  # a burst waits for the cycle
    np.testing.assert_allclose(goals.to_write(here, now=0.3), [0.4, 0.0])
    goals.command(["shoulder"], [0.0], now=0.4)
    np.testing.assert_allclose(goals.to_write(here, now=0.4, receipt=True), [0.0, 0.0])  # written again
    goals.hold()  # a reconnect: nothing on receipt until a cycle has written
    assert goals.to_write(here, now=0.5, receipt=True) is None
