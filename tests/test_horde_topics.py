"""Topics of any type, resolved from their names and sampled on a clock (real nodes, real messages)."""

from __future__ import annotations

import pytest
from nav_msgs.msg import Odometry
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import qos_profile_sensor_data
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import BatteryState, Imu, JointState

from gamma_net_ros.conversions import seconds_to_stamp
from gamma_net_ros.horde.topics import TopicSampler, check_field, message_class

pytestmark = pytest.mark.ros


@pytest.mark.parametrize(
    "name, cls",
    [
        ("sensor_msgs/msg/JointState", JointState),
        ("sensor_msgs/Imu", Imu),
        (" sensor_msgs/msg/BatteryState ", BatteryState),
        ("nav_msgs/msg/Odometry", Odometry),  # a base's odometry: `make setup` installs ros-nav-msgs
    ],
)
def test_message_classes_resolve_from_type_names(name, cls):
    assert message_class(name) is cls


@pytest.mark.parametrize(
    "name, needle",
    [
        ("nope_msgs/msg/Thing", "message type 'nope_msgs/msg/Thing' is not installed"),
        ("nope_msgs/msg/Thing", "pip install ros-nope-msgs"),
        ("sensor_msgs/msg/Nope", "message type 'sensor_msgs/msg/Nope' is not installed"),
        ("JointState", "must look like 'pkg/msg/Type'"),
        ("sensor_msgs/srv/SetCameraInfo", "must look like 'pkg/msg/Type'"),
    ],
)
def test_a_type_that_is_not_installed_is_named(name, needle):
    with pytest.raises(ValueError) as error:
        message_class(name)
    assert needle in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize(
    "cls, path",
    [
        (JointState, "velocity[elbow]"),
        (JointState, "effort[1]"),
        (Imu, "linear_acceleration.z"),
        (Imu, "orientation_covariance[4]"),
        (BatteryState, "voltage"),
        (BatteryState, "present"),
        (BatteryState, "cell_voltage[0]"),
        (Odometry, "twist.twist.linear.x"),
        (Odometry, "pose.pose.position.y"),
    ],
)
def test_numeric_fields_are_accepted(cls, path):
    check_field(cls, path)


@pytest.mark.parametrize(
    "cls, path, needle",
    [
        (JointState, "speed[elbow]", "JointState has no field 'speed'"),
        (Imu, "linear_acceleration", "'linear_acceleration' is a geometry_msgs/Vector3, not a number"),
        (Imu, "linear_acceleration.w", "Vector3 has no field 'w'"),
        (BatteryState, "voltage[0]", "'voltage' is a float, not a sequence to index"),
        (BatteryState, "cell_voltage[left]", "indexed by name but sensor_msgs/msg/BatteryState has no name list"),
        (JointState, "name[0]", "'name' is a string, not a number"),
        (BatteryState, "voltage.x", "'voltage' is a number, it has no fields"),
        (JointState, "velocity[", "cannot read 'velocity['"),
    ],
)
def test_a_field_that_does_not_exist_is_named(cls, path, needle):
    with pytest.raises(ValueError) as error:
        check_field(cls, path)
    message = str(error.value)
    assert f"field {path!r}" in message and needle in message and "\n" not in message


class _Rig(Node):
    def __init__(self) -> None:
        super().__init__("horde_topics_rig")
        self.clock = self.create_publisher(Clock, "/clock", 10)
        self.joints = self.create_publisher(JointState, "joint_states", qos_profile_sensor_data)
        self.battery = self.create_publisher(BatteryState, "battery_state", qos_profile_sensor_data)

    def at(self, seconds: float) -> None:
        self.clock.publish(Clock(clock=seconds_to_stamp(seconds)))


def test_the_sampler_hands_back_the_latest_message_or_names_silent_and_stale_topics(executor, spin):
    node = Node("horde_topics_sampler", parameter_overrides=[Parameter("use_sim_time", value=True)])
    topics = {"joint_states": "sensor_msgs/msg/JointState", "battery_state": "sensor_msgs/BatteryState"}
    sampler = TopicSampler(node, topics, stale_after=0.5)
    rig = _Rig()
    executor.add_node(node)
    executor.add_node(rig)
    assert spin(executor, lambda: rig.count_subscribers("/clock") >= 1 and rig.count_subscribers("battery_state") >= 1)
    rig.at(10.0)
    assert spin(executor, lambda: node.get_clock().now().nanoseconds == 10_000_000_000)
    first = sampler.sample()
    assert not first.ok and first.silent == ["joint_states", "battery_state"]

    rig.joints.publish(JointState(name=["shoulder"], velocity=[0.5]))
    assert spin(executor, lambda: sampler.topics["joint_states"].received == 1)
    assert sampler.sample().silent == ["battery_state"]

    rig.battery.publish(BatteryState(voltage=12.5))
    rig.joints.publish(JointState(name=["shoulder"], velocity=[0.7]))
    assert spin(executor, lambda: sampler.topics["joint_states"].received == 2)
    assert spin(executor, lambda: sampler.topics["battery_state"].received == 1)
    sample = sampler.sample()
    assert sample.ok
    assert list(sample.messages["joint_states"].velocity) == [0.7]  # the latest
    assert sample.messages["battery_state"].voltage == pytest.approx(12.5)

    rig.at(10.4)  # younger than the limit: still fine
    assert spin(executor, lambda: node.get_clock().now().nanoseconds == 10_400_000_000)
    assert sampler.sample().ok
    rig.battery.publish(BatteryState(voltage=12.4))
    assert spin(executor, lambda: sampler.topics["battery_state"].received == 2)
    rig.at(10.7)  # joint_states is 0.7 s old, battery_state 0.3 s
    assert spin(executor, lambda: node.get_clock().now().nanoseconds == 10_700_000_000)
    sample = sampler.sample()
    assert not sample.ok and sample.stale == ["joint_states"] and sample.silent == []


def test_the_readme_horde_questions_load_and_name_installed_fields():
    import yaml
    from guides import guide_text

    from gamma_net_core.horde.questions import load_questions

    guide = guide_text("horde")
    start = guide.index("rate_hz:", guide.index("# A Horde of questions"))
    spec = load_questions(yaml.safe_load(guide[start : guide.index("```", start)]))
    assert len(spec.questions) == 3 and spec.questions[2].termination is not None
    for signal in spec.signals():
        check_field(message_class(signal.type), signal.field)
