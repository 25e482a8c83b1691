"""A mobile base through the real reflex node: a range rule on a LaserScan, and a fail-safe that stops driving only.

The node runs in-process beside a rig node (tests/test_reflex_node.py's) that publishes real
LaserScan, PredictionArray and Twist messages and records the Twists the reflex sends on
``cmd_vel``. The rules are the shipped base example (config/base_reflex_rules.yaml: fail-safe
``{stop: [linear.x, linear.y]}``), or the same with the default fail-safe, ``stop``.
"""

from __future__ import annotations

import math
import pathlib

import numpy as np
import pytest
import yaml
from gamma_net_msgs.msg import PredictionArray
from geometry_msgs.msg import Twist
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import LaserScan
from test_reflex_node import Rig
from test_reflex_node_safety import FormRig, make_reflex

pytestmark = pytest.mark.ros

REPO = pathlib.Path(__file__).resolve().parents[1]
QUESTIONS = REPO / "config" / "base_reflex_questions.yaml"
RULES = REPO / "config" / "base_reflex_rules.yaml"
TAUS = np.array([1.0, 10.0, 100.0])
RANGE_MAX = 3.5


class Base:
    """The base's side of the rig: scans on /scan, the Horde's predictions, Twists in and out.

    ``answers`` pairs each Twist the reflex sends with the command it had last received, so a
    command's answer is told apart from a hold or a re-send of an earlier one.
    """

    def __init__(self, rig: Rig, reflex) -> None:
        self.rig, self.reflex = rig, reflex
        self.scans = rig.node.create_publisher(LaserScan, "/scan", qos_profile_sensor_data)
        self.teleop = rig.node.create_publisher(Twist, "cmd_vel_in", 10)
        self.out: list[Twist] = []
        rig.node.create_subscription(Twist, "cmd_vel", self.out.append, 10)
        self.answers: list[tuple[Twist | None, Twist]] = []
        publish = reflex.commands.publish

        def answer(msg: Twist) -> None:
            self.answers.append((reflex.last[1] if reflex.last is not None else None, msg))
            publish(msg)

        reflex.commands.publish = answer

    def scan(self, front: float = math.inf) -> None:
        """A 36-beam scan, open space (+inf) all round but for ``front`` on beam 2."""
        ranges = [math.inf] * 36
        ranges[2] = front
        self.scans.publish(LaserScan(range_min=0.12, range_max=RANGE_MAX, ranges=ranges))

    def predict(self) -> None:
        """The Horde's predictions, quiet: nothing near ahead expected."""
        gammas = 1.0 - 1.0 / TAUS
        questions = ["front_range", "near_front", "bump"]
        values = np.zeros((len(questions), TAUS.size))
        values[0] = RANGE_MAX / (1.0 - gammas)
        self.rig.predictions.publish(
            PredictionArray(questions=questions, gammas=gammas.tolist(), values=values.ravel().tolist())
        )

    def feed(self, front: float = math.inf):
        return lambda: (self.scan(front), self.predict())

    def drive(self, x: float, z: float, feed=None) -> tuple[float, float]:
        """Send one Twist (forward ``x``, turning ``z``), calling ``feed()`` meanwhile; return the
        (linear.x, angular.z) the reflex sent for it."""
        msg, before = Twist(), len(self.answers)
        msg.linear.x, msg.angular.z = x, z
        self.teleop.publish(msg)
        asked = lambda m: m is not None and (m.linear.x, m.angular.z) == (x, z)  # noqa: E731
        assert self.rig.until(lambda: any(asked(m) for m, _ in self.answers[before:]), feed=feed), "no answer"
        out = next(out for m, out in self.answers[before:] if asked(m))
        return out.linear.x, out.angular.z


def start(tmp_path, executor, spin, fail_safe=None, **params) -> tuple:
    rules = RULES
    if fail_safe is not None:
        doc = yaml.safe_load(RULES.read_text()) | {"fail_safe": fail_safe}
        rules = tmp_path / "base_rules.yaml"
        rules.write_text(yaml.safe_dump(doc))
    remap = FormRig.REMAP("cmd_vel")
    reflex = make_reflex(rules, remap, command_type="twist", questions_file=str(QUESTIONS), **params)
    executor.add_node(reflex)
    rig = Rig(executor, spin)
    return reflex, rig, Base(rig, reflex)


