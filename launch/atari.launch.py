"""The Atari pipeline on ROS 2: a recording replayed by the bridge, a neural Γ-net learning from it.

ros2 launch gamma_net_ros atari.launch.py shard_dir:=runs/centipede
ros2 launch gamma_net_ros atari.launch.py shard_dir:=runs/centipede params_file:=my_atari.yaml

Both nodes read config/atari.yaml (or params_file); shard_dir overrides the bridge's. The
bridge waits until the predictor reports on transitions/taken, then delivers every
transition without loss at the predictor's pace (gamma_net_ros/flow_control.py).
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from gamma_net_ros.launch_checks import refuse_bad_arguments


def generate_launch_description():
    default_params = os.path.join(get_package_share_directory("gamma_net_ros"), "config", "atari.yaml")
    params = LaunchConfiguration("params_file")
    shard_dir = LaunchConfiguration("shard_dir")
    return LaunchDescription(
        [
            DeclareLaunchArgument("params_file", default_value=default_params, description="YAML parameter file"),
            DeclareLaunchArgument("shard_dir", description="recording to replay (gamma-net atari record --out DIR)"),
            refuse_bad_arguments(files=["params_file"]),
            # namespace="": the nodes' full names key the overrides, which then win over the YAML.
            Node(
                package="gamma_net_ros",
                executable="neural_predictor",
                name="neural_predictor",
                namespace="",
                parameters=[params],
                output="screen",
            ),
            Node(
                package="gamma_net_ros",
                executable="ale_bridge",
                name="ale_bridge",
                namespace="",
                parameters=[params, {"shard_dir": shard_dir}],
                output="screen",
            ),
        ]
    )
