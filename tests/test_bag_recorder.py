"""`bag_recorder`: topics published by real nodes, recorded by the real node process, read back with `rosbags`.

The robot stand-in (tests/robot_standin.py, its own process) publishes a known number of
messages once the recorder has subscribed and exits once every one is acknowledged: all of
them must be in the bag after Ctrl-C or SIGTERM, and the bag must read as rosbag2 writes it.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import signal
import subprocess
import sys

import numpy as np
import pytest
import rclpy
import yaml
from ament_index_python.packages import get_package_share_directory
from rclpy.duration import Duration
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from rosbags.highlevel import AnyReader
from rosbags.typesys import Stores, get_typestore
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from waiting import bound, wait_until

from gamma_net_ros.msg_definitions import MessageDefinitions
from gamma_net_ros.processes import NodeProcess, node_command

pytestmark = pytest.mark.ros
TESTS = pathlib.Path(__file__).resolve().parent
STANDIN = TESTS / "robot_standin.py"
TOPICS = ["/joint_states", "/battery", "/horde/predictions"]
TYPES = {
    "/joint_states": "sensor_msgs/msg/JointState",
    "/battery": "sensor_msgs/msg/BatteryState",
    "/horde/predictions": "gamma_net_msgs/msg/PredictionArray",
}
#: What rosbag2 (version 9) writes under ``rosbag2_bagfile_information`` (rosbag2_storage's
#: metadata_io.cpp), and under each entry of ``topics_with_message_count`` and ``files``.
ROSBAG2_KEYS = {
    "version",
    "storage_identifier",
    "duration",
    "starting_time",
    "message_count",
    "topics_with_message_count",
    "compression_format",
    "compression_mode",
    "relative_file_paths",
    "files",
    "custom_data",
    "ros_distro",
}
ROSBAG2_TOPIC_KEYS = {"name", "type", "serialization_format", "offered_qos_profiles", "type_description_hash"}
ROSBAG2_FILE_KEYS = {"path", "starting_time", "duration", "message_count"}


def recorder(tmp_path, **params) -> NodeProcess:
    """The recorder as `python -m gamma_net_ros.entry bag_recorder --ros-args ...` (what its executable runs)."""
    command = node_command("gamma_net_ros.bag_recorder", params=params)
    return NodeProcess(command, log_path=tmp_path / "recorder.log").start()


def standin(tmp_path, count: int) -> subprocess.Popen:
    log = open(tmp_path / "standin.log", "w")
    return subprocess.Popen(
        [sys.executable, str(STANDIN), "--count", str(count), "--wait", str(bound(60))],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )


def run_standin(tmp_path, count: int) -> dict[str, int]:
    """The stand-in, to its end: how many messages it published (all acknowledged) per topic."""
    process = standin(tmp_path, count)
    code = process.wait(timeout=bound(120))
    out = (tmp_path / "standin.log").read_text()
    assert code == 0, out
    words = out.strip().splitlines()[-1].replace(",", "").split()  # published J joint_states, B battery, P predictions
    return {"/joint_states": int(words[1]), "/battery": int(words[3]), "/horde/predictions": int(words[5])}


def stop(process: NodeProcess, sig: int) -> tuple[int, str]:
    os.killpg(process.process.pid, sig)
    code = process.wait(timeout=bound(30))
    process.stop()
    return code, process.log_path.read_text()


def read_bag(path) -> dict[str, list]:
    """Every message of the bag, deserialized with the definitions the bag carries, per topic."""
    messages: dict[str, list] = {}
    with AnyReader([pathlib.Path(path)], default_typestore=get_typestore(Stores.EMPTY)) as reader:
        for connection, _, raw in reader.messages():
            messages.setdefault(connection.topic, []).append(reader.deserialize(raw, connection.msgtype))
    return messages


def check_metadata(path, counts: dict[str, int], storage: str) -> None:
    info = yaml.safe_load((pathlib.Path(path) / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert set(info) == ROSBAG2_KEYS
    assert info["version"] == 9 and info["storage_identifier"] == storage
    assert info["message_count"] == sum(counts.values())
    listed = {t["topic_metadata"]["name"]: t for t in info["topics_with_message_count"]}
    assert {name: t["message_count"] for name, t in listed.items()} == counts
    for name, t in listed.items():
        assert set(t["topic_metadata"]) == ROSBAG2_TOPIC_KEYS
        assert t["topic_metadata"]["type"] == TYPES.get(name, t["topic_metadata"]["type"])
        assert t["topic_metadata"]["type_description_hash"].startswith("RIHS01_")
    (file,) = info["files"]
    assert set(file) == ROSBAG2_FILE_KEYS and file["message_count"] == sum(counts.values())
    assert info["relative_file_paths"] == [file["path"]]
    assert (pathlib.Path(path) / file["path"]).is_file()
    assert file["path"].endswith(".mcap" if storage == "mcap" else ".db3")
    assert info["duration"]["nanoseconds"] > 0 and info["starting_time"]["nanoseconds_since_epoch"] > 0


@pytest.mark.parametrize(
    ("storage", "sig"), [("mcap", signal.SIGINT), ("sqlite3", signal.SIGTERM)], ids=["mcap-SIGINT", "sqlite3-SIGTERM"]
)
def test_every_message_published_after_it_subscribed_is_in_the_bag(tmp_path, storage, sig):
    bag = tmp_path / "bag"
    node = recorder(tmp_path, topics=TOPICS, output=str(bag), storage=storage)
    try:
        published = run_standin(tmp_path, 60)
        code, log = stop(node, sig)
    finally:
        node.stop()
    assert code == 0, log
    assert "Traceback" not in log
    assert published == {"/joint_states": 60, "/battery": 6, "/horde/predictions": 6}
    assert f"wrote {bag}: 72 messages (/joint_states 60, /battery 6, /horde/predictions 6)" in log, log
    check_metadata(bag, published, storage)
    messages = read_bag(bag)
    assert {t: len(m) for t, m in messages.items()} == published
    # The bytes as published: the stand-in's values, in order (the swing of robot_standin.py).
    phase = 2 * np.pi * np.arange(60) / 100
    shoulder = [m.position[0] for m in messages["/joint_states"]]
    np.testing.assert_allclose(shoulder, -0.75 + 0.5 * np.cos(phase))
    assert [m.name for m in messages["/joint_states"]] == [["shoulder", "elbow"]] * 60
    assert [m.update_count for m in messages["/horde/predictions"]] == list(range(6))
    np.testing.assert_allclose([m.voltage for m in messages["/battery"]], 12.0 - np.arange(6) / 100, rtol=1e-6)


def test_qos_matches_the_publishers_and_a_topic_without_publisher_is_awaited(tmp_path, executor, spin):
    node = rclpy.create_node("qos_rig")  # the test's own node publishes
    executor.add_node(node)
    latched = node.create_publisher(
        String,
        "/latched",
        QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL),
    )
    latched.publish(String(data="published before the recorder started"))
    node.create_publisher(JointState, "/sensor", qos_profile_sensor_data)
    bag = tmp_path / "bag"
    process = recorder(tmp_path, topics=["/latched", "/sensor", "later"], output=str(bag))
    try:
        log = lambda: process.log_path.read_text()  # noqa: E731
        assert wait_until(lambda: "recording /sensor (sensor_msgs/msg/JointState, best effort)" in log(), 60), log()
        assert "recording /latched (std_msgs/msg/String, reliable, transient local)" in log(), log()
        # Said once, after 3 s, naming the topic (and any other not discovered yet on a busy machine).
        assert wait_until(lambda: "after 3 s: waiting for one" in log(), 30), log()
        later = node.create_publisher(String, "/later", QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE))
        assert spin(executor, lambda: later.get_subscription_count() > 0, timeout=30), log()
        later.publish(String(data="once it had a publisher"))
        assert later.wait_for_all_acked(Duration(seconds=bound(10)))
        assert latched.wait_for_all_acked(Duration(seconds=bound(10)))
        code, out = stop(process, signal.SIGINT)
    finally:
        process.stop()
    assert code == 0 and "Traceback" not in out, out
    (waiting,) = [line for line in out.splitlines() if "no publisher yet" in line]
    assert "'/later']" in waiting, waiting
    messages = read_bag(bag)
    assert [m.data for m in messages["/latched"]] == ["published before the recorder started"]
    assert [m.data for m in messages["/later"]] == ["once it had a publisher"]
    info = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    profiles = {
        t["topic_metadata"]["name"]: t["topic_metadata"]["offered_qos_profiles"]
        for t in info["topics_with_message_count"]
    }
    # In words, as rosbag2 writes them since version 9.
    assert profiles["/latched"][0]["reliability"] == "reliable"
    assert profiles["/latched"][0]["durability"] == "transient_local"
    assert profiles["/sensor"][0]["reliability"] == "best_effort"


def test_publishers_that_disagree_on_a_type_are_refused_in_one_line(tmp_path, executor, spin):
    node = rclpy.create_node("mixed_rig")
    executor.add_node(node)
    node.create_publisher(JointState, "/mixed", 10)
    # Another process offers another type: in one process Fast DDS keeps one type per topic.
    script = (
        "import time, rclpy; from sensor_msgs.msg import BatteryState; rclpy.init(); "
        "node = rclpy.create_node('mixed_other'); pub = node.create_publisher(BatteryState, '/mixed', 10); "
        "time.sleep(600)"
    )
    other = NodeProcess([sys.executable, "-c", script], log_path=tmp_path / "other.log").start()
    try:
        bag = tmp_path / "bag"
        process = recorder(tmp_path, topics=["/mixed"], output=str(bag))
        try:
            code = process.wait(timeout=bound(60))
        finally:
            process.stop()
    finally:
        other.kill()
    out = process.log_path.read_text()
    assert code == 1, out
    errors = [line for line in out.splitlines() if "ERROR" in line]
    assert len(errors) == 1 and "Traceback" not in out, out
    assert (
        "refusing to record /mixed: its publishers disagree on its type "
        "(sensor_msgs/msg/BatteryState and sensor_msgs/msg/JointState)" in errors[0]
    )
    assert read_bag(bag) == {}  # closed: an empty, readable bag


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"topics": ["/joint_states"], "output": "notes"}, "output 'notes' exists already (a non-empty folder)"),
        (
            {"topics": ["/joint_states"], "output": "bag", "storage": "rosbag1"},
            "storage must be one of ['mcap', 'sqlite3']; got 'rosbag1'",
        ),
        ({"output": "bag"}, "parameter 'topics' is required"),
        ({"topics": "/joint_states", "output": "bag"}, "topics must be a string list; got '/joint_states' (a string)"),
        ({"topics": ["bad topic"], "output": "bag"}, "'bad topic' is not a topic name"),
        # Refused once built, its bag folder already made: it goes again.
        ({"topics": ["/joint_states"], "output": "bag", "stroage": "sqlite3"}, "unknown parameter 'stroage'"),
    ],
    ids=[
        "output-exists",
        "unknown-storage",
        "no-topics",
        "one-topic-not-a-list",
        "bad-topic-name",
        "unknown-parameter",
    ],
)
def test_bad_settings_are_refused_in_one_line(tmp_path, params, says):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("the user's notes\n")
    command = node_command("gamma_net_ros.bag_recorder", params=params)
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=bound(60))
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "Traceback" not in out
    (line,) = out.strip().splitlines()
    assert "refusing to start" in line and says in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes"]  # nothing written, the folder untouched
    assert (tmp_path / "notes" / "todo.txt").read_text() == "the user's notes\n"


def test_what_it_records_plays_through_bag_player_as_published(tmp_path, executor, spin):
    bag = tmp_path / "bag"
    node = recorder(tmp_path, topics=TOPICS, output=str(bag))
    try:
        run_standin(tmp_path, 60)
        code, log = stop(node, signal.SIGINT)
    finally:
        node.stop()
    assert code == 0, log
    recorded = read_bag(bag)["/joint_states"]
    rig = rclpy.create_node("playback_rig")
    executor.add_node(rig)
    received = []
    qos = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
    rig.create_subscription(JointState, "/joint_states", received.append, qos)
    params = {"bag": str(bag), "rate": 0.0, "reliable": True, "wait_for_subscribers": 1}
    player = NodeProcess(node_command("gamma_net_ros.bag_player", params=params), log_path=tmp_path / "player.log")
    player.start()
    try:
        assert spin(executor, lambda: len(received) >= 60, timeout=60), (tmp_path / "player.log").read_text()
        assert player.wait(timeout=bound(30)) == 0, (tmp_path / "player.log").read_text()
    finally:
        player.stop()
    assert "published 60, acknowledged 60" in (tmp_path / "player.log").read_text()
    assert [list(m.position) for m in received] == [list(m.position) for m in recorded]
    # bag_player carries stamps as float seconds: equal to well under a microsecond at today's dates.
    stamp = lambda m: m.header.stamp.sec + m.header.stamp.nanosec * 1e-9  # noqa: E731
    np.testing.assert_allclose([stamp(m) for m in received], [stamp(m) for m in recorded], rtol=0, atol=1e-6)


def test_max_messages_ends_the_recording_with_a_complete_bag(tmp_path):
    bag = tmp_path / "bag"
    node = recorder(tmp_path, topics=["/joint_states"], output=str(bag), max_messages=10)
    standin = subprocess.Popen(
        [sys.executable, str(STANDIN), "--count", "60", "--topics", "/joint_states", "--wait", str(bound(60))],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    try:
        code = node.wait(timeout=bound(60))  # it ends by itself
    finally:
        node.stop()
        standin.kill()
        standin.wait()
    log = node.log_path.read_text()
    assert code == 0 and "Traceback" not in log, log
    check_metadata(bag, {"/joint_states": 10}, "mcap")
    # What came after the limit is not in the bag, and is counted so.
    final = re.search(r"received (\d+), skipped (\d+)(?: \(max_messages (\d+)\))?, lost on the way (\d+)", log)
    assert final, log
    received, skipped, past, _ = (int(g or 0) for g in final.groups())
    assert received == 10 + skipped and skipped == past, log
    phase = 2 * np.pi * np.arange(10) / 100
    np.testing.assert_allclose([m.position[0] for m in read_bag(bag)["/joint_states"]], -0.75 + 0.5 * np.cos(phase))


def test_message_definitions_come_from_the_installed_msg_files():
    definitions = MessageDefinitions()
    msgdef, rihs01 = definitions.of("gamma_net_msgs/msg/PredictionArray")
    assert msgdef.startswith("std_msgs/Header header\n") and "MSG: builtin_interfaces/Time" in msgdef
    assert "uint64 update_count" in msgdef
    # The hash ROS itself computed when it built the package (its .json beside the .msg).
    built = pathlib.Path(get_package_share_directory("gamma_net_msgs"), "msg", "PredictionArray.json")
    assert rihs01 == json.loads(built.read_text())["type_hashes"][0]["hash_string"]
    with pytest.raises(ValueError, match="no message definition for gamma_net_msgs/msg/Nothing"):
        definitions.of("gamma_net_msgs/msg/Nothing")