def test_a_blind_base_stops_driving_and_turns_away_and_a_range_rule_sees_open_space(tmp_path, executor, spin):
    reflex, rig, base = start(tmp_path, executor, spin)
    front = [r.name for r in reflex.rule_set.rules].index("front_too_close")
    # No scan, no prediction yet: every rule is stale; the fail-safe holds driving, turning passes.
    assert rig.until(lambda: reflex.state.stopped)
    assert reflex.state.stop_joints == ("linear.x", "linear.y")
    assert base.drive(0.5, 0.3) == (0.0, 0.3)
    assert base.drive(-0.5, -0.3) == (0.0, -0.3)
    # Open space all round (+inf beams): the range rule reads range_max, so it is fresh and off; driving passes.
    assert rig.until(lambda: not reflex.state.stopped, feed=base.feed())
    assert reflex.state.status[front].value == RANGE_MAX and not reflex.state.status[front].on
    seen = reflex.state.status[front].seen
    assert rig.until(lambda: reflex.state.status[front].seen > seen, feed=base.feed())  # each inf scan is news
    assert reflex.state.status[front].value == RANGE_MAX and "front_too_close" not in reflex.state.stale
    assert base.drive(0.5, 0.3, feed=base.feed()) == (0.5, 0.3)
    # Something 0.2 m ahead: forward stopped, backing away and turning free.
    assert rig.until(lambda: reflex.state.status[front].on, feed=base.feed(0.2))
    assert base.drive(0.4, 0.3, feed=base.feed(0.2)) == (0.0, 0.3)
    assert base.drive(-0.2, 0.3, feed=base.feed(0.2)) == (-0.2, 0.3)
    # The scans stop (the lidar unplugged): the range rule goes stale, and driving is held both ways.
    assert rig.until(lambda: reflex.state.stale == ["front_too_close"], feed=base.predict)
    assert reflex.state.stop_joints == ("linear.x", "linear.y")
    assert base.drive(-0.3, 0.3, feed=base.predict) == (0.0, 0.3)
    heard = lambda: base.out and (base.out[-1].linear.x, base.out[-1].angular.z) == (0.0, 0.3)  # noqa: E731
    assert rig.until(heard, feed=base.predict)  # on the wire: one Twist, driving held and the turn as asked
    assert reflex.counts["errors"] == 0 and reflex.counts["rejected"] == 0


def test_a_stop_of_some_axes_re_sends_the_operators_turn_while_recent_then_holds_every_axis(tmp_path, executor, spin):
    reflex, rig, base = start(tmp_path, executor, spin, command_stale_s=1.0)
    assert rig.until(lambda: reflex.state.stopped)
    assert base.drive(0.5, 0.3) == (0.0, 0.3)
    # The operator goes quiet: the hold goes on every hold_period_s, the turn with it while recent, then none.
    sent = len(base.answers)  # (as the reflex sends them: the rig may not have heard the earlier holds yet)
    out = lambda: [m for _, m in base.answers[sent:]]  # noqa: E731
    assert rig.until(lambda: len(out()) > 1 and out()[-1].angular.z == 0.0)
    assert all(m.linear.x == 0.0 for m in out())
    turning = [m.angular.z for m in out()]
    assert set(turning) <= {0.3, 0.0} and turning == sorted(turning, reverse=True)  # the turn, then none


@pytest.mark.parametrize("fail_safe", ["stop", {"stop": "all"}])
def test_the_default_fail_safe_holds_every_axis(tmp_path, executor, spin, fail_safe):
    reflex, rig, base = start(tmp_path, executor, spin, fail_safe)
    assert rig.until(lambda: reflex.state.stopped)
    assert reflex.state.stops_all
    assert base.drive(0.5, 0.3) == (0.0, 0.0)
    assert rig.until(lambda: not reflex.state.stopped, feed=base.feed())
    assert base.drive(0.5, 0.3, feed=base.feed()) == (0.5, 0.3)
