"""The emulated arm meeting an obstacle, a Horde learning it, and a reflex acting on the Horde's predictions.

    ros2 launch gamma_net_ros reflex.launch.py
    ros2 launch gamma_net_ros reflex.launch.py rules_file:=my_rules.yaml checkpoint_path:=~/.ros/horde.npz
    ros2 launch gamma_net_ros reflex.launch.py operator_seed:=3 overshoot_joint:=1 \
        obstacle_servo:=2 obstacle_low:=2.27 obstacle_high:=2.9        # the elbow meets it instead
    ros2 topic echo /reflex/events

    servo emulator (pty, obstacle in the shoulder's range) <- dynamixel_driver -> joint_states -> horde
         joint_commands <- reflex <- joint_commands_in <- teleop <- joy <- operator (scripted, overshooting)
                              ^---------------------- horde/predictions

Every part is the node a robot runs, with the package's YAML files (config/arm.yaml,
config/dynamixel.yaml, config/reflex_questions.yaml, config/reflex.yaml and its rules); only the servos are
emulated. The operator overshoots now and then (config/reflex.yaml's operator section, or the
overshoot_* arguments), which is when the joint meets the obstacle; teleop's commands go through
the reflex to the driver. The driver cycles at ``driver_rate_hz`` (100 Hz), so a changed command
reaches the servos within 10 ms; the Horde ticks at its questions' ``rate_hz`` (30 Hz, the time
base its taus and the rules were chosen on), or on each message of ``tick_topic``.

The launch ends, every process stopped and exit code 1 with one line naming the process, when
the reflex, the driver, the Horde or the emulator ends: a safety filter that died must not
leave the operator's commands a path to the servos, and without the others it has nothing to
act on. Each run gets its own serial link (``port`` '' = a fresh folder under the temporary
directory), so runs side by side never share one.
"""

import os
import shutil
import sys
import tempfile

import yaml
from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, ExecuteProcess, OpaqueFunction, SetLaunchConfiguration
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue

from gamma_net_ros.entry import OUTLIVE_ENV
from gamma_net_ros.launch_checks import (
    BLOCKED_START,
    LaunchRefused,
    end_the_launch_with,
    node_env,
    refuse_bad_arguments,
    take_stop_signals,
)

#: The emulated servos' ids, in joint order (config/dynamixel.yaml's ids).
SERVO_IDS = ("1", "2")


def _operator_defaults(path: str) -> dict:
    """config/reflex.yaml's operator settings: the overshoot arguments' defaults, so the file stays their source."""
    with open(path) as handle:
        return yaml.safe_load(handle)["operator"]["ros__parameters"]["operator"]


def _number(context, name: str, kind=float, choices=None, low=None):
    text = context.launch_configurations[name]
    try:
        value = kind(text)
    except ValueError:
        value = None
    if value is None or (kind is float and not value == value) or (choices and value not in choices):
        kind_name = "an integer" if kind is int else "a number"
        expected = f"one of {', '.join(map(str, choices))}" if choices else kind_name
        raise LaunchRefused(f"{name}:={text}: must be {expected}")
    if low is not None and not value >= low:
        raise LaunchRefused(f"{name}:={text}: must be at least {low}")
    return value


def _check_and_place(context):
    """The run's own values, refused in one line before any process starts; ``port`` '' made a fresh path."""
    _number(context, "operator_seed", int, low=0)
    _number(context, "overshoot_joint", int, choices=(0, 1))
    _number(context, "overshoot_direction", int, choices=(-1, 0, 1))
    _number(context, "obstacle_servo", int, choices=tuple(map(int, SERVO_IDS)))
    low, high = _number(context, "obstacle_low"), _number(context, "obstacle_high")
    if not low < high:
        raise LaunchRefused(f"obstacle_low:={low:g} obstacle_high:={high:g}: the obstacle needs low < high")
    _number(context, "driver_rate_hz", low=1.0)
    if context.launch_configurations["port"]:
        return []
    # Not one fixed path: two runs (two users, or the same user twice) would fight over it.
    folder = tempfile.mkdtemp(prefix="gamma_net_reflex-")
    context.extend_globals({"reflex_launch_folder": folder})
    return [SetLaunchConfiguration("port", os.path.join(folder, "ttyDXL"))]


