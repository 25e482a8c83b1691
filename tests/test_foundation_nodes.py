"""Real ROS 2: a Prediction crosses between nodes, in-process and between processes."""

from __future__ import annotations

import pytest
from rclpy.node import Node
from waiting import bound, spin_for

from gamma_net_ros.processes import NodeProcess, node_command

pytestmark = pytest.mark.ros


def test_prediction_monitor_prints_predictions_from_another_process(executor, spin, tmp_path):
    """A Prediction published here crosses to a monitor node in its own process, which prints it."""
    from gamma_net_msgs.msg import Prediction

    from gamma_net_ros.conversions import prediction_msg, seconds_to_stamp

    node = Node("test_talker")
    publisher = node.create_publisher(Prediction, "predictions", 10)
    executor.add_node(node)
    log = tmp_path / "monitor.log"
    monitor = NodeProcess(node_command("gamma_net_ros.prediction_monitor", params={"count": 3, "scaled": True}), log)
    with monitor:
        assert spin(executor, lambda: publisher.get_subscription_count() >= 1, timeout=30), log.read_text()
        sent = 0
        while monitor.running and sent < 200:
            msg = prediction_msg(
                stamp=seconds_to_stamp(12.5),
                question="|shoulder.velocity|",
                gammas=[0.0, 0.9, 0.99],
                values=[0.5, 4.0, 30.0],
                update_count=sent,
            )
            publisher.publish(msg)
            sent += 1
            spin_for(executor, 0.05)
        assert monitor.wait(timeout=bound(10)) == 0
    lines = [line for line in log.read_text().splitlines() if "|shoulder.velocity|" in line and "updates" in line]
    assert len(lines) == 3
    # scaled: values times (1 - gamma), the paper's display scale
    assert "[12.500] |shoulder.velocity| (updates" in lines[0]
    assert "tau=1:+0.5000 tau=10:+0.4000 tau=100:+0.3000" in lines[0]


def test_prediction_monitor_prints_a_horde_prediction_array_a_line_per_question(executor, spin, tmp_path):
    """`prediction_monitor -p topic:=/horde/predictions` prints the Horde's PredictionArray (it printed nothing)."""
    from gamma_net_msgs.msg import PredictionArray

    node = Node("test_horde_talker")
    publisher = node.create_publisher(PredictionArray, "/horde/predictions", 10)
    executor.add_node(node)
    log = tmp_path / "monitor.log"
    params = {"topic": "/horde/predictions", "count": 2, "scaled": True}
    monitor = NodeProcess(node_command("gamma_net_ros.prediction_monitor", params=params), log)
    with monitor:
        assert spin(executor, lambda: publisher.get_subscription_count() >= 1, timeout=30), log.read_text()
        sent = 0
        while monitor.running and sent < 200:
            msg = PredictionArray(questions=["speed", "effort"], gammas=[0.0, 0.9], readouts=["next_2s"])
            msg.header.stamp.sec = 3
            msg.values, msg.readout_values, msg.update_count = [0.5, 4.0, 1.0, 20.0], [7.0, 8.0], sent
            publisher.publish(msg)
            sent += 1
            spin_for(executor, 0.05)
        assert monitor.wait(timeout=bound(10)) == 0
    lines = [line for line in log.read_text().splitlines() if "(updates" in line]
    assert len(lines) == 4, log.read_text()  # count 2: two arrays of two questions
    assert lines[0].startswith("[3.000] speed (updates") and "tau=1:+0.5000 tau=10:+0.4000 next_2s:+7.0000" in lines[0]
    assert lines[1].startswith("[3.000] effort (updates") and "tau=1:+1.0000 tau=10:+2.0000 next_2s:+8.0000" in lines[1]


def test_out_of_range_parameter_is_refused(executor):
    from rclpy.parameter import Parameter

    from gamma_net_ros.teleop import Teleop

    node = Teleop()
    executor.add_node(node)
    result = node.set_parameters([Parameter("timeout", value=500.0)])[0]
    assert not result.successful
    assert node.get_parameter("timeout").value == 0.5
    descriptor = node.describe_parameter("timeout")
    assert descriptor.floating_point_range[0].to_value == 60.0


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
