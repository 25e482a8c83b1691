"""The node contract as code: what run_node needs of every node, which nodes learn, and their hooks."""

from __future__ import annotations

import importlib
import inspect
import pathlib

import pytest
from rclpy.node import Node

from gamma_net_ros import entry
from gamma_net_ros.node_main import LearningNode, RefusableNode, RosNode, is_learning_node
from gamma_net_ros.params import ros_arguments

pytestmark = pytest.mark.ros

#: Nodes with a learner: warmed up before they take input, checkpointed, told when refused.
LEARNING = {"horde", "predictor", "neural_predictor"}
#: Nodes without a learner that write files all the same (a bag): told when refused, nothing else.
REFUSABLE = {"bag_recorder"}
#: Executables of entry.NODES that are no rclpy node (a serial-port program).
NOT_ROS = {"servo_emulator"}
HOOKS = ("warm_up", "take_input", "save_checkpoint", "refused")


def _node_classes(module_name: str) -> list[type]:
    """The rclpy node classes a module defines."""
    module = importlib.import_module(module_name)
    classes = [c for _, c in inspect.getmembers(module, inspect.isclass) if c.__module__ == module_name]
    return [c for c in classes if issubclass(c, Node)]


@pytest.mark.parametrize("name", sorted(set(entry.NODES) - NOT_ROS))
def test_every_node_meets_the_contract_and_only_learning_nodes_have_the_hooks(name):
    (cls,) = _node_classes(entry.NODES[name])
    assert issubclass(cls, RosNode)
    assert is_learning_node(cls) == (name in LEARNING)
    if name in LEARNING:
        assert issubclass(cls, LearningNode) and all(callable(getattr(cls, hook)) for hook in HOOKS)
        # run_node builds it without input: the constructor takes that choice.
        assert inspect.signature(cls).parameters["take_input_now"].default is True
    elif name in REFUSABLE:
        assert issubclass(cls, RefusableNode) and callable(cls.refused)
        assert not any(hasattr(cls, hook) for hook in HOOKS if hook != "refused")
    else:
        assert not any(hasattr(cls, hook) for hook in HOOKS)
        assert not issubclass(cls, RefusableNode)


def test_the_registry_holds_the_learning_nodes_and_one_program_that_is_no_node():
    assert LEARNING | NOT_ROS <= set(entry.NODES)
    assert all(not _node_classes(entry.NODES[name]) for name in NOT_ROS)


def test_a_learning_node_built_for_run_node_takes_its_input_only_when_told(rclpy_session):
    from gamma_net_ros.predictor import Predictor

    def listens(node) -> bool:
        return any(s.topic_name == "/joint_states" for s in node.subscriptions)

    later = Predictor(take_input_now=False)
    now = Predictor()
    try:
        assert not listens(later) and listens(now)
        later.take_input()
        assert listens(later)
    finally:
        later.destroy_node()
        now.destroy_node()


def test_one_scanner_reads_files_assignments_and_unknown_flags_of_every_ros_args_section():
    argv = ["node", "--ros-args", "--params-file", "a.yaml", "-r", "x:=y", "-p", "k:=1", "--params_file", "b", "--",
            "--not-ros", "--ros-args", "--param", "n:k:=2", "--log-level", "-p"]  # fmt: skip
    scanned = ros_arguments(argv)
    assert scanned.files == [pathlib.Path("a.yaml")]
    assert scanned.assignments == ["k:=1", "n:k:=2"]  # a flag's value ("x:=y", "-p" after --log-level) is no flag
    assert scanned.unknown == ["--params_file", "b"]
