"""A Horde of Γ-nets on a robot: many questions (GVFs) about any topics, from one YAML file.

    ros2 launch gamma_net_ros horde.launch.py                               # config/horde.yaml
    ros2 launch gamma_net_ros horde.launch.py questions_file:=my_robot.yaml checkpoint_path:=~/.ros/horde.npz
    ros2 launch gamma_net_ros horde.launch.py tick_topic:=/joint_states    # a tick per message
    ros2 topic echo /horde/predictions gamma_net_msgs/msg/PredictionArray
    ros2 topic echo /horde/errors gamma_net_msgs/msg/PredictionErrors

The questions (cumulants, terminations, inputs, learner, readouts, rate, published taus) live in
the questions file (gamma_net_core/horde/questions.py documents its keys); the node's own
parameters (checkpoints, learn, tick_topic) are launch arguments. Start it beside the nodes that publish the
topics the questions name (e.g. arm.launch.py).
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from gamma_net_ros.launch_checks import refuse_bad_arguments


def generate_launch_description():
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
    ]
    return LaunchDescription(
        [
            *arguments,
            refuse_bad_arguments(arguments, files=["questions_file"]),
            Node(
                package="gamma_net_ros",
                executable="horde",
                name="horde",
                namespace="",
                parameters=[
                    {
                        "questions_file": LaunchConfiguration("questions_file"),
                        "checkpoint_path": LaunchConfiguration("checkpoint_path"),
                        "learn": LaunchConfiguration("learn"),
                        "tick_topic": LaunchConfiguration("tick_topic"),
                    }
                ],
                output="screen",
            ),
        ]
    )
