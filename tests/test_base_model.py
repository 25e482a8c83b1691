"""The simulated mobile base: braking, walls and the bumper, REP 117 beams, the watchdog, the operator."""

import math

import numpy as np
import pytest

from gamma_net_core.signals.base import (
    BaseConfig,
    SimulatedBase,
    WanderConfig,
    WanderOperator,
    stopping_distance,
)

OPEN = BaseConfig(room_width=20.0, room_height=20.0, obstacles=(), velocity_noise=0.0)
TICK = 0.05


def _drive(base: SimulatedBase, linear: float, seconds: float, angular: float = 0.0) -> None:
    for _ in range(round(seconds / TICK)):
        base.command(linear, angular)
        base.step(TICK)


@pytest.mark.parametrize(
    "changes", [{}, {"deceleration": 0.5}, {"latency_s": 0.3}, {"deceleration": 2.0, "latency_s": 0.0}]
)
def test_braking_from_speed_takes_the_latency_and_the_deceleration_limit(changes):
    config = BaseConfig(**{**OPEN.__dict__, **changes})
    base = SimulatedBase(config, rng=np.random.default_rng(0), pose=(2.0, 10.0, 0.0))
    _drive(base, 0.6, 3.0)
    assert base.linear == pytest.approx(0.6)
    start = base.x
    _drive(base, 0.0, 3.0)
    expected = stopping_distance(config, 0.6)  # 0.6 * latency + 0.36 / (2 * deceleration)
    assert base.linear == 0.0
    assert base.x - start == pytest.approx(expected, abs=0.6 * config.physics_dt + 1e-6)


def test_a_wall_stops_the_base_and_closes_the_bumper_once():
    base = SimulatedBase(OPEN, rng=np.random.default_rng(0), pose=(18.0, 10.0, 0.0))
    assert not base.bumper
    _drive(base, 0.7, 5.0)
    assert base.bumper and base.counters.bumps == 1
    assert base.x == pytest.approx(OPEN.room_width - OPEN.radius, abs=1e-3)
    assert base.linear == 0.0
    _drive(base, -0.2, 1.0)  # backing away opens it
    assert not base.bumper and base.counters.bumps == 1
    assert base.counters.contact_s > 0.0


def test_an_obstacle_stops_the_base_too():
    config = BaseConfig(**{**OPEN.__dict__, "obstacles": (("circle", 5.0, 10.0, 0.5),)})
    base = SimulatedBase(config, rng=np.random.default_rng(0), pose=(3.0, 10.0, 0.0))
    _drive(base, 0.5, 6.0)
    assert base.bumper and base.x == pytest.approx(5.0 - 0.5 - config.radius, abs=1e-3)


def test_beams_past_range_max_read_plus_inf_and_too_close_minus_inf():
    base = SimulatedBase(OPEN, rng=np.random.default_rng(0), pose=(10.0, 10.0, 0.0))
    assert np.all(np.isposinf(base.scan()))  # every wall is 10 m away, past 3.5 m
    base = SimulatedBase(OPEN, rng=np.random.default_rng(0), pose=(18.0, 10.0, 0.0))
    ranges = base.scan()
    ahead = round(-OPEN.angle_min / base.angle_increment)  # the beam straight ahead
    assert ranges[ahead] == pytest.approx(2.0)
    assert np.isposinf(ranges[ahead + OPEN.beams // 2])  # behind: 18 m
    near = BaseConfig(**{**OPEN.__dict__, "range_min": 0.3})
    base = SimulatedBase(near, rng=np.random.default_rng(0), pose=(19.75, 10.0, 0.0))
    assert np.isneginf(base.scan()[ahead])


def test_the_watchdog_brakes_a_base_whose_commands_stop():
    base = SimulatedBase(OPEN, rng=np.random.default_rng(0), pose=(2.0, 10.0, 0.0))
    _drive(base, 0.5, 2.0)
    assert base.linear == pytest.approx(0.5) and base.counters.watchdog_stops == 0
    for _ in range(round(0.4 / TICK)):  # under watchdog_s without a command: still driving
        base.step(TICK)
    assert base.linear == pytest.approx(0.5)
    for _ in range(round(1.5 / TICK)):
        base.step(TICK)
    assert base.linear == 0.0 and base.counters.watchdog_stops == 1


def test_a_command_that_is_not_finite_is_refused_by_value():
    base = SimulatedBase(OPEN, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="nan"):
        base.command(math.nan, 0.0)


def test_a_start_inside_an_obstacle_is_refused():
    with pytest.raises(ValueError, match="overlaps"):
        SimulatedBase(OPEN, rng=np.random.default_rng(0), pose=(0.05, 10.0, 0.0))


def _wander(seed: int, seconds: float = 120.0):
    base = SimulatedBase(BaseConfig(), rng=np.random.default_rng(seed))
    operator = WanderOperator(WanderConfig(), rng=np.random.default_rng(seed + 1))
    for _ in range(round(seconds / 0.1)):
        base.command(*operator.observe(base.now, base.scan(), base.odometry(), base.bumper, 0.1))
        base.step(0.1)
    return base, operator


def test_the_wandering_operator_is_seeded_explores_and_dashes_into_walls():
    base, operator = _wander(3)
    again, _ = _wander(3)
    assert base.counters == again.counters and (base.x, base.y) == (again.x, again.y)
    assert base.counters.distance_m > 0.1 * 120.0  # it gets about, at least 0.1 m/s on average
    assert operator.dashes >= 1 and base.counters.bumps >= 1
