"""A Horde with off-policy questions, started as users start it (``ros2 launch``): predictions, RUPEE, resume.

The behaviour here spins left, right or not at all at random (angular.z), and the speed that
follows is the action taken plus the state: "the speed if I spin left" is 1 + x, "if I stand
still" is x, while the behaviour's own is (-2 + 0 + 1) / 3 + x. The node publishes both
off-policy questions and the on-policy one on horde/predictions, their RUPEE on horde/errors,
saves on Ctrl-C, and a second launch resumes with the behaviour counts it had. In-process, the
node's warm-up compiles all that its off-policy ticks, errors and checkpoints use.
"""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
import yaml
from compilations import numba_compilations
from gamma_net_msgs.msg import PredictionArray, PredictionErrors
from geometry_msgs.msg import Twist
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy
from ros2_cli import close_all, launch
from waiting import spin_until

from gamma_net_core.horde.learner import HordeLearner
from gamma_net_core.horde.questions import load_questions

pytestmark = pytest.mark.ros
CMD = {"topic": "/cmd", "type": "geometry_msgs/msg/Twist"}


@pytest.fixture(scope="module", autouse=True)
def _nothing_left_running():
    yield
    close_all()


def questions() -> dict:
    spin = {"action": {**CMD, "field": "angular.z"}, "target": {"kind": "sign", "sign": "positive"},
            "behaviour": {"kind": "matching"}}  # fmt: skip
    still = {**spin, "target": {"kind": "interval", "low": -0.1, "high": 0.1}}
    return {
        "rate_hz": 20.0,
        "stale_after_s": 60.0,  # a busy machine's pause is no gap in this stream
        "publish_taus": [1, 2],
        "state": [{**CMD, "field": "linear.y", "low": 0.0, "high": 1.0}],
        "learner": {"tilings": [8], "memory_size": 256, "step_size": 0.03},
        "timescales": {"n_gamma": 1, "n_tau": 2, "tau_max": 4},
        "questions": [
            {"name": "speed_if_spinning", "cumulant": {**CMD, "field": "linear.x"}, "policy": spin},
            {"name": "speed_if_still", "cumulant": {**CMD, "field": "linear.x"}, "policy": still},
            {"name": "speed", "cumulant": {**CMD, "field": "linear.x"}},
        ],
    }


class Behaviour:
    """The robot's stream on /cmd: each message's speed is the previous message's action plus its state."""

    def __init__(self, node: Node) -> None:
        qos = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
        self.publisher = node.create_publisher(Twist, "/cmd", qos)
        self.rng = np.random.default_rng(3)
        self.action = 0.0
        self.sent = 0

    def send(self) -> None:
        msg = Twist()
        msg.linear.y = float(self.rng.random())
        msg.linear.x = self.action + msg.linear.y
        self.action = float(self.rng.choice([-2.0, 0.0, 1.0]))
        msg.angular.z = self.action
        self.publisher.publish(msg)
        self.sent += 1


class Listener:
    def __init__(self, node: Node) -> None:
        self.arrays: list[PredictionArray] = []
        self.errors: list[PredictionErrors] = []
        node.create_subscription(PredictionArray, "/horde/predictions", self.arrays.append, 100)
        node.create_subscription(PredictionErrors, "/horde/errors", self.errors.append, 10)


def run_until(executor, behaviour, heard, launched, done, timeout) -> bool:
    """Send the stream in step with the node: the next message once the last one's array is out (a message the
    node had no time for would be dropped from its queue, and the transition would skip an action)."""
    last = {"arrays": -1, "at": 0.0}

    def step() -> bool:
        if launched is not None and launched.process.poll() is not None:
            raise AssertionError(launched.output)
        # a fresh node's first message gives no array, nor does one sent before it listens: resend after a while
        if len(heard.arrays) > last["arrays"] or time.monotonic() - last["at"] > 2.0:
            last["arrays"], last["at"] = len(heard.arrays), time.monotonic()
            behaviour.send()
        return done()

    return spin_until(executor, step, timeout=timeout, step=0.005)