def _emulator_ended(event, context):
    """The emulator's exit: its made-up folder goes (it has removed its link), and the launch ends."""
    made = context.get_locals_as_dict().get("reflex_launch_folder")
    if made and os.path.dirname(context.launch_configurations.get("port", "")) == made:
        shutil.rmtree(made, ignore_errors=True)
    return end_the_launch_with("servo_emulator")(event, context)


def generate_launch_description():
    take_stop_signals()  # a stop while ros2cli started waited for launch's handlers
    config = os.path.join(get_package_share_directory("gamma_net_ros"), "config")
    arm = os.path.join(config, "arm.yaml")
    reflex = os.path.join(config, "reflex.yaml")
    operator = _operator_defaults(reflex)
    port = LaunchConfiguration("port")
    arguments = [
        DeclareLaunchArgument(
            "port", default_value="", description="the emulated servos' link path ('' = a fresh one for this run)"
        ),
        DeclareLaunchArgument(
            "driver_rate_hz",
            default_value="100.0",
            description="the driver's read/write cycles per second (a changed command waits up to one cycle)",
        ),
        # The tool on the wire's start point for config/arm.yaml's maze (as `make demo` computes it).
        DeclareLaunchArgument("shoulder_start", default_value="-1.102465", description="rad, at start"),
        DeclareLaunchArgument("elbow_start", default_value="1.703387", description="rad, at start"),
        DeclareLaunchArgument(
            "obstacle_servo", default_value="1", description="the servo whose range holds it: 1 shoulder, 2 elbow"
        ),
        # 0.05 rad past the shoulder's reach on the route (-0.25 rad, gamma-net arm simulate): only
        # an overshoot meets it.
        DeclareLaunchArgument("obstacle_low", default_value="-0.2", description="obstacle from, rad"),
        DeclareLaunchArgument("obstacle_high", default_value="0.5", description="obstacle to, rad"),
        DeclareLaunchArgument("operator_seed", default_value="0", description="the operator's noise, pace and pauses"),
        DeclareLaunchArgument(
            "overshoot_joint",
            default_value=str(operator["overshoot_joint"]),
            description="joint whose turns the operator overshoots: 0 shoulder, 1 elbow (config/reflex.yaml)",
        ),
        DeclareLaunchArgument(
            "overshoot_direction",
            default_value=str(operator["overshoot_direction"]),
            description="overshoot turns of the joint moving up (1), down (-1) or both (0) (config/reflex.yaml)",
        ),
        DeclareLaunchArgument(
            "rules_file", default_value=os.path.join(config, "reflex_rules.yaml"), description="the reflex rules"
        ),
        DeclareLaunchArgument(
            "questions_file",
            default_value=os.path.join(config, "reflex_questions.yaml"),
            description="the Horde's questions",
        ),
        DeclareLaunchArgument(
            "checkpoint_path", default_value="", description="the Horde's learner ('' = in memory, from scratch)"
        ),
        # The Horde's clock by default: the questions file's rate_hz (config/reflex_questions.yaml: 30 Hz) is the
        # time base of its taus and seconds, which the rules' tau were chosen on. tick_topic:=/joint_states
        # gives a prediction after each state within the driver's cycle, but then every tau is a
        # driver cycle long (shorter in wall time by rate_hz / driver_rate_hz): use it with questions
        # and rules written for that rate.
        DeclareLaunchArgument(
            "tick_topic",
            default_value="",
            description="the Horde ticks on each message of this topic ('' = its clock at the questions' rate_hz)",
        ),
    ]
    return LaunchDescription(
        [
            *arguments,
            refuse_bad_arguments(arguments, files=["rules_file", "questions_file"]),
            OpaqueFunction(function=_check_and_place),
            ExecuteProcess(
                cmd=[
                    sys.executable,
                    "-u",
                    "-m",
                    "gamma_net_ros.hardware.emulator",
                    "--link",
                    port,
                    "--ids",
                    *SERVO_IDS,
                    "--positions",
                    LaunchConfiguration("shoulder_start"),
                    LaunchConfiguration("elbow_start"),
                    "--obstacle",
                    LaunchConfiguration("obstacle_servo"),
                    LaunchConfiguration("obstacle_low"),
                    LaunchConfiguration("obstacle_high"),
                ],
                name="servo_emulator",
                additional_env=node_env(),  # it stops with this launch, however that ends
                output="screen",
                # On Ctrl-C it answers until the driver has let go of the port (its --grace-s).
                on_exit=_emulator_ended,
            ),
            # The driver retries the port until the emulator has made it.
            Node(
                package="gamma_net_ros",
                executable="dynamixel_driver",
                name="dynamixel_driver",
                namespace="",
                ros_arguments=["--enclave", "/gamma_net/reflex/dynamixel_driver"],  # docs/security.md
                prefix=BLOCKED_START,  # a stop while it starts waits for its handlers
                exec_name="dynamixel_driver",  # its log label (the prefix would make it "env")
                additional_env=node_env(),  # it stops with this launch, however that ends
                parameters=[
                    os.path.join(config, "dynamixel.yaml"),
                    {"port": port, "rate_hz": ParameterValue(LaunchConfiguration("driver_rate_hz"), value_type=float)},
                ],
                output="screen",
                on_exit=end_the_launch_with("dynamixel_driver"),
            ),
            Node(
                package="gamma_net_ros",
                executable="teleop",
                name="teleop",
                namespace="",
                ros_arguments=["--enclave", "/gamma_net/reflex/teleop"],  # docs/security.md
                prefix=BLOCKED_START,  # a stop while it starts waits for its handlers
                exec_name="teleop",  # its log label (the prefix would make it "env")
                additional_env=node_env(),  # it stops with this launch, however that ends
                parameters=[arm],
                remappings=[("joint_commands", "joint_commands_in")],
                output="screen",
            ),
            Node(
                package="gamma_net_ros",
                executable="operator",
                name="operator",
                namespace="",
                ros_arguments=["--enclave", "/gamma_net/reflex/operator"],  # docs/security.md
                prefix=BLOCKED_START,  # a stop while it starts waits for its handlers
                exec_name="operator",  # its log label (the prefix would make it "env")
                additional_env=node_env(),  # it stops with this launch, however that ends
                parameters=[
                    arm,
                    reflex,
                    {
                        "seed": ParameterValue(LaunchConfiguration("operator_seed"), value_type=int),
                        "operator.overshoot_joint": ParameterValue(
                            LaunchConfiguration("overshoot_joint"), value_type=int
                        ),
                        "operator.overshoot_direction": ParameterValue(
                            LaunchConfiguration("overshoot_direction"), value_type=int
                        ),
                    },
                ],
                output="screen",
            ),
            Node(
                package="gamma_net_ros",
                executable="horde",
                name="horde",
                namespace="",
                ros_arguments=["--enclave", "/gamma_net/reflex/horde"],  # docs/security.md
                prefix=BLOCKED_START,  # a stop while it starts waits for its handlers
                exec_name="horde",  # its log label (the prefix would make it "env")
                additional_env=node_env(),  # it stops with this launch, however that ends
                parameters=[
                    {
                        "questions_file": LaunchConfiguration("questions_file"),
                        "checkpoint_path": LaunchConfiguration("checkpoint_path"),
                        "tick_topic": ParameterValue(LaunchConfiguration("tick_topic"), value_type=str),
                    }
                ],
                output="screen",
                on_exit=end_the_launch_with("horde"),
            ),
            Node(
                package="gamma_net_ros",
                executable="reflex",
                name="reflex",
                namespace="",
                ros_arguments=["--enclave", "/gamma_net/reflex/reflex"],  # docs/security.md
                prefix=BLOCKED_START,  # a stop while it starts waits for its handlers
                exec_name="reflex",  # its log label (the prefix would make it "env")
                # Stopping, it keeps filtering until the operator and teleop have ended (4 s at most):
                # nothing steers the arm once the reflex is gone (gamma_net_ros.entry.OUTLIVE_ENV).
                additional_env=node_env(**{OUTLIVE_ENV: "operator,teleop"}),
                parameters=[
                    reflex,
                    {
                        "rules_file": LaunchConfiguration("rules_file"),
                        "questions_file": LaunchConfiguration("questions_file"),
                    },
                ],
                output="screen",
                # The command path runs through it: without it nothing may pass, so nothing runs.
                on_exit=end_the_launch_with("reflex"),
            ),
        ]
    )
