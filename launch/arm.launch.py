"""The robot-arm pipeline on a robot: Dynamixel driver, joystick teleop, online Γ-net predictor.

    ros2 launch gamma_net_ros arm.launch.py port:=/dev/serial/by-id/usb-FTDI_...
    ros2 launch gamma_net_ros arm.launch.py scripted_operator:=true   # no person at the joystick
    ros2 topic echo /predictions gamma_net_msgs/msg/Prediction

All behaviour lives in the nodes and in config/arm.yaml and config/dynamixel.yaml, so what
this file starts is what the tests and `make demo` start. A joystick needs the `joy`
package's node (`joy:=true` starts it).
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.conditions import IfCondition
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
    params = LaunchConfiguration("params_file")
    dynamixel_params = LaunchConfiguration("dynamixel_params_file")
    arguments = [
        DeclareLaunchArgument("port", default_value="/dev/ttyUSB0", description="the servos' serial port"),
        DeclareLaunchArgument(
            "params_file", default_value=os.path.join(config, "arm.yaml"), description="arm, teleop, predictor"
        ),
        DeclareLaunchArgument(
            "dynamixel_params_file",
            default_value=os.path.join(config, "dynamixel.yaml"),
            description="the Dynamixel driver's parameters",
        ),
        DeclareLaunchArgument("joy", default_value="false", description="start the joy package's joy_node"),
        DeclareLaunchArgument(
            "scripted_operator", default_value="false", description="steer by the simulated operator"
        ),
    ]
    return LaunchDescription(
        [
            *arguments,
            # Before any node starts: an undeclared argument, a missing parameter file or joy package stops the launch.
            refuse_bad_arguments(arguments, files=["params_file", "dynamixel_params_file"], packages=[("joy", "joy")]),
            # namespace="" names each node fully, so launch_ros files the overrides (port) under the
            # node's name, where they win over the YAML's section for the node.
            Node(
                package="gamma_net_ros",
                executable="dynamixel_driver",
                name="dynamixel_driver",
                namespace="",
                ros_arguments=["--enclave", "/gamma_net/arm/dynamixel_driver"],  # docs/security.md
                prefix=BLOCKED_START,  # a stop while it starts waits for its handlers
                exec_name="dynamixel_driver",  # its log label (the prefix would make it "env")
                additional_env=node_env(),  # it stops with this launch, however that ends
                parameters=[dynamixel_params, {"port": LaunchConfiguration("port")}],
                output="screen",
                # Without its driver the rest only does harm: a second launch on a port already
                # driven (refused, one bus, one driver) would otherwise leave its operator
                # commanding the first launch's arm.
                on_exit=end_the_launch_with("dynamixel_driver"),
            ),
            Node(
                package="gamma_net_ros",
                executable="teleop",
                name="teleop",
                namespace="",
                ros_arguments=["--enclave", "/gamma_net/arm/teleop"],  # docs/security.md
                prefix=BLOCKED_START,  # a stop while it starts waits for its handlers
                exec_name="teleop",  # its log label (the prefix would make it "env")
                additional_env=node_env(),  # it stops with this launch, however that ends
                parameters=[params],
                output="screen",
            ),
            Node(
                package="gamma_net_ros",
                executable="predictor",
                name="predictor",
                namespace="",
                ros_arguments=["--enclave", "/gamma_net/arm/predictor"],  # docs/security.md
                prefix=BLOCKED_START,  # a stop while it starts waits for its handlers
                exec_name="predictor",  # its log label (the prefix would make it "env")
                additional_env=node_env(),  # it stops with this launch, however that ends
                parameters=[params],
                output="screen",
            ),
            Node(
                package="joy",
                executable="joy_node",
                name="joy",
                namespace="",
                ros_arguments=["--enclave", "/gamma_net/arm/joy"],  # docs/security.md
                condition=IfCondition(LaunchConfiguration("joy")),
            ),
            Node(
                package="gamma_net_ros",
                executable="operator",
                name="operator",
                namespace="",
                ros_arguments=["--enclave", "/gamma_net/arm/operator"],  # docs/security.md
                prefix=BLOCKED_START,  # a stop while it starts waits for its handlers
                exec_name="operator",  # its log label (the prefix would make it "env")
                additional_env=node_env(),  # it stops with this launch, however that ends
                parameters=[params],
                condition=IfCondition(LaunchConfiguration("scripted_operator")),
            ),
        ]
    )
