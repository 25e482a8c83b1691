"""The emulated mobile base, a scripted operator, a Horde learning the base, and a reflex on its Twist.

    ros2 launch gamma_net_ros base.launch.py
    ros2 launch gamma_net_ros base.launch.py seed:=3 deceleration:=0.5 latency_s:=0.3 dash_speed:=0.7 \
        dash_probability:=0.2                                          # heads for a wall every 5 s or so
    ros2 launch gamma_net_ros base.launch.py rules_file:=my_base_rules.yaml checkpoint_path:=~/.ros/base_horde.npz
    ros2 topic echo /reflex/events

    base_emulator -> scan, odom, bumper -> horde -> horde/predictions -> reflex
         cmd_vel <- reflex (twist in, twist out) <- cmd_vel_in <- base_operator (scripted, reads scan, odom, bumper)

Every part but the base is the node a robot runs, with the package's YAML files
(config/base_reflex_questions.yaml, config/base_reflex_rules.yaml, config/reflex.yaml): the
operator's Twist goes to ``cmd_vel_in``, the reflex filters it onto ``cmd_vel``, which the base
takes. The Horde ticks on each scan (10 Hz, the rate its taus and the rules were chosen on).

The launch ends, every process stopped and exit code 1 with one line naming the process, when
the reflex, the Horde or the emulator ends: a safety filter that died must not leave the
operator's commands a path to the base, and without the others it has nothing to act on.
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue

from gamma_net_ros.entry import OUTLIVE_ENV
from gamma_net_ros.launch_checks import (
    BLOCKED_START,
    end_the_launch_with,
    node_env,
    refuse_bad_arguments,
    take_stop_signals,
)


def _common(name: str, env=None) -> dict:
    """What every node of this launch shares: its name, a blocked start, the launch's stop, the screen."""
    return {
        "name": name,
        "namespace": "",
        "prefix": BLOCKED_START,  # a stop while it starts waits for its handlers
        "exec_name": name,  # its log label (the prefix would make it "env")
        "additional_env": env or node_env(),  # it stops with this launch, however that ends
        "output": "screen",
    }


def _float(name: str) -> ParameterValue:
    return ParameterValue(LaunchConfiguration(name), value_type=float)


def generate_launch_description():
    take_stop_signals()  # a stop while ros2cli started waited for launch's handlers
    config = os.path.join(get_package_share_directory("gamma_net_ros"), "config")
    arguments = [
        DeclareLaunchArgument("seed", default_value="0", description="the operator's turns and dashes"),
        DeclareLaunchArgument("dash_speed", default_value="0.7", description="m/s the operator heads for walls at"),
        DeclareLaunchArgument(
            "dash_probability", default_value="0.04", description="the operator's chance a second of heading for a wall"
        ),
        DeclareLaunchArgument("deceleration", default_value="1.0", description="m/s^2, the base's braking limit"),
        DeclareLaunchArgument("latency_s", default_value="0.1", description="s from a command to the wheels"),
        DeclareLaunchArgument(
            "rules_file", default_value=os.path.join(config, "base_reflex_rules.yaml"), description="the reflex rules"
        ),
        DeclareLaunchArgument(
            "questions_file",
            default_value=os.path.join(config, "base_reflex_questions.yaml"),
            description="the Horde's questions",
        ),
        DeclareLaunchArgument(
            "checkpoint_path", default_value="", description="the Horde's learner ('' = in memory, from scratch)"
        ),
    ]
    return LaunchDescription(
        [
            *arguments,
            refuse_bad_arguments(arguments, files=["rules_file", "questions_file"]),
            Node(
                package="gamma_net_ros",
                executable="base_emulator",
                **_common("base_emulator"),
                parameters=[
                    {
                        "deceleration": _float("deceleration"),
                        "latency_s": _float("latency_s"),
                        # The base may go as fast as the operator dashes.
                        "max_linear": ParameterValue(LaunchConfiguration("dash_speed"), value_type=float),
                    }
                ],
                on_exit=end_the_launch_with("base_emulator"),
            ),
            Node(
                package="gamma_net_ros",
                executable="base_operator",
                **_common("base_operator"),
                parameters=[
                    {
                        "seed": ParameterValue(LaunchConfiguration("seed"), value_type=int),
                        "dash_speed": _float("dash_speed"),
                        "dash_probability": _float("dash_probability"),
                    }
                ],
                remappings=[("cmd_vel", "cmd_vel_in")],
            ),
            Node(
                package="gamma_net_ros",
                executable="horde",
                **_common("horde"),
                parameters=[
                    {
                        "questions_file": LaunchConfiguration("questions_file"),
                        "checkpoint_path": LaunchConfiguration("checkpoint_path"),
                        "tick_topic": "/scan",
                    }
                ],
                on_exit=end_the_launch_with("horde"),
            ),
            Node(
                package="gamma_net_ros",
                executable="reflex",
                # Stopping, it keeps filtering until the operator has ended: nothing drives the base
                # once the reflex is gone (gamma_net_ros.entry.OUTLIVE_ENV).
                **_common("reflex", env=node_env(**{OUTLIVE_ENV: "base_operator"})),
                parameters=[
                    os.path.join(config, "reflex.yaml"),
                    {
                        "rules_file": LaunchConfiguration("rules_file"),
                        "questions_file": LaunchConfiguration("questions_file"),
                        "command_type": "twist",
                    },
                ],
                remappings=[("joint_commands_in", "cmd_vel_in"), ("joint_commands", "cmd_vel")],
                # The command path runs through it: without it nothing may pass, so nothing runs.
                on_exit=end_the_launch_with("reflex"),
            ),
        ]
    )
