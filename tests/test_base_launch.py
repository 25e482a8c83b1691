"""The mobile-base stand-in as users start it (``ros2 launch gamma_net_ros base.launch.py``).

Real processes: the base emulator, the scripted operator, the Horde and the reflex, with the
shipped base questions and the range rule alone (``config/base_range_rules.yaml``), so a
forward command held at zero is the range rule's doing. This test's
node listens to the operator's Twist (``cmd_vel_in``), the reflex's (``cmd_vel``) and the
odometry, and pairs each Twist the reflex sends with the operator's latest.
"""

from __future__ import annotations

import math

import pytest
import yaml
from gamma_net_msgs.msg import ReflexEvent
from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
from rclpy.node import Node
from ros2_cli import close_all, launch
from waiting import spin_until

from gamma_net_core.paths import config_file

pytestmark = pytest.mark.ros


@pytest.fixture(scope="module", autouse=True)
def _nothing_left_running():
    yield
    close_all()


class Listener:
    """The operator's commands, the reflex's answers (each with the command it last had) and the base's path."""

    def __init__(self, node: Node) -> None:
        self.last_in: Twist | None = None
        self.turns: set[float] = set()  # every angular.z the operator sent
        self.answers: list[tuple[Twist, Twist, bool]] = []  # (operator's latest, reflex's out, range rule on)
        self.range_on = False
        self.events: list[ReflexEvent] = []
        self.start: tuple[float, float] | None = None
        self.travelled = 0.0
        self.position: tuple[float, float] | None = None
        node.create_subscription(Twist, "/cmd_vel_in", self.on_in, 100)
        node.create_subscription(Twist, "/cmd_vel", self.on_out, 100)
        node.create_subscription(Odometry, "/odom", self.on_odometry, 100)
        node.create_subscription(ReflexEvent, "/reflex/events", self.on_event, 100)

    def on_event(self, msg: ReflexEvent) -> None:
        self.events.append(msg)
        if msg.rule == "front_too_close":
            self.range_on = msg.active

    def on_in(self, msg: Twist) -> None:
        self.last_in = msg
        self.turns.add(msg.angular.z)

    def on_out(self, msg: Twist) -> None:
        if self.last_in is not None:
            self.answers.append((self.last_in, msg, self.range_on))

    def on_odometry(self, msg: Odometry) -> None:
        p = (msg.pose.pose.position.x, msg.pose.pose.position.y)
        if self.position is not None:
            self.travelled += math.dist(p, self.position)
        self.position = p

    def forwarded(self) -> list[Twist]:
        """Forward commands the reflex passed as they came."""
        return [o for i, o, _ in self.answers if i.linear.x > 0.1 and o.linear.x == pytest.approx(i.linear.x)]

    def held(self) -> list[tuple[Twist, Twist, bool]]:
        """Forward commands the reflex held at zero while the range rule was on."""
        return [a for a in self.answers if a[0].linear.x > 0.1 and a[1].linear.x == 0.0 and a[2]]


def test_the_base_drives_the_reflex_forwards_and_a_range_stop_holds_forward_only(executor, tmp_path):
    rules_path = config_file("base_range_rules")
    assert [r["name"] for r in yaml.safe_load(rules_path.read_text())["rules"]] == ["front_too_close"]
    node = Node("base_launch_test")
    heard = Listener(node)
    executor.add_node(node)
    # The operator heads for a wall about every second: the range rule meets one soon.
    args = [f"rules_file:={rules_path}", "dash_probability:=1.0", "seed:=2"]
    launched = launch("gamma_net_ros", "base.launch.py", *args, cwd=tmp_path, log_path=tmp_path / "launch.txt")
    try:

        def stopped_then_drove_on() -> bool:
            if launched.process.poll() is not None:
                raise AssertionError(launched.output)
            held = heard.held()
            if not held or not heard.forwarded():
                return False
            after = heard.answers[heard.answers.index(held[0]) :]
            return any(i.linear.x > 0.1 and o.linear.x > 0.1 for i, o, _ in after) and heard.travelled > 2.0

        assert spin_until(executor, stopped_then_drove_on, timeout=240), (
            f"{len(heard.answers)} answers, {len(heard.held())} held, {heard.travelled:.2f} m\n{launched.output}"
        )
        assert any(e.rule == "front_too_close" and e.active and e.reason == "threshold" for e in heard.events)
        # Held forward, free to turn: each held command's turn is one the operator gave (not zeroed with it).
        turned = [o.angular.z for _, o, _ in heard.held()]
        assert all(z in heard.turns for z in turned), (turned, sorted(heard.turns))
        assert any(z != 0.0 for z in turned), turned
        assert launched.interrupt() == 0, launched.output
        assert "Traceback" not in launched.output
    finally:
        executor.remove_node(node)
        node.destroy_node()
        close_all()
