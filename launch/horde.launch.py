"""A Horde of Γ-nets on a robot: many questions (GVFs) about any topics, from one YAML file.

    ros2 launch gamma_net_ros horde.launch.py                               # config/horde.yaml
    ros2 launch gamma_net_ros horde.launch.py questions_file:=my_robot.yaml checkpoint_path:=~/.ros/horde.npz
    ros2 launch gamma_net_ros horde.launch.py tick_topic:=/joint_states    # a tick per message
    ros2 launch gamma_net_ros horde.launch.py workers:=2     # two processes, half the questions each
    ros2 launch gamma_net_ros horde.launch.py share:=2/2     # this machine's share (docs/horde.md)
    ros2 topic echo /horde/predictions gamma_net_msgs/msg/PredictionArray
    ros2 topic echo /horde/errors gamma_net_msgs/msg/PredictionErrors

The questions (cumulants, terminations, inputs, learner, readouts, rate, published taus) live in
the questions file (gamma_net_core/horde/questions.py documents its keys); the node's own
parameters (checkpoints, learn, tick_topic, reliable_input) are launch arguments. With ``workers:=N`` (N > 1) the
questions are split by name into N shares, one ``horde`` process each (nodes ``horde_1`` ..
``horde_N``, services ``horde_i/predict_at``, checkpoints ``PATH.i-of-N``), all publishing on
``horde/predictions``; the client's LatestPredictions, the reflex and the live view read them as
one set of questions. ``share:=i/n`` starts one node learning that share (one machine of several).
Start it beside the nodes that publish the topics the questions name (e.g. arm.launch.py).
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from gamma_net_ros.launch_checks import (
    BLOCKED_START,
    LaunchRefused,
    end_the_launch_with,
    node_env,
    refuse_bad_arguments,
    take_stop_signals,
)


def generate_launch_description():
    take_stop_signals()  # a stop while ros2cli started waited for launch's handlers
    config = os.path.join(get_package_share_directory("gamma_net_ros"), "config")
    arguments = [
        DeclareLaunchArgument(
            "questions_file", default_value=os.path.join(config, "horde.yaml"), description="the questions YAML"
        ),
        DeclareLaunchArgument(
            "checkpoint_path", default_value="", description="where to keep the learner ('' = in memory)"
        ),
        DeclareLaunchArgument("learn", default_value="true", description="learn (false: predict only)"),
        DeclareLaunchArgument(
            "tick_topic",
            default_value="",
            description="a questions' topic whose every message is a tick ('' = the clock at rate_hz)",
        ),
        DeclareLaunchArgument(
            "reliable_input", default_value="false", description="reliable QoS on the inputs (e.g. a bag's)"
        ),
        DeclareLaunchArgument(
            "workers", default_value="1", description="horde processes sharing the questions by name (docs/horde.md)"
        ),
        DeclareLaunchArgument(
            "share",
            default_value="",
            description="with workers 1: this node's share of the questions ('' all, 'i/n', or names 'a,b')",
        ),
    ]
    return LaunchDescription(
        [
            *arguments,
            refuse_bad_arguments(arguments, files=["questions_file"]),
            OpaqueFunction(function=_hordes),
        ]
    )


def _hordes(context):
    """One horde node (named horde), or ``workers`` of them, each learning its share of the questions."""
    text = LaunchConfiguration("workers").perform(context)
    try:
        workers = int(text)
    except ValueError:
        workers = 0
    if workers < 1:
        raise LaunchRefused(f"workers:={text}: must be a whole number >= 1")
    share = LaunchConfiguration("share").perform(context)
    if workers > 1 and share:
        raise LaunchRefused(f"share:={share} with workers:={workers}: give one (workers splits the questions itself)")
    checkpoint = LaunchConfiguration("checkpoint_path").perform(context)
    if workers == 1:
        return [_horde("horde", share, checkpoint)]
    # Each worker keeps its own checkpoint and service; the predictions share one topic.
    return [
        _horde(f"horde_{i}", f"{i}/{workers}", f"{checkpoint}.{i}-of-{workers}" if checkpoint else "")
        for i in range(1, workers + 1)
    ]


def _horde(name: str, share: str, checkpoint: str) -> Node:
    return Node(
        package="gamma_net_ros",
        executable="horde",
        name=name,
        namespace="",
        ros_arguments=["--enclave", "/gamma_net/horde/horde"],  # docs/security.md
        prefix=BLOCKED_START,  # a stop while it starts waits for its handlers
        exec_name="horde",  # its log label (the prefix would make it "env")
        additional_env=node_env(),  # it stops with this launch, however that ends
        parameters=[
            {
                "questions_file": LaunchConfiguration("questions_file"),
                "checkpoint_path": checkpoint,
                "learn": LaunchConfiguration("learn"),
                "tick_topic": LaunchConfiguration("tick_topic"),
                "reliable_input": LaunchConfiguration("reliable_input"),
                "share": share,
            }
        ],
        remappings=[] if name == "horde" else [("predict_at", f"{name}/predict_at")],
        on_exit=end_the_launch_with(name),  # a worker that refused ends the launch with exit code 1
        output="screen",
    )
