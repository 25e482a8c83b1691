"""The emulated arm meeting an obstacle, a Horde learning it, and a reflex acting on the Horde's predictions.

    ros2 launch gamma_net_ros reflex.launch.py
    ros2 launch gamma_net_ros reflex.launch.py rules_file:=my_rules.yaml checkpoint_path:=~/.ros/horde.npz
    ros2 topic echo /reflex/events

    servo emulator (pty, obstacle in the shoulder's range) <- dynamixel_driver -> joint_states -> horde
         joint_commands <- reflex <- joint_commands_in <- teleop <- joy <- operator (scripted, overshooting)
                              ^---------------------- horde/predictions

Every part is the node a robot runs, with the package's YAML files (config/arm.yaml,
config/dynamixel.yaml, config/horde.yaml, config/reflex.yaml and its rules); only the servos are
emulated. The operator overshoots now and then (config/reflex.yaml's operator section), which is
when the shoulder meets the obstacle; teleop's commands go through the reflex to the driver.
"""

import os
import sys

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, ExecuteProcess
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from gamma_net_ros.launch_checks import refuse_bad_arguments


def generate_launch_description():
    config = os.path.join(get_package_share_directory("gamma_net_ros"), "config")
    arm = os.path.join(config, "arm.yaml")
    reflex = os.path.join(config, "reflex.yaml")
    port = LaunchConfiguration("port")
    arguments = [
        DeclareLaunchArgument(
            "port", default_value="/tmp/gamma_net_reflex/ttyDXL", description="the emulated servos' link path"
        ),
        # The tool on the wire's start point for config/arm.yaml's maze (as `make demo` computes it).
        DeclareLaunchArgument("shoulder_start", default_value="-1.102465", description="rad, at start"),
        DeclareLaunchArgument("elbow_start", default_value="1.703387", description="rad, at start"),
        # 0.05 rad past the shoulder's reach on the route (-0.25 rad, gamma-net arm simulate): only
        # an overshoot meets it.
        DeclareLaunchArgument("obstacle_low", default_value="-0.2", description="shoulder obstacle from, rad"),
        DeclareLaunchArgument("obstacle_high", default_value="0.5", description="shoulder obstacle to, rad"),
        DeclareLaunchArgument(
            "rules_file", default_value=os.path.join(config, "reflex_rules.yaml"), description="the reflex rules"
        ),
        DeclareLaunchArgument(
            "questions_file", default_value=os.path.join(config, "horde.yaml"), description="the Horde's questions"
        ),
        DeclareLaunchArgument(
            "checkpoint_path", default_value="", description="the Horde's learner ('' = in memory, from scratch)"
        ),
    ]
    return LaunchDescription(
        [
            *arguments,
            refuse_bad_arguments(arguments, files=["rules_file", "questions_file"]),
            ExecuteProcess(
                cmd=[
                    sys.executable,
                    "-u",
                    "-m",
                    "gamma_net_ros.hardware.emulator",
                    "--link",
                    port,
                    "--ids",
                    "1",
                    "2",
                    "--positions",
                    LaunchConfiguration("shoulder_start"),
                    LaunchConfiguration("elbow_start"),
                    "--obstacle",
                    "1",
                    LaunchConfiguration("obstacle_low"),
                    LaunchConfiguration("obstacle_high"),
                ],
                name="servo_emulator",
                output="screen",
            ),
            # The driver retries the port until the emulator has made it.
            Node(
                package="gamma_net_ros",
                executable="dynamixel_driver",
                name="dynamixel_driver",
                namespace="",
                parameters=[os.path.join(config, "dynamixel.yaml"), {"port": port}],
                output="screen",
            ),
            Node(
                package="gamma_net_ros",
                executable="teleop",
                name="teleop",
                namespace="",
                parameters=[arm],
                remappings=[("joint_commands", "joint_commands_in")],
                output="screen",
            ),
            Node(
                package="gamma_net_ros",
                executable="operator",
                name="operator",
                namespace="",
                parameters=[arm, reflex],
                output="screen",
            ),
            Node(
                package="gamma_net_ros",
                executable="horde",
                name="horde",
                namespace="",
                parameters=[
                    {
                        "questions_file": LaunchConfiguration("questions_file"),
                        "checkpoint_path": LaunchConfiguration("checkpoint_path"),
                    }
                ],
                output="screen",
            ),
            Node(
                package="gamma_net_ros",
                executable="reflex",
                name="reflex",
                namespace="",
                parameters=[
                    reflex,
                    {
                        "rules_file": LaunchConfiguration("rules_file"),
                        "questions_file": LaunchConfiguration("questions_file"),
                    },
                ],
                output="screen",
            ),
        ]
    )
