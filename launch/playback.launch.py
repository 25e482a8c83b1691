"""The predictor alone, for recordings: learn from a bag played with `ros2 bag play`.

    ros2 launch gamma_net_ros playback.launch.py &
    ros2 bag play runs/arm/joint_states
    ros2 topic echo /predictions gamma_net_msgs/msg/Prediction

The predictor takes the time of each reading from its header stamp (`stamp_source:
header`), so a bag replays its own time; playing the bag again (time jumps back) starts a
new episode instead of corrupting learning.
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from gamma_net_ros.launch_checks import (
    BLOCKED_START,
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
            "params_file", default_value=os.path.join(config, "arm.yaml"), description="the predictor's parameters"
        ),
        DeclareLaunchArgument(
            "checkpoint_path", default_value="", description="where to keep the learner ('' = in memory)"
        ),
    ]
    return LaunchDescription(
        [
            *arguments,
            refuse_bad_arguments(arguments, files=["params_file"]),
            # namespace="" names the node fully (/predictor): launch_ros then files the overrides
            # below under the node's name, so they win over the YAML's predictor section
            # (under the wildcard /** they would lose to it).
            Node(
                package="gamma_net_ros",
                executable="predictor",
                name="predictor",
                namespace="",
                ros_arguments=["--enclave", "/gamma_net/playback/predictor"],  # docs/security.md
                prefix=BLOCKED_START,  # a stop while it starts waits for its handlers
                exec_name="predictor",  # its log label (the prefix would make it "env")
                additional_env=node_env(),  # it stops with this launch, however that ends
                parameters=[
                    LaunchConfiguration("params_file"),
                    {"checkpoint_path": LaunchConfiguration("checkpoint_path"), "stamp_source": "header"},
                ],
                on_exit=end_the_launch_with("predictor"),  # refused: `ros2 launch` exits 1
                output="screen",
            ),
        ]
    )
