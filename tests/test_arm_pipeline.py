"""The arm pipeline's joints: Joy -> teleop -> driver -> emulated servos; a played bag -> predictor."""

from __future__ import annotations

import time

import pytest
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import JointState, Joy
from waiting import bound, spin_for

from gamma_net_core.data.bags import write_recording
from gamma_net_core.signals.arm_recording import simulate_arm
from gamma_net_ros.paths import config_file
from gamma_net_ros.predictor import Predictor
from gamma_net_ros.processes import NodeProcess, node_command
from gamma_net_ros.teleop import Teleop

pytestmark = pytest.mark.ros


@pytest.fixture
def emulator(start_emulator):
    return start_emulator((-0.5, 1.7))


def test_teleop_moves_the_emulated_arm(emulator, executor, spin):
    from gamma_net_ros.dynamixel_driver.node import DynamixelDriver

    port, client = emulator
    driver = DynamixelDriver(
        cli_args=["--ros-args", "--params-file", str(config_file("dynamixel")), "-p", f"dynamixel_driver:port:={port}"]
    )
    teleop = Teleop(cli_args=["--ros-args", "--params-file", str(config_file("arm"))])
    rig = Node("pipeline_rig")
    joy = rig.create_publisher(Joy, "joy", 10)
    states: list[JointState] = []
    rig.create_subscription(JointState, "joint_states", states.append, qos_profile_sensor_data)
    for node in (driver, teleop, rig):
        executor.add_node(node)
    assert spin(executor, lambda: len(states) > 3, timeout=15)
    start = client.state()["servos"]
    push = Joy()
    push.axes = [1.0, -0.5]  # shoulder forward at full speed, elbow back at about half

    def moved() -> tuple[float, float]:
        now = client.state()["servos"]
        return now[1]["position"] - start[1]["position"], now[2]["position"] - start[2]["position"]

    def pushed_far_enough() -> bool:
        joy.publish(push)  # a joystick repeats its state at ~20 Hz
        spin_for(executor, 0.05)
        shoulder, elbow = moved()
        return shoulder > 0.2 and elbow < -0.05  # about 1 s at 0.6 and -0.28 rad/s

    deadline = time.monotonic() + bound(15.0)
    while not pushed_far_enough() and time.monotonic() < deadline:
        pass
    end = client.state()["servos"]
    shoulder, elbow = moved()
    assert shoulder > 0.2 and elbow < -0.05, (shoulder, elbow)
    assert end[1]["goal_velocity"] == pytest.approx(0.6, abs=0.03)  # teleop's max speed, in servo units
    # The driver reports what the servos do.
    assert states[-1].position[0] == pytest.approx(end[1]["position"], abs=0.05)
    # Letting go: teleop's deadman and the driver's command timeout bring the goals to zero.
    assert spin(executor, lambda: client.state()["servos"][1]["goal_velocity"] == 0.0, timeout=5)


def test_predictor_learns_from_a_played_bag_and_a_replay_starts_a_new_episode(executor, spin, tmp_path):
    recording = simulate_arm(circuits=1, rng=__import__("numpy").random.default_rng(0))
    write_recording(tmp_path / "bag", recording)
    n = len(recording.stamp_ns)
    predictor = Predictor(
        cli_args=["--ros-args", "--params-file", str(config_file("arm"))],
        # Reliable, and a queue that holds the whole recording: a loaded test machine may fall behind, never drop.
        parameter_overrides=[Parameter("reliable_input", value=True), Parameter("input_queue_depth", value=2000)],
    )
    executor.add_node(predictor)
    player = NodeProcess(
        node_command(
            "gamma_net_ros.bag_player",
            params={
                "bag": str(tmp_path / "bag"),
                "rate": 10.0,
                "loops": 2,
                "reliable": True,
                "wait_for_subscribers": 1,
            },  # 300 messages/s
        ),
        log_path=tmp_path / "player.log",
    ).start()
    try:
        assert spin(executor, lambda: predictor.online.accepted >= 2 * n, timeout=60), predictor.online.accepted
        # The player ends once the predictor reports every message taken (keep spinning: it reports from here).
        assert spin(executor, lambda: not player.running, timeout=20)
        assert player.wait(timeout=bound(1)) == 0
    finally:
        player.stop(timeout=bound(10.0))
    assert f"published {2 * n}, acknowledged {2 * n}" in (tmp_path / "player.log").read_text()
    assert predictor.online.episodes == 2  # the replay's stamps jumped back: a new episode, not corruption
    assert predictor.online.update_count == 2 * (n - 1)
    assert predictor.online.skips.total == 0
