"""Real ROS 2: a Prediction crosses between nodes, in-process and between processes."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from rclpy.node import Node

from gamma_net_ros.paths import config_file
from gamma_net_ros.processes import NodeProcess, node_command

pytestmark = pytest.mark.ros


def _collector(executor, topic="predictions"):
    from gamma_net_msgs.msg import Prediction

    node = Node("test_collector")
    received = []
    node.create_subscription(Prediction, topic, received.append, 10)
    executor.add_node(node)
    return received


def test_prediction_crosses_in_process(executor, spin):
    from gamma_net_ros.smoke_talker import SmokeTalker

    executor.add_node(SmokeTalker())
    received = _collector(executor)
    assert spin(executor, lambda: len(received) >= 3, timeout=15)
    msg = received[-1]
    assert msg.cumulant == "constant"
    np.testing.assert_allclose(msg.gammas, [0.0, 0.9, 0.99])
    np.testing.assert_allclose(msg.values, [1.0, 10.0, 100.0])
    assert [m.update_count for m in received] == sorted(m.update_count for m in received)


def test_prediction_crosses_between_processes(executor, spin):
    received = _collector(executor)
    cmd = node_command("gamma_net_ros.smoke_talker", params_file=config_file("smoke"), params={"taus": [5.0, 20.0]})
    with NodeProcess(cmd, log_path=None).start(stdout=subprocess.DEVNULL):
        assert spin(executor, lambda: len(received) >= 3, timeout=30)
    np.testing.assert_allclose(received[-1].gammas, [0.8, 0.95])
    np.testing.assert_allclose(received[-1].values, [5.0, 20.0])


def test_out_of_range_parameter_is_refused(executor):
    from rclpy.parameter import Parameter

    from gamma_net_ros.smoke_talker import SmokeTalker

    node = SmokeTalker()
    executor.add_node(node)
    result = node.set_parameters([Parameter("rate_hz", value=5000.0)])[0]
    assert not result.successful
    assert node.get_parameter("rate_hz").value == 10.0
    descriptor = node.describe_parameter("rate_hz")
    assert descriptor.floating_point_range[0].to_value == 1000.0


def test_demo_command_runs_two_real_nodes():
    result = subprocess.run(
        [sys.executable, "-m", "gamma_net_core.cli", "demo", "--timeout", "60"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = [line for line in result.stdout.splitlines() if "constant (updates" in line]
    assert len(lines) == 10
    assert "tau=100:+100.0000" in lines[0]


def test_declare_config_mirrors_the_dataclass(executor):
    import dataclasses

    from rclpy.parameter import Parameter

    from gamma_net_core.config import setting
    from gamma_net_ros.params import declare_config

    @dataclasses.dataclass(frozen=True)
    class Learner:
        alpha: float = setting(0.1, "step size", low=0.0, high=1.0)
        tilings: tuple[int, ...] = setting((20, 30), "tilings per group", low=1, high=1000)
        scale: str = setting("both", "sampling scale", choices=("gamma", "tau", "both"))

    node = Node("config_node", parameter_overrides=[Parameter("learner.alpha", value=0.5)])
    executor.add_node(node)
    config = declare_config(node, Learner, "learner")
    assert config == Learner(alpha=0.5)
    descriptor = node.describe_parameter("learner.alpha")
    assert descriptor.description == "step size" and descriptor.read_only
    assert descriptor.floating_point_range[0].to_value == 1.0
    assert "one of" in node.describe_parameter("learner.scale").additional_constraints

    bad = Node("bad_config_node", parameter_overrides=[Parameter("learner.scale", value="log")])
    executor.add_node(bad)
    with pytest.raises(ValueError, match=r"Learner\.scale must be one of"):
        declare_config(bad, Learner, "learner")
