"""Smoke test of an installation: a node publishes Predictions, another prints them.

ros2 launch gamma_net_ros smoke.launch.py
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


def generate_launch_description():
    default_params = os.path.join(get_package_share_directory("gamma_net_ros"), "config", "smoke.yaml")
    params = LaunchConfiguration("params_file")
    return LaunchDescription(
        [
            DeclareLaunchArgument("params_file", default_value=default_params, description="YAML parameter file"),
            Node(package="gamma_net_ros", executable="smoke_talker", name="smoke_talker", parameters=[params]),
            Node(
                package="gamma_net_ros",
                executable="prediction_monitor",
                name="prediction_monitor",
                parameters=[params],
                output="screen",
            ),
        ]
    )
