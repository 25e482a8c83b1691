"""A mobile base's LaserScan as the Horde's state: beams that see open space (inf) stop nothing.

A real horde node ticks on each scan of a real publisher. REP 117 reads an inf beam as
range_max, so every scan is a tick that learns and publishes, and no question reads NaN for a
beam that reads inf (before, every tick was skipped: "field 'ranges[-3]' on /base/scan is inf").
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml
from gamma_net_msgs.msg import PredictionArray
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import LaserScan

from gamma_net_ros.horde.node import Horde

pytestmark = pytest.mark.ros
SCAN = {"topic": "/base/scan", "type": "sensor_msgs/msg/LaserScan"}
QUESTIONS = {
    "rate_hz": 10.0,
    "stale_after_s": 5.0,
    "publish_taus": [1, 5],
    "state": [
        {**SCAN, "field": "min(ranges[0:3])", "low": 0.0, "high": 4.0},
        {**SCAN, "field": "ranges[-3]", "transform": "clip", "max": 3.0, "low": 0.0, "high": 3.0},
    ],
    "learner": {"tilings": [4], "memory_size": 256, "step_size": 0.1},
    "timescales": {"n_gamma": 1, "n_tau": 3, "tau_max": 10},
    "questions": [
        {"name": "near_front", "cumulant": {**SCAN, "field": "ranges[0]", "transform": "indicator",
                                             "threshold": 0.35, "direction": "below"}},
        {"name": "front_gap", "cumulant": {**SCAN, "field": "min(ranges[0:3])"}},
        {"name": "nearness", "cumulant": {**SCAN, "field": "min(ranges)", "transform": "inverse"}},
    ],
}  # fmt: skip


class Base(Node):
    """Publishes scans of six beams, range_max 4 m; records the Horde's predictions."""

    def __init__(self) -> None:
        super().__init__("base")
        self.scans = self.create_publisher(LaserScan, "/base/scan", qos_profile_sensor_data)
        self.predictions: list[PredictionArray] = []
        self.create_subscription(PredictionArray, "horde/predictions", self.predictions.append, 100)

    def scan(self, step: int) -> None:
        beams = [math.inf] * 6  # open space all round; now and then an obstacle ahead, or one too close
        if step % 3 == 1:
            beams[:3] = [0.3, 0.5, math.inf]
        if step % 4 == 2:
            beams[4] = -math.inf
        self.scans.publish(LaserScan(range_min=0.05, range_max=4.0, ranges=beams))


def test_a_scan_with_inf_beams_as_state_publishes_every_tick_and_no_question_is_nan(executor, spin, tmp_path):
    path = tmp_path / "questions.yaml"
    path.write_text(yaml.safe_dump(QUESTIONS))
    horde = Horde(
        parameter_overrides=[Parameter("questions_file", value=str(path)), Parameter("tick_topic", value="/base/scan")]
    )
    base = Base()
    executor.add_node(horde)
    executor.add_node(base)
    assert spin(executor, lambda: base.count_subscribers("/base/scan") >= 1, timeout=10)
    assert spin(executor, lambda: base.count_publishers("horde/predictions") >= 1, timeout=10)
    steps = 12
    for step in range(steps):
        ticks = horde.ticks
        base.scan(step)
        assert spin(executor, lambda ticks=ticks: horde.ticks > ticks, timeout=10)
    # the first tick only records the state; every later one learns and publishes
    assert spin(executor, lambda: len(base.predictions) == steps - 1, timeout=10)
    assert horde.ticks == steps and horde.learner.update_count == steps - 1
    assert horde.stopped == {} and not any(horde.skipped.values())
    values = np.array([np.reshape(m.values, (3, 2)) for m in base.predictions])
    assert np.isfinite(values).all()
    # the questions read what REP 117 says: open space is range_max, not "no reading"
    reading = horde.row.read({"/base/scan": LaserScan(range_min=0.05, range_max=4.0, ranges=[math.inf] * 6)})
    np.testing.assert_allclose(reading.inputs, [4.0, 3.0])
    np.testing.assert_allclose(reading.cumulants, [0.0, 4.0, 0.25])
