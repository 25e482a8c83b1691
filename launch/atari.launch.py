"""The Atari pipeline on ROS 2: a recording replayed by the bridge, a neural Γ-net learning from it.

ros2 launch gamma_net_ros atari.launch.py shard_dir:=runs/centipede
ros2 launch gamma_net_ros atari.launch.py shard_dir:=runs/centipede params_file:=my_atari.yaml
ros2 launch gamma_net_ros atari.launch.py shard_dir:=runs/centipede checkpoint_path:=~/.ros/gamma_net/centipede.pt

Both nodes read config/atari.yaml (or params_file); shard_dir overrides the bridge's, and
checkpoint_path (when given) the predictor's. The bridge waits until the predictor reports on
transitions/taken, then delivers every transition without loss at the predictor's pace
(gamma_net_ros/flow_control.py).
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
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
    default_params = os.path.join(get_package_share_directory("gamma_net_ros"), "config", "atari.yaml")
    arguments = [
        DeclareLaunchArgument("params_file", default_value=default_params, description="YAML parameter file"),
        DeclareLaunchArgument("shard_dir", description="recording to replay (gamma-net atari record --out DIR)"),
        DeclareLaunchArgument(
            "checkpoint_path",
            default_value="",
            description="where to keep the learner ('' = as params_file says; config/atari.yaml: in memory)",
        ),
    ]
    return LaunchDescription(
        [*arguments, refuse_bad_arguments(arguments, files=["params_file"]), OpaqueFunction(function=_nodes)]
    )


def _nodes(context):
    params = LaunchConfiguration("params_file")
    # Only a checkpoint_path given here overrides the params file's: a default of '' would silently
    # turn off the checkpoints a user's params_file asks for, and the learning with them.
    checkpoint = context.launch_configurations.get("checkpoint_path", "")
    overrides = {"checkpoint_path": checkpoint} if checkpoint else {}
    # namespace="": the nodes' full names key the overrides, which then win over the YAML.
    return [
        Node(
            package="gamma_net_ros",
            executable="neural_predictor",
            name="neural_predictor",
            namespace="",
            ros_arguments=["--enclave", "/gamma_net/atari/neural_predictor"],  # docs/security.md
            prefix=BLOCKED_START,  # a stop while it starts waits for its handlers
            exec_name="neural_predictor",  # its log label (the prefix would make it "env")
            additional_env=node_env(),  # it stops with this launch, however that ends
            parameters=[params, overrides] if overrides else [params],
            on_exit=end_the_launch_with("neural_predictor"),  # refused: `ros2 launch` exits 1
            output="screen",
        ),
        Node(
            package="gamma_net_ros",
            executable="ale_bridge",
            name="ale_bridge",
            namespace="",
            ros_arguments=["--enclave", "/gamma_net/atari/ale_bridge"],  # docs/security.md
            prefix=BLOCKED_START,  # a stop while it starts waits for its handlers
            exec_name="ale_bridge",  # its log label (the prefix would make it "env")
            additional_env=node_env(),  # it stops with this launch, however that ends
            parameters=[params, {"shard_dir": LaunchConfiguration("shard_dir")}],
            # refused: `ros2 launch` exits 1; at the recording's end (exit_at_end) the learner goes on
            on_exit=end_the_launch_with("ale_bridge", on_clean_exit=False),
            output="screen",
        ),
    ]