def test_off_policy_questions_run_from_a_questions_file_through_ros2_launch_and_resume(executor, tmp_path):
    path, checkpoint = tmp_path / "questions.yaml", tmp_path / "horde.npz"
    path.write_text(yaml.safe_dump(questions()))
    args = [f"questions_file:={path}", f"checkpoint_path:={checkpoint}", "tick_topic:=/cmd", "reliable_input:=true"]
    node = Node("off_policy_launch_test")
    behaviour, heard = Behaviour(node), Listener(node)
    executor.add_node(node)
    first = launch("gamma_net_ros", "horde.launch.py", *args, cwd=tmp_path, log_path=tmp_path / "first.txt")
    try:

        def learned_and_scored() -> bool:
            # RUPEE falls as it learns (here 0.3-0.5 at 800 updates, 0.2-0.35 at 1,600; on a loaded CI machine
            # once 1.04 at 800): scored at 1,600, its bound of 1 has room for a busy machine's irregular ticks
            if not heard.arrays or heard.arrays[-1].update_count < 1600:
                return False
            scored = [e for e in heard.errors if e.samples[0] > 100 and e.samples[3] > 100]
            return bool(scored)

        assert run_until(executor, behaviour, heard, first, learned_and_scored, timeout=300), first.output
        last = heard.arrays[-1]
        assert list(last.questions) == ["speed_if_spinning", "speed_if_still", "speed"]
        values = np.reshape(last.values, (3, 2))
        # tau 1 (gamma 0): E[speed | x, pi] is 1 + x spinning, x standing still: each target's own (measured offline
        # on this stream: 0.8-1.3 apart over seeds and ticks)
        assert values[0, 0] - values[1, 0] == pytest.approx(1.0, abs=0.45)
        assert values[0, 0] > values[2, 0] + 0.5  # the behaviour's, (-2 + 0 + 1) / 3 + x, well below spinning's
        errors = [e for e in heard.errors if e.samples[0] > 100][-1]
        rmse = np.reshape(errors.rmse, (3, 2))
        assert np.all(np.isfinite(rmse)) and np.all(rmse[:2] < 1.0)  # RUPEE rows, and the on-policy row's rmse
        assert all(math.isnan(v) for v in np.reshape(errors.mean_rmse, (3, 2))[:2].ravel())  # no yardstick off-policy
        assert first.interrupt() == 0, first.output
        assert "Traceback" not in first.output
        saved = HordeLearner.load(checkpoint, spec=load_questions(path))  # Ctrl-C saved it, whole
        assert saved.off_policy and saved.update_count >= 800
        counted = saved.ratios.counts[:2, :2].sum(axis=1)
        assert np.all(counted > 800)  # the behaviour's actions, counted, travel with the weights

        heard.arrays.clear()
        second = launch("gamma_net_ros", "horde.launch.py", *args, cwd=tmp_path, log_path=tmp_path / "second.txt")
        assert second.wait_for(f"resumed from {checkpoint} after {saved.update_count} updates", timeout=120), (
            second.output
        )
        # the first node's last arrays may still be on their way: the resumed node's are those past its count
        resumed = lambda: any(a.update_count > saved.update_count for a in heard.arrays)  # noqa: E731
        assert run_until(executor, behaviour, heard, second, resumed, timeout=120), second.output
        assert (
            min(a.update_count for a in heard.arrays if a.update_count > saved.update_count) == saved.update_count + 1
        )
        assert second.interrupt() == 0, second.output
        again = HordeLearner.load(checkpoint, spec=load_questions(path))
        assert np.all(again.ratios.counts[:2, :2].sum(axis=1) > counted)
    finally:
        executor.remove_node(node)
        node.destroy_node()
        close_all()


def test_after_its_warm_up_an_off_policy_horde_compiles_nothing_on_its_ticks(executor, spin, tmp_path):
    from gamma_net_ros.horde.node import Horde

    path, checkpoint = tmp_path / "questions.yaml", tmp_path / "horde.npz"
    path.write_text(yaml.safe_dump(questions()))
    params = {"questions_file": str(path), "checkpoint_path": str(checkpoint), "tick_topic": "/cmd",
              "reliable_input": True}  # fmt: skip
    horde = Horde(parameter_overrides=[Parameter(k, value=v) for k, v in params.items()])
    node = Node("off_policy_warm_test")
    behaviour, heard = Behaviour(node), Listener(node)
    executor.add_node(horde)
    executor.add_node(node)
    try:
        assert spin(executor, lambda: node.count_subscribers("/cmd") >= 1, timeout=10)
        horde.warm_up()
        with numba_compilations() as compiled:
            for _ in range(12):
                ticks = horde.ticks
                behaviour.send()
                assert spin(executor, lambda ticks=ticks: horde.ticks > ticks, timeout=10)
            horde.publish_diagnostics()
            horde.save_checkpoint()
        assert horde.learner.update_count == 11 and checkpoint.is_file()
        assert compiled == []
        assert spin(executor, lambda: bool(heard.errors), timeout=10)
    finally:
        for n in (horde, node):
            executor.remove_node(n)
            n.destroy_node()
